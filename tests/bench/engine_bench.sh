#!/usr/bin/env bash
# Benchmark: the CPU engine on Llama-3.2-1B-shaped models (random weights,
# real shapes) in Q4_0, Q4_K_M and Q8_0. Generates each model with
# octo-make-model, decomposes it, and runs engine_bench on it, which prints
# memcpy bandwidth, weight bytes per token, the decode bound, decode tokens/s
# at batch 1, 4, 8 and 16 (aggregate), prefill tokens/s (also by the CPU time
# the engine got) and the batch-1 / bound ratio next to its target (see
# engine_bench.cc for how each figure is taken).
#
#   [BUILD_DIR=build] [TYPES="Q4_0 Q4_K_M Q8_0"] [PRESET=llama-3.2-1b] \
#     tests/bench/engine_bench.sh [WORK_DIR] [-- ENGINE_BENCH_FLAGS...]
#   e.g. tests/bench/engine_bench.sh /data/octo-bench -- --threads 2 --reps 5
#
# WORK_DIR (default BUILD_DIR/engine-bench) keeps the model directories, so a
# second run skips generation; about 3 GB for the three types (the GGUF is
# deleted once decomposed). Not /tmp by default: it is often a small tmpfs.
# About 5-7 minutes on 2 cores for the three types (batches 1, 4, 8, 16).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${BUILD_DIR:-$root/build}"
preset="${PRESET:-llama-3.2-1b}"
types="${TYPES:-Q4_0 Q4_K_M Q8_0}"
work="$build/engine-bench"
if [ $# -gt 0 ] && [ "$1" != "--" ]; then work="$1"; shift; fi
[ "${1:-}" = "--" ] && shift
bin="$build/bin"
source "$root/tests/bench/bench_models.sh"
bench_need engine_bench
dirs=()
for type in $types; do
  dirs+=("$(bench_model "$preset" "$type" "$work")")
done

"$bin/engine_bench" "$@" "${dirs[@]}"

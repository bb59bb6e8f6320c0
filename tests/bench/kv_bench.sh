#!/usr/bin/env bash
# Benchmark: the KV cache's types on the Llama-3-8B shape (random weights,
# real shape, Q4_K_M): for f16, q8_0 and q4_0, the bytes a position takes,
# the longest context a KV budget holds, and decode tokens/s with an
# 8K-position cache beside the memory bound (kv_bench.cc says how each is
# taken).
#
#   [BUILD_DIR=build] [PRESET=llama-3-8b] [TYPE=Q4_K_M] \
#     tests/bench/kv_bench.sh [WORK_DIR] [-- KV_BENCH_FLAGS...]
#   e.g. tests/bench/kv_bench.sh /data/octo-bench -- --kv-budget 2GiB --tokens 3
#
# WORK_DIR (default BUILD_DIR/engine-bench, shared with engine_bench.sh)
# keeps the model directory (about 5 GB at Q4_K_M), so a second run skips
# generation. About 10 minutes on 2 cores the first time, 3 after.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${BUILD_DIR:-$root/build}"
preset="${PRESET:-llama-3-8b}"
type="${TYPE:-Q4_K_M}"
work="$build/engine-bench"
if [ $# -gt 0 ] && [ "$1" != "--" ]; then work="$1"; shift; fi
[ "${1:-}" = "--" ] && shift
bin="$build/bin"
source "$root/tests/bench/bench_models.sh"
bench_need kv_bench
"$bin/kv_bench" "$@" "$(bench_model "$preset" "$type" "$work")"

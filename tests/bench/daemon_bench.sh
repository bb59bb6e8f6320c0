#!/usr/bin/env bash
# Benchmark: the daemon's runtime with the real octo-loader on a generated
# Llama-3.2-1B-shaped Q4_K_M model. Prints streamed vs resident decode
# tokens/s (target 0.9) and the aggregate decode tokens/s of 1, 4 and 16
# concurrent sessions while streaming (targets 3x and 8x); see
# daemon_bench.cc for how each figure is taken.
#
#   [BUILD_DIR=build] [PRESET=llama-3.2-1b] [TYPE=Q4_K_M] \
#     tests/bench/daemon_bench.sh [WORK_DIR] [-- DAEMON_BENCH_FLAGS...]
#   e.g. tests/bench/daemon_bench.sh -- --direct -n 24
#
# WORK_DIR (default BUILD_DIR/engine-bench, shared with engine_bench.sh)
# keeps the model directory, so a second run skips generation.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${BUILD_DIR:-$root/build}"
preset="${PRESET:-llama-3.2-1b}"
type="${TYPE:-Q4_K_M}"
work="$build/engine-bench"
if [ $# -gt 0 ] && [ "$1" != "--" ]; then work="$1"; shift; fi
[ "${1:-}" = "--" ] && shift
bin="$build/bin"
source "$root/tests/bench/bench_models.sh"
bench_need daemon_bench octo-loader
dir="$(bench_model "$preset" "$type" "$work")"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores" >&2
"$bin/daemon_bench" --loader "$bin/octo-loader" "$@" "$dir"

#!/usr/bin/env bash
# Benchmark: selective expert streaming on a generated Qwen3-30B-A3B-shaped
# Q4_K_M model (its real layer shape: 128 experts of 768, 8 per token), cut
# to LAYERS layers (default 8: about 3 GB of layers), streamed from disk with
# O_DIRECT. Prints bytes read per token against whole-layer streaming and
# against the minimum (target <= 1.3x), decode tokens/s against whole-layer
# streaming (target >= 5x), the prediction's hit rate, and the same at 8
# sessions, and prefill tokens/s for a 512-token prompt (--prefill N;
# --prefill-only for that figure alone); see moe_bench.cc for how each
# figure is taken.
#
#   [BUILD_DIR=build] [PRESET=qwen3-30b-a3b] [LAYERS=8] [TYPE=Q4_K_M] tests/bench/moe_bench.sh [WORK_DIR] [-- MOE_BENCH_FLAGS...]
#
# PRESET picks another MoE shape of octo-make-model's, e.g. the hybrid
# qwen3-next-80b-a3b (512 experts of 512, 10 per token; gated DeltaNet in
# three layers of four).
#
# WORK_DIR (default BUILD_DIR/moe-bench) keeps the model directory, so a
# second run skips generation.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${BUILD_DIR:-$root/build}"
layers="${LAYERS:-8}"
preset="${PRESET:-qwen3-30b-a3b}"
type="${TYPE:-Q4_K_M}"
work="$build/moe-bench"
if [ $# -gt 0 ] && [ "$1" != "--" ]; then work="$1"; shift; fi
[ "${1:-}" = "--" ] && shift
bin="$build/bin"
source "$root/tests/bench/bench_models.sh"
bench_need moe_bench octo-loader octo-make-model octo-ctl
name="$preset-$type-${layers}l"
dir="$work/$name"
mkdir -p "$work"
if [ ! -f "$dir/manifest.json" ]; then
  echo "generating $name in $work ..." >&2
  "$bin/octo-make-model" --preset "$preset" --type "$type" --layers "$layers" -o "$work/$name.gguf" >/dev/null
  "$bin/octo-ctl" decompose -q --force "$work/$name.gguf" "$dir"
  rm -f "$work/$name.gguf"
fi
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores" >&2
"$bin/moe_bench" --loader "$bin/octo-loader" "$@" "$dir"

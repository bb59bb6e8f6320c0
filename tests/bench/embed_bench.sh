#!/usr/bin/env bash
# Benchmark: embeddings of a Qwen3-Embedding-0.6B-shaped model (random Q8_0
# weights, last-token pooling; PRESET picks another), 64 inputs of 256 tokens in one request
# against 64 one-input requests, resident and streamed (embed_bench.cc says
# what each figure is). Target, streamed: the one request at least 8x the
# inputs/s of the sequential ones.
#
#   [BUILD_DIR=build] [LAYERS=8] [PRESET=qwen3-embedding-0.6b] tests/bench/embed_bench.sh [WORK_DIR]
#       [-- EMBED_BENCH_FLAGS...]
#   e.g. tests/bench/embed_bench.sh -- --inputs 64 --tokens 256 --embed-batch-tokens 2048
#   PRESET=nomic-embed-text-v1.5 LAYERS=12 tests/bench/embed_bench.sh   (an encoder, mean pooling)
#
# LAYERS (default 8 of the model's 28) keeps a run to minutes on a 2-core
# CPU, where computing 16,384 tokens, not reading the layers, takes most of
# the time; on a GPU give LAYERS=28. WORK_DIR (default BUILD_DIR/embed-bench)
# keeps the model directory between runs.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${BUILD_DIR:-$root/build}"
layers="${LAYERS:-8}"
preset="${PRESET:-qwen3-embedding-0.6b}"
work="$build/embed-bench"
if [ $# -gt 0 ] && [ "$1" != "--" ]; then work="$1"; shift; fi
[ "${1:-}" = "--" ] && shift
bin="$build/bin"
source "$root/tests/bench/bench_models.sh"
bench_need embed_bench octo-loader octo-make-model octo-ctl

name="$preset-Q8_0-$layers"
dir="$work/$name"
mkdir -p "$work"
if [ ! -f "$dir/manifest.json" ]; then
  echo "generating $name in $work ..." >&2
  "$bin/octo-make-model" --preset "$preset" --type Q8_0 --layers "$layers" -o "$work/$name.gguf" >/dev/null
  "$bin/octo-ctl" decompose -q --force "$work/$name.gguf" "$dir" >&2
  rm -f "$work/$name.gguf"
fi
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores" >&2
"$bin/embed_bench" --loader "$bin/octo-loader" "$@" "$dir"

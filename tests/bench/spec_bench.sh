#!/usr/bin/env bash
# Benchmark: speculative decoding of a streamed Llama-3-8B-shaped target
# (spec_bench.cc says what each figure is). Target: a draft gives at least 3x
# the tokens/s of plain streamed decode at an acceptance of 0.8 or more.
#
#   [BUILD_DIR=build] [EXTRA_LAYER_NORM=0.002] \
#     tests/bench/spec_bench.sh [WORK_DIR] [-- SPEC_BENCH_FLAGS...]
#   e.g. tests/bench/spec_bench.sh -- -n 24 --sessions 4 --draft-tree 24
#
# How the pair is made, without trained weights: the draft is a random
# llama-3-8b-draft model (octo-make-model's preset: dim 1024, 4 layers, the
# 8B's head_dim, group size and 128256-token vocabulary; Q4_K_M, 0.22 GB,
# resident). The target is that draft widened to the llama-3-8b preset
# (octo-make-model --widen-from, tests/tools/widen_model.h): dim 4096, 32
# layers, the draft's weights in the corner of each of the first 4 layers'
# matrices, 28 more layers of random Q4_K_M weights whose RMSNorm weights are
# EXTRA_LAYER_NORM. At 0 the target computes the draft's function exactly
# (acceptance 1); larger values perturb its logits so that the draft is only
# mostly right. Random weights give flat logits whose top tokens are near
# ties, so small values already matter: on a 2-core machine 0.002 gave an
# acceptance of 0.81, 0.004 0.70, 0.008 0.60, 0.015 0.57 (32 tokens). The target is 4.7 GB, read per pass like a real 8B Q4_K_M
# model (zero padding is as costly to read and multiply as real weights).
#
# WORK_DIR (default BUILD_DIR/spec-bench) keeps both model directories; a
# second run with the same EXTRA_LAYER_NORM skips generation. Needs about
# 11 GB free while generating.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${BUILD_DIR:-$root/build}"
norm="${EXTRA_LAYER_NORM:-0.002}"
work="$build/spec-bench"
if [ $# -gt 0 ] && [ "$1" != "--" ]; then work="$1"; shift; fi
[ "${1:-}" = "--" ] && shift
bin="$build/bin"
source "$root/tests/bench/bench_models.sh"
bench_need spec_bench octo-loader octo-make-model octo-ctl

draft="$work/llama-3-8b-draft"
target="$work/llama-3-8b-widened-$norm"
mkdir -p "$work"
free_kib=$(df -Pk "$work" | awk 'NR == 2 { print $4 }')
if [ ! -f "$draft/manifest.json" ] || [ ! -f "$target/manifest.json" ]; then
  if [ "$free_kib" -lt $(( 11 * 1024 * 1024 )) ]; then
    echo "$(basename "$0"): $work has $((free_kib / 1024)) MiB free, needs about 11 GiB; pass another WORK_DIR" >&2
    exit 2
  fi
fi
if [ ! -f "$draft/manifest.json" ]; then
  echo "generating the draft in $work ..." >&2
  "$bin/octo-make-model" --preset llama-3-8b-draft --type Q4_K_M -o "$work/draft.gguf" >/dev/null
  "$bin/octo-ctl" decompose -q --force "$work/draft.gguf" "$draft" >&2
fi
if [ ! -f "$target/manifest.json" ]; then
  [ -f "$work/draft.gguf" ] ||
    "$bin/octo-make-model" --preset llama-3-8b-draft --type Q4_K_M -o "$work/draft.gguf" >/dev/null
  echo "widening the draft to llama-3-8b (extra layer norm $norm) in $work ..." >&2
  "$bin/octo-make-model" --preset llama-3-8b --widen-from "$work/draft.gguf" --extra-layer-norm "$norm" \
    -o "$work/target.gguf" >/dev/null
  "$bin/octo-ctl" decompose -q --force "$work/target.gguf" "$target" >&2
  rm -f "$work/target.gguf"
fi
rm -f "$work/draft.gguf"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores" >&2
"$bin/spec_bench" --loader "$bin/octo-loader" "$@" "$target" "$draft"

#!/usr/bin/env bash
# Benchmark: constrained output's cost per token beside the decode step it
# rides on. Makes a Qwen3-0.6B-shaped model (random weights, Qwen's
# 151,936-token vocabulary, Q4_K_M) with octo-make-model, and runs
# grammar_bench with it: the mask and fast-path figures next to their
# targets, and each as a share of that model's batch-1 decode step on the
# CPU engine, timed in the same run.
#
#   [BUILD_DIR=build] [TYPE=Q4_K_M] tests/bench/grammar_bench.sh [WORK_DIR] [-- GRAMMAR_BENCH_FLAGS...]
#
# WORK_DIR (default BUILD_DIR/grammar-bench) keeps the model (about 0.5 GB).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${BUILD_DIR:-$root/build}"
type="${TYPE:-Q4_K_M}"
work="$build/grammar-bench"
if [ $# -gt 0 ] && [ "$1" != "--" ]; then work="$1"; shift; fi
[ "${1:-}" = "--" ] && shift
bin="$build/bin"
source "$root/tests/bench/bench_models.sh"
bench_need grammar_bench
# qwen3-embedding-0.6b is Qwen3-0.6B's shape (its 151,669-token vocabulary is the
# decoder's 151,936 less unused rows: the same step within 0.2%).
dir=$(bench_model qwen3-embedding-0.6b "$type" "$work")
"$bin/grammar_bench" --decode-model "$dir" "$@"

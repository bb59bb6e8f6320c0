#!/usr/bin/env bash
# CTest's short pass of one fuzz target: RUNS executions starting from the
# seed corpus SEEDS (read, never written: new inputs go to a temporary
# corpus that is removed afterwards). On a failure the crashing input is
# shown (its first 512 bytes, hex) before it is removed.
#   smoke.sh FUZZER SEEDS RUNS
set -uo pipefail
fuzzer="$1" seeds="$2" runs="$3"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir "$work/corpus"
# -max_len: seeds (a 2-layer manifest, a GGUF header) are a few KiB to 100 KiB;
# -timeout: one input taking 10 s is a hang, reported as a failure.
"$fuzzer" "$work/corpus" "$seeds" -runs="$runs" -seed=1 -max_len=131072 -timeout=10 -rss_limit_mb=4096 \
  -artifact_prefix="$work/" -print_final_stats=1
rc=$?
if [ "$rc" -ne 0 ]; then
  for artifact in "$work"/crash-* "$work"/timeout-* "$work"/leak-* "$work"/oom-*; do
    [ -f "$artifact" ] || continue
    echo "=== $(basename "$artifact") ($(stat -c %s "$artifact") bytes):"
    od -A d -t x1z -N 512 "$artifact"
  done
fi
exit "$rc"

#!/usr/bin/env bash
# Runs the fuzz targets for a long time, each with a corpus directory that
# persists between runs, and prints per target: executions, executions per
# second, coverage (libFuzzer's cov: edges and ft: features), corpus size
# and crashes found.
#
#   tests/fuzz/run_long.sh [-d CORPUS_ROOT] [-t SECONDS] [-r RUNS] [-j PARALLEL] [-f FLAGS] [TARGET...]
#
#   -d  corpus root (default fuzz-corpus/): TARGET's corpus is CORPUS_ROOT/TARGET,
#       seeded from tests/fuzz/corpus/TARGET; crashes land in CORPUS_ROOT/crashes/
#   -t  seconds per target (default 3600)
#   -r  stop a target after this many executions instead (-t still bounds it)
#   -j  targets run at once (default: the number of cores)
#   -f  more libFuzzer flags, e.g. "-entropic=0" (faster executions, blunter
#       scheduling: about 3x for http_request_fuzz)
# An input that takes 60 s is reported as a hang (-timeout): long runs share
# the machine, and a starved process must not count as a hung one.
#   TARGET  default: all six
#
# Needs the fuzz build:
#   cmake -S . -B build-fuzz -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
#     -DOCTO_WITH_CUDA=OFF -DOCTO_FUZZ=ON && cmake --build build-fuzz --target fuzz_targets
# (BUILD_DIR=... to use another build directory.)
set -euo pipefail
cd "$(dirname "$0")/../.."
build="${BUILD_DIR:-build-fuzz}"
root="fuzz-corpus" seconds=3600 runs=-1 parallel="$(nproc)" flags=""
while getopts "d:t:r:j:f:" opt; do
  case "$opt" in
    d) root="$OPTARG" ;;
    t) seconds="$OPTARG" ;;
    r) runs="$OPTARG" ;;
    j) parallel="$OPTARG" ;;
    f) flags="$OPTARG" ;;
    *) sed -n '2,22p' "$0"; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
targets=("$@")
[ "${#targets[@]}" -gt 0 ] || targets=(gguf_fuzz manifest_fuzz http_request_fuzz http_fields_fuzz tokenizer_fuzz chat_fuzz)
mkdir -p "$root/crashes" "$root/logs"

run_one() {
  local target="$1" binary="$build/tests/fuzz/$1"
  if [ ! -x "$binary" ]; then
    echo "$target: $binary is not built" >"$root/logs/$target.log"
    return 1
  fi
  mkdir -p "$root/$target"
  # Shorter allocation stacks: ASan's bookkeeping was a fifth of an
  # execution; a report still shows where a bad access happened.
  ASAN_OPTIONS="${ASAN_OPTIONS:-malloc_context_size=4}" "$binary" "$root/$target" "tests/fuzz/corpus/$target" -max_total_time="$seconds" -runs="$runs" \
    -max_len=131072 -timeout=60 -rss_limit_mb=4096 -artifact_prefix="$root/crashes/$target-" \
    -print_final_stats=1 $flags >"$root/logs/$target.log" 2>&1 || true
}

running=0
for target in "${targets[@]}"; do
  run_one "$target" &
  running=$((running + 1))
  if [ "$running" -ge "$parallel" ]; then
    wait -n || true
    running=$((running - 1))
  fi
done
wait

printf '%-18s %14s %10s %8s %8s %8s %8s\n' target executions exec/s cov ft corpus crashes
status=0
for target in "${targets[@]}"; do
  log="$root/logs/$target.log"
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
  last=$(grep -E '^#[0-9]+' "$log" | tail -n 1 || true)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
  corpus=$(find "$root/$target" -type f | wc -l)
  crashes=$(find "$root/crashes" -name "$target-*" -type f | wc -l)
  printf '%-18s %14s %10s %8s %8s %8s %8s\n' "$target" "${execs:-?}" "${rate:-?}" "${cov:-?}" "${ft:-?}" "$corpus" "$crashes"
  [ "$crashes" -eq 0 ] && [ -n "$execs" ] || status=1
done
echo "logs: $root/logs/; crashing inputs: $root/crashes/"
exit "$status"

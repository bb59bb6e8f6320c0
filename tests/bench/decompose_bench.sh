#!/usr/bin/env bash
# Benchmark: decompose a generated model of a real shape and print what it
# achieved next to the limits it is measured against, all in the same run on
# the same file, each from a cold page cache:
#   - throughput vs `dd` reading the GGUF and vs `dd` copying it (O_DIRECT
#     writes) to the same disk,
#   - peak memory (max RSS) vs the model's size and a fixed bound: decompose
#     must not grow with the model (a 40 GB GGUF on a 24 GB machine).
# Then `verify` rate vs `dd` reading the directory.
#
#   [ROUNDS=3] tests/bench/decompose_bench.sh [PRESET] [TYPE] [WORK_DIR]
#   e.g. tests/bench/decompose_bench.sh llama-3-8b Q4_K_M /tmp/octo-bench
set -euo pipefail
preset="${1:-llama-3.2-1b}"
type="${2:-Q4_K_M}"
work="${3:-/tmp/octo-bench}"
rounds="${ROUNDS:-3}"
bin="$(cd "$(dirname "$0")/../.." && pwd)/build/bin"
rss_limit_mib=256

calc() { awk "BEGIN { print $1 }"; }
# Every measurement starts from a cold page cache, so the reference and Octo
# read from the disk alike (needs root; otherwise the figures say "warm").
cache="cold"
cold() {
  sync
  if ! { echo 3 > /proc/sys/vm/drop_caches; } 2>/dev/null; then cache="warm (not root: page cache not dropped)"; fi
}
mkdir -p "$work"
model="$work/$preset-$type.gguf"
out="$work/$preset-$type"
trap 'rm -rf "$out" "$work/dd-copy"' EXIT

[ -f "$model" ] || "$bin/octo-make-model" --preset "$preset" --type "$type" -o "$model"
bytes=$(stat -c %s "$model")

# References on the same file and disk: dd reading it (decompose can go no
# faster), and dd copying it with O_DIRECT writes (the same bytes in, the
# same bytes out, no hashing or re-layout). The disk's rate drifts, so the
# three are interleaved for $rounds rounds and the medians compared.
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
reads=(); copies=(); decs=(); rss_kib=0
for round in $(seq "$rounds"); do
  cold
  t0=$(date +%s.%N)
  dd if="$model" of=/dev/null bs=8M status=none
  t1=$(date +%s.%N)
  reads+=("$(calc "$bytes / ($t1 - $t0) / 1e9")")
  cold
  t0=$(date +%s.%N)
  dd if="$model" of="$work/dd-copy" bs=8M oflag=direct status=none
  t1=$(date +%s.%N)
  rm -f "$work/dd-copy"
  copies+=("$(calc "$bytes / ($t1 - $t0) / 1e9")")
  rm -rf "$out"
  cold
  /usr/bin/time -f "%M %e" -o "$work/time.txt" "$bin/octo-ctl" decompose -q "$model" "$out" >/dev/null
  read -r round_rss secs < "$work/time.txt"
  decs+=("$(calc "$bytes / $secs / 1e9")")
  [ "$round_rss" -gt "$rss_kib" ] && rss_kib=$round_rss
  echo "round $round: dd read ${reads[-1]} GB/s, dd copy ${copies[-1]} GB/s, decompose ${decs[-1]} GB/s" >&2
done
dd_read=$(median "${reads[@]}")
dd_rate=$(median "${copies[@]}")
dec_rate=$(median "${decs[@]}")

dir_bytes=$(du -sb "$out" | cut -f1)
cold
t0=$(date +%s.%N)
for f in "$out"/*.bin; do dd if="$f" of=/dev/null bs=8M status=none; done
t1=$(date +%s.%N)
read_rate=$(calc "$dir_bytes / ($t1 - $t0) / 1e9")
cold
/usr/bin/time -f "%M %e" -o "$work/time.txt" "$bin/octo-ctl" verify -q "$out" >/dev/null
read -r vrss_kib vsecs < "$work/time.txt"
ver_rate=$(calc "$dir_bytes / $vsecs / 1e9")

printf '\n== decompose benchmark: %s %s, %.2f GB GGUF, page cache %s, median of %d rounds ==\n' "$preset" "$type" "$(calc "$bytes / 1e9")" "$cache" "$rounds"
printf 'decompose throughput : %6.2f GB/s   vs dd copy of the same file: %6.2f GB/s  (%3.0f%%)\n' \
  "$dec_rate" "$dd_rate" "$(calc "100 * $dec_rate / $dd_rate")"
printf '                                      vs dd read of the same file: %6.2f GB/s  (%3.0f%%)\n' \
  "$dd_read" "$(calc "100 * $dec_rate / $dd_read")"
printf 'decompose peak RSS   : %6.1f MiB    limit %d MiB (model is %.0f MiB)  %s\n' \
  "$(calc "$rss_kib / 1024")" "$rss_limit_mib" "$(calc "$bytes / 1048576")" \
  "$( [ $((rss_kib / 1024)) -le $rss_limit_mib ] && echo OK || echo OVER)"
printf 'verify throughput    : %6.2f GB/s   vs dd read of the directory : %6.2f GB/s  (%3.0f%%)\n' \
  "$ver_rate" "$read_rate" "$(calc "100 * $ver_rate / $read_rate")"
printf 'verify peak RSS      : %6.1f MiB\n' "$(calc "$vrss_kib / 1024")"

#!/usr/bin/env bash
# How cuda::MatMul's decode path loads its weights, from the PTX (no GPU
# needed): per type, the thread-level global load instructions that fetch
# one weight block, and the bytes they load against the block's size.
#
#   [NVCC=/usr/local/cuda/bin/nvcc] [ARCH=sm_90] tests/bench/ptx_loads.sh [--check]
#
# --check: exit 1 when a type misses a target below (ctest runs it so in
# the nvcc build: ptx_loads_targets).
#
# prints, per type of kernels/cuda/q8_dot.cuh, one line
#   ptx-loads: <TYPE> loads/block=N bytes-loaded/block-bytes=R min-width=W
# beside the targets of issue 24: Q4_K at most 12 loads per 144-byte block
# (16-byte loads need 9; llama.cpp issues about 88), every type each weight
# byte loaded once (R = 1.0), no load narrower than 4 bytes.
#
# How it counts: tests/bench/ptx_loads_probe.cu has kernels per type built
# from the decode path's own inline code, compiled with the build's flags.
#  - Q4_K and Q5_K (read straight from global memory): the ld.global
#    instructions of one lane's unpack of one unit (a chunk pair; every path:
#    a branch on the unit counts both sides), times the block's units, are
#    the loads per block; their widths, the bytes.
#  - Every other type is staged (kernels/cuda/weight_stage.cuh): the lanes of
#    a row copy a span of whole blocks to shared memory, 16-byte loads for
#    the span's aligned 16-byte units and 4-byte words at its two ends (async
#    copies, cp.async: counted as the loads they are), and unpack from there. Its PTX gives the load widths (the narrowest is
#    min-width); the count follows StageSpan's rule, applied below to the
#    spans of a row that starts 16-byte aligned (the skew of each span, over
#    the 16 spans after which it repeats): loads/block and the bytes they
#    load per block byte. The unpack's own global loads are the IQ types'
#    grid tables (weights come from shared memory there), printed apart as
#    table-loads/block.
set -euo pipefail
source "$(dirname "$0")/nvcc_reading.sh"
arch="${ARCH:-sm_90}"

# The types the decode path unpacks: every Q8Weights specialisation.
grep -o 'struct Q8Weights<GgmlType::k[A-Z0-9_]*>' "$root/kernels/cuda/q8_dot.cuh" |
  sed 's/.*GgmlType::k\(.*\)>/PROBE(\1)/' >"$work/types.inc"
"$nvcc" -std=c++20 -I"$root" -O3 --fmad=false -arch="$arch" -ptx \
  -DOCTO_PTX_PROBE_TYPES="\"$work/types.inc\"" "$root/tests/bench/ptx_loads_probe.cu" -o "$work/probe.ptx"

awk -v check="$check" '
  # .global .align 4 .u32 probe_Q4_K_units = 4;
  /^\.global .* probe_[A-Za-z0-9_]+_(units|bytes|staged) = / {
    name = $5; value = $7; sub(/;/, "", value); sub(/^probe_/, "", name)
    if (name ~ /_units$/) { sub(/_units$/, "", name); units[name] = value }
    else if (name ~ /_bytes$/) { sub(/_bytes$/, "", name); bytes[name] = value }
    else { sub(/_staged$/, "", name); staged[name] = value }
    next
  }
  /\.entry probe_/ {
    entry = $0; sub(/.*\.entry probe_/, "", entry); sub(/\(.*/, "", entry)
    if (entry !~ /_unpack$/) order[++n] = entry
    next
  }
  entry != "" && /ld\.global/ {
    width = 1
    if ($1 ~ /\.v4\./) width = 4; else if ($1 ~ /\.v2\./) width = 2
    if ($1 ~ /(8|s8|u8|b8)$/) size = 1; else if ($1 ~ /16$/) size = 2; else if ($1 ~ /64$/) size = 8; else size = 4
    loads[entry]++; loaded[entry] += width * size
    w = width * size
    if (!(entry in minw) || w < minw[entry]) minw[entry] = w
    if (!(entry in maxw) || w > maxw[entry]) maxw[entry] = w
  }
  # cp.async.cg.shared.global [dst], [src], 16, 16;  (the copy size: 4, 8 or 16)
  entry != "" && /cp\.async\.(ca|cg)\.shared\.global/ {
    w = $0; sub(/.*\], */, "", w); sub(/,.*/, "", w); w += 0
    loads[entry]++; loaded[entry] += w
    if (!(entry in minw) || w < minw[entry]) minw[entry] = w
    if (!(entry in maxw) || w > maxw[entry]) maxw[entry] = w
  }
  # StageSpan on the spans of a row from a 16-byte aligned start: per span
  # at skew k, the words [k rounded down to 4, the first 16-byte boundary)
  # and [the last one, the end rounded up to 4), 16-byte units between.
  function stage(t,    per_span, blocks, i, skew, n, words_end, vb, ve, n_words, n_vec) {
    blocks = 32 / units[t]; per_span = blocks * bytes[t]
    stage_loads = 0; stage_bytes = 0
    for (i = 0; i < 16; i++) {
      skew = (i * per_span) % 16; n = per_span + skew
      words_end = int((n + 3) / 4) * 4
      vb = skew == 0 ? 0 : 16; if (vb > words_end) vb = words_end
      ve = int(words_end / 16) * 16; if (ve < vb) ve = vb
      n_words = (vb - int(skew / 4) * 4) / 4 + (words_end - ve) / 4
      n_vec = (ve - vb) / 16
      stage_loads += n_words + n_vec; stage_bytes += minw[t] * n_words + maxw[t] * n_vec
    }
    stage_loads /= 16 * blocks; stage_bytes /= 16 * per_span
  }
  END {
    for (i = 1; i <= n; i++) {
      t = order[i]
      if (staged[t]) {
        stage(t)
        printf "ptx-loads: %s loads/block=%g bytes-loaded/block-bytes=%.2f min-width=%d staged table-loads/block=%d", t, stage_loads, stage_bytes, minw[t], loads[t "_unpack"] * units[t]
      } else {
        printf "ptx-loads: %s loads/block=%d bytes-loaded/block-bytes=%.2f min-width=%d", t, loads[t] * units[t], loaded[t] * units[t] / bytes[t], minw[t]
      }
      if (t == "Q4_K") printf "   (targets: loads/block <= 12, ratio 1.00, min-width >= 4)"
      printf "\n"
      ratio = staged[t] ? stage_bytes : loaded[t] * units[t] / bytes[t]
      if (sprintf("%.2f", ratio) != "1.00" || minw[t] < 4 || (t == "Q4_K" && loads[t] * units[t] > 12)) {
        printf "ptx-loads: %s misses a target\n", t; missed++
      }
    }
    if (check && (n == 0 || missed > 0)) exit 1
  }' "$work/probe.ptx"
echo "targets (issue 24): every type bytes-loaded/block-bytes = 1.00 and min-width >= 4; Q4_K loads/block <= 12"

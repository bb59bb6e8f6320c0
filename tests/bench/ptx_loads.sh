#!/usr/bin/env bash
# How cuda::MatMul's decode path loads its weights, from the PTX (no GPU
# needed): per type, the thread-level global load instructions that fetch
# one weight block, and the bytes they load against the block's size.
#
#   [NVCC=/usr/local/cuda/bin/nvcc] [ARCH=sm_90] tests/bench/ptx_loads.sh
#
# prints, per type of kernels/cuda/q8_dot.cuh, one line
#   ptx-loads: <TYPE> loads/block=N bytes-loaded/block-bytes=R min-width=W
# beside the targets of issue 24: Q4_K at most 12 loads per 144-byte block
# (16-byte loads need 9; llama.cpp issues about 88), every type each weight
# byte loaded once (R = 1.0), no load narrower than 4 bytes.
#
# How it counts: tests/bench/ptx_loads_probe.cu has one kernel per type that
# runs one decode lane's work for one unit (a 32-element chunk, or a chunk
# pair where they share bytes; the decode kernel's own inline unpack, the
# unit a runtime value), compiled with the build's flags. The ld.global
# instructions of that kernel's PTX (every path: a branch on the unit counts
# both sides), times the block's units, are the loads per block; their
# widths, the bytes. The IQ types' grid lookups are
# global loads too and are counted with them.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
nvcc="${NVCC:-/usr/local/cuda/bin/nvcc}"
arch="${ARCH:-sm_90}"
[ -x "$nvcc" ] || { echo "$(basename "$0"): no nvcc at $nvcc (set NVCC)" >&2; exit 2; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# The types the decode path unpacks: every Q8Weights specialisation.
grep -o 'struct Q8Weights<GgmlType::k[A-Z0-9_]*>' "$root/kernels/cuda/q8_dot.cuh" |
  sed 's/.*GgmlType::k\(.*\)>/PROBE(\1)/' >"$work/types.inc"
"$nvcc" -std=c++20 -I"$root" -O3 --fmad=false -arch="$arch" -ptx \
  -DOCTO_PTX_PROBE_TYPES="\"$work/types.inc\"" "$root/tests/bench/ptx_loads_probe.cu" -o "$work/probe.ptx"

awk '
  # .global .align 4 .u32 probe_Q4_K_units = 4;
  /^\.global .* probe_[A-Za-z0-9_]+_(units|bytes) = / {
    name = $5; value = $7; sub(/;/, "", value)
    if (name ~ /_units$/) { sub(/^probe_/, "", name); sub(/_units$/, "", name); chunks[name] = value }
    else { sub(/^probe_/, "", name); sub(/_bytes$/, "", name); bytes[name] = value }
    next
  }
  /\.entry probe_/ { entry = $0; sub(/.*\.entry probe_/, "", entry); sub(/\(.*/, "", entry); order[++n] = entry; next }
  entry != "" && /ld\.global/ {
    width = 1
    if ($1 ~ /\.v4\./) width = 4; else if ($1 ~ /\.v2\./) width = 2
    if ($1 ~ /(8|s8|u8|b8)$/) size = 1; else if ($1 ~ /16$/) size = 2; else if ($1 ~ /64$/) size = 8; else size = 4
    loads[entry]++; loaded[entry] += width * size
    w = width * size; if (!(entry in minw) || w < minw[entry]) minw[entry] = w
  }
  END {
    for (i = 1; i <= n; i++) {
      t = order[i]
      per_block = loads[t] * chunks[t]
      printf "ptx-loads: %s loads/block=%d bytes-loaded/block-bytes=%.2f min-width=%d", t, per_block, loaded[t] * chunks[t] / bytes[t], minw[t]
      if (t == "Q4_K") printf "   (targets: loads/block <= 12, ratio 1.00, min-width >= 4)"
      printf "\n"
    }
  }' "$work/probe.ptx"
echo "targets (issue 24): every type bytes-loaded/block-bytes = 1.00 and min-width >= 4; Q4_K loads/block <= 12"

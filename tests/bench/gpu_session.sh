#!/usr/bin/env bash
# gpu_session.sh: every GPU measurement issue 24 asks for, in one run on a
# GPU machine, from the archive tests/bench/gpu_pack.sh made (the machine
# needs CUDA 13 and nothing of Octo's build dependencies).
#
#   [STEPS="ctest bench llama matmul prefill pdl ncu"] tests/bench/gpu_session.sh ARCHIVE [OUT_DIR]
#   (from the repository root; STEPS picks some of the steps below)
#
# Each step has its own time limit and log in OUT_DIR (default $OUT, else
# /tmp/octo-gpu-out):
#   ctest.log      ctest -L cuda: every CUDA test, on the device;
#   gpu_bench.log  tests/bench/gpu_bench.sh on a generated Llama-3-8B
#                  Q4_K_M: pinned H2D and HBM limits, streamed decode,
#                  resident decode, prefill of 2048, 1/8/32 sessions;
#   llama.log      llama.cpp's llama-bench on the same GGUF, every layer on
#                  the GPU: prompt 2048, 128 generated tokens;
#   matmul.log     matmul_cuda_bench: the decode MatMul's GB/s per type at
#                  the 8B shapes (14336 x 4096, 4096 x 14336, 4096 x 4096),
#                  then Q4_K and Q6_K without the weight prefetch;
#   prefill.log    the prefill path at a 512-token chunk (the engine's):
#                  matmul_cuda_bench at the 8B shapes, Q4_K with the
#                  engine's tiles and with the 512-row tiles used before,
#                  and F16 (cuBLAS alone, nothing dequantized); then
#                  decode_step_bench's 512-token step at 1536 cached
#                  positions (the last chunk of a 2048-token prompt), its
#                  attention blocks serving 4 query heads (the default) and
#                  1, and a decode step at 4096 positions with 1 (the
#                  default) and 4;
#   pdl.log        decode_step_bench at the 8B shapes (4 layers, eager
#                  launches) with programmatic launches on and off
#                  (OCTO_CUDA_PDL), each with the kernels' prefetch at
#                  4096 bytes a weight row (the default) and off, and
#                  with launches on 16384 too (OCTO_CUDA_PREFETCH);
#   ncu-POS.csv    Nsight Compute (when there): each kernel's time and DRAM
#                  throughput over a decode step at POS cached positions
#                  (NCU_POS, default 512);
#   ncu-prefill.csv  the same over that 512-token prefill step (2 layers).
# A summary of the figures is printed last.
set -uo pipefail
[ $# -ge 1 ] || { echo "usage: $0 ARCHIVE [OUT_DIR]" >&2; exit 2; }
archive=$(readlink -f "$1")
out=${2:-${OUT:-/tmp/octo-gpu-out}}
root=$(pwd -P)
mkdir -p "$out"
t0=$(date +%s)
step() { echo "=== $(($(date +%s) - t0)) s: $*"; }
steps=" ${STEPS:-ctest bench llama matmul prefill pdl ncu} "
want() { [[ "$steps" == *" $1 "* ]]; }

step unpack
pack=/tmp/octo-pack
rm -rf "$pack" && mkdir -p "$pack" && tar xJf "$archive" -C "$pack" || exit 1
build_path=$(cat "$pack/build-path")
src_path=$(dirname "$build_path")
# CTest's files name the build's absolute paths here: the same paths there.
if [ "$(readlink -f "$src_path" 2>/dev/null)" != "$root" ]; then
  [ -e "$src_path" ] && { echo "gpu_session: $src_path exists and is not this checkout" >&2; exit 1; }
  mkdir -p "$(dirname "$src_path")" && ln -s "$root" "$src_path"
fi
build="$root/$(basename "$build_path")"
rm -rf "$build" && mv "$pack/build" "$build"
# The test lists gtest_discover_tests wrote here, newer than the (stripped)
# executables: CTest reads them rather than discovering again with this
# machine's CMake modules.
find "$build" -name '*_tests.cmake' -exec touch {} +
shared="$(cd -P "$src_path/.." && pwd -P)/shared"
[ -d "$shared" ] || [ ! -d "$pack/shared" ] || mv "$pack/shared" "$shared"
libs="$pack/lib"
for lib in libcudart.so.13 libcublas.so.13 libcublasLt.so.13; do
  dir=""
  for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
    [ -e "$d/$lib" ] && { dir=$d; break; }
  done
  [ -n "$dir" ] || dir=$(dirname "$(find / -xdev -name "$lib*" -print -quit 2>/dev/null)")
  libs="$libs:$dir"
done
export LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
bin="$build/bin"
missing=$(ldd "$bin/gpu_bench" | grep 'not found')
[ -z "$missing" ] || { echo "gpu_session: gpu_bench cannot load: $missing" >&2; exit 1; }
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,clocks.max.mem,pcie.link.gen.current,pcie.link.width.current \
  --format=csv | tee "$out/device.txt"

# The 8B model, generated on the CPU while the tests use the GPU.
work=/tmp/octo-gpu-bench
mkdir -p "$work"
want bench || want llama && (time ("$bin/octo-make-model" --preset llama-3-8b --type Q4_K_M -o "$work/l8b.gguf" &&
  "$bin/octo-ctl" decompose -q --force "$work/l8b.gguf" "$work/llama-3-8b-Q4_K_M")) >"$out/model.log" 2>&1 &
model=$!

if want ctest; then
step "ctest -L cuda"
# The CTest files name the cmake that wrote them (fixtures run it).
cmake_here=$(grep -o '/[^"]*/cmake"' "$build/tests/CTestTestfile.cmake" "$build/CTestTestfile.cmake" 2>/dev/null | head -n 1 | sed 's/.*:\(.*\)"/\1/')
[ -z "$cmake_here" ] || [ -x "$cmake_here" ] || ln -s "$(command -v cmake)" "$cmake_here"
# ptx_loads_targets and decode_waves_targets only compile (two minutes):
# they need no GPU and CI runs them.
timeout 170 ctest --test-dir "$build" -L cuda -E '^(ptx_loads|decode_waves)_targets$' -j 12 --timeout 160 \
  --output-on-failure >"$out/ctest.log" 2>&1
echo "ctest exit $?"; grep -E 'tests passed|tests failed|^\s+[0-9]+ - ' "$out/ctest.log" | tail -n 25

fi

if want bench || want llama; then
step "waiting for the model"
wait "$model" || { tail -n 20 "$out/model.log"; exit 1; }
tail -n 3 "$out/model.log"
fi

if want bench; then

step gpu_bench
BUILD_DIR="$build" timeout 200 tests/bench/gpu_bench.sh "$work" >"$out/gpu_bench.log" 2>&1
echo "gpu_bench exit $?"
fi

step llama-bench
if want llama && [ -x "$pack/llama-bench" ]; then
  timeout 100 "$pack/llama-bench" -m "$work/l8b.gguf" -ngl 99 -p 2048 -n 128 -r 2 >"$out/llama.log" 2>&1
  echo "llama-bench exit $?"
fi

if want matmul; then
step matmul_cuda_bench
# The 8B shapes: gate/up, down (the longest rows: a lane's most units), o.
: >"$out/matmul.log"
for shape in "14336 4096" "4096 14336" "4096 4096"; do
  read -r rows cols <<<"$shape"
  timeout 40 "$build/tests/kernels/cuda/matmul_cuda_bench" --rows "$rows" --cols "$cols" Q4_K Q6_K Q8_0 \
    >>"$out/matmul.log" 2>&1
  echo "matmul_cuda_bench $rows x $cols exit $?"
  # Without the weight prefetch (device.h: WeightPrefetchBytes), Q4_K and Q6_K.
  OCTO_CUDA_PREFETCH=0 timeout 30 "$build/tests/kernels/cuda/matmul_cuda_bench" --rows "$rows" --cols "$cols" \
    Q4_K Q6_K >>"$out/matmul.log" 2>&1
  echo "matmul_cuda_bench $rows x $cols, no prefetch: exit $?"
done
fi

# The 8B shapes of a 2048-token prompt's last chunk, as gpu_bench's prefill
# runs them, and llama-bench's pp2048 beside it in llama.log.
prefill_step=("$build/tests/kernels/cuda/decode_step_bench" --dim 4096 --hidden 14336 --heads 32 --kv-heads 8
  --layers 2 --vocab 32000 --pos 1536 --tokens 512 --type Q4_K)
if want prefill; then
step "prefill path, 512 tokens"
: >"$out/prefill.log"
for shape in "14336 4096" "4096 14336" "4096 4096"; do
  read -r rows cols <<<"$shape"
  for tile in default $((512 * cols)); do
    tile_flag=()
    [ "$tile" = default ] || tile_flag=(--prefill-tile-elements "$tile")
    echo "--- $rows x $cols, tile elements: $tile" >>"$out/prefill.log"
    timeout 40 "$build/tests/kernels/cuda/matmul_cuda_bench" --rows "$rows" --cols "$cols" --tokens 512 --iters 10 \
      "${tile_flag[@]}" Q4_K Q6_K >>"$out/prefill.log" 2>&1
  done
  timeout 40 "$build/tests/kernels/cuda/matmul_cuda_bench" --rows "$rows" --cols "$cols" --tokens 512 --iters 10 F16 \
    >>"$out/prefill.log" 2>&1
  echo "prefill matmul $rows x $cols exit $?"
done
for heads in 4 1; do
  echo "--- prefill step, attention heads a block: $heads" >>"$out/prefill.log"
  timeout 60 "${prefill_step[@]}" --steps 5 --attention-heads "$heads" >>"$out/prefill.log" 2>&1
  echo "prefill step, $heads attention heads a block: exit $?"
done
for heads in 1 4; do
  echo "--- decode step at 4096 positions, attention heads a block: $heads" >>"$out/prefill.log"
  timeout 60 "$build/tests/kernels/cuda/decode_step_bench" --dim 4096 --hidden 14336 --heads 32 --kv-heads 8 \
    --layers 4 --vocab 32000 --pos 4096 --steps 50 --type Q4_K --attention-heads "$heads" >>"$out/prefill.log" 2>&1
  echo "decode step at 4096, $heads attention heads a block: exit $?"
done
fi

if want pdl; then
step "programmatic launches on and off"
: >"$out/pdl.log"
for pdl in 1 0; do
  prefetches="4096 0"
  [ "$pdl" = 1 ] && prefetches="4096 0 16384"
  for prefetch in $prefetches; do
    echo "--- OCTO_CUDA_PDL=$pdl OCTO_CUDA_PREFETCH=$prefetch" >>"$out/pdl.log"
    OCTO_CUDA_PDL=$pdl OCTO_CUDA_PREFETCH=$prefetch timeout 60 "$build/tests/kernels/cuda/decode_step_bench" \
      --dim 4096 --hidden 14336 --heads 32 --kv-heads 8 --layers 4 --vocab 32000 --pos 512 --steps 50 --type Q4_K \
      >>"$out/pdl.log" 2>&1
    echo "decode step, OCTO_CUDA_PDL=$pdl OCTO_CUDA_PREFETCH=$prefetch: exit $?"
  done
done
fi

ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -n 1)
if want ncu && [ -n "$ncu" ]; then
  step "ncu over resident decode kernels"
  # decode_step_bench's ops at Llama-3-8B's shapes (2 layers, a 32000-row
  # lm_head), each kernel of its second step, at the GPU's own clocks, at
  # each cached length of NCU_POS.
  for pos in ${NCU_POS:-512}; do
    timeout 120 "$ncu" --csv --print-summary none --clock-control none --section SpeedOfLight \
      --launch-skip 40 --launch-count 40 "$build/tests/kernels/cuda/decode_step_bench" --dim 4096 \
      --hidden 14336 --heads 32 --kv-heads 8 --layers 2 --vocab 32000 --pos "$pos" --steps 3 --type Q4_K \
      >"$out/ncu-$pos.csv" 2>>"$out/ncu.err"
    echo "ncu at $pos positions: exit $?"
  done
  if want prefill; then
    # Every kernel of the warm-up step and one more: two of each launch.
    timeout 150 "$ncu" --csv --print-summary none --clock-control none --section SpeedOfLight \
      "${prefill_step[@]}" --steps 1 >"$out/ncu-prefill.csv" 2>>"$out/ncu.err"
    echo "ncu over the prefill step: exit $?"
  fi
fi

step summary
[ -f "$out/gpu_bench.log" ] && tail -n 45 "$out/gpu_bench.log"
grep -E '^\|' "$out/llama.log" 2>/dev/null
grep -E "GB/s|prefetch" "$out/matmul.log" 2>/dev/null | head -n 72
grep -E "^(---|Q4_K|Q6_K|F16) |prefill step|decode step" "$out/prefill.log" 2>/dev/null
grep -E "^---|decode step" "$out/pdl.log" 2>/dev/null
for csv in "$out"/ncu-*.csv; do
  [ -s "$csv" ] || continue
  echo "$(basename "$csv"):"
  python3 - "$csv" <<'EOF'
import collections, csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
if not rows: sys.exit()
head, body = rows[0], rows[1:]
ix = {name: i for i, name in enumerate(head)}
agg = collections.defaultdict(lambda: [0, 0.0, 0.0])
for r in body:
    name = r[ix["Kernel Name"]].replace("(anonymous namespace)::", "").replace("void ", "")
    name = name.split("(")[0][:70]
    metric, value, unit = r[ix["Metric Name"]], r[ix["Metric Value"]].replace(",", ""), r[ix["Metric Unit"]]
    try: v = float(value)
    except ValueError: continue
    if metric == "Duration":
        agg[name][0] += 1; agg[name][1] += v * {"m": 1000, "n": 0.001}.get(unit[:1], 1)
    if metric == "DRAM Throughput": agg[name][2] += v
for name, (n, us, dram) in sorted(agg.items(), key=lambda kv: -kv[1][1]):
    print(f"ncu: {name:70s} launches={n:3d} mean={us / max(n, 1):8.1f} us  total={us:9.1f} us  "
          f"dram={dram / max(n, 1):5.1f}% of peak")
EOF
done
step done

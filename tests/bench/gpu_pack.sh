#!/usr/bin/env bash
# gpu_pack.sh: one archive of an nvcc build's CUDA tests and benchmarks, for
# a GPU machine that has CUDA 13 but none of Octo's build dependencies (a
# lent machine with nothing to install from). tests/bench/gpu_session.sh
# unpacks and runs it there.
#
#   tests/bench/gpu_pack.sh BUILD_DIR OUT_DIR [LLAMA_BENCH]
#
# OUT_DIR/octo-gpu.tar.xz holds:
#   build/        BUILD_DIR's executables (stripped) and CTest files, so
#                 `ctest -L cuda` runs there at the same absolute path;
#   lib/          every shared library they load from this machine except
#                 the C runtime and CUDA's own (the GPU machine's are used);
#   shared/       ../shared's models and references, when present (tests
#                 that use them skip without);
#   llama-bench   llama.cpp's, when LLAMA_BENCH is given;
#   build-path    the absolute path BUILD_DIR had here.
# Build BUILD_DIR first: -DCMAKE_CUDA_ARCHITECTURES=<the GPU's>, targets
# cuda_tests gpu_bench octo-make-model octo-ctl matmul_cuda_bench
# decode_step_bench.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 BUILD_DIR OUT_DIR [LLAMA_BENCH]" >&2; exit 2; }
build=$(cd "$1" && pwd)
out=$2
llama=${3:-}
root="$(cd "$(dirname "$0")/../.." && pwd)"
grep -q '^OCTO_CUDA_SIM:BOOL=ON' "$build/CMakeCache.txt" &&
  { echo "$0: $build is an executor build; pack an nvcc build" >&2; exit 2; }
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/build" "$stage/lib" "$out"

# CTest's files, and the executables the CUDA tests, the benchmarks and the
# tools they run (bin/) need, at their paths under BUILD_DIR.
{
  (cd "$build" && find . -path ./gpu-bench -prune -o -type f \
     \( -name 'CTestTestfile.cmake' -o -name '*_tests.cmake' -o -name '*_include.cmake' \) -print)
  (cd "$build" && find bin -type f -perm -u+x)
  echo tests/kernels/cuda/matmul_cuda_bench
  echo tests/kernels/cuda/decode_step_bench
  ctest --test-dir "$build" -L cuda -N -V | sed -n 's|^[0-9]*: Test command: '"$build"'/\([^ ]*\).*|\1|p'
} | sort -u | while read -r f; do
  mkdir -p "$stage/build/$(dirname "$f")"
  cp "$build/$f" "$stage/build/$f"
done
# Scripts the CTest files call stay in the source tree, which travels.
find "$stage/build" -type f -perm -u+x -exec sh -c 'file -b "$1" | grep -q ELF && strip "$1"' _ {} \;

[ -z "$llama" ] || { cp "$llama" "$stage/llama-bench"; strip "$stage/llama-bench"; }

# Shared libraries from this machine, but not the C runtime nor CUDA's.
skip='^(linux-vdso|libc\.so|libm\.so|libdl\.so|librt\.so|libpthread\.so|ld-linux|libstdc\+\+|libgcc_s|libcuda|libcudart|libcublas)'
find "$stage/build" ${llama:+"$stage/llama-bench"} -type f -perm -u+x -exec sh -c 'file -b "$1" | grep -q ELF && ldd "$1"' _ {} \; |
  awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }' | sort -u |
  while read -r name path; do
    [[ "$name" =~ $skip ]] || cp -L "$path" "$stage/lib/$name"
  done
if [ -d "$root/../shared/models" ]; then
  mkdir -p "$stage/shared"
  cp -r "$root/../shared/models" "$root/../shared/reference" "$stage/shared/"
fi
echo "$build" >"$stage/build-path"
# A large dictionary: the executables share their CUDA kernels (about 10 MB
# each), so the archive keeps them about once.
tar cf - -C "$stage" . | xz -9 --lzma2=dict=512MiB >"$out/octo-gpu.tar.xz"
ls -l "$out/octo-gpu.tar.xz" | awk '{ printf "gpu_pack: %s, %.1f MiB\n", $NF, $5 / 1048576 }'

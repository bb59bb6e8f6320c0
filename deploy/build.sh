#!/usr/bin/env bash
# Configures and builds Octo into ./build (Ninja, ccache, RelWithDebInfo).
# CUDA targets are built when nvcc is found (/usr/local/cuda), GPU or not.
# Then, when CUDA's host headers are there, the CUDA tests for the host
# executor into ./build-sim (OCTO_CUDA_SIM=ON, kernels/cuda/sim/README.md),
# where they run without a GPU. Extra arguments go to the first cmake, e.g.
# -DOCTO_WITH_CUDA=OFF.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="${OCTO_JOBS:-$(nproc)}"
# build and build-sim compile most sources with the same flags: let them
# share ccache entries (the build directory is not part of the key).
export CCACHE_NOHASHDIR=1
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@"
cmake --build build -j "$jobs"
if [ -f /usr/local/cuda/include/cuda_runtime_api.h ]; then
  cmake -S . -B build-sim -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DOCTO_CUDA_SIM=ON
  cmake --build build-sim -j "$jobs" --target cuda_tests
else
  echo "build: no CUDA headers at /usr/local/cuda/include: the executor build (build-sim) is skipped" >&2
fi
# The openai npm client the HTTP API test drives (tests/daemon/http); the
# test skips without it, so a machine without npm or the registry still builds.
client_dir=tests/daemon/http/openai_client
if command -v npm >/dev/null 2>&1; then
  npm ci --prefix "$client_dir" --no-audit --no-fund --loglevel=error ||
    echo "build: npm ci in $client_dir failed; the openai-client test will skip" >&2
else
  echo "build: npm not found; the openai-client test will skip" >&2
fi

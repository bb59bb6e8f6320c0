#!/usr/bin/env bash
# Configures and builds Octo into ./build (Ninja, ccache, RelWithDebInfo).
# CUDA targets are built when nvcc is found (/usr/local/cuda), GPU or not.
# Extra arguments go to cmake, e.g. -DOCTO_WITH_CUDA=OFF.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="${OCTO_JOBS:-$(nproc)}"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@"
cmake --build build -j "$jobs"

#!/usr/bin/env bash
# Configures and builds Octo into ./build (Ninja, ccache, RelWithDebInfo).
# CUDA targets are built when nvcc is found (/usr/local/cuda), GPU or not.
# Extra arguments go to cmake, e.g. -DOCTO_WITH_CUDA=OFF.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="${OCTO_JOBS:-$(nproc)}"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@"
cmake --build build -j "$jobs"
# The openai npm client the HTTP API test drives (tests/daemon/http); the
# test skips without it, so a machine without npm or the registry still builds.
client_dir=tests/daemon/http/openai_client
if command -v npm >/dev/null 2>&1; then
  npm ci --prefix "$client_dir" --no-audit --no-fund --loglevel=error ||
    echo "build: npm ci in $client_dir failed; the openai-client test will skip" >&2
else
  echo "build: npm not found; the openai-client test will skip" >&2
fi

#!/usr/bin/env bash
# Configures and builds Octo into ./build (Ninja, ccache, RelWithDebInfo).
# CUDA targets are built when nvcc is found (/usr/local/cuda), GPU or not.
# Then, when CUDA's host headers are there, the CUDA tests for the host
# executor into ./build-sim (OCTO_CUDA_SIM=ON, kernels/cuda/sim/README.md),
# where they run without a GPU. Extra arguments go to the first cmake, e.g.
# -DOCTO_WITH_CUDA=OFF.
# OCTO_BUILD_TARGETS="octod octo-gen ..." (deploy/quickstart.sh) builds only
# those targets of ./build, and neither the executor build nor the npm
# clients: what only the tests use is left to deploy/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="${OCTO_JOBS:-$(nproc)}"
# build and build-sim compile most sources with the same flags (both
# position-independent, CMakeLists.txt): with paths relative to the checkout
# and the build directory left out of the key, they share ccache entries.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}" CCACHE_NOHASHDIR=1
# OCTO_SKIP_SANITIZED_TESTS=ON (CI, after its ASan stage ran them) leaves the
# sanitized tests out of both builds (tests/CMakeLists.txt).
# OCTO_LINE_TABLES_ONLY=ON (CI) builds both with -g1 (CMakeLists.txt).
# OCTO_BUILD_BENCHES=OFF (CI) leaves the benchmarks out (tests/CMakeLists.txt).
skip_sanitized="-DOCTO_SKIP_SANITIZED_TESTS=${OCTO_SKIP_SANITIZED_TESTS:-OFF}"
line_tables="-DOCTO_LINE_TABLES_ONLY=${OCTO_LINE_TABLES_ONLY:-OFF}"
benches="-DOCTO_BUILD_BENCHES=${OCTO_BUILD_BENCHES:-ON}"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$skip_sanitized" "$line_tables" "$benches" "$@"
if [ -n "${OCTO_BUILD_TARGETS:-}" ]; then
  read -r -a targets <<<"$OCTO_BUILD_TARGETS"
  cmake --build build -j "$jobs" --target "${targets[@]}"
  exit 0
fi
cmake --build build -j "$jobs"
if [ -f /usr/local/cuda/include/cuda_runtime_api.h ]; then
  cmake -S . -B build-sim -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DOCTO_CUDA_SIM=ON "$skip_sanitized" "$line_tables" \
    "$benches"
  command -v ccache >/dev/null 2>&1 && ccache --zero-stats >/dev/null
  cmake --build build-sim -j "$jobs" --target cuda_tests
  if command -v ccache >/dev/null 2>&1; then
    # What build-sim took from the cache the main build filled.
    ccache --print-stats | awk -F'\t' '$1 == "direct_cache_hit" || $1 == "preprocessed_cache_hit" { hits += $2 }
      $1 == "cache_miss" { misses = $2 }
      END { n = hits + misses; printf "build: ccache in build-sim: %d hits of %d compilations (%.0f%%)\n", hits, n, n ? 100 * hits / n : 0 }'
  fi
else
  echo "build: no CUDA headers at /usr/local/cuda/include: the executor build (build-sim) is skipped" >&2
fi
# The openai and ollama npm clients the HTTP API tests drive
# (tests/daemon/http); the tests skip without them, so a machine without npm
# or the registry still builds. Installed once: again only when the lock
# file is newer than what npm ci last wrote.
client_dir=tests/daemon/http/openai_client
if [ -f "$client_dir/node_modules/.package-lock.json" ] &&
  [ "$client_dir/node_modules/.package-lock.json" -nt "$client_dir/package-lock.json" ]; then
  echo "build: the npm clients in $client_dir are current"
elif command -v npm >/dev/null 2>&1; then
  npm ci --prefix "$client_dir" --no-audit --no-fund --loglevel=error ||
    echo "build: npm ci in $client_dir failed; the npm-client tests will skip" >&2
else
  echo "build: npm not found; the npm-client tests will skip" >&2
fi

#!/usr/bin/env bash
# Builds what the tests need, then runs every test: the main build's
# (./build; its CUDA tests run on a GPU and skip without one), then the CUDA
# tests through the host executor (./build-sim, label "cuda"; none may skip
# there). deploy/install-deps.sh and deploy/build.sh come first, so that this
# runs on a fresh clone as well as after deploy/quickstart.sh (which builds
# the programs alone); on a current build they have nothing to do.
# Arguments go to both ctest runs: .ci/run passes `-LE sanitized` to leave out
# the tests it ran under ASan already.
set -euo pipefail
cd "$(dirname "$0")/.."
bash deploy/install-deps.sh
bash deploy/build.sh
jobs="${OCTO_JOBS:-2}"
ctest --test-dir build --output-on-failure -j "$jobs" "$@"
if [ -d build-sim ]; then
  echo "=== the CUDA tests through the executor (build-sim, ctest -L cuda) ==="
  log="$(mktemp)"
  trap 'rm -f "$log"' EXIT
  ctest --test-dir build-sim -L cuda --output-on-failure -j "$jobs" "$@" | tee "$log"
  # Every CUDA test must run here; those on ../shared's real models may skip
  # only where ../shared is absent (a user's clone).
  skipped="$(grep "(Skipped)" "$log" || true)"
  if [ ! -d ../shared/models ]; then
    skipped="$(printf '%s\n' "$skipped" | grep -Ev "CudaSharedModel|CudaLlamaCppReference" || true)"
  fi
  if [ -n "$skipped" ]; then
    printf '%s\n' "$skipped" >&2
    echo "test: a CUDA test skipped in the executor build, where every one must run" >&2
    exit 1
  fi
else
  echo "test: no build-sim (CUDA's host headers were missing at build time): the executor's CUDA tests did not run" >&2
fi

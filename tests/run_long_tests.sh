#!/usr/bin/env bash
# The long forms of the slow suites, which CI runs short (tests/long_tests.h):
# every truncation length of a GGUF, 15 loader kills mid-stream, 24-token
# concurrent speculation under ASan; every llama.cpp reference record through
# the CUDA executor (build-sim; CI runs one per model); then the fuzz targets for FUZZ_SECONDS
# each (tests/fuzz/run_long.sh). Uses the builds deploy/build.sh and .ci/run
# make: build-asan if present (else build), build-fuzz if present.
#   tests/run_long_tests.sh [FUZZ_SECONDS]   (default 3600; 0: no fuzzing)
set -euo pipefail
cd "$(dirname "$0")/.."
fuzz_seconds="${1:-3600}"
build=build
[ -d build-asan ] && build=build-asan
echo "=== the long forms, in $build ==="
OCTO_LONG_TESTS=1 ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir "$build" --output-on-failure -j2 \
  -R 'GgufHostileTest.EveryTruncationFails|LayerStreamTest.LoaderKilledAtRandomPoints|SpeculationTest.EightConcurrentSessions'
if [ -d build-sim ]; then
  echo "=== the long forms, in build-sim ==="
  OCTO_LONG_TESTS=1 ctest --test-dir build-sim --output-on-failure -R 'CudaLlamaCppReference'
fi
if [ "$fuzz_seconds" -gt 0 ] && [ -d build-fuzz ]; then
  echo "=== fuzzing, $fuzz_seconds s per target ==="
  tests/fuzz/run_long.sh -t "$fuzz_seconds"
fi

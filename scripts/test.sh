#!/usr/bin/env bash
# Builds spectrasift with every backend this machine can compile (warnings are errors) and runs the
# whole test suite. Usage: bash scripts/test.sh [extra cmake args]
# It uses its own build folder (build-test, or $SPECTRASIFT_TEST_BUILD_DIR) and forces the tests on, so
# that whatever configured build/ before (scripts/demo.sh turns the tests off there) does not matter; a
# run that finds no test fails (ctest --no-tests=error).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-debian.sh
# The CUDA toolkit compiles here even without a GPU; make sure CMake finds nvcc.
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then export PATH=/usr/local/cuda/bin:$PATH; fi
build=${SPECTRASIFT_TEST_BUILD_DIR:-build-test}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DSPECTRASIFT_WERROR=ON -DSPECTRASIFT_BUILD_TESTS=ON "$@"
cmake --build "$build" -j"$(nproc)"
ctest --test-dir "$build" --output-on-failure --no-tests=error -j"$(nproc)" --timeout 900

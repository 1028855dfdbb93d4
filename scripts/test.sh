#!/usr/bin/env bash
# Builds spectrasift with every backend this machine can compile (warnings are errors) and runs the
# whole test suite. Usage: bash scripts/test.sh [extra cmake args]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-debian.sh
# The CUDA toolkit compiles here even without a GPU; make sure CMake finds nvcc.
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then export PATH=/usr/local/cuda/bin:$PATH; fi
build=${SPECTRASIFT_BUILD_DIR:-build}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DSPECTRASIFT_WERROR=ON "$@"
cmake --build "$build" -j"$(nproc)"
ctest --test-dir "$build" --output-on-failure -j"$(nproc)" --timeout 900

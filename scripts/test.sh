#!/usr/bin/env bash
# Builds spectrasift with every backend this machine can compile (warnings are errors) and runs the
# whole test suite, the Python module's pytest suite included. Usage: bash scripts/test.sh [extra cmake args]
# It uses its own build folder (build-test, or $SPECTRASIFT_TEST_BUILD_DIR) and forces the tests on, so
# that whatever configured build/ before (scripts/demo.sh turns the tests off there) does not matter; a
# run that finds no test fails (ctest --no-tests=error).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-debian.sh
# The CUDA toolkit compiles here even without a GPU; make sure CMake finds nvcc.
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then export PATH=/usr/local/cuda/bin:$PATH; fi
build=${SPECTRASIFT_TEST_BUILD_DIR:-build-test}
# The Python module and its pytest suite (python/) build with a venv's python that has nanobind.
case "$build" in /*) venv=$build/venv ;; *) venv=$PWD/$build/venv ;; esac
mkdir -p "$build"
python=$(bash scripts/python-venv.sh "$venv")
# ccache, when installed, serves rebuilds and the `pip install .` check's second build of the library.
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DSPECTRASIFT_WERROR=ON -DSPECTRASIFT_BUILD_TESTS=ON \
  -DSPECTRASIFT_WITH_PYTHON=ON -DPython_EXECUTABLE="$python" "${launcher[@]}" "$@"
cmake --build "$build" -j"$(nproc)"
ctest --test-dir "$build" --output-on-failure --no-tests=error -j"$(nproc)" --timeout 900

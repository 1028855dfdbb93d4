#!/usr/bin/env bash
# Sanitizer run of the whole CPU + OpenCL (PoCL) test suite (issue 5): builds the library, the CLI and the
# tests with AddressSanitizer + UndefinedBehaviorSanitizer (preset "asan") or ThreadSanitizer ("tsan"),
# without CUDA and without the benchmarks, and runs ctest. Any report fails the test that produced it
# (UBSan does not recover; ASan/LSan exit non-zero). Called by .ci/run with "asan".
#   bash scripts/sanitize.sh [asan|tsan]
# Line tables only (-g1) instead of full debug info: reports keep file:line, the build is much faster.
# TSan builds with clang and LLVM's libomp, and the tests load Archer (OMP_TOOL_LIBRARIES, set by the test
# preset), the OpenMP tool that tells TSan about OpenMP's barriers; with GCC's uninstrumented libgomp every
# parallel region reports false races (fuzz/README.md).
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:-asan}
case "$preset" in asan|tsan) ;; *) echo "usage: $0 [asan|tsan]" >&2; exit 2 ;; esac
bash scripts/setup-debian.sh
cmake --preset "$preset" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -g1" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1" >/dev/null
cmake --build --preset "$preset" -j"$(nproc)"
ctest --preset "$preset" -j"$(nproc)" --timeout 1800

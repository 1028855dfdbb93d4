#!/usr/bin/env bash
# Builds spectrasift and runs `spectrasift demo` on the bundled sample data (outputs in demo-out/).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-debian.sh
build=${SPECTRASIFT_BUILD_DIR:-build}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DSPECTRASIFT_BUILD_TESTS=OFF -DSPECTRASIFT_BUILD_BENCH=OFF
cmake --build "$build" -j"$(nproc)" --target spectrasift_cli
"$build/bin/spectrasift" demo --out demo-out "$@"

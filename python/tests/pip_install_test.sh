#!/usr/bin/env bash
# `pip install .` from the repository root, as a user runs it, into a folder of its own; then the installed
# package is imported from elsewhere and runs (ctest python_pip_install, label "slow").
#   pip_install_test.sh PYTHON WORK_DIR
# PYTHON must have scikit-build-core and nanobind (scripts/test.sh's venv): the build runs without build
# isolation so that it needs no network. It is a second build of the library: CPU + OpenCL (CUDA off, the
# slowest part to compile; the CUDA build's module is the build tree's, tested by the rest of the suite),
# with ccache when it is installed, in WORK_DIR/build so that a rerun is incremental.
set -euo pipefail
python=$1
work=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$work"
rm -rf "$work/site"
launcher=()
if command -v ccache >/dev/null; then
  launcher=(--config-settings=cmake.define.CMAKE_CXX_COMPILER_LAUNCHER=ccache
            --config-settings=cmake.define.CMAKE_C_COMPILER_LAUNCHER=ccache)
fi
cd "$root"
"$python" -m pip install --no-build-isolation --no-deps --disable-pip-version-check -q --target "$work/site" \
  --config-settings=build-dir="$work/build" --config-settings=cmake.define.SPECTRASIFT_WITH_CUDA=OFF \
  --config-settings=cmake.define.SPECTRASIFT_WERROR=ON "${launcher[@]}" .
test -f "$work/site/spectrasift/__init__.py" -a -f "$work/site/spectrasift/__init__.pyi" -a -f "$work/site/spectrasift/py.typed"
ls "$work/site/spectrasift"/_core*.so >/dev/null
# Only the package is installed (no headers, library or CLI in the wheel).
test ! -e "$work/site/include" -a ! -e "$work/site/bin" -a ! -e "$work/site/lib"
cd "$work"
PYTHONPATH="$work/site" "$python" - "$root" <<'PY'
import sys
import numpy as np
import spectrasift as ss
assert "/site/spectrasift/" in ss.__file__, ss.__file__
print(ss.__version__, ss.devices())
with ss.Context("cpu") as c:
    f = ss.sift(c, ss.read_image(sys.argv[1] + "/data/box.png"))
    assert len(f) > 500, len(f)
print("pip install: ok,", len(f), "keypoints from", ss.__file__)
PY

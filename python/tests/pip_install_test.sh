#!/usr/bin/env bash
# `pip install .` from the repository root, as a user runs it, into a folder of its own; then the installed
# package is imported from elsewhere and runs (ctest python_pip_install, label "slow").
#   pip_install_test.sh PYTHON WORK_DIR [-DNAME=VALUE...]
# PYTHON must have scikit-build-core and nanobind (scripts/python-venv.sh): the build runs without build
# isolation, so it needs no network. The -D definitions go to CMake (python/CMakeLists.txt passes its backends,
# flags and compiler launcher, so that ccache serves the library's objects: WORK_DIR, the build folder, is at the
# build's depth, and CMAKE_GENERATOR in the environment picks the build's generator). A rerun is incremental.
set -euo pipefail
python=$1
work=$2
shift 2
root=$(cd "$(dirname "$0")/../.." && pwd)
settings=(--config-settings=build-dir="$work")
for d in "$@"; do
  d=${d#-D}
  settings+=("--config-settings=cmake.define.$d")
done
# The compiler CMake would pick, not the one Python was built with (pip's build sets CC/CXX from sysconfig).
export CC=${SPECTRASIFT_CC:-cc} CXX=${SPECTRASIFT_CXX:-c++}
mkdir -p "$work"
rm -rf "$work/site"
cd "$root"
"$python" -m pip install --no-build-isolation --no-deps --disable-pip-version-check -q --target "$work/site" \
  "${settings[@]}" .
for f in __init__.py __init__.pyi py.typed; do test -f "$work/site/spectrasift/$f"; done
ls "$work/site/spectrasift"/_core*.so >/dev/null
# Only the package is installed: no headers, library or CLI in the wheel; bin/ holds the package's one command.
for d in include lib share; do test ! -e "$work/site/$d"; done
test "$(ls "$work/site/bin")" = spectrasift-batch
PYTHONPATH="$work/site" "$work/site/bin/spectrasift-batch" register --help | grep -q "fixed,moving"
cd "$work"
PYTHONPATH="$work/site" "$python" - "$root" <<'PY'
import sys
import spectrasift as ss
assert "/site/spectrasift/" in ss.__file__, ss.__file__
print(ss.__version__, ss.devices())
with ss.Context("cpu") as c:
    f = ss.sift(c, ss.read_image(sys.argv[1] + "/data/box.png"))
    assert len(f) > 500, len(f)
print("pip install: ok,", len(f), "keypoints from", ss.__file__)
PY

#!/usr/bin/env bash
# Makes (or updates) the Python environment that builds and tests the Python module, and prints its python:
#   python=$(bash scripts/python-venv.sh DIR)
# A venv in DIR over Debian's /usr/bin/python3 with --system-site-packages, so that Debian's numpy, OpenCV
# (python3-opencv), Spectral Python and pytest stay visible (Debian 12's python is "externally managed": pip
# installs only into a venv), plus nanobind and scikit-build-core from PyPI (the module's build needs them).
set -euo pipefail
dir=${1:?usage: python-venv.sh DIR}
base=/usr/bin/python3
[ -x "$base" ] || base=$(command -v python3)
if [ ! -x "$dir/bin/python" ]; then
  "$base" -m venv --system-site-packages "$dir" >&2
fi
"$dir/bin/python" -m pip install -q --disable-pip-version-check "nanobind>=2.4,<4" "scikit-build-core>=0.10" >&2
"$dir/bin/python" -c "import nanobind, numpy, pytest" >&2
echo "$dir/bin/python"

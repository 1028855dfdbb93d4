#!/usr/bin/env bash
# Installs everything spectrasift needs to build, test and compare on Debian 12 (run as root).
# Idempotent: packages already present are left alone. Set SPECTRASIFT_SKIP_APT=1 to skip.
set -euo pipefail
[ "${SPECTRASIFT_SKIP_APT:-0}" = 1 ] && exit 0
packages=(
  build-essential cmake pkg-config ccache
  libpng-dev libjpeg-dev libtiff-dev nlohmann-json3-dev libcli11-dev
  libgdal-dev gdal-bin                          # GeoTIFF and every other raster GDAL reads (optional at build time)
  libgtest-dev libgmock-dev libbenchmark-dev
  ocl-icd-opencl-dev opencl-headers pocl-opencl-icd clinfo
  libopencv-dev python3-opencv python3-numpy python3-spectral python3-skimage opencv-doc libvlfeat-dev
  python3-dev python3-venv python3-pip python3-pytest   # the Python module (nanobind from PyPI in a venv: scripts/test.sh)
  python3-dask python3-distributed python3-pandas       # spectrasift.batch (scale-out on Dask) and its tests
  clang libclang-rt-14-dev llvm libomp-14-dev   # fuzz targets (libFuzzer), symbolizer, libomp + Archer for TSan
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

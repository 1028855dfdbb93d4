#!/usr/bin/env bash
# Issue 18's CPU-device target: SIFT on PoCL (OpenCL on the host cores) within 1.5x of our CPU backend on the same
# cores. Times both on kleiber and elephants 1080p (upsampled and not; end to end and PoCL's device time per stage),
# then runs sift_opencl_test on the PoCL device (bit for bit against the CPU backend; exit 1 when it fails). With --scaling, also PoCL at
# 1, 2, 4, 8 and all threads, each beside the CPU backend at as many threads, on kleiber 1080p, to see which stage
# stops scaling (POCL_CPU_MAX_CU_COUNT is read by PoCL 4 and later, POCL_MAX_PTHREAD_COUNT by PoCL 3; both are set).
#
# Usage (repository root, a build with -DSPECTRASIFT_BUILD_BENCH=ON):
#   bash scripts/pocl-vs-cpu.sh BUILD_DIR PHOTOS_DIR POCL_DEVICE_INDEX [--scaling]
# e.g. bash scripts/pocl-vs-cpu.sh build ../shared/data/photos 0 --scaling
# (POCL_DEVICE_INDEX: the OpenCL device index of PoCL, as `BUILD_DIR/bin/spectrasift devices` lists it.)
set -u
cd "$(dirname "$0")/.."
build=${1:?usage: pocl-vs-cpu.sh BUILD_DIR PHOTOS_DIR POCL_DEVICE_INDEX [--scaling]}
photos=${2:?usage: pocl-vs-cpu.sh BUILD_DIR PHOTOS_DIR POCL_DEVICE_INDEX [--scaling]}
dev=${3:?usage: pocl-vs-cpu.sh BUILD_DIR PHOTOS_DIR POCL_DEVICE_INDEX [--scaling]}
scaling=${4:-}
bench="$build/bin/sift_bench"
[ -x "$bench" ] || { echo "no $bench (configure with -DSPECTRASIFT_BUILD_BENCH=ON)"; exit 2; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
mkdir -p "$dir/both" "$dir/kleiber"
for f in kleiber_1920x1080.jpg elephants_1920x1080.jpg; do
  [ -f "$photos/$f" ] || { echo "no $photos/$f"; exit 2; }
  ln -s "$(cd "$photos" && pwd)/$f" "$dir/both/$f"
done
ln -s "$(cd "$photos" && pwd)/kleiber_1920x1080.jpg" "$dir/kleiber/"
threads=$(nproc)
echo "== devices"
"$build/bin/spectrasift" devices
echo "== CPU backend, $threads threads"
"$bench" --backend cpu --threads "$threads" --photos "$dir/both" --runs 5 --warmup 1 --match-size 1 | grep '^| [ke]'
echo "== OpenCL device $dev (PoCL, all compute units)"
"$bench" --backend opencl --device "$dev" --photos "$dir/both" --runs 5 --warmup 1 --match-size 1 | grep '^| [ke]'
if [ "$scaling" = "--scaling" ]; then
  for cu in 1 2 4 8 "$threads"; do  # PoCL 4+: POCL_CPU_MAX_CU_COUNT; PoCL 3: POCL_MAX_PTHREAD_COUNT
    echo "== OpenCL device $dev, $cu PoCL threads (kleiber)"
    POCL_CPU_MAX_CU_COUNT=$cu POCL_MAX_PTHREAD_COUNT=$cu "$bench" --backend opencl --device "$dev" \
      --photos "$dir/kleiber" --runs 3 --warmup 1 \
      --match-size 1 | grep '^| [ke]'
    "$bench" --backend cpu --threads "$cu" --photos "$dir/kleiber" --runs 3 --warmup 1 --match-size 1 | grep '^| [ke]'
  done
fi
echo "== sift_opencl_test on device $dev (bits against the CPU backend)"
SPECTRASIFT_TEST_OPENCL_DEVICE=$dev "$build/bin/sift_opencl_test" 2>&1 | grep -E '^\[  (PASSED|FAILED)|FAILED'
status=${PIPESTATUS[0]}  # the test's, not grep's
[ "$status" -eq 0 ] || { echo "sift_opencl_test failed (exit $status)"; exit 1; }

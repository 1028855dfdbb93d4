#!/usr/bin/env bash
# RANSAC on the GPU machine (issue 19, item 3): builds the RANSAC tests and geometry_bench with CUDA and OpenCL for
# the H200 (sm_90a), runs the cross-backend bit tests (CUDA, PoCL and NVIDIA OpenCL against the CPU backend; the
# refits' sums on CUDA and on both OpenCL devices against the host's, RefitSumsAreTheHostBits) and the host's
# refit-order tests, then the bench: medians of 200 runs per backend, NVIDIA OpenCL with the refits' sums on the
# host (its default) and on the device (opencl/device-sums), and a few --verbose runs whose log lines split each
# run into hypotheses, scoring (batches and masks: each a host round trip on a device) and least-squares refits.
# Writes ${OUT:-out}/ransac-gpu.log and ransac-bench.txt; exits non-zero if a step failed (it keeps going after one).
# Usage (from the repository root): bash scripts/ransac-gpu-check.sh
# Environment: OUT (default out), BUILD (default build-ransac), JOBS (default nproc), OPENCL_DEVICE (default 1, the
# NVIDIA platform's GPU next to PoCL on the H200 machine; geometry_bench --opencl-device).
source "$(dirname "$0")/gpu-check-common.sh" build-ransac ransac-gpu.log
OPENCL_DEVICE=${OPENCL_DEVICE:-1}
bench="$OUT/ransac-bench.txt"; : >"$bench"
run cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DSPECTRASIFT_CUDA_ARCH=90a -DSPECTRASIFT_WITH_CUDA=ON \
  -DSPECTRASIFT_BUILD_BENCH=ON
run cmake --build "$BUILD" -j "$JOBS" --target ransac_backend_test homography_bits_test geometry_test register_test \
  geometry_bench
bin="$BUILD/bin"
run "$bin/ransac_backend_test"
run env SPECTRASIFT_TEST_OPENCL_DEVICE="$OPENCL_DEVICE" "$bin/ransac_backend_test" --gtest_filter='*/opencl'
run "$bin/homography_bits_test"
run "$bin/geometry_test" --gtest_filter='Ransac.*:Outliers/*:FitModel.*'
run "$bin/register_test" --gtest_filter='Graffiti.*:Camera/*'
echo "==== geometry_bench --runs 200" | tee -a "$log"
"$bin/geometry_bench" --runs 200 --threads 16 --opencl-device "$OPENCL_DEVICE" --only ransac \
  --backends cpu,opencl,opencl/device-sums,cuda >>"$bench" 2>&1 ||
  { echo "FAILED: geometry_bench" | tee -a "$log"; failed=1; }
echo "==== geometry_bench --runs 3 --verbose (the split of each run)" | tee -a "$log"
"$bin/geometry_bench" --runs 3 --threads 16 --opencl-device "$OPENCL_DEVICE" --only ransac --verbose \
  --backends cpu,opencl,opencl/device-sums,cuda 2>&1 |
  grep -E "ransac:|^\|" >>"$bench" || { echo "FAILED: geometry_bench --verbose" | tee -a "$log"; failed=1; }
cat "$bench"
exit "$failed"

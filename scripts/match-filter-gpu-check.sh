#!/usr/bin/env bash
# Ratio test and mutual check on the device (issues 18 and 19, matching) on the GPU machine: builds the matching
# tests and sift_bench with CUDA and OpenCL for the H200 (sm_90a), runs the bit tests against the CPU backend
# (CUDA; OpenCL on NVIDIA's platform and on PoCL), compute-sanitizer memcheck and racecheck on the CUDA filter
# tests, then the matching table of sift_bench (16384 x 16384, elephants 4K descriptors: nearest_two,
# match_features with ratio 0.8, and with the mutual check; the GPU rows' matches compared bit for bit with the
# CPU row's) and a few --verbose calls whose lines split a call into packing, uploads, kernels and read-back.
# Writes ${OUT:-out}/match-filter-gpu.log and match-filter-bench.txt; exits non-zero if a step failed (it keeps
# going after one).
# Usage (from the repository root): bash scripts/match-filter-gpu-check.sh
# Environment: OUT (default out), BUILD (default build-match-filter), JOBS (default nproc), OPENCL_DEVICE (default 1,
# the NVIDIA platform's GPU next to PoCL on the H200 machine), POCL_DEVICE (default 0), PHOTOS (default
# ../shared/data/photos).
source "$(dirname "$0")/gpu-check-common.sh" build-match-filter match-filter-gpu.log
OPENCL_DEVICE=${OPENCL_DEVICE:-1}
POCL_DEVICE=${POCL_DEVICE:-0}
PHOTOS=${PHOTOS:-../shared/data/photos}
bench="$OUT/match-filter-bench.txt"; : >"$bench"
run cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DSPECTRASIFT_CUDA_ARCH=90a -DSPECTRASIFT_WITH_CUDA=ON \
  -DSPECTRASIFT_BUILD_BENCH=ON
run cmake --build "$BUILD" -j "$JOBS" --target match_filter_cuda_test match_cuda_test match_filter_opencl_test \
  match_opencl_test match_test sift_bench
bin="$BUILD/bin"
run "$bin/match_filter_cuda_test"
run "$bin/match_cuda_test"
run "$bin/match_test"
run env SPECTRASIFT_TEST_OPENCL_DEVICE="$OPENCL_DEVICE" "$bin/match_filter_opencl_test"
run env SPECTRASIFT_TEST_OPENCL_DEVICE="$OPENCL_DEVICE" "$bin/match_opencl_test"
run env SPECTRASIFT_TEST_OPENCL_DEVICE="$POCL_DEVICE" "$bin/match_filter_opencl_test"
run compute-sanitizer --tool memcheck --error-exitcode 1 "$bin/match_filter_cuda_test"
# racecheck is slow: the small sets (300 queries: two filter blocks, the u8 and merge kernels) are enough for it.
run compute-sanitizer --tool racecheck --error-exitcode 1 "$bin/match_filter_cuda_test" \
  --gtest_filter=MatchFilterCuda.OneDescriptorAndEmptySets
echo "==== sift_bench --match-only --runs 100" | tee -a "$log"
"$bin/sift_bench" --match-only --backend all --opencl-device "$OPENCL_DEVICE" --threads 16 --runs 100 --warmup 5 \
  --photos "$PHOTOS" >>"$bench" 2>&1 || { echo "FAILED: sift_bench" | tee -a "$log"; failed=1; }
echo "==== sift_bench --match-only --runs 3 --verbose (the split of each call)" | tee -a "$log"
"$bin/sift_bench" --match-only --backend cuda --threads 16 --runs 3 --warmup 1 --photos "$PHOTOS" --verbose 2>&1 |
  grep -E "match_top2 on|match_features|^\|" >>"$bench" || { echo "FAILED: sift_bench --verbose (cuda)" | tee -a "$log"; failed=1; }
"$bin/sift_bench" --match-only --backend opencl --device "$OPENCL_DEVICE" --threads 16 --runs 3 --warmup 1 \
  --photos "$PHOTOS" --verbose 2>&1 | grep -E "match_top2 on|match_features on|^\|" >>"$bench" ||
  { echo "FAILED: sift_bench --verbose (opencl)" | tee -a "$log"; failed=1; }
cat "$bench"
exit "$failed"

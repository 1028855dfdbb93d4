#!/usr/bin/env bash
# CUDA SIFT on the GPU machine, for a branch that changes it: builds the SIFT and matching test programs for
# the H200 (sm_90a), runs them (bit identity with the CPU backend and run to run), compute-sanitizer memcheck
# and racecheck on the device stages (both descriptor forms), and the per-stage timing table (median of 11, u8 image
# in pageable memory to features on the host; a line per descriptor form) on the four photos. Writes ${OUT:-out}/cuda-sift.log and timing.txt; exits non-zero
# if a step failed (it keeps going after one).
# Usage (from the repository root): bash scripts/cuda-sift-check.sh [--no-sanitizer]
# Environment: OUT (default out), BUILD (default build-sift), JOBS (default nproc), PHOTOS (default the first of
# shared/data/photos, ../shared/data/photos that exists).
source "$(dirname "$0")/gpu-check-common.sh" build-sift cuda-sift.log
sanitizer=1
[ "${1:-}" = "--no-sanitizer" ] && sanitizer=0
run cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DSPECTRASIFT_CUDA_ARCH=90a -DSPECTRASIFT_WITH_CUDA=ON \
  -DSPECTRASIFT_WITH_OPENCL=OFF -DSPECTRASIFT_BUILD_BENCH=OFF
run cmake --build "$BUILD" -j "$JOBS" --target sift_cuda_test sift_cuda_host_test match_cuda_test sift_test
bin="$BUILD/bin"
run "$bin/sift_cuda_host_test"
run "$bin/sift_cuda_test"
run "$bin/match_cuda_test"
run "$bin/sift_test" --gtest_filter='Sift.EveryGpuBackendRunsSift'
if [ "$sanitizer" = 1 ] && command -v compute-sanitizer >/dev/null; then
  filter='SiftCuda.PublicApiRunsTheDeviceStages:SiftCuda.BuffersGrowAndRunAgain:SiftCuda.UploadPathsGiveTheSameFeatures'
  filter="$filter:SiftCuda.DescriptorFormsGiveTheSameFeatures"
  filter="$filter:SiftCuda.SelectPathsGiveTheSameFeatures"
  # Without the photo cases (elephants 4K in SelectPathsGiveTheSameFeatures would take minutes under memcheck).
  run env SPECTRASIFT_TEST_PHOTOS=none compute-sanitizer --tool memcheck --error-exitcode 1 "$bin/sift_cuda_test" \
    --gtest_filter="$filter"
  # Racecheck without the photo cases (the test images cover every form).
  run env SPECTRASIFT_TEST_PHOTOS=none compute-sanitizer --tool racecheck --error-exitcode 1 "$bin/sift_cuda_test" \
    --gtest_filter='SiftCuda.PublicApiRunsTheDeviceStages:SiftCuda.DescriptorFormsGiveTheSameFeatures:SiftCuda.SelectPathsGiveTheSameFeatures'
fi
PHOTOS=${PHOTOS:-}
for d in shared/data/photos ../shared/data/photos; do [ -z "$PHOTOS" ] && [ -d "$d" ] && PHOTOS=$d; done
if [ -n "$PHOTOS" ]; then
  imgs="$PHOTOS/kleiber_1920x1080.jpg:$PHOTOS/elephants_1920x1080.jpg:$PHOTOS/kleiber_3840x2160.jpg:$PHOTOS/elephants_3840x2160.jpg"
  echo "==== timing ($imgs)" | tee -a "$log"
  SPECTRASIFT_SIFT_TIMING_IMAGES="$imgs" "$bin/sift_cuda_test" --gtest_also_run_disabled_tests \
    --gtest_filter='*StageTimes*' 2>&1 | tee "$OUT/timing.txt" | grep 'sift-cuda' || failed=1
else
  echo "no photos folder: timing skipped" | tee -a "$log"
fi
grep -E '^\[  (PASSED|FAILED) |FAILED|ERROR SUMMARY|RACECHECK SUMMARY' "$log"
exit $failed

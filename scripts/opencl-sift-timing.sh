#!/usr/bin/env bash
# NVIDIA OpenCL SIFT timing on the GPU machine (issue 18): builds sift_opencl_test, records what else loads the
# host and the GPU (load average, the busiest processes, nvidia-smi's clocks and compute processes) before and
# after, checks that steady runs create nothing (SiftOpenCL.SteadyRunsCreateNothing on NVIDIA OpenCL), then
# the per-stage table (StageTimes: device time per stage and the host time of each stage call, full lines) and
# the transfer timings (TransferTimes: direct against staged upload and read-back). Writes ${OUT:-out}/
# opencl-sift.log and opencl-timing.txt; exits non-zero if a step failed (it keeps going after one).
# Usage (from the repository root): bash scripts/opencl-sift-timing.sh
# Environment: OUT (default out), BUILD (default build-ocl), JOBS (default nproc), DEVICE (the OpenCL device
# index of the NVIDIA GPU, default 1), PHOTOS (default the first of shared/data/photos, ../shared/data/photos,
# .photos that exists).
source "$(dirname "$0")/gpu-check-common.sh" build-ocl opencl-sift.log
DEVICE=${DEVICE:-1}
run cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DSPECTRASIFT_WITH_CUDA=OFF -DSPECTRASIFT_BUILD_BENCH=OFF
run cmake --build "$BUILD" -j "$JOBS" --target sift_opencl_test
bin="$BUILD/bin"
host_facts() {
  echo "==== host and GPU ($1)"
  echo "nproc $(nproc); $(uptime)"
  ps -eo pcpu,pid,etime,comm --sort=-pcpu | head -8
  command -v nvidia-smi >/dev/null &&
    nvidia-smi --query-gpu=clocks.sm,clocks.mem,clocks.max.sm,pstate,utilization.gpu,power.draw --format=csv &&
    nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv
}
host_facts "before" 2>&1 | tee -a "$log"
run env SPECTRASIFT_TEST_OPENCL_DEVICE=$DEVICE "$bin/sift_opencl_test" --gtest_filter='SiftOpenCL.SteadyRunsCreateNothing'
PHOTOS=${PHOTOS:-}
for d in shared/data/photos ../shared/data/photos .photos; do [ -z "$PHOTOS" ] && [ -d "$d" ] && PHOTOS=$d; done
if [ -n "$PHOTOS" ]; then
  imgs="$PHOTOS/kleiber_1920x1080.jpg:$PHOTOS/elephants_1920x1080.jpg:$PHOTOS/kleiber_3840x2160.jpg:$PHOTOS/elephants_3840x2160.jpg"
  echo "==== timing ($imgs)" | tee -a "$log"
  # The test's own exit status counts (a pipe would report grep's); then the table lines on the terminal.
  SPECTRASIFT_TEST_OPENCL_DEVICE=$DEVICE SPECTRASIFT_SIFT_TIMING_IMAGES="$imgs" "$bin/sift_opencl_test" \
    --gtest_also_run_disabled_tests --gtest_filter='*StageTimes*:*TransferTimes*' >"$OUT/opencl-timing.txt" 2>&1 ||
    { echo "FAILED: the timing tests (see $OUT/opencl-timing.txt)" | tee -a "$log"; failed=1; }
  grep 'sift-ocl' "$OUT/opencl-timing.txt" || { echo "FAILED: no timing lines" | tee -a "$log"; failed=1; }
else
  echo "no photos folder: timing skipped" | tee -a "$log"
fi
host_facts "after" 2>&1 | tee -a "$log"
grep -E '^\[  (PASSED|FAILED) |FAILED' "$log"
exit $failed

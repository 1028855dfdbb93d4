#!/usr/bin/env bash
# The SIFT batch call on the GPU machine (issue 19, item 1; branch s2-batch): builds the CUDA SIFT tests, the
# bench and the command line for the H200 (sm_90a), runs the batch tests (every image of a batch has the single
# call's bits, from pageable and page-locked memory; errors), compute-sanitizer memcheck on them, the batch
# table (`sift_bench --batch 100`: 100 copies of kleiber 1080p, per image, batch call against single calls in
# the same run, pageable and page-locked) and the command line over a folder of 20 copies of the photo.
# Writes ${OUT:-out}/cuda-sift-batch.log; exits non-zero if a step failed (it keeps going after one).
# Usage (from the repository root): bash scripts/cuda-sift-batch.sh
# Environment: OUT (default out), BUILD (default build-batch), JOBS (default nproc), PHOTOS (default the first of
# shared/data/photos, ../shared/data/photos that exists).
source "$(dirname "$0")/gpu-check-common.sh" build-batch cuda-sift-batch.log
run cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DSPECTRASIFT_CUDA_ARCH=90a -DSPECTRASIFT_WITH_CUDA=ON \
  -DSPECTRASIFT_WITH_OPENCL=OFF -DSPECTRASIFT_BUILD_BENCH=ON
run cmake --build "$BUILD" -j "$JOBS" --target sift_cuda_test sift_bench spectrasift_cli
bin="$BUILD/bin"
run "$bin/sift_cuda_test" --gtest_filter='SiftCuda.Batch*:SiftCuda.UploadPathsGiveTheSameFeatures:SiftCuda.IdenticalRunToRun'
if command -v compute-sanitizer >/dev/null; then
  run compute-sanitizer --tool memcheck --error-exitcode 1 "$bin/sift_cuda_test" --gtest_filter='SiftCuda.Batch*'
fi
PHOTOS=${PHOTOS:-}
for d in shared/data/photos ../shared/data/photos; do [ -z "$PHOTOS" ] && [ -d "$d" ] && PHOTOS=$d; done
if [ -n "$PHOTOS" ]; then
  run "$bin/sift_bench" --backend cuda --photos "$PHOTOS" --batch 100 --runs 11 --warmup 2
  folder="$OUT/batch-photos"; rm -rf "$folder" "$OUT/batch-features"; mkdir -p "$folder"
  for i in $(seq -w 1 20); do cp "$PHOTOS/kleiber_1920x1080.jpg" "$folder/kleiber_$i.jpg"; done
  run "$bin/spectrasift" sift "$folder" --backend cuda --json -o "$OUT/batch-features"
  run "$bin/spectrasift" sift "$PHOTOS/kleiber_1920x1080.jpg" --backend cuda -o "$OUT/single.bin"
  run cmp "$OUT/single.bin" "$OUT/batch-features/kleiber_20.bin"
else
  echo "no photos (shared/data/photos): batch table and command line not run" | tee -a "$log"
fi
exit $failed

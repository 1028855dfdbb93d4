// sift_extrema.cuh — the candidate search of one octave, written as compact records with an atomic counter
// (the CUDA form of backend/opencl/kernels/sift_extrema.cl).
#pragma once

#include "backend/cuda/kernels/sift_common.cuh"

namespace spectrasift::cuda::kernels {

// sift_extrema: grid (ceil((w - 2B) / X), Y, S), block (X, 1, 1) (B = the plan's border; the host takes
// X = 128 and Y = ceil((h - 2B) / 8), at most 65535); one thread per interior column of DoG layers 1..S,
// walking the rows r = B + blockIdx.y, + Y, ... (one row's load at a time: four rows' loads in flight together, as
// OpenCL's GPU kernel does, cut kleiber 4K upsampled's stage 0.455 -> 0.406 ms but cost elephants 4K 0.838 -> 0.98
// ms on the H200, StageTimes, sixth session: not kept here). A pixel
// that passes numeric/sift_extrema.h's test takes a slot from the counter (an integer atomic: no result
// depends on the slot order, the select stage sorts) and writes (octave index, layer, row, column) there
// when the slot is below capacity; the counter ends at the true count, which the host reads back (a count
// above capacity: grow, run again).
__global__ void sift_extrema(const float* dog, const long long* info, int octave, int border, float thr,
                             unsigned int* counters, int4* candidates, unsigned int capacity) {
  const int w = sift_oct_w(info, octave), h = sift_oct_h(info, octave);
  const int c = border + (int)(blockIdx.x * blockDim.x + threadIdx.x);
  const int layer = 1 + (int)blockIdx.z;
  if (c >= w - border) return;
  const size_t plane = (size_t)w * (size_t)h;
  for (int r = border + (int)blockIdx.y; r < h - border; r += (int)gridDim.y) {
    const float* cur = dog + sift_oct_dog(info, octave) + (size_t)layer * plane + (size_t)r * (size_t)w + c;
    if (fabsf(cur[0]) <= thr) continue;  // most pixels: the test below fails on its first condition
    if (!sift_is_extremum_global(cur - plane, cur, cur + plane, w, thr)) continue;
    const unsigned int slot = atomicAdd(&counters[kCountCandidates], 1u);
    if (slot < capacity) candidates[slot] = make_int4(octave, layer, r, c);
  }
}

}  // namespace spectrasift::cuda::kernels

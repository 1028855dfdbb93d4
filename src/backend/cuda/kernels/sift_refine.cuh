// sift_refine.cuh — sub-pixel refinement, contrast and edge tests of the candidates (numeric/sift_refine.h;
// the CUDA form of backend/opencl/kernels/sift_refine.cl).
#pragma once

#include "backend/cuda/kernels/sift_common.cuh"

namespace spectrasift::cuda::kernels {

// Plan values of the refinement (one argument): numeric/sift_refine.h's.
using ::SiftRefineParams;

// sift_refine: grid ceil(candidates / 64), block 64 (candidates: the count read back by the host); one
// thread per candidate (the live count is read on the device): numeric/sift_refine.h's
// sift_refine_candidate; an accepted point takes a slot of the refined counter and writes its record.
__global__ void sift_refine(const float* dog, const long long* info, const float* octave_scale, const int4* candidates,
                            unsigned int* counters, unsigned int capacity, SiftRefineParams p, SiftKeypoint* refined) {
  const unsigned int id = blockIdx.x * blockDim.x + threadIdx.x;
  const unsigned int count = min(counters[kCountCandidates], capacity);
  if (id >= count) return;
  const int4 cand = candidates[id];
  SiftKeypoint kp;
  if (!sift_refine_candidate(dog, info, octave_scale, cand.x, cand.y, cand.z, cand.w, p, &kp)) return;
  const unsigned int slot = atomicAdd(&counters[kCountRefined], 1u);
  if (slot < capacity) refined[slot] = kp;
}

}  // namespace spectrasift::cuda::kernels

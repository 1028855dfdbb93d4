// sift_sort.cuh — the bitonic sort of the select stage's index array (the network and its launches:
// host/bitonic_plan.hpp; the comparisons: sift_compare_exchange of numeric/sift_select.h, shared with OpenCL).
//
// The network runs over the first P = next power of two >= n positions, n (the live count) read on the
// device from counters[count_slot]; positions n .. P - 1 hold -1, which sorts last. The host launches the
// plan for its bound on P; a launch whose stage k exceeds the device's P returns at once. Which launch runs
// which compare-exchanges changes nothing: each step's pairs are disjoint and the steps run in the network's
// order, so the result is the network's, whatever the block size.
#pragma once

#include "backend/cuda/host/bitonic_plan.hpp"
#include "backend/cuda/kernels/sift_select.cuh"

namespace spectrasift::cuda::kernels {

// sift_sort_step: grid G, block 256; the threads take the pairs t = id, id + G 256, ... < P / 2 of bitonic
// step (k, j) (j >= the local block's positions).
__global__ void sift_sort_step(int* order, const SiftKeypoint* kp, const unsigned int* counters, int count_slot,
                               unsigned int capacity, unsigned int k, unsigned int j, int mode) {
  const unsigned int p = sift_pow2_at_least(min(counters[count_slot], capacity));
  if (k > p || counters[kCountSelectSmall]) return;
  for (unsigned int t = blockIdx.x * blockDim.x + threadIdx.x; t < p / 2; t += gridDim.x * blockDim.x) {
    const unsigned int i = bitonic_pair_lower(t, j);
    int a = order[i], b = order[i + j];
    sift_compare_exchange(kp, &a, &b, i, k, mode);
    order[i] = a;
    order[i + j] = b;
  }
}

// sift_sort_step2: grid G, block 256; the threads take the quads t = id, id + G 256, ... < P / 4 of the two
// bitonic steps (k, j) and (k, j / 2) (j / 2 >= the local block's positions): the four positions in
// registers, step j's two compare-exchanges, then step j / 2's two (bitonic_quad_base).
__global__ void sift_sort_step2(int* order, const SiftKeypoint* kp, const unsigned int* counters, int count_slot,
                                unsigned int capacity, unsigned int k, unsigned int j, int mode) {
  const unsigned int p = sift_pow2_at_least(min(counters[count_slot], capacity));
  if (k > p || counters[kCountSelectSmall]) return;
  const unsigned int h = j / 2;
  for (unsigned int t = blockIdx.x * blockDim.x + threadIdx.x; t < p / 4; t += gridDim.x * blockDim.x) {
    const unsigned int b = bitonic_quad_base(t, j);
    int v0 = order[b], v1 = order[b + h], v2 = order[b + j], v3 = order[b + j + h];
    sift_compare_exchange(kp, &v0, &v2, b, k, mode);  // step j
    sift_compare_exchange(kp, &v1, &v3, b + h, k, mode);
    sift_compare_exchange(kp, &v0, &v1, b, k, mode);  // step j / 2
    sift_compare_exchange(kp, &v2, &v3, b + j, k, mode);
    order[b] = v0;
    order[b + h] = v1;
    order[b + j] = v2;
    order[b + j + h] = v3;
  }
}

// sift_sort_local: grid P_max / (2 L), block L (a power of two, up to 1024); block g holds positions
// [2 L g, 2 L g + 2 L) of the order in shared memory (dynamic: block[2 L] ints) and runs, there, the steps
// j = L .. 1 of stage k (k_fixed > 0: the merges of a stage larger than the block), or every stage
// k = 2 .. 2 L with all its steps (k_fixed = 0: the first launch). Only pairs below P and stages k <= P run.
constexpr int kSortLocalMaxThreads = 1024;
__global__ void __launch_bounds__(kSortLocalMaxThreads)
    sift_sort_local(int* order, const SiftKeypoint* kp, const unsigned int* counters, int count_slot,
                    unsigned int capacity, unsigned int k_fixed, int mode) {
  extern __shared__ int sift_sort_block[];
  const unsigned int p = sift_pow2_at_least(min(counters[count_slot], capacity));
  const unsigned int lid = threadIdx.x, l = blockDim.x;
  const unsigned int base = 2 * l * blockIdx.x;
  if (base >= p || k_fixed > p || counters[kCountSelectSmall]) return;  // uniform in the block
  sift_sort_block[lid] = order[base + lid];
  sift_sort_block[lid + l] = order[base + lid + l];
  __syncthreads();
  const unsigned int k_first = k_fixed ? k_fixed : 2, k_last = k_fixed ? k_fixed : 2 * l;
  for (unsigned int k = k_first; k <= k_last && k <= p; k <<= 1) {
    for (unsigned int j = min(k / 2, l); j > 0; j >>= 1) {
      const unsigned int i = bitonic_pair_lower(lid, j);
      if (base + i < p) {
        int a = sift_sort_block[i], b = sift_sort_block[i + j];
        sift_compare_exchange(kp, &a, &b, base + i, k, mode);
        sift_sort_block[i] = a;
        sift_sort_block[i + j] = b;
      }
      __syncthreads();
    }
  }
  order[base + lid] = sift_sort_block[lid];
  order[base + lid + l] = sift_sort_block[lid + l];
}

}  // namespace spectrasift::cuda::kernels

// ransac.cuh — RANSAC scoring on the device (backend/cuda/ransac.cu): the inlier counts and sums of squared
// transfer errors of a batch of models, and one model's inlier mask. The per-pair maths is
// numeric/homography.h and numeric/ransac_score.h, as on the CPU backend (built with --fmad=false, so every
// double operation rounds as the host's): the same inlier decisions and, because the sums are exact
// fixed-point integers added in any order, the same sums, bit for bit.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "numeric/ransac_score.h"

namespace spectrasift::cuda::kernels {

constexpr int kRansacThreads = 256;  // threads per block of both kernels (8 warps)

// One model's score as the scoring kernel returns it (one record per model, one read-back per batch).
struct RansacScore {
  double sum;
  int inliers;
  int pad;
};

// One block's partial score of the mask kernel; the host adds the blocks' integers.
struct RansacPartial {
  unsigned long long hi, lo;
  int inliers;
  int pad;
};

// Adds (count, hi, lo) over the block (warp shuffles, then the warps' totals in shared memory; integers, so
// the order does not matter). Thread 0 gets the totals. Every thread must call it.
__device__ inline void ransac_block_sum(int& count, unsigned long long& hi, unsigned long long& lo) {
  __shared__ int sc[kRansacThreads / 32];
  __shared__ unsigned long long sh[kRansacThreads / 32], sl[kRansacThreads / 32];
  for (int o = 16; o > 0; o >>= 1) {
    count += __shfl_down_sync(0xffffffffu, count, o);
    hi += __shfl_down_sync(0xffffffffu, hi, o);
    lo += __shfl_down_sync(0xffffffffu, lo, o);
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) {
    sc[warp] = count;
    sh[warp] = hi;
    sl[warp] = lo;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kRansacThreads / 32; ++w) {
      count += sc[w];
      hi += sh[w];
      lo += sl[w];
    }
  }
}

// Accumulates pair i's score against model m.
__device__ inline void ransac_add(const double* m, double2 mv, double2 fx, double threshold2, double scale, int& count,
                                  unsigned long long& hi, unsigned long long& lo, bool& inlier) {
  const double e2 = ss_transfer_error2(m, mv.x, mv.y, fx.x, fx.y);
  inlier = e2 <= threshold2;
  if (inlier) {
    const ss_u64 q = ss_score_fixed(e2, scale);
    ++count;
    hi += ss_score_hi(q);
    lo += ss_score_lo(q);
  }
}

// Launch: grid = count blocks, block = kRansacThreads: block h scores model h, thread t takes pairs t,
// t + kRansacThreads, ... . out[h] = {sum, count} ({0, -1} when valid[h] == 0).
__global__ void __launch_bounds__(kRansacThreads) ransac_score(const double* models, const std::uint8_t* valid,
                                                               const double2* moving, const double2* fixed, int n,
                                                               double threshold2, double scale, double inv_scale,
                                                               RansacScore* out) {
  const int h = blockIdx.x;
  if (!valid[h]) {  // the whole block leaves: no barrier is reached
    if (threadIdx.x == 0) out[h] = RansacScore{0.0, -1, 0};
    return;
  }
  double m[9];
  for (int k = 0; k < 9; ++k) m[k] = models[9 * h + k];
  int count = 0;
  unsigned long long hi = 0, lo = 0;
  bool inlier;
  for (int i = threadIdx.x; i < n; i += kRansacThreads)
    ransac_add(m, moving[i], fixed[i], threshold2, scale, count, hi, lo, inlier);
  ransac_block_sum(count, hi, lo);
  if (threadIdx.x == 0) out[h] = RansacScore{ss_score_sum(hi, lo, inv_scale), count, 0};
}

// Launch: grid = any number of blocks, block = kRansacThreads, grid-stride over the n pairs of one model:
// mask[i] = 1 for an inlier, else 0; block b writes its partial count and fixed-point halves to part[b].
__global__ void __launch_bounds__(kRansacThreads) ransac_inlier_mask(const double* model, const double2* moving,
                                                                     const double2* fixed, int n, double threshold2,
                                                                     double scale, std::uint8_t* mask,
                                                                     RansacPartial* part) {
  double m[9];
  for (int k = 0; k < 9; ++k) m[k] = model[k];
  int count = 0;
  unsigned long long hi = 0, lo = 0;
  bool inlier;
  for (int i = blockIdx.x * kRansacThreads + threadIdx.x; i < n; i += gridDim.x * kRansacThreads) {
    ransac_add(m, moving[i], fixed[i], threshold2, scale, count, hi, lo, inlier);
    mask[i] = inlier ? 1 : 0;
  }
  ransac_block_sum(count, hi, lo);
  if (threadIdx.x == 0) part[blockIdx.x] = RansacPartial{hi, lo, count, 0};
}

}  // namespace spectrasift::cuda::kernels

// ransac.cuh — RANSAC scoring on the device (backend/cuda/ransac.cu): the inlier counts and sums of squared
// transfer errors of a batch of models, and one model's inlier mask. The per-pair maths is
// numeric/homography.h and numeric/ransac_score.h, as on the CPU backend (built with --fmad=false, so every
// double operation rounds as the host's): the same inlier decisions and, because the sums are exact
// fixed-point integers added in any order, the same sums, bit for bit.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "numeric/ransac_score.h"
#include "numeric/refit_sums.h"

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

// ---- the refits' sums (numeric/refit_sums.h): blocks of 256 pair indices in pair order, then the tree ----

// Sums added per round of the block kernel: 16 x 257 doubles, 32.9 KB of shared memory (30 would pass 48 KB).
constexpr int kRefitChunk = 16;

// Launch: grid = ss_refit_blocks(n) blocks, block = SS_REFIT_BLOCK (256) threads. Block b owns pairs 256 b ..
// 256 b + 255 (exactly the host's block b), thread t pair 256 b + t. Thread 0 first forms the pass's parameters
// with ss_refit_chain_params (from `given` and the chain's earlier totals `done`, as the host does). Each thread
// computes its pair's K = ss_refit_sum_count(pass) terms with ss_refit_terms (all +0 for a pair that is not
// selected or is past n: adding +0 leaves a sum's bits unchanged, as the host's skipping does). The block then
// adds each sum's 256 terms in pair order: kRefitChunk sums at a time go through shared memory, and thread
// k < kRefitChunk adds sum k's terms serially from pair 0 to pair 255, starting at +0, as the host's loop does.
// part[b * K + k] = block b's partial of sum k.
__global__ void __launch_bounds__(SS_REFIT_BLOCK) ransac_refit_blocks(int pass, int first, const double* given,
                                                                      const double* done, int count,
                                                                      const double2* moving, const double2* fixed,
                                                                      const std::uint8_t* mask, int n, double* part) {
  __shared__ double p[SS_REFIT_MAX_PARAMS];
  __shared__ double chunk[kRefitChunk][SS_REFIT_BLOCK + 1];  // + 1: the adding threads read different banks
  if (threadIdx.x == 0) ss_refit_chain_params(pass, first, given, done, count, p);
  __syncthreads();
  const int k_count = ss_refit_sum_count(pass);
  const int i = blockIdx.x * SS_REFIT_BLOCK + threadIdx.x;
  double t[SS_REFIT_MAX_SUMS];
  for (int k = 0; k < SS_REFIT_MAX_SUMS; ++k) t[k] = 0.0;
  if (i < n && mask[i]) {
    const double2 m = moving[i], f = fixed[i];
    ss_refit_terms(pass, p, m.x, m.y, f.x, f.y, t);
  }
  for (int c0 = 0; c0 < k_count; c0 += kRefitChunk) {
    for (int k = 0; k < kRefitChunk && c0 + k < k_count; ++k) chunk[k][threadIdx.x] = t[c0 + k];
    __syncthreads();
    if (int(threadIdx.x) < kRefitChunk && c0 + int(threadIdx.x) < k_count) {
      double acc = 0.0;
      for (int j = 0; j < SS_REFIT_BLOCK; ++j) acc += chunk[threadIdx.x][j];
      part[std::size_t(blockIdx.x) * k_count + c0 + threadIdx.x] = acc;
    }
    __syncthreads();
  }
}

// Launch: grid = 1 block, block = 32 threads. Thread k < k_count adds sum k's nb block partials (part[b * k_count
// + k]) by ss_refit_tree, the host's tree, and writes the total to out[k]. (nb is ~40 for 10,000 pairs: a
// serial tree per sum is a few microseconds, less than a launch.)
__global__ void __launch_bounds__(32) ransac_refit_tree(double* part, int nb, int k_count, double* out) {
  const int k = threadIdx.x;
  if (k < k_count) out[k] = ss_refit_tree_global(part + k, nb, k_count);
}

}  // namespace spectrasift::cuda::kernels

// match_filter.cuh — match_features' tests on the device and the kept matches compacted in query order
// (backend/cuda/match.cu, State::match_filtered; docs/performance/matching.md, 'GPU matching: ratio test and
// mutual check'). The OpenCL twin is opencl/kernels/match_filter.cl: the same two launches and the same output.
//
// Input: the query -> train records (MatchTop2, final distances: sqrtf, correctly rounded without fast-math)
// and, for the mutual check, the train -> query records (only best1 is read). The tests are
// numeric/match_filter.h's, so the host's bits. Output `out`: record 0 = {count, 0, 0, 0}, record 1 + k = the
// k-th kept match (the layout of spectrasift::Match). Grid ceil(nq / kFilterThreads) blocks of kFilterThreads:
// match_filter_count writes each block's number of kept matches, match_filter_compact adds the counts of the
// blocks before its own (each block reads them all: G^2 / 2 loads for G blocks, nothing next to the matching's
// nq * nt) and scatters its kept matches at their ranks: the same output on every run.
#pragma once

#include <cuda_runtime.h>

#include "backend/cuda/kernels/match_l2_top2.cuh"
#include "numeric/match_filter.h"

namespace spectrasift::cuda::kernels {

constexpr int kFilterThreads = 256;

// One kept match (the layout of spectrasift::Match); record 0 of the output holds the count in `query`.
struct MatchRecord {
  int query, train;
  float distance, second_distance;
};

// Whether query q's match is kept (its record in r); backward: null without the mutual check.
__device__ inline int match_filter_keep(int q, const MatchTop2* forward, const MatchTop2* backward, double ratio,
                                        double max_distance, MatchTop2& r) {
  r = forward[q];
  const int mutual_ok = backward == nullptr || (r.best1 >= 0 && backward[r.best1].best1 == q);
  return ss_match_keep(r.best1, r.distance1, r.distance2, ratio, max_distance, mutual_ok);
}

// The block's sum of `v` (every thread gets it).
__device__ inline int match_filter_block_sum(int v, int* scratch) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  if ((threadIdx.x & 31) == 0) scratch[threadIdx.x >> 5] = v;
  __syncthreads();
  int total = 0;
  for (int w = 0; w < kFilterThreads / 32; ++w) total += scratch[w];
  __syncthreads();
  return total;
}

// backward: null without the mutual check.
__global__ void __launch_bounds__(kFilterThreads)
    match_filter_count(const MatchTop2* forward, const MatchTop2* backward, int nq, double ratio,
                       double max_distance, int* block_counts) {
  __shared__ int scratch[kFilterThreads / 32];
  const int q = int(blockIdx.x) * kFilterThreads + int(threadIdx.x);
  MatchTop2 r;
  const int keep = q < nq ? match_filter_keep(q, forward, backward, ratio, max_distance, r) : 0;
  const int total = match_filter_block_sum(keep, scratch);
  if (threadIdx.x == 0) block_counts[blockIdx.x] = total;
}

__global__ void __launch_bounds__(kFilterThreads)
    match_filter_compact(const MatchTop2* forward, const MatchTop2* backward, int nq, double ratio,
                         double max_distance, const int* block_counts, MatchRecord* out) {
  __shared__ int scratch[kFilterThreads / 32];
  int before = 0;  // the kept matches of the blocks before this one
  for (int b = int(threadIdx.x); b < int(blockIdx.x); b += kFilterThreads) before += block_counts[b];
  const int offset = match_filter_block_sum(before, scratch);
  const int q = int(blockIdx.x) * kFilterThreads + int(threadIdx.x);
  MatchTop2 r;
  const int keep = q < nq ? match_filter_keep(q, forward, backward, ratio, max_distance, r) : 0;
  // Rank in the block: the kept matches of the lower lanes of this warp and of the warps before.
  const unsigned lanes = __ballot_sync(0xffffffffu, keep);
  const int lane = int(threadIdx.x & 31), warp = int(threadIdx.x >> 5);
  if (lane == 0) scratch[warp] = __popc(lanes);
  __syncthreads();
  int rank = __popc(lanes & ((1u << lane) - 1u));
  for (int w = 0; w < warp; ++w) rank += scratch[w];
  if (keep) out[1 + offset + rank] = MatchRecord{q, r.best1, r.distance1, r.distance2};
  if (blockIdx.x == gridDim.x - 1 && threadIdx.x == kFilterThreads - 1) {
    int total = offset;
    for (int w = 0; w < kFilterThreads / 32; ++w) total += scratch[w];
    out[0] = MatchRecord{total, 0, 0.0f, 0.0f};
  }
}

}  // namespace spectrasift::cuda::kernels

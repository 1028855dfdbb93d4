// match_l2_top2.cuh — the nearest and second nearest train descriptor of every query, distances and the
// best two in one kernel, without an N x M matrix (backend/cuda/match.cu).
//
// Exactly backend/cpu/match.cpp's numbers: d^2(q, t) = (|q|^2 + |t|^2) - 2 q.t with every sum in float in
// the order k = 0..dim-1 (one thread per pair runs the whole sum; --fmad=false keeps each product and sum
// separately rounded), negative results clamped to 0 as std::max(0, v) does, distances returned as sqrtf of
// the squared ones. The CPU pushes train indices in increasing order with "strictly less", which keeps the
// two smallest (d^2, index) pairs in lexicographic order among the finite ones; that rule does not depend on
// the visiting order, so the threads here keep partial best-twos of any subset and merge them with it.
#pragma once

#include <cuda_runtime.h>

namespace spectrasift::cuda::kernels {

// The record of one query (the layout of spectrasift::Top2).
struct MatchTop2 {
  int best1, best2;
  float distance1, distance2;
};

// Two best (squared distance, index) pairs; empty slots are (inf, -1).
struct MatchBest2 {
  float d1, d2;
  int i1, i2;
};

// (a, ia) before (b, ib): smaller distance, then smaller index. An infinite distance never enters an empty
// slot (inf == inf and ia < -1 is false), as on the CPU where inf < inf fails.
__device__ inline bool match_before(float a, int ia, float b, int ib) { return a < b || (a == b && ia < ib); }

__device__ inline void match_push(MatchBest2& s, float d, int i) {
  if (match_before(d, i, s.d1, s.i1)) {
    s.d2 = s.d1;
    s.i2 = s.i1;
    s.d1 = d;
    s.i1 = i;
  } else if (match_before(d, i, s.d2, s.i2)) {
    s.d2 = d;
    s.i2 = i;
  }
}

// match_norms: grid ceil(n / 256), block 256; one thread per descriptor: its squared norm, summed in float
// in the order k = 0..dim-1 (the CPU's squared_norm).
__global__ void match_norms(const float* v, int n, int dim, float* norms) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float* row = v + (size_t)i * (size_t)dim;
  float s = 0.0f;
  for (int k = 0; k < dim; ++k) s += row[k] * row[k];
  norms[i] = s;
}

constexpr int kMatchQueries = 32;      // queries per block
constexpr int kMatchTrains = 64;       // train descriptors per shared tile
constexpr int kMatchSlice = 32;        // dimensions per shared slice
constexpr int kMatchThreads = 256;     // 8 threads per query, each with kMatchTrains / 8 trains of a tile
constexpr int kMatchLanesPerQuery = kMatchThreads / kMatchQueries;
constexpr int kMatchPerThread = kMatchTrains / kMatchLanesPerQuery;

// match_l2_top2: grid ceil(nq / 32), block 256 (static shared memory: a 32 x 32 query slice and a 64 x 32
// train slice, padded rows: 12.7 KB). Block b takes queries 32 b .. 32 b + 31; thread (q = tid / 8, lane =
// tid % 8) computes, for every tile of 64 train descriptors, the dot products of query q with trains lane,
// lane + 8, ..., lane + 56 of the tile over slices of 32 dimensions in ascending order (one running float sum
// per pair, so the order is k = 0..dim-1), then pushes their clamped squared distances into its best-two.
// The 8 lanes of a query (consecutive lanes of one warp) merge their best-twos with shuffles and lane 0
// writes the query's record.
__global__ void __launch_bounds__(kMatchThreads) match_l2_top2(const float* query, const float* query_norm, int nq,
                                                               const float* train, const float* train_norm, int nt,
                                                               int dim, MatchTop2* out) {
  __shared__ float qs[kMatchQueries][kMatchSlice + 1];
  __shared__ float ts[kMatchTrains][kMatchSlice + 1];
  const int tid = threadIdx.x;
  const int ql = tid / kMatchLanesPerQuery, lane = tid % kMatchLanesPerQuery;
  const int q = blockIdx.x * kMatchQueries + ql;
  const float qn = q < nq ? query_norm[q] : 0.0f;
  MatchBest2 best{__int_as_float(0x7f800000), __int_as_float(0x7f800000), -1, -1};
  for (int t0 = 0; t0 < nt; t0 += kMatchTrains) {
    float acc[kMatchPerThread];
#pragma unroll
    for (int j = 0; j < kMatchPerThread; ++j) acc[j] = 0.0f;
    for (int k0 = 0; k0 < dim; k0 += kMatchSlice) {
      const int width = min(kMatchSlice, dim - k0);
      __syncthreads();  // the previous slice is consumed
      for (int e = tid; e < kMatchQueries * kMatchSlice; e += kMatchThreads) {
        const int r = e / kMatchSlice, c = e % kMatchSlice;
        const int qi = blockIdx.x * kMatchQueries + r;
        qs[r][c] = (qi < nq && c < width) ? query[(size_t)qi * (size_t)dim + (size_t)(k0 + c)] : 0.0f;
      }
      for (int e = tid; e < kMatchTrains * kMatchSlice; e += kMatchThreads) {
        const int r = e / kMatchSlice, c = e % kMatchSlice;
        const int ti = t0 + r;
        ts[r][c] = (ti < nt && c < width) ? train[(size_t)ti * (size_t)dim + (size_t)(k0 + c)] : 0.0f;
      }
      __syncthreads();
      for (int c = 0; c < width; ++c) {
        const float qv = qs[ql][c];
#pragma unroll
        for (int j = 0; j < kMatchPerThread; ++j) acc[j] += qv * ts[lane + j * kMatchLanesPerQuery][c];
      }
    }
#pragma unroll
    for (int j = 0; j < kMatchPerThread; ++j) {
      const int ti = t0 + lane + j * kMatchLanesPerQuery;
      if (ti >= nt) continue;
      const float v = (qn + train_norm[ti]) - 2.0f * acc[j];
      match_push(best, 0.0f < v ? v : 0.0f, ti);  // std::max(0.0f, v): NaN gives 0 there too
    }
  }
  // Merge the 8 lanes of this query (consecutive lanes of one warp).
  for (int off = kMatchLanesPerQuery / 2; off > 0; off >>= 1) {
    const float d1 = __shfl_down_sync(0xffffffffu, best.d1, off, kMatchLanesPerQuery);
    const float d2 = __shfl_down_sync(0xffffffffu, best.d2, off, kMatchLanesPerQuery);
    const int i1 = __shfl_down_sync(0xffffffffu, best.i1, off, kMatchLanesPerQuery);
    const int i2 = __shfl_down_sync(0xffffffffu, best.i2, off, kMatchLanesPerQuery);
    if (i1 >= 0) match_push(best, d1, i1);
    if (i2 >= 0) match_push(best, d2, i2);
  }
  if (lane == 0 && q < nq) {
    MatchTop2 r;
    r.best1 = best.i1;
    r.best2 = best.i2;
    r.distance1 = sqrtf(best.d1);
    r.distance2 = sqrtf(best.d2);
    out[q] = r;
  }
}

}  // namespace spectrasift::cuda::kernels

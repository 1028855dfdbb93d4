// Many references through a GEMM: candidates from the GEMM keys, exact rescoring, reduction (kernel
// spectral_select, the epilogue of the cuBLAS path).
#pragma once

#include "backend/cuda/kernels/spectral_multi.cuh"

namespace spectrasift::cuda::kernels {

// ---- many references: GEMM candidates, exact rescoring -------------------------------------------

/// (key, index) ordering of the GEMM stage: higher key first, then lower index; a NaN key (NaN data) after
/// every number; index -1 = empty, last. A strict total order, so that a warp-wide butterfly gives every
/// lane the same winner (the loops that depend on it stay uniform).
__device__ __forceinline__ bool key_before(float ka, int ia, float kb, int ib) {
  if (ia < 0) return false;
  if (ib < 0) return true;
  const bool na = ka != ka, nb = kb != kb;
  if (na != nb) return nb;
  if (na || ka == kb) return ia < ib;
  return ka > kb;
}

constexpr int kLaneList = 8;  ///< best keys kept per lane while scanning (the warp merges them)

/// Inserts (key, idx) into a lane's sorted list (registers: compile-time indices only).
__device__ __forceinline__ void lane_insert(float (&ks)[kLaneList], int (&ki)[kLaneList], float key, int idx) {
  if (!key_before(key, idx, ks[kLaneList - 1], ki[kLaneList - 1])) return;
  ks[kLaneList - 1] = key;
  ki[kLaneList - 1] = idx;
#pragma unroll
  for (int i = kLaneList - 1; i > 0; --i) {
    if (key_before(ks[i], ki[i], ks[i - 1], ki[i - 1])) {
      const float tk = ks[i]; ks[i] = ks[i - 1]; ks[i - 1] = tk;
      const int ti = ki[i]; ki[i] = ki[i - 1]; ki[i - 1] = ti;
    }
  }
}

/// Rows of the exact rescoring: the pixel's values (pixel-major X rows for ed/sam/scc) and the reference
/// rows padded to a multiple of 4 floats, so that both are read 16 bytes at a time.
struct RescoreRows {
  const float* x = nullptr;   ///< X rows (kpad floats per pixel); nullptr for sid (planes are used)
  int kpad = 0;
  const float* v1 = nullptr;  ///< count rows of npad floats
  const float* v2 = nullptr;  ///< sid: count rows of npad floats
  int npad = 0;
  /// Candidates whose GEMM key is below the best key by more than margin_a * |x| + margin_b cannot be the
  /// best (the GEMM's rounding error bound, see spectral_plan.cu) and are not rescored; margin_a < 0: rescore all.
  float margin_a = -1.0f;
  float margin_b = 0.0f;
};

/* spectral_select<kMetric>: the epilogue of the many-reference path. C holds the GEMM keys' dot part for
 * each pixel of a sub-chunk (column-major R x nsub, C[r + q * ldc]); key_r = C + w[r] orders the
 * references like the metric, higher = better (see spectral_plan.cu). Launch: grid ceil(nsub / 8), block
 * 256 = 8 warps, one warp per pixel, no shared memory, no atomics.
 *   scan:    lane l reads references 4l..4l+3, +128, ... (16-byte loads) and keeps its kLaneList best;
 *   merge:   up to kCandidates rounds of a warp-wide best head: candidate i goes to lane i; for
 *            best/threshold the rounds stop at a key below the best by more than the GEMM's error bound;
 *   rescore: each lane rescores its candidate EXACTLY with the single-pass formulas (bands in order,
 *            as the CPU backend), reading 16 bytes of pixel and reference at a time;
 *   reduce:  best / top-k / threshold on the exact scores with spectral_better (ties: lower index). */
template <int kMetric>
__global__ void __launch_bounds__(kBlock) spectral_select(const float* __restrict__ c, int ldc,
                                                          const float* __restrict__ w, PixelPlanes planes, int npix,
                                                          int q0, int nsub, RefSet refs, RescoreRows rows,
                                                          OutView out) {
  const int lane = threadIdx.x & 31;
  const int q = blockIdx.x * (kBlock / 32) + (threadIdx.x >> 5);
  if (q >= nsub) return;  // whole warps leave together
  const int p = q0 + q;   // pixel of the chunk
  const int higher = spectral_higher_is_better(kMetric);
  const bool valid = planes.valid[p] != 0;

  float ks[kLaneList];
  int ki[kLaneList];
#pragma unroll
  for (int i = 0; i < kLaneList; ++i) {
    ks[i] = 0.0f;
    ki[i] = -1;
  }
  if (valid) {
    const float* col = c + (long long)q * ldc;
    const int R = refs.count;
    // Two 16-byte loads in flight per lane before they are used.
    for (int r0 = 4 * lane; r0 < R; r0 += 256) {
      const float4 a = *reinterpret_cast<const float4*>(col + r0);
      const int r1 = r0 + 128;
      float4 b = make_float4(0.f, 0.f, 0.f, 0.f);
      if (r1 < R) b = *reinterpret_cast<const float4*>(col + r1);
      const float av[4] = {a.x, a.y, a.z, a.w};
      const float bv[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
      for (int e = 0; e < 4; ++e)
        if (r0 + e < R) lane_insert(ks, ki, av[e] + __ldg(w + r0 + e), r0 + e);
#pragma unroll
      for (int e = 0; e < 4; ++e)
        if (r1 + e < R) lane_insert(ks, ki, bv[e] + __ldg(w + r1 + e), r1 + e);
    }
  }
  // Merge: kCandidates rounds of a warp-wide "best head"; the owner pops its head. For best/threshold the
  // merge stops at the first key below the best key by more than the GEMM's error margin: no later
  // candidate can win.
  SpectralPixelStats st;
  load_stats(planes, p, &st);
  const bool prune = rows.margin_a >= 0.0f && out.mode != kOutTopK;
  const float margin = prune ? rows.margin_a * (float)sqrt(st.sum_p2) + rows.margin_b : 0.0f;
  float best_key = 0.0f;
  int my_cand = -1;
#pragma unroll 1
  for (int round = 0; round < kCandidates; ++round) {
    float bk = ks[0];
    int bi = ki[0];
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
      const float ok = __shfl_xor_sync(0xffffffffu, bk, off);
      const int oi = __shfl_xor_sync(0xffffffffu, bi, off);
      if (key_before(ok, oi, bk, bi)) { bk = ok; bi = oi; }
    }
    if (bi < 0) break;  // uniform: every lane is empty
    if (round == 0) best_key = bk;
    else if (prune && bk < best_key - margin) break;  // uniform: bk is the warp's
    if (lane == round) my_cand = bi;
    if (ki[0] == bi) {
#pragma unroll
      for (int i = 0; i < kLaneList - 1; ++i) { ks[i] = ks[i + 1]; ki[i] = ki[i + 1]; }
      ks[kLaneList - 1] = 0.0f;
      ki[kLaneList - 1] = -1;
    }
  }
  // Exact rescoring of one candidate per lane (for best/threshold, only the candidates within the GEMM's
  // error margin of the best key: the others cannot win).
  float score = SPECTRASIFT_NAN_F;
  if (my_cand >= 0) {
    SpectralPairAcc acc;
    spectral_pair_init(&acc);
    const int n = refs.n;
    if (rows.x) {
      const float* xp = rows.x + (long long)p * rows.kpad;
      const float* vp = rows.v1 + (long long)my_cand * rows.npad;
      const int n4 = n & ~3;
#pragma unroll 2
      for (int j = 0; j < n4; j += 4) {
        const float4 xv = *reinterpret_cast<const float4*>(xp + j);
        const float4 rv = __ldg(reinterpret_cast<const float4*>(vp + j));
        spectral_pair_add(&acc, kMetric, xv.x, rv.x, 0.0f);
        spectral_pair_add(&acc, kMetric, xv.y, rv.y, 0.0f);
        spectral_pair_add(&acc, kMetric, xv.z, rv.z, 0.0f);
        spectral_pair_add(&acc, kMetric, xv.w, rv.w, 0.0f);
      }
      for (int j = n4; j < n; ++j) spectral_pair_add(&acc, kMetric, xp[j], __ldg(vp + j), 0.0f);
    } else {
      const float* v1 = rows.v1 + (long long)my_cand * rows.npad;
      const float* v2 = rows.v2 + (long long)my_cand * rows.npad;
#pragma unroll 4
      for (int j = 0; j < n; ++j)
        spectral_pair_add(&acc, kMetric, planes.f[(long long)j * planes.pitch + p], __ldg(v1 + j), __ldg(v2 + j));
    }
    score = spectral_finalise(kMetric, &st, &acc, n, refs.constant[my_cand]);
  }
  int idx = (score == score) ? my_cand : -1;
  // Reduction on the exact scores: k rounds of a warp-wide spectral_better; the winner drops out.
  const int rounds = out.mode == kOutTopK ? out.k : 1;
  for (int t = 0; t < rounds; ++t) {
    float bs = score;
    int bi = idx;
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
      const float os = __shfl_xor_sync(0xffffffffu, bs, off);
      const int oi = __shfl_xor_sync(0xffffffffu, bi, off);
      if (oi >= 0 && (bi < 0 || spectral_better(os, oi, bs, bi, higher))) { bs = os; bi = oi; }
    }
    if (bi >= 0 && idx == bi) { score = SPECTRASIFT_NAN_F; idx = -1; }
    if (lane == 0) {
      if (bi < 0) bs = SPECTRASIFT_NAN_F;
      if (out.mode == kOutThreshold && !spectral_passes(bs, out.threshold, higher)) {
        bs = SPECTRASIFT_NAN_F;
        bi = -1;
      }
      out.score[(long long)t * out.stride + p] = bs;
      out.index[(long long)t * out.stride + p] = bi;
    }
  }
}

}  // namespace spectrasift::cuda::kernels

// Exact multi-reference matching, references tiled through shared memory (kernel spectral_multi), and the
// reference set and top-k insertion that the other many-reference kernels share.
#pragma once

#include "backend/cuda/kernels/spectral_convert.cuh"

namespace spectrasift::cuda::kernels {

/// References of the multi-reference kernels (device arrays of PreparedReferences).
struct RefSet {
  const float* v1 = nullptr;        ///< count * n
  const float* v2 = nullptr;        ///< count * n (sid) or nullptr
  const double* constant = nullptr; ///< count
  int count = 0;
  int n = 0;
};

__device__ __forceinline__ void load_stats(const PixelPlanes& planes, int p, SpectralPixelStats* st) {
  st->sum_p = planes.sum_p[p];
  st->sum_p2 = planes.sum_p2[p];
  st->sum_plp = planes.sum_plp[p];
}

/// Offers (score, idx) to the top-k heap of pixel p kept in the output bands (spectral_topk_heap_push of
/// numeric/spectral_metrics.h on strided storage: O(log k) per kept reference, issue 21 item 6).
__device__ __forceinline__ void topk_push_strided(const OutView& out, int p, float score, int idx, int higher) {
  spectral_topk_heap_push(out.score + p, out.index + p, nullptr, out.stride, out.k, score, idx, 0.0, higher);
}

/* spectral_multi<kMetric>: every pixel against every reference, exactly (the single-pass formulas),
 * for kAll and for small reference counts. Launch: grid ceil(npix / 256), block 256, one thread per
 * pixel; the references pass through shared memory kMultiTile at a time (dynamic shared memory
 * 2 * kMultiTile * n floats). A thread keeps kMultiTile accumulators and reads its pixel's planes once
 * per tile (coalesced). Outputs: kAll writes every score band; kBest/kThreshold keep the running best in
 * registers (references visited in increasing index, ties to the lower index); kTopK keeps a heap in the
 * output bands, which the host initialised to (NaN, -1), and sorts it best first at the end. */
template <int kMetric>
__global__ void __launch_bounds__(kBlock) spectral_multi(PixelPlanes planes, int npix, RefSet refs, OutView out) {
  extern __shared__ float smem[];
  float* t1 = smem;
  float* t2 = smem + kMultiTile * refs.n;
  const int p = blockIdx.x * blockDim.x + threadIdx.x;
  const bool live = p < npix;
  const int higher = spectral_higher_is_better(kMetric);
  SpectralPixelStats st;
  spectral_stats_init(&st);
  bool valid = false;
  if (live) {
    load_stats(planes, p, &st);
    valid = planes.valid[p] != 0;
  }
  float best_s = SPECTRASIFT_NAN_F;
  int best_i = -1;
  for (int r0 = 0; r0 < refs.count; r0 += kMultiTile) {
    const int tile = min(kMultiTile, refs.count - r0);
    __syncthreads();  // the previous tile is no longer read
    for (int e = threadIdx.x; e < tile * refs.n; e += blockDim.x) {
      t1[e] = refs.v1[(long long)r0 * refs.n + e];
      t2[e] = refs.v2 ? refs.v2[(long long)r0 * refs.n + e] : 0.0f;
    }
    __syncthreads();
    if (!live) continue;
    SpectralPairAcc acc[kMultiTile];
#pragma unroll
    for (int t = 0; t < kMultiTile; ++t) spectral_pair_init(&acc[t]);
    for (int j = 0; j < refs.n; ++j) {
      const float pv = planes.f[(long long)j * planes.pitch + p];
#pragma unroll
      for (int t = 0; t < kMultiTile; ++t) {
        if (t < tile) spectral_pair_add(&acc[t], kMetric, pv, t1[t * refs.n + j], t2[t * refs.n + j]);
      }
    }
#pragma unroll
    for (int t = 0; t < kMultiTile; ++t) {
      if (t >= tile) continue;
      const int r = r0 + t;
      const float s = valid ? spectral_finalise(kMetric, &st, &acc[t], refs.n, refs.constant[r]) : SPECTRASIFT_NAN_F;
      if (out.mode == kOutAll) {
        out.score[(long long)r * out.stride + p] = s;
      } else if (out.mode == kOutTopK) {
        topk_push_strided(out, p, s, r, higher);
      } else if (spectral_better(s, r, best_s, best_i, higher)) {
        best_s = s;
        best_i = r;
      }
    }
  }
  if (!live) return;
  if (out.mode == kOutTopK) spectral_topk_heap_sort(out.score + p, out.index + p, nullptr, out.stride, out.k, higher);
  if (out.mode == kOutBest || out.mode == kOutThreshold) {
    if (out.mode == kOutThreshold && !spectral_passes(best_s, out.threshold, higher)) {
      best_s = SPECTRASIFT_NAN_F;
      best_i = -1;
    }
    if (best_s != best_s) best_i = -1;
    out.score[p] = best_s;
    out.index[p] = best_i;
  }
}

}  // namespace spectrasift::cuda::kernels

// sam with two or more references: the exact rescoring of the reported angles (kernel family
// spectral_sam_exact). Every many-reference path (spectral_multi, spectral_select, the fused best kernels)
// ranks by the float cosine and writes its scores; this kernel then replaces each reported score by the
// angle recomputed in double from the float planes and the references as given (refs.raw), with
// numeric/spectral_metrics.h's spectral_sam_exact_* (2 atan2(|a - b|, |a + b|) on unit vectors: a pixel
// identical to a reference gives 0), and applies the threshold to it.
#pragma once

#include "backend/cuda/kernels/spectral_convert.cuh"

namespace spectrasift::cuda::kernels {

/* spectral_sam_exact: launch grid ceil(npix / 256), block 256 (kBlock), no shared memory; one thread per
 * pixel of the chunk. Reads F[j * pitch + p] (coalesced across the block), sum_p2[p], raw [count][n] and
 * constant [count] (|r|). kOutAll: rescores out.score[r * stride + p] for every reference (NaN stays NaN);
 * otherwise the out.k kept entries (index >= 0), then for kOutThreshold a best score that fails the
 * threshold gives (NaN, -1). The score kernels before it must have written kOutBest for kOutThreshold. */
__global__ void __launch_bounds__(kBlock)
    spectral_sam_exact(PixelPlanes planes, int npix, const float* __restrict__ raw, const double* __restrict__ constant,
                       int n, int count, OutView out) {
  const int p = blockIdx.x * blockDim.x + threadIdx.x;
  if (p >= npix) return;
  SpectralPixelStats st;
  st.sum_p = planes.sum_p[p];
  st.sum_p2 = planes.sum_p2[p];
  st.sum_plp = planes.sum_plp[p];
  const double p_norm = spectral_sam_exact_norm(&st);
  const bool all = out.mode == kOutAll;
  const int slots = all ? count : out.k;
  for (int t = 0; t < slots; ++t) {
    const long long at = (long long)t * out.stride + p;
    int r = t;
    if (all) {
      if (out.score[at] != out.score[at]) continue;  // no data, zero norm: NaN stays
    } else {
      r = out.index[at];
      if (r < 0) continue;
    }
    SpectralSamExact e;
    spectral_sam_exact_init(&e);
    const double r_norm = constant[r];
    const float* row = raw + (long long)r * n;
    for (int j = 0; j < n; ++j)
      spectral_sam_exact_add(&e, planes.f[(long long)j * planes.pitch + p], row[j], p_norm, r_norm);
    out.score[at] = spectral_sam_exact_finalise(&e);
  }
  if (out.mode == kOutThreshold && !spectral_passes(out.score[p], out.threshold, 0)) {
    out.score[p] = SPECTRASIFT_NAN_F;
    out.index[p] = -1;
  }
}

}  // namespace spectrasift::cuda::kernels

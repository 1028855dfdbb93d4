/* spectral_sam_exact.cl — sam with two or more references: the exact rescoring of the reported angles
 * (numeric/spectral_metrics.h, spectral_sam_exact_*). spectral_gemm ranks the references by the float
 * cosine and writes its scores and indices; this kernel replaces each reported score by the angle
 * recomputed in double from the prepared pixel (x1) and the reference as given (refs.raw), then applies
 * the threshold (so the threshold tests the reported score).
 *
 * Build options: -DKEEP=<k> (0: every score, Reduction::kAll; k >= 1: the k kept per pixel).
 * Launch geometry: 1-D, global = npix rounded up to the work-group size (State::work_group_1d), one
 *   work-item per pixel of the chunk; consecutive work-items read consecutive pixels of x1 (band-major).
 * Inputs: x1 [n][pitch], stats [3][pitch] (stats[pitch + p] = sum p^2), raw [count][n], rconst [count] (|r|).
 * In/out: out_s [bands][pitch] and, for KEEP != 0, out_i [KEEP][pitch] (read: the kept indices). */
#include "spectral_metrics.h"

__kernel void spectral_sam_exact(__global const float* x1, __global const double* stats, int npix, int pitch, int n,
                                 __global const float* raw, __global const double* rconst, int count,
                                 int use_threshold, float threshold, __global float* out_s,
                                 __global int* out_i) {
  const int p = (int)get_global_id(0);
  if (p >= npix) return;
  SpectralPixelStats st;
  st.sum_p = stats[p];
  st.sum_p2 = stats[pitch + p];
  st.sum_plp = stats[2 * pitch + p];
  const double p_norm = spectral_sam_exact_norm(&st);
#if KEEP == 0
  (void)out_i;
  (void)use_threshold;
  (void)threshold;
  for (int r = 0; r < count; ++r) {
    const size_t at = (size_t)r * (size_t)pitch + (size_t)p;
    if (out_s[at] != out_s[at]) continue; /* no data, zero norm: NaN stays */
#else
  (void)count;
  for (int j = 0; j < KEEP; ++j) {
    const size_t at = (size_t)j * (size_t)pitch + (size_t)p;
    const int r = out_i[at];
    if (r < 0) continue;
#endif
    SpectralSamExact e;
    spectral_sam_exact_init(&e);
    const double r_norm = rconst[r];
    for (int u = 0; u < n; ++u)
      spectral_sam_exact_add(&e, x1[(size_t)u * (size_t)pitch + (size_t)p], raw[(size_t)r * (size_t)n + (size_t)u], p_norm,
                             r_norm);
    out_s[at] = spectral_sam_exact_finalise(&e);
  }
#if KEEP != 0
  if (use_threshold && !spectral_passes(out_s[p], threshold, 0)) {
    out_s[p] = SPECTRASIFT_NAN_F;
    out_i[p] = -1;
  }
#endif
}

/* spectral_gemm.cl — many references: a tiled product of the prepared pixels (spectral_prepare) against
 * the prepared references, with the final formula and the reduction (all / best / top-k / threshold)
 * fused into its epilogue, so that a full score cube is written only for KEEP == 0.
 *
 * Build options (chosen by src/backend/opencl/spectral.cpp from CL_DEVICE_LOCAL_MEM_SIZE and
 * CL_DEVICE_MAX_WORK_GROUP_SIZE / CL_KERNEL_WORK_GROUP_SIZE, never constants):
 *   -DMETRIC=<0..3>
 *   -DKEEP=<k>       0: every score (Reduction::kAll); k >= 1: the k best per pixel (best and threshold: 1;
 *                    the threshold is a run-time argument, so best and threshold share one program)
 *   -DGEMM_ROWS=0|1  0: the tiled kernel (GPUs); 1: the row kernel (CPU devices such as PoCL, which run a
 *                    work-group as a loop vectorised across work-items: no barriers, no __local tiles)
 *   -DWG_X, -DWG_Y   tiled: work-group shape (references along x, pixels along y)
 *   -DRP, -DRR       tiled: pixels and references per work-item (register tile); rows: references per block
 *   -DTK             tiled: bands per __local tile
 *   -DSPECTRASIFT_CPU_DEVICE on CPU devices (results unchanged)
 *
 * Numerics are those of numeric/spectral_metrics.h: every (pixel, reference) pair accumulates its bands
 * in order 0..n-1 (ed in double, the dot products of sam/scc/sid in float), then spectral_finalise_*.
 * Tiles change only where the operands are read from, never the order of a pair's sum: both kernels give the
 * same bits. */
#include "spectral_metrics.h"

#define BP (WG_Y * RP) /* pixels of a work-group tile */
#define BR (WG_X * RR) /* references of a work-group tile */
#define WG_SIZE (WG_X * WG_Y)


/* One pixel-reference score from the accumulator (nodata and padding give NaN). */
inline float spectral_gemm_score(const SpectralPairAcc* acc, __global const double* stats, int pitch, int p, int n,
                                 double ref_constant) {
  SpectralPixelStats st;
  st.sum_p = stats[p];
  st.sum_p2 = stats[pitch + p];
  st.sum_plp = stats[2 * pitch + p];
#if METRIC == SPECTRAL_METRIC_ED
  (void)ref_constant;
  return spectral_finalise_ed(acc->d2);
#else
  return spectral_finalise(METRIC, &st, acc, n, ref_constant);
#endif
}

#if !GEMM_ROWS
/* spectral_gemm (tiled) — launch geometry:
 *   local  = (WG_X, WG_Y); global = (WG_X * ceil(npix / BP), WG_Y): one work-group per tile of BP pixels,
 *   looping over ALL references in tiles of BR and over the bands in tiles of TK.
 *   Work-item (lx, ly) computes RP x RR pairs: pixels p0 + ly + i*WG_Y, references r0 + lx + j*WG_X.
 *   __local: x tile [TK][BP] and reference tile [TK][BR] (twice for sid); for reductions a score tile
 *   [BP][BR+1] that the first BP work-items (one per pixel) merge, in reference order, into their private
 *   top-KEEP heap with spectral_topk_heap_push, sorted best first at the end (spectral_topk_heap_sort; the
 *   result does not depend on the merge order anyway).
 * Inputs: x1/x2 [n][pitch] (spectral_prepare), stats [3][pitch], nodata [pitch], r1/r2 [n][rpitch],
 *   rconst [count]. use_threshold != 0: a best score that fails `threshold` gives (NaN, -1).
 *   Outputs [bands][pitch]: KEEP == 0: out_s[r * pitch + p] for every reference; otherwise
 *   out_s/out_i[j * pitch + p], j < KEEP, best first (-1 / NaN when absent or rejected). */
__kernel __attribute__((reqd_work_group_size(WG_X, WG_Y, 1)))
void spectral_gemm(__global const float* x1, __global const float* x2, __global const double* stats,
                   __global const int* nodata, int npix, int pitch, int n, __global const float* r1,
                   __global const float* r2, __global const double* rconst, int count, int rpitch,
                   int use_threshold, float threshold, __global float* out_s, __global int* out_i) {
  __local float xs[TK][BP];
  __local float rs[TK][BR];
#if METRIC == SPECTRAL_METRIC_SID
  __local float xs2[TK][BP];
  __local float rs2[TK][BR];
#endif
#if KEEP != 0
  __local float tile_s[BP][BR + 1];
  float keep_s[KEEP];
  int keep_i[KEEP];
  spectral_topk_init(keep_s, keep_i, KEEP);
#endif
  const int lx = (int)get_local_id(0);
  const int ly = (int)get_local_id(1);
  const int lid = ly * WG_X + lx;
  const int p0 = (int)get_group_id(0) * BP;
  const int higher = spectral_higher_is_better(METRIC);

  for (int r0 = 0; r0 < count; r0 += BR) {
    SpectralPairAcc acc[RP][RR];
    for (int i = 0; i < RP; ++i)
      for (int j = 0; j < RR; ++j) spectral_pair_init(&acc[i][j]);

    for (int k0 = 0; k0 < n; k0 += TK) {
      barrier(CLK_LOCAL_MEM_FENCE); /* the previous tile has been consumed */
      for (int e = lid; e < TK * BP; e += WG_SIZE) {
        const int kk = e / BP, pp = e - kk * BP;
        const int b = k0 + kk, p = p0 + pp;
        const int ok = b < n && p < npix;
        const size_t at = (size_t)b * (size_t)pitch + (size_t)p;
        xs[kk][pp] = ok ? x1[at] : 0.0f;
#if METRIC == SPECTRAL_METRIC_SID
        xs2[kk][pp] = ok ? x2[at] : 0.0f;
#endif
      }
      for (int e = lid; e < TK * BR; e += WG_SIZE) {
        const int kk = e / BR, rr = e - kk * BR;
        const int b = k0 + kk, r = r0 + rr;
        const int ok = b < n && r < count;
        const size_t at = (size_t)b * (size_t)rpitch + (size_t)r;
        rs[kk][rr] = ok ? r1[at] : 0.0f;
#if METRIC == SPECTRAL_METRIC_SID
        rs2[kk][rr] = ok ? r2[at] : 0.0f;
#endif
      }
      barrier(CLK_LOCAL_MEM_FENCE);
      const int kmax = min(TK, n - k0);
      for (int kk = 0; kk < kmax; ++kk) {
        float xv[RP], rv[RR];
#if METRIC == SPECTRAL_METRIC_SID
        float xv2[RP], rv2[RR];
#endif
        for (int i = 0; i < RP; ++i) {
          xv[i] = xs[kk][ly + i * WG_Y];
#if METRIC == SPECTRAL_METRIC_SID
          xv2[i] = xs2[kk][ly + i * WG_Y];
#endif
        }
        for (int j = 0; j < RR; ++j) {
          rv[j] = rs[kk][lx + j * WG_X];
#if METRIC == SPECTRAL_METRIC_SID
          rv2[j] = rs2[kk][lx + j * WG_X];
#endif
        }
        for (int i = 0; i < RP; ++i)
          for (int j = 0; j < RR; ++j) {
#if METRIC == SPECTRAL_METRIC_ED
            const double d = (double)xv[i] - (double)rv[j];
            acc[i][j].d2 += d * d;
#elif METRIC == SPECTRAL_METRIC_SID
            /* spectral_pair_add's sid branch with the pixel's clamp and log done by spectral_prepare:
             * dot += p' * log b, dot2 += b * log p' */
            acc[i][j].dot += xv[i] * rv2[j];
            acc[i][j].dot2 += rv[j] * xv2[i];
#else
            acc[i][j].dot += xv[i] * rv[j];
#endif
          }
      }
    }

    /* epilogue: final formula, then the full score band or the fused reduction */
    for (int i = 0; i < RP; ++i) {
      const int pp = ly + i * WG_Y;
      const int p = p0 + pp;
      for (int j = 0; j < RR; ++j) {
        const int rr = lx + j * WG_X;
        const int r = r0 + rr;
        float s = SPECTRASIFT_NAN_F;
        if (p < npix && r < count && !nodata[p]) s = spectral_gemm_score(&acc[i][j], stats, pitch, p, n, rconst[r]);
#if KEEP == 0
        if (p < npix && r < count) out_s[(size_t)r * (size_t)pitch + (size_t)p] = s;
#else
        tile_s[pp][rr] = s;
#endif
      }
    }
#if KEEP != 0
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid < BP) {
      const int rmax = min(BR, count - r0);
      for (int rr = 0; rr < rmax; ++rr)
        spectral_topk_heap_push(keep_s, keep_i, 0, 1, KEEP, tile_s[lid][rr], r0 + rr, 0.0, higher);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
#endif
  }

#if KEEP != 0
  const int p = p0 + lid;
  if (lid < BP && p < npix) {
    spectral_topk_heap_sort(keep_s, keep_i, 0, 1, KEEP, higher);
    if (use_threshold && !spectral_passes(keep_s[0], threshold, higher)) {
      keep_s[0] = SPECTRASIFT_NAN_F;
      keep_i[0] = -1;
    }
    for (int j = 0; j < KEEP; ++j) {
      out_s[(size_t)j * (size_t)pitch + (size_t)p] = keep_s[j];
      out_i[(size_t)j * (size_t)pitch + (size_t)p] = keep_i[j];
    }
  }
#endif
}

#else /* GEMM_ROWS */
#if RR != 8
#error "the row kernel works on blocks of 8 references (RR=8)"
#endif

/* spectral_gemm (rows, CPU devices) — launch geometry: 1-D, global = npix rounded up to the work-group size
 * (State::work_group_1d), one work-item = one pixel against ALL references in blocks of RR = 8 (one 8-wide
 * vector of accumulators). Consecutive work-items read consecutive pixels of x1 (band-major); the 8
 * references of a block are contiguous in r1 (transposed, padded rows), read with vload8. Same
 * arguments, same per-pair band order and same outputs as the tiled kernel; r1/r2 are padded to rpitch
 * (a multiple of RR) with zeros so that the reference block needs no bounds test. */
__kernel void spectral_gemm(__global const float* x1, __global const float* x2, __global const double* stats,
                            __global const int* nodata, int npix, int pitch, int n, __global const float* r1,
                            __global const float* r2, __global const double* rconst, int count, int rpitch,
                            int use_threshold, float threshold, __global float* out_s, __global int* out_i) {
  const int p = (int)get_global_id(0);
  if (p >= npix) return;
  const int nd = nodata[p];
  const int higher = spectral_higher_is_better(METRIC);
#if KEEP != 0
  float keep_s[KEEP];
  int keep_i[KEEP];
  spectral_topk_init(keep_s, keep_i, KEEP);
#endif
  for (int r0 = 0; r0 < count; r0 += RR) {
    /* RR == 8 references per block as one 8-wide vector: explicit SIMD that does not depend on the
     * compiler vectorising across work-items; per lane the same float/double operations, in the same
     * band order, as spectral_pair_add (FP_CONTRACT is off, so nothing is fused). */
#if METRIC == SPECTRAL_METRIC_ED
    double8 vd2 = (double8)(0.0);
#else
    float8 vdot = (float8)(0.0f);
#if METRIC == SPECTRAL_METRIC_SID
    float8 vdot2 = (float8)(0.0f);
#endif
#endif
    for (int u = 0; u < n; ++u) {
      const size_t at = (size_t)u * (size_t)pitch + (size_t)p;
      const float xv = x1[at];
      const float8 rv = vload8(0, r1 + (size_t)u * (size_t)rpitch + (size_t)r0);
#if METRIC == SPECTRAL_METRIC_ED
      const double8 d = (double8)((double)xv) - convert_double8(rv);
      vd2 = vd2 + d * d;
#elif METRIC == SPECTRAL_METRIC_SID
      const float xv2 = x2[at];
      const float8 rv2 = vload8(0, r2 + (size_t)u * (size_t)rpitch + (size_t)r0);
      vdot = vdot + (float8)(xv) * rv2;
      vdot2 = vdot2 + rv * (float8)(xv2);
#else
      vdot = vdot + (float8)(xv) * rv;
#endif
    }
    SpectralPairAcc acc[RR];
    {
      double d2s[8];
      float dots[8], dot2s[8];
#if METRIC == SPECTRAL_METRIC_ED
      vstore8(vd2, 0, d2s);
      vstore8((float8)(0.0f), 0, dots);
      vstore8((float8)(0.0f), 0, dot2s);
#else
      vstore8((double8)(0.0), 0, d2s);
      vstore8(vdot, 0, dots);
#if METRIC == SPECTRAL_METRIC_SID
      vstore8(vdot2, 0, dot2s);
#else
      vstore8((float8)(0.0f), 0, dot2s);
#endif
#endif
      for (int j = 0; j < RR; ++j) {
        acc[j].d2 = d2s[j];
        acc[j].dot = dots[j];
        acc[j].dot2 = dot2s[j];
      }
    }
    const int jmax = min(RR, count - r0);
    for (int j = 0; j < jmax; ++j) {
      const int r = r0 + j;
      const float s = nd ? SPECTRASIFT_NAN_F : spectral_gemm_score(&acc[j], stats, pitch, p, n, rconst[r]);
#if KEEP == 0
      out_s[(size_t)r * (size_t)pitch + (size_t)p] = s;
#else
      spectral_topk_heap_push(keep_s, keep_i, 0, 1, KEEP, s, r, 0.0, higher);
#endif
    }
  }
#if KEEP != 0
  spectral_topk_heap_sort(keep_s, keep_i, 0, 1, KEEP, higher);
  if (use_threshold && !spectral_passes(keep_s[0], threshold, higher)) {
    keep_s[0] = SPECTRASIFT_NAN_F;
    keep_i[0] = -1;
  }
  for (int j = 0; j < KEEP; ++j) {
    out_s[(size_t)j * (size_t)pitch + (size_t)p] = keep_s[j];
    out_i[(size_t)j * (size_t)pitch + (size_t)p] = keep_i[j];
  }
#else
  (void)higher;
  (void)use_threshold;
  (void)threshold;
#endif
}

#endif /* GEMM_ROWS */

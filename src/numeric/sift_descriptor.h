/* sift_descriptor.h — the 4 x 4 x 8 SIFT descriptor (notes §8), per sample and per keypoint.
 *
 * A sample at integer offset (i = row, j = column) from the rounded keypoint centre has rotated
 * coordinates in cell units u = (j cos a + i sin a) / hw, v = (-j sin a + i cos a) / hw (a = keypoint
 * angle, hw = 3 sigma), spatial bins cbin = u + 1.5, rbin = v + 1.5, orientation bin
 * obin = (theta - (360 - a)) * 8 / 360 and weight |grad| * exp(-(u^2 + v^2) / 8). Its weight is split
 * trilinearly among the 2 x 2 x 2 neighbouring bins. The accumulator has (d+2) x (d+2) x (n+2) entries
 * so that samples next to the grid need no test; after accumulation bin n folds onto bin 0 and the inner
 * d x d cells form the descriptor, index (row * d + col) * n + o. */
#ifndef SPECTRASIFT_NUMERIC_SIFT_DESCRIPTOR_H
#define SPECTRASIFT_NUMERIC_SIFT_DESCRIPTOR_H

#include "sift_common.h"

#define SIFT_DESCR_HIST_LEN ((SIFT_DESCR_WIDTH + 2) * (SIFT_DESCR_WIDTH + 2) * (SIFT_DESCR_HIST_BINS + 2))

/* Splits a fractional bin into its integer part (floor) and the fraction in [0, 1). */
SPECTRASIFT_FN int sift_descriptor_split(float bin, float* frac) {
  const int b = (int)SIFT_FLOORF(bin);
  *frac = bin - (float)b;
  return b;
}

/* The 8 shares of a sample's weight mag among its neighbouring bins, with fractions (rf, cf, of) towards the
 * next row, column and orientation bin: mag times a product of (1 - f) or f, computed by differences in
 * OpenCV's order. Share k = 4 dr + 2 dc + do goes to accumulator index idx + sift_descriptor_share_offset(k). */
typedef struct SiftDescriptorShares {
  float v[8];
} SiftDescriptorShares;

SPECTRASIFT_FN SiftDescriptorShares sift_descriptor_shares(float mag, float rf, float cf, float of) {
  SiftDescriptorShares s;
  const float v_r1 = mag * rf, v_r0 = mag - v_r1;
  const float v_rc11 = v_r1 * cf, v_rc10 = v_r1 - v_rc11;
  const float v_rc01 = v_r0 * cf, v_rc00 = v_r0 - v_rc01;
  s.v[7] = v_rc11 * of;
  s.v[6] = v_rc11 - s.v[7];
  s.v[5] = v_rc10 * of;
  s.v[4] = v_rc10 - s.v[5];
  s.v[3] = v_rc01 * of;
  s.v[2] = v_rc01 - s.v[3];
  s.v[1] = v_rc00 * of;
  s.v[0] = v_rc00 - s.v[1];
  return s;
}

/* The accumulator index of integer bins (r0, c0, o0), r0, c0 in -1..d-1 and o0 in 0..n-1. */
SPECTRASIFT_FN int sift_descriptor_index(int r0, int c0, int o0) {
  return ((r0 + 1) * (SIFT_DESCR_WIDTH + 2) + c0 + 1) * (SIFT_DESCR_HIST_BINS + 2) + o0;
}

/* The offset of share k (4 dr + 2 dc + do) from the index of its sample's integer bins. */
SPECTRASIFT_FN int sift_descriptor_share_offset(int k) {
  return ((k >> 2) * (SIFT_DESCR_WIDTH + 2) + ((k >> 1) & 1)) * (SIFT_DESCR_HIST_BINS + 2) + (k & 1);
}

/* The array forms, in the address-space variants of dialect.h (every array in the same space):
 *   sift_descriptor_accumulate_at(hist, r0, c0, o0, rf, cf, of, mag): adds the 8 shares at integer bins;
 *   sift_descriptor_accumulate(hist, rbin, cbin, obin, mag): the same from fractional bins, rbin, cbin in
 *     (-1, d), obin in [-n, 2n);
 *   sift_descriptor_finalize(hist, out): folds the circular orientation bin, clamps at 0.2 of the L2 norm,
 *     rescales to L2 norm 512, rounds (half to even) and saturates to 0..255: out[128] receives
 *     integer-valued floats, as OpenCV's CV_32F descriptors. Its sums run in index order.
 * Summation order (the determinism rule of DESIGN.md): every accumulator entry is the float sum, from 0, of
 * the shares it receives, in sample order (rows i ascending, then columns j ascending). The 8 shares of one
 * sample go to 8 different entries, so adding each sample's shares in turn gives that order; a device
 * computes (index, shares) per sample in parallel and then lets one work-item per entry add its shares in
 * sample order, never float atomics. */
#define SIFT_DEFINE_DESCRIPTOR_ARRAYS(SUFFIX, AS)                                                         \
  SPECTRASIFT_FN void sift_descriptor_accumulate_at##SUFFIX(AS float* hist, int r0, int c0, int o0, float rf, \
                                                            float cf, float of, float mag) {            \
    const SiftDescriptorShares s = sift_descriptor_shares(mag, rf, cf, of);                              \
    const int idx = sift_descriptor_index(r0, c0, o0);                                                   \
    for (int k = 0; k < 8; ++k) hist[idx + sift_descriptor_share_offset(k)] += s.v[k];                   \
  }                                                                                                      \
  SPECTRASIFT_FN void sift_descriptor_accumulate##SUFFIX(AS float* hist, float rbin, float cbin, float obin, \
                                                         float mag) {                                   \
    const int n = SIFT_DESCR_HIST_BINS;                                                                  \
    float rf, cf, of;                                                                                    \
    const int r0 = sift_descriptor_split(rbin, &rf);                                                     \
    const int c0 = sift_descriptor_split(cbin, &cf);                                                     \
    int o0 = sift_descriptor_split(obin, &of);                                                           \
    if (o0 < 0) o0 += n;                                                                                 \
    if (o0 >= n) o0 -= n;                                                                                \
    sift_descriptor_accumulate_at##SUFFIX(hist, r0, c0, o0, rf, cf, of, mag);                            \
  }                                                                                                      \
  SPECTRASIFT_FN void sift_descriptor_finalize##SUFFIX(AS float* hist, AS float* out) {                  \
    const int d = SIFT_DESCR_WIDTH;                                                                      \
    const int n = SIFT_DESCR_HIST_BINS;                                                                  \
    const int len = d * d * n;                                                                           \
    for (int i = 0; i < d; ++i) {                                                                        \
      for (int j = 0; j < d; ++j) {                                                                      \
        const int idx = ((i + 1) * (d + 2) + (j + 1)) * (n + 2);                                         \
        hist[idx] += hist[idx + n];                                                                      \
        hist[idx + 1] += hist[idx + n + 1];                                                              \
        for (int k = 0; k < n; ++k) out[(i * d + j) * n + k] = hist[idx + k];                            \
      }                                                                                                  \
    }                                                                                                    \
    float nrm2 = 0.0f;                                                                                   \
    for (int k = 0; k < len; ++k) nrm2 += out[k] * out[k];                                               \
    const float thr = SIFT_SQRTF(nrm2) * SIFT_DESCR_MAG_THR;                                             \
    nrm2 = 0.0f;                                                                                         \
    for (int k = 0; k < len; ++k) {                                                                      \
      const float val = out[k] < thr ? out[k] : thr;                                                     \
      out[k] = val;                                                                                      \
      nrm2 += val * val;                                                                                 \
    }                                                                                                    \
    const float nrm = SIFT_SQRTF(nrm2);                                                                  \
    const float scale = SIFT_INT_DESCR_FCTR / (nrm > SIFT_FLT_EPSILON ? nrm : SIFT_FLT_EPSILON);         \
    for (int k = 0; k < len; ++k) {                                                                      \
      int v = sift_round(out[k] * scale);                                                                \
      v = v < 0 ? 0 : (v > 255 ? 255 : v);                                                               \
      out[k] = (float)v;                                                                                 \
    }                                                                                                    \
  }
SPECTRASIFT_AS_VARIANTS(SIFT_DEFINE_DESCRIPTOR_ARRAYS)
#undef SIFT_DEFINE_DESCRIPTOR_ARRAYS

#if defined(SIFT_HAVE_DOUBLE)
/* RootSIFT of one finished descriptor row v[128] (integer-valued, 0..255): v / sum(v), square root, times
 * 512 (L2 norm 512 like the default rows), in double; an all-zero row stays zero. (OpenCL: needs fp64.) */
SPECTRASIFT_FN void sift_descriptor_root(float* v) {
  const int len = SIFT_DESCR_WIDTH * SIFT_DESCR_WIDTH * SIFT_DESCR_HIST_BINS;
  double l1 = 0;
  for (int k = 0; k < len; ++k) l1 += v[k];
  if (l1 <= 0) return;
  for (int k = 0; k < len; ++k) v[k] = (float)(SIFT_SQRT_DOUBLE((double)v[k] / l1) * 512.0);
}
#endif

#endif /* SPECTRASIFT_NUMERIC_SIFT_DESCRIPTOR_H */

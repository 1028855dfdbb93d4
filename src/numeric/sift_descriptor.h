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

/* Adds weight mag to the accumulator at integer bins (r0, c0, o0), r0, c0 in -1..d-1 and o0 in 0..n-1,
 * with fractions (rf, cf, of) towards the next bins: each of the 8 neighbours gets mag times a product of
 * (1 - f) or f, computed by differences in OpenCV's order. */
SPECTRASIFT_FN void sift_descriptor_accumulate_at(float* hist, int r0, int c0, int o0, float rf, float cf, float of,
                                                  float mag) {
  const int d = SIFT_DESCR_WIDTH;
  const int n = SIFT_DESCR_HIST_BINS;
  const float v_r1 = mag * rf, v_r0 = mag - v_r1;
  const float v_rc11 = v_r1 * cf, v_rc10 = v_r1 - v_rc11;
  const float v_rc01 = v_r0 * cf, v_rc00 = v_r0 - v_rc01;
  const float v_rco111 = v_rc11 * of, v_rco110 = v_rc11 - v_rco111;
  const float v_rco101 = v_rc10 * of, v_rco100 = v_rc10 - v_rco101;
  const float v_rco011 = v_rc01 * of, v_rco010 = v_rc01 - v_rco011;
  const float v_rco001 = v_rc00 * of, v_rco000 = v_rc00 - v_rco001;
  const int idx = ((r0 + 1) * (d + 2) + c0 + 1) * (n + 2) + o0;
  hist[idx] += v_rco000;
  hist[idx + 1] += v_rco001;
  hist[idx + (n + 2)] += v_rco010;
  hist[idx + (n + 3)] += v_rco011;
  hist[idx + (d + 2) * (n + 2)] += v_rco100;
  hist[idx + (d + 2) * (n + 2) + 1] += v_rco101;
  hist[idx + (d + 3) * (n + 2)] += v_rco110;
  hist[idx + (d + 3) * (n + 2) + 1] += v_rco111;
}

/* Adds weight mag to the accumulator hist[SIFT_DESCR_HIST_LEN] at fractional bins (rbin, cbin, obin);
 * rbin, cbin in (-1, d), obin in [-n, 2n). */
SPECTRASIFT_FN void sift_descriptor_accumulate(float* hist, float rbin, float cbin, float obin, float mag) {
  const int n = SIFT_DESCR_HIST_BINS;
  float rf, cf, of;
  const int r0 = sift_descriptor_split(rbin, &rf);
  const int c0 = sift_descriptor_split(cbin, &cf);
  int o0 = sift_descriptor_split(obin, &of);
  if (o0 < 0) o0 += n;
  if (o0 >= n) o0 -= n;
  sift_descriptor_accumulate_at(hist, r0, c0, o0, rf, cf, of, mag);
}

/* Folds the circular orientation bin, clamps at 0.2 of the L2 norm, rescales to L2 norm 512 and rounds
 * (half to even) and saturates to 0..255: out[128] receives integer-valued floats, as OpenCV's CV_32F
 * descriptors. The sums run in index order (deterministic). */
SPECTRASIFT_FN void sift_descriptor_finalize(float* hist, float* out) {
  const int d = SIFT_DESCR_WIDTH;
  const int n = SIFT_DESCR_HIST_BINS;
  const int len = d * d * n;
  for (int i = 0; i < d; ++i) {
    for (int j = 0; j < d; ++j) {
      const int idx = ((i + 1) * (d + 2) + (j + 1)) * (n + 2);
      hist[idx] += hist[idx + n];
      hist[idx + 1] += hist[idx + n + 1];
      for (int k = 0; k < n; ++k) out[(i * d + j) * n + k] = hist[idx + k];
    }
  }
  float nrm2 = 0.0f;
  for (int k = 0; k < len; ++k) nrm2 += out[k] * out[k];
  const float thr = SIFT_SQRTF(nrm2) * SIFT_DESCR_MAG_THR;
  nrm2 = 0.0f;
  for (int k = 0; k < len; ++k) {
    const float val = out[k] < thr ? out[k] : thr;
    out[k] = val;
    nrm2 += val * val;
  }
  const float nrm = SIFT_SQRTF(nrm2);
  const float scale = SIFT_INT_DESCR_FCTR / (nrm > SIFT_FLT_EPSILON ? nrm : SIFT_FLT_EPSILON);
  for (int k = 0; k < len; ++k) {
    int v = sift_round(out[k] * scale);
    v = v < 0 ? 0 : (v > 255 ? 255 : v);
    out[k] = (float)v;
  }
}

#endif /* SPECTRASIFT_NUMERIC_SIFT_DESCRIPTOR_H */

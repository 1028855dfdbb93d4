/* sift_orientation.h — orientation assignment (notes §7), per keypoint.
 *
 * Samples: every pixel (x, y) = (c + j, r + i), |i|, |j| <= R = round(4.5 sigma), that is not on the
 * image's outer ring, with dx = L(y, x+1) - L(y, x-1), dy = L(y-1, x) - L(y+1, x) (brighter upwards is
 * positive), weight exp(-(i^2 + j^2) / (2 (1.5 sigma)^2)) * |(dx, dy)|, into bin round(theta / 10) mod 36.
 * The raw histogram is smoothed once with the circular kernel [1 4 6 4 1]/16; each strict local maximum
 * that reaches 0.8 of the highest bin gives one keypoint, its bin refined by a parabola through the three
 * bins, and angle = 360 - 10 * bin (OpenCV's convention, y down).
 *
 * Summation order (the determinism rule of DESIGN.md): raw bin b is the float sum, from 0, of the
 * contributions (w(i) * w(j)) * sqrt(dx^2 + dy^2) of the samples whose bin is b, in sample order: rows i
 * ascending, then columns j ascending, w(k) = sift_window_weight(k, sift_orientation_window_scale(sigma)).
 * A device computes (bin, contribution) of every sample in parallel, then one work-item per bin adds that
 * bin's contributions in sample order; never float atomics. The host loop adds in sample order directly. */
#ifndef SPECTRASIFT_NUMERIC_SIFT_ORIENTATION_H
#define SPECTRASIFT_NUMERIC_SIFT_ORIENTATION_H

#include "sift_device.h"

/* The exponent scale -1 / (2 s^2) of the orientation window of window sigma s (1.5 keypoint sigmas). */
SPECTRASIFT_FN float sift_orientation_window_scale(float window_sigma) {
  return -1.0f / (2.0f * window_sigma * window_sigma);
}

/* The separable window weight of offset k: exp(k^2 * scale); a sample (i, j) weighs w(i) * w(j). */
SPECTRASIFT_FN float sift_window_weight(int k, float scale) { return SIFT_EXPF((float)(k * k) * scale); }

/* The histogram bin (0..35) of a gradient direction in degrees [0, 360]. */
SPECTRASIFT_FN int sift_orientation_bin(float theta_deg) {
  int bin = sift_round(theta_deg * ((float)SIFT_ORI_HIST_BINS / 360.0f));
  if (bin >= SIFT_ORI_HIST_BINS) bin -= SIFT_ORI_HIST_BINS;
  if (bin < 0) bin += SIFT_ORI_HIST_BINS;
  return bin;
}

/* Bin i of the smoothed histogram from raw bins i-2 .. i+2: circular [1 4 6 4 1]/16. */
SPECTRASIFT_FN float sift_orientation_smooth_bin(float m2, float m1, float c, float p1, float p2) {
  return (m2 + p2) * (1.0f / 16.0f) + (m1 + p1) * (4.0f / 16.0f) + c * (6.0f / 16.0f);
}

/* 1 when a bin of value h with circular neighbours hl, hr gives a keypoint: strictly above both and
 * >= threshold (0.8 * the maximum). */
SPECTRASIFT_FN int sift_orientation_peak_test(float hl, float h, float hr, float threshold) {
  return h > hl && h > hr && h >= threshold;
}

/* The keypoint angle in degrees [0, 360) of peak bin j of value h: parabolic interpolation of the bin
 * through (hl, h, hr), then 360 - 10 b. */
SPECTRASIFT_FN float sift_orientation_interpolate(float hl, float h, float hr, int j) {
  const int n = SIFT_ORI_HIST_BINS;
  float bin = (float)j + 0.5f * (hl - hr) / (hl - 2.0f * h + hr);
  bin = bin < 0.0f ? (float)n + bin : (bin >= (float)n ? bin - (float)n : bin);
  float angle = 360.0f - (360.0f / (float)n) * bin;
  const float d = angle - 360.0f;
  if ((d < 0.0f ? -d : d) < SIFT_FLT_EPSILON) angle = 0.0f;
  return angle;
}

/* The array forms, in the address-space variants of dialect.h (every array in the same space):
 *   sift_orientation_smooth(raw[36], hist[36]): smooths raw into hist, returns the maximum of hist;
 *   sift_orientation_is_peak(hist, j, threshold) and sift_orientation_peak_angle(hist, j): the two above
 *   for bin j of the smoothed histogram. */
#define SIFT_DEFINE_ORIENTATION_ARRAYS(SUFFIX, AS)                                                        \
  SPECTRASIFT_FN float sift_orientation_smooth##SUFFIX(AS const float* raw, AS float* hist) {            \
    const int n = SIFT_ORI_HIST_BINS;                                                                    \
    float maxval = 0.0f;                                                                                 \
    for (int i = 0; i < n; ++i) {                                                                        \
      hist[i] = sift_orientation_smooth_bin(raw[(i + n - 2) % n], raw[(i + n - 1) % n], raw[i],          \
                                            raw[(i + 1) % n], raw[(i + 2) % n]);                         \
      maxval = (i == 0 || hist[i] > maxval) ? hist[i] : maxval;                                          \
    }                                                                                                    \
    return maxval;                                                                                       \
  }                                                                                                      \
  SPECTRASIFT_FN int sift_orientation_is_peak##SUFFIX(AS const float* hist, int j, float threshold) {    \
    const int n = SIFT_ORI_HIST_BINS;                                                                    \
    return sift_orientation_peak_test(hist[j > 0 ? j - 1 : n - 1], hist[j], hist[j < n - 1 ? j + 1 : 0], \
                                      threshold);                                                        \
  }                                                                                                      \
  SPECTRASIFT_FN float sift_orientation_peak_angle##SUFFIX(AS const float* hist, int j) {                \
    const int n = SIFT_ORI_HIST_BINS;                                                                    \
    return sift_orientation_interpolate(hist[j > 0 ? j - 1 : n - 1], hist[j], hist[j < n - 1 ? j + 1 : 0], j); \
  }
SPECTRASIFT_AS_VARIANTS(SIFT_DEFINE_ORIENTATION_ARRAYS)
#undef SIFT_DEFINE_ORIENTATION_ARRAYS

/* The device orientation stage, per point and per sample (backend/cuda/kernels/sift_orientation.cuh and
 * backend/opencl/kernels/sift_orientation.cl). */

/* The window radius of a point (at most what the host sized ex_cap for: the plan's largest). */
SPECTRASIFT_FN int sift_orientation_radius(SiftKeypoint kp, int ex_cap) {
  return sift_min_i(sift_round(SIFT_ORI_RADIUS * kp.sigma_octave), (ex_cap - 1) / 2);
}

/* The window weight of offset k (sift_window_weight with the host's exp). */
SPECTRASIFT_FN float sift_orientation_weight(SiftKeypoint kp, int k) {
  return sift_dev_exp((float)(k * k) * sift_orientation_window_scale(SIFT_ORI_SIG_FCTR * kp.sigma_octave));
}

/* The bin of the gradient at column x of the level row mid (a row with rows above and below, width w), and
 * its contribution (wi * wj) * sqrt(dx^2 + dy^2) in *val, wi and wj the window weights of its offsets. */
SPECTRASIFT_FN int sift_orientation_gradient(SPECTRASIFT_CONST_GLOBAL float* mid, int w, int x, float wi, float wj,
                                             float* val) {
  const float dx = mid[x + 1] - mid[x - 1];
  const float dy = mid[x - w] - mid[x + w];
  const int bin = sift_orientation_bin(sift_atan2_deg(dy, dx));
  *val = (wi * wj) * SIFT_SQRTF(dx * dx + dy * dy);
  return bin;
}

/* Sample (i, x) of point (r, c)'s window on level img (w x h), ex the window weights (ex[k + radius] = w(k)):
 * its bin and its contribution in *val, or -1 (and 0) on the level's outer rows. */
#define SIFT_DEFINE_ORIENTATION_SAMPLE(SUFFIX, AS)                                                        \
  SPECTRASIFT_FN int sift_orientation_sample##SUFFIX(SPECTRASIFT_CONST_GLOBAL float* img, int w, int h, int r, \
                                                     int c, AS const float* ex, int radius, int i, int x,   \
                                                     float* val) {                                       \
    int bin = -1;                                                                                        \
    *val = 0.0f;                                                                                         \
    const int y = r + i;                                                                                 \
    if (y > 0 && y < h - 1)                                                                              \
      bin = sift_orientation_gradient(img + (size_t)y * (size_t)w, w, x, ex[i + radius], ex[x - c + radius], val); \
    return bin;                                                                                          \
  }
SPECTRASIFT_AS_VARIANTS(SIFT_DEFINE_ORIENTATION_SAMPLE)
#undef SIFT_DEFINE_ORIENTATION_SAMPLE

#endif /* SPECTRASIFT_NUMERIC_SIFT_ORIENTATION_H */

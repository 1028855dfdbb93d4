/* sift_orientation.h — orientation assignment (notes §7), per keypoint.
 *
 * Samples: every pixel (x, y) = (c + j, r + i), |i|, |j| <= R = round(4.5 sigma), that is not on the
 * image's outer ring, with dx = L(y, x+1) - L(y, x-1), dy = L(y-1, x) - L(y+1, x) (brighter upwards is
 * positive), weight exp(-(i^2 + j^2) / (2 (1.5 sigma)^2)) * |(dx, dy)|, into bin round(theta / 10) mod 36.
 * The raw histogram is smoothed once with the circular kernel [1 4 6 4 1]/16; each strict local maximum
 * that reaches 0.8 of the highest bin gives one keypoint, its bin refined by a parabola through the three
 * bins, and angle = 360 - 10 * bin (OpenCV's convention, y down). */
#ifndef SPECTRASIFT_NUMERIC_SIFT_ORIENTATION_H
#define SPECTRASIFT_NUMERIC_SIFT_ORIENTATION_H

#include "sift_common.h"

/* The histogram bin (0..35) of a gradient direction in degrees [0, 360]. */
SPECTRASIFT_FN int sift_orientation_bin(float theta_deg) {
  int bin = sift_round(theta_deg * ((float)SIFT_ORI_HIST_BINS / 360.0f));
  if (bin >= SIFT_ORI_HIST_BINS) bin -= SIFT_ORI_HIST_BINS;
  if (bin < 0) bin += SIFT_ORI_HIST_BINS;
  return bin;
}

/* Circular [1 4 6 4 1]/16 smoothing of raw[36] into hist[36]; returns the maximum of hist. */
SPECTRASIFT_FN float sift_orientation_smooth(const float* raw, float* hist) {
  const int n = SIFT_ORI_HIST_BINS;
  float maxval = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float m2 = raw[(i + n - 2) % n];
    const float m1 = raw[(i + n - 1) % n];
    const float p1 = raw[(i + 1) % n];
    const float p2 = raw[(i + 2) % n];
    hist[i] = (m2 + p2) * (1.0f / 16.0f) + (m1 + p1) * (4.0f / 16.0f) + raw[i] * (6.0f / 16.0f);
    maxval = (i == 0 || hist[i] > maxval) ? hist[i] : maxval;
  }
  return maxval;
}

/* 1 when bin j of the smoothed histogram is a peak that gives a keypoint (strictly above both
 * circular neighbours and >= threshold = 0.8 * max). */
SPECTRASIFT_FN int sift_orientation_is_peak(const float* hist, int j, float threshold) {
  const int n = SIFT_ORI_HIST_BINS;
  const float hl = hist[j > 0 ? j - 1 : n - 1];
  const float hr = hist[j < n - 1 ? j + 1 : 0];
  return hist[j] > hl && hist[j] > hr && hist[j] >= threshold;
}

/* The keypoint angle in degrees [0, 360) of peak j: parabolic interpolation of the bin, then 360 - 10 b. */
SPECTRASIFT_FN float sift_orientation_peak_angle(const float* hist, int j) {
  const int n = SIFT_ORI_HIST_BINS;
  const float hl = hist[j > 0 ? j - 1 : n - 1];
  const float hr = hist[j < n - 1 ? j + 1 : 0];
  float bin = (float)j + 0.5f * (hl - hr) / (hl - 2.0f * hist[j] + hr);
  bin = bin < 0.0f ? (float)n + bin : (bin >= (float)n ? bin - (float)n : bin);
  float angle = 360.0f - (360.0f / (float)n) * bin;
  const float d = angle - 360.0f;
  if ((d < 0.0f ? -d : d) < SIFT_FLT_EPSILON) angle = 0.0f;
  return angle;
}

#endif /* SPECTRASIFT_NUMERIC_SIFT_ORIENTATION_H */

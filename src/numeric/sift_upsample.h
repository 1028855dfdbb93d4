/* sift_upsample.h — the doubled first octave (octave -1), per output pixel: OpenCV's INTER_LINEAR resize by
 * 2, output pixel (X, Y) sampling input ((X + 0.5) / 2 - 0.5, (Y + 0.5) / 2 - 0.5), edges replicated, rows
 * blended after the columns in the CPU backend's float operations (its upsample_row), so that a device
 * gives the same bits. */
#ifndef SPECTRASIFT_NUMERIC_SIFT_UPSAMPLE_H
#define SPECTRASIFT_NUMERIC_SIFT_UPSAMPLE_H

#include "sift_common.h"

/* Column x (0 .. 2w - 1) of input row `row` (w pixels) doubled with half-pixel bilinear weights. */
SPECTRASIFT_FN float sift_upsampled_at(SPECTRASIFT_CONST_GLOBAL float* row, int w, int x) {
  if (x == 0) return row[0];
  if (x == 2 * w - 1) return row[w - 1];
  const int k = x / 2;
  if ((x & 1) == 0) return row[k - 1] * 0.25f + row[k] * 0.75f;
  return row[k] * 0.75f + row[k + 1] * 0.25f;
}

/* Output pixel (x, y), x < 2w, y < 2h, of the doubled w x h image `in`. */
SPECTRASIFT_FN float sift_upsampled_pixel(SPECTRASIFT_CONST_GLOBAL float* in, int w, int h, int x, int y) {
  const int h2 = 2 * h;
  const int k = y / 2;
  if (y == 0 || y == h2 - 1) return sift_upsampled_at(in + (size_t)k * (size_t)w, w, x);
  const int ya = (y % 2 == 0) ? k - 1 : k;
  const float wa = (y % 2 == 0) ? 0.25f : 0.75f;
  const float a = sift_upsampled_at(in + (size_t)ya * (size_t)w, w, x);
  const float b = sift_upsampled_at(in + (size_t)(ya + 1) * (size_t)w, w, x);
  return a * wa + b * (1.0f - wa);
}

#endif /* SPECTRASIFT_NUMERIC_SIFT_UPSAMPLE_H */

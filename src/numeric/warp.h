/* warp.h — the bilinear warp of one output pixel, in the common subset of C++, CUDA and OpenCL C (OpenCL
 * needs cl_khr_fp64): the CPU (backend/cpu/warp.cpp), CUDA and OpenCL warps give the same bits.
 *
 * Output (FIXED) pixel (x, y) samples MOVING at (sx, sy) = (u / w, v / w), (u, v, w) = inv (x, y, 1), inv
 * row-major (FIXED -> MOVING). When |w| <= 1e-12 or (sx, sy) lies outside [-0.5, width - 0.5] x
 * [-0.5, height - 0.5] the output stays 0. Otherwise the four neighbours (floor(sx) + {0, 1},
 * floor(sy) + {0, 1}) have their indices clamped to the image (the border half pixel repeats the edge)
 * and are mixed with the weights ax = sx - floor(sx), ay = sy - floor(sy), in double:
 *   top = p00 + ax (p01 - p00), bottom = p10 + ax (p11 - p10), value = top + ay (bottom - top).
 * Integer samples are rounded to nearest (ties to even) and clamped to their range; floats are rounded
 * once to float. Every operation is written out in order (no fused multiply-add: the library is built
 * with contraction off on every backend). */
#ifndef SPECTRASIFT_NUMERIC_WARP_H
#define SPECTRASIFT_NUMERIC_WARP_H

#include "dialect.h"

/* Where one output pixel reads: the clamped neighbour indices and the weights. */
typedef struct {
  int x0, x1, y0, y1;
  double ax, ay;
} ss_warp_tap;

SPECTRASIFT_FN int ss_warp_clamp(int v, int hi) { return v < 0 ? 0 : (v > hi ? hi : v); }

/* The tap of output pixel (x, y) for a width x height MOVING image; 0 when the pixel stays 0. */
SPECTRASIFT_FN int ss_warp_tap_at(const double* inv, int x, int y, int width, int height, ss_warp_tap* t) {
  const double dx = (double)x, dy = (double)y;
  const double wz = inv[6] * dx + inv[7] * dy + inv[8];
  if (!(wz > 1e-12 || wz < -1e-12)) return 0;
  const double sx = (inv[0] * dx + inv[1] * dy + inv[2]) / wz;
  const double sy = (inv[3] * dx + inv[4] * dy + inv[5]) / wz;
  if (!(sx >= -0.5 && sx <= (double)width - 0.5 && sy >= -0.5 && sy <= (double)height - 0.5)) return 0;
  const double fx = floor(sx), fy = floor(sy);
  t->ax = sx - fx;
  t->ay = sy - fy;
  const int ix = (int)fx, iy = (int)fy;
  t->x0 = ss_warp_clamp(ix, width - 1);
  t->x1 = ss_warp_clamp(ix + 1, width - 1);
  t->y0 = ss_warp_clamp(iy, height - 1);
  t->y1 = ss_warp_clamp(iy + 1, height - 1);
  return 1;
}

/* The bilinear value of the four neighbours (p01 right of p00, p10 below it). */
SPECTRASIFT_FN double ss_warp_mix(double p00, double p01, double p10, double p11, double ax, double ay) {
  const double top = p00 + ax * (p01 - p00);
  const double bottom = p10 + ax * (p11 - p10);
  return top + ay * (bottom - top);
}

/* An integer sample's value: v rounded to nearest, ties to even (the default rounding mode), clamped to
 * [0, max]. */
SPECTRASIFT_FN double ss_warp_round(double v, double max) {
  const double r = rint(v);
  return r < 0.0 ? 0.0 : (max < r ? max : r);
}

#endif /* SPECTRASIFT_NUMERIC_WARP_H */

/* homography.h — per-correspondence residual of a 3x3 model, in the common subset of C++, CUDA and
 * OpenCL C (OpenCL needs cl_khr_fp64 for the double version; a backend without fp64 may instantiate
 * the same formula in float with a documented tolerance).
 *
 * h is row-major and maps a MOVING point m to the FIXED image: (u, v, w) = h (m.x, m.y, 1),
 * projected = (u / w, v / w). The residual is the squared one-sided transfer error
 *   e2 = (u / w - f.x)^2 + (v / w - f.y)^2,
 * and +inf-like (1e300) when |w| is below 1e-12 (the point maps to the line at infinity), so that
 * such points are never inliers. The operations are written out in a fixed order (no fused
 * multiply-add is assumed: the library is built with -ffp-contract=off). */
#ifndef SPECTRASIFT_NUMERIC_HOMOGRAPHY_H
#define SPECTRASIFT_NUMERIC_HOMOGRAPHY_H

#include "dialect.h"

SPECTRASIFT_FN double ss_transfer_error2(const double* h, double mx, double my, double fx, double fy) {
  const double w = h[6] * mx + h[7] * my + h[8];
  if (!(w > 1e-12 || w < -1e-12)) return 1e300;
  const double u = (h[0] * mx + h[1] * my + h[2]) / w;
  const double v = (h[3] * mx + h[4] * my + h[5]) / w;
  const double dx = u - fx;
  const double dy = v - fy;
  return dx * dx + dy * dy;
}

#endif /* SPECTRASIFT_NUMERIC_HOMOGRAPHY_H */

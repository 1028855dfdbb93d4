// Affine estimator: least squares on centred points (exact for a minimal sample of 3).
#include <cmath>

#include "core/estimators/estimators.hpp"

namespace spectrasift::geometry {

bool affine_ls(const Point2* m, const Point2* f, int n, Mat3& a) {
  const PairCentroids centre = pair_centroids(m, f, n);
  const double mx = centre.mx, my = centre.my, fx = centre.fx, fy = centre.fy;
  double sxx = 0, sxy = 0, syy = 0, uxx = 0, uxy = 0, uyx = 0, uyy = 0;
  for (int i = 0; i < n; ++i) {
    const double x = m[i].x - mx, y = m[i].y - my, u = f[i].x - fx, v = f[i].y - fy;
    sxx += x * x, sxy += x * y, syy += y * y;
    uxx += u * x, uxy += u * y, uyx += v * x, uyy += v * y;
  }
  const double det = sxx * syy - sxy * sxy;
  if (!(det > 1e-12 * (sxx + syy) * (sxx + syy))) return false;
  // [a b; c d] = [uxx uxy; uyx uyy] * inverse([sxx sxy; sxy syy])
  const double i00 = syy / det, i01 = -sxy / det, i11 = sxx / det;
  const double A = uxx * i00 + uxy * i01, B = uxx * i01 + uxy * i11;
  const double C = uyx * i00 + uyy * i01, D = uyx * i01 + uyy * i11;
  a = {A, B, fx - A * mx - B * my, C, D, fy - C * mx - D * my, 0, 0, 1};
  return all_finite(a);
}

}  // namespace spectrasift::geometry

// Similarity estimator: least-squares rotation, scale and translation (exact for a minimal sample of 2).
#include <cmath>

#include "core/estimators/estimators.hpp"

namespace spectrasift::geometry {

bool similarity_ls(const Point2* m, const Point2* f, int n, Mat3& a) {
  const PairCentroids centre = pair_centroids(m, f, n);
  const double mx = centre.mx, my = centre.my, fx = centre.fx, fy = centre.fy;
  double ss = 0, sc = 0, sn = 0;
  for (int i = 0; i < n; ++i) {
    const double x = m[i].x - mx, y = m[i].y - my, u = f[i].x - fx, v = f[i].y - fy;
    ss += x * x + y * y;
    sc += x * u + y * v;
    sn += x * v - y * u;
  }
  if (!(ss > 1e-12)) return false;
  const double c = sc / ss, s = sn / ss;  // c = scale cos(theta), s = scale sin(theta)
  a = {c, -s, fx - c * mx + s * my, s, c, fy - s * mx - c * my, 0, 0, 1};
  return all_finite(a) && (c * c + s * s) > 1e-24;
}

}  // namespace spectrasift::geometry

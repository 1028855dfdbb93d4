// Degeneracy checks of samples and point sets, shared by the estimators.
#include <cmath>

#include "core/estimators/estimators.hpp"

namespace spectrasift::geometry {

double cross(Point2 a, Point2 b, Point2 c) { return (b.x - a.x) * (c.y - a.y) - (b.y - a.y) * (c.x - a.x); }

bool has_coincident(const Point2* p, int n) {
  for (int i = 0; i < n; ++i)
    for (int j = i + 1; j < n; ++j)
      if (std::hypot(p[i].x - p[j].x, p[i].y - p[j].y) < 1e-3) return true;
  return false;
}

bool nearly_collinear(Point2 a, Point2 b, Point2 c) {
  const double lab = std::hypot(b.x - a.x, b.y - a.y), lac = std::hypot(c.x - a.x, c.y - a.y);
  return std::fabs(cross(a, b, c)) <= 0.01 * lab * lac;
}

bool all_collinear(const std::vector<Point2>& p) {
  const std::size_t n = p.size();
  double mx = 0, my = 0;
  for (const auto& q : p) mx += q.x, my += q.y;
  mx /= double(n), my /= double(n);
  double sxx = 0, sxy = 0, syy = 0;
  for (const auto& q : p) {
    const double x = q.x - mx, y = q.y - my;
    sxx += x * x, sxy += x * y, syy += y * y;
  }
  const double tr = sxx + syy, det = sxx * syy - sxy * sxy;
  return !(tr > 1e-12) || det <= 1e-8 * tr * tr;
}

}  // namespace spectrasift::geometry

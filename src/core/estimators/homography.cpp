// Homography estimators: the exact 4-point solver and the minimal-sample orientation checks (maths in
// include/spectrasift/geometry.hpp). The least-squares DLT and Levenberg-Marquardt are in refit.cpp.
#include <algorithm>
#include <cmath>

#include "core/estimators/estimators.hpp"
#include "numeric/homography.h"

namespace spectrasift::geometry {

bool homography_4pt(const Point2* m, const Point2* f, Mat3& h) {
  double a[8][8], b[8], x[8];
  for (int i = 0; i < 4; ++i) {
    const double X = m[i].x, Y = m[i].y, u = f[i].x, v = f[i].y;
    const double r0[8] = {X, Y, 1, 0, 0, 0, -u * X, -u * Y};
    const double r1[8] = {0, 0, 0, X, Y, 1, -v * X, -v * Y};
    for (int k = 0; k < 8; ++k) {
      a[2 * i][k] = r0[k];
      a[2 * i + 1][k] = r1[k];
    }
    b[2 * i] = u;
    b[2 * i + 1] = v;
  }
  if (!solve<8>(a, b, x)) return false;
  h = {x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7], 1.0};
  return true;
}

bool homography_minimal(const Point2* m, const Point2* f, const Normaliser& nm, const Normaliser& nf, Mat3& h) {
  // Every triple must be non-degenerate, and its orientation must change the same way between the
  // images for all four triples (a homography of a plane seen from its front side never folds the
  // quadrilateral; mirrored images flip all four consistently).
  static constexpr int kTriples[4][3] = {{0, 1, 2}, {1, 2, 3}, {2, 3, 0}, {3, 0, 1}};
  int sign = 0;
  for (const auto& t : kTriples) {
    if (nearly_collinear(m[t[0]], m[t[1]], m[t[2]]) || nearly_collinear(f[t[0]], f[t[1]], f[t[2]])) return false;
    const int sg = (cross(m[t[0]], m[t[1]], m[t[2]]) > 0) == (cross(f[t[0]], f[t[1]], f[t[2]]) > 0) ? 1 : -1;
    if (sign == 0) sign = sg;
    else if (sg != sign) return false;
  }
  Point2 mn[4], fn[4];
  for (int i = 0; i < 4; ++i) {
    mn[i] = nm.apply(m[i]);
    fn[i] = nf.apply(f[i]);
  }
  Mat3 hn;
  if (!homography_4pt(mn, fn, hn)) return false;
  h = mul(mul(nf.inverse(), hn), nm.matrix());
  if (!normalise(h)) return false;
  // The sample's points must all lie on the same side of the line mapped to infinity.
  int wsign = 0;
  for (int i = 0; i < 4; ++i) {
    const double w = h[6] * m[i].x + h[7] * m[i].y + h[8];
    const int sg = w > 0 ? 1 : -1;
    if (wsign == 0) wsign = sg;
    else if (sg != wsign) return false;
  }
  return true;
}

}  // namespace spectrasift::geometry

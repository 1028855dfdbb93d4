// Homography estimators: the exact 4-point solver, the normalised DLT, the Levenberg-Marquardt
// refinement, and the minimal-sample orientation checks (maths in include/spectrasift/geometry.hpp).
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

bool homography_dlt(const std::vector<Point2>& m, const std::vector<Point2>& f, Mat3& h) {
  double ata[9][9] = {};
  for (std::size_t i = 0; i < m.size(); ++i) {
    const double X = m[i].x, Y = m[i].y, u = f[i].x, v = f[i].y;
    const double r0[9] = {X, Y, 1, 0, 0, 0, -u * X, -u * Y, -u};
    const double r1[9] = {0, 0, 0, X, Y, 1, -v * X, -v * Y, -v};
    for (int p = 0; p < 9; ++p)
      for (int q = p; q < 9; ++q) ata[p][q] += r0[p] * r0[q] + r1[p] * r1[q];
  }
  for (int p = 0; p < 9; ++p)
    for (int q = 0; q < p; ++q) ata[p][q] = ata[q][p];
  double e[9];
  smallest_eigenvector9(ata, e);
  for (int k = 0; k < 9; ++k) h[k] = e[k];
  return normalise(h);
}

/// Points are normalised; the normalisation of FIXED is isotropic, so the cost is the pixel cost
/// times a constant and the optimum is the same.
void homography_lm(const std::vector<Point2>& m, const std::vector<Point2>& f, Mat3& h) {
  if (!(std::fabs(h[8]) > 1e-12)) return;
  for (double& v : h) v /= h[8];
  auto cost = [&](const Mat3& g) {
    double c = 0;
    for (std::size_t i = 0; i < m.size(); ++i) c += ss_transfer_error2(g.data(), m[i].x, m[i].y, f[i].x, f[i].y);
    return c;
  };
  double current = cost(h);
  double lambda = 1e-3;
  for (int it = 0; it < 30 && current > 0; ++it) {
    double jtj[8][8] = {}, jtr[8] = {};
    for (std::size_t i = 0; i < m.size(); ++i) {
      const double X = m[i].x, Y = m[i].y;
      const double w = h[6] * X + h[7] * Y + 1.0;
      if (!(std::fabs(w) > 1e-12)) continue;
      const double u = (h[0] * X + h[1] * Y + h[2]) / w, v = (h[3] * X + h[4] * Y + h[5]) / w;
      const double ju[8] = {X / w, Y / w, 1 / w, 0, 0, 0, -X * u / w, -Y * u / w};
      const double jv[8] = {0, 0, 0, X / w, Y / w, 1 / w, -X * v / w, -Y * v / w};
      const double ru = u - f[i].x, rv = v - f[i].y;
      for (int p = 0; p < 8; ++p) {
        jtr[p] += ju[p] * ru + jv[p] * rv;
        for (int q = p; q < 8; ++q) jtj[p][q] += ju[p] * ju[q] + jv[p] * jv[q];
      }
    }
    for (int p = 0; p < 8; ++p)
      for (int q = 0; q < p; ++q) jtj[p][q] = jtj[q][p];
    bool improved = false;
    for (int attempt = 0; attempt < 10; ++attempt) {
      double a[8][8], b[8], d[8];
      for (int p = 0; p < 8; ++p) {
        for (int q = 0; q < 8; ++q) a[p][q] = jtj[p][q];
        a[p][p] += lambda * (jtj[p][p] > 0 ? jtj[p][p] : 1.0);
        b[p] = -jtr[p];
      }
      if (!solve<8>(a, b, d)) {
        lambda *= 10;
        continue;
      }
      Mat3 g = h;
      for (int p = 0; p < 8; ++p) g[p] += d[p];
      const double c = cost(g);
      if (c < current) {
        const double gain = (current - c) / current;
        h = g;
        current = c;
        lambda = std::max(lambda / 10, 1e-12);
        improved = gain > 1e-12;
        break;
      }
      lambda *= 10;
    }
    if (!improved) break;
  }
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

bool homography_refit(std::vector<Point2>& m, std::vector<Point2>& f, bool nonlinear, Mat3& h) {
  const int n = int(m.size());
  if (all_collinear(m) || all_collinear(f)) return false;
  Normaliser nm, nf;
  if (!nm.fit(m.data(), nullptr, n) || !nf.fit(f.data(), nullptr, n)) return false;
  for (int i = 0; i < n; ++i) {
    m[std::size_t(i)] = nm.apply(m[std::size_t(i)]);
    f[std::size_t(i)] = nf.apply(f[std::size_t(i)]);
  }
  Mat3 hn;
  if (!homography_dlt(m, f, hn)) return false;
  if (nonlinear) homography_lm(m, f, hn);
  h = mul(mul(nf.inverse(), hn), nm.matrix());
  return normalise(h);
}

}  // namespace spectrasift::geometry

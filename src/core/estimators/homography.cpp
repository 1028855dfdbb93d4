// Homography estimators: the exact 4-point solver, the normalised DLT, the Levenberg-Marquardt
// refinement, and the minimal-sample orientation checks (maths in include/spectrasift/geometry.hpp).
#include <algorithm>
#include <cmath>

#include "core/estimators/estimators.hpp"
#include "numeric/homography.h"

namespace spectrasift::geometry {

namespace {
/// Two doubles operated on lane by lane (GCC/Clang vector extension: SSE2 on x86-64, NEON on arm64).
typedef double V2 __attribute__((vector_size(16)));
}  // namespace

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

// The rows of a pair, r0 = (X, Y, 1, 0, 0, 0, -uX, -uY, -u) and r1 = (0, 0, 0, X, Y, 1, -vX, -vY, -v), have
// fixed zeros, so A^T A has four kinds of entry: (0..2, 0..2) from r0 alone, equal term by term to (3..5, 3..5)
// from r1 alone; (0..2, 6..8) from r0 alone; (3..5, 6..8) from r1 alone; (6..8, 6..8) from both; and
// (0..2, 3..5) is zero. Only the products that can be non-zero are accumulated, each in point order with the
// expression of the full 9 x 9 loop: a product that is exactly zero leaves a sum's bits unchanged (a sum that
// starts at +0 never becomes -0), so the matrix is the full loop's bits at a quarter of the work.
bool homography_dlt(const std::vector<Point2>& m, const std::vector<Point2>& f, Mat3& h) {
  // Named scalars, not small arrays: the compiler builds vectors of array elements through the stack, and
  // those reloads stall store forwarding (3x slower). x = (X, Y, 1), a = -u x, b = -v x; X * 1 = X exactly.
  double xx[6] = {}, xu[9] = {}, xv[9] = {}, uv[6] = {};  // upper triangles row by row; 3 x 3 blocks row-major
  for (std::size_t i = 0; i < m.size(); ++i) {
    const double X = m[i].x, Y = m[i].y, u = f[i].x, v = f[i].y;
    const double a0 = -u * X, a1 = -u * Y, a2 = -u, b0 = -v * X, b1 = -v * Y, b2 = -v;
    xx[0] += X * X, xx[1] += X * Y, xx[2] += X, xx[3] += Y * Y, xx[4] += Y, xx[5] += 1.0;
    xu[0] += X * a0, xu[1] += X * a1, xu[2] += X * a2, xu[3] += Y * a0, xu[4] += Y * a1, xu[5] += Y * a2;
    xu[6] += a0, xu[7] += a1, xu[8] += a2;
    xv[0] += X * b0, xv[1] += X * b1, xv[2] += X * b2, xv[3] += Y * b0, xv[4] += Y * b1, xv[5] += Y * b2;
    xv[6] += b0, xv[7] += b1, xv[8] += b2;
    uv[0] += a0 * a0 + b0 * b0, uv[1] += a0 * a1 + b0 * b1, uv[2] += a0 * a2 + b0 * b2;
    uv[3] += a1 * a1 + b1 * b1, uv[4] += a1 * a2 + b1 * b2, uv[5] += a2 * a2 + b2 * b2;
  }
  double ata[9][9] = {};
  for (int p = 0, k = 0; p < 3; ++p)
    for (int q = p; q < 3; ++q, ++k) {
      ata[p][q] = ata[3 + p][3 + q] = xx[k];
      ata[6 + p][6 + q] = uv[k];
    }
  for (int p = 0; p < 3; ++p)
    for (int q = 0; q < 3; ++q) {
      ata[p][6 + q] = xu[3 * p + q];
      ata[3 + p][6 + q] = xv[3 * p + q];
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
    // J^T J and J^T r in point order. The Jacobian rows ju = (X/w, Y/w, 1/w, 0, 0, 0, -Xu/w, -Yu/w) and
    // jv = (0, 0, 0, X/w, Y/w, 1/w, -Xv/w, -Yv/w) have fixed zeros: as in homography_dlt, only the products
    // that can be non-zero are accumulated (the same bits as the full 8 x 8 loop). The pass is bound by its
    // nine divisions per pair; the u and v halves go as the two lanes of a 2-double vector (lane-wise the same
    // operations, so the same bits), which takes five division instructions instead of nine.
    double jtj[8][8] = {}, jtr[8] = {};
    V2 gg[3] = {}, rgh[3] = {}, guv[6] = {};  // (g0g0, g0g1), (g1g1, g1g2), (g0g2, g2g2); (rg, rh); (gu, gv)
    double uu[3] = {}, rt[2] = {};
    for (std::size_t i = 0; i < m.size(); ++i) {
      const double X = m[i].x, Y = m[i].y;
      const double w = h[6] * X + h[7] * Y + 1.0;
      if (!(std::fabs(w) > 1e-12)) continue;
      const V2 ww = {w, w};
      const V2 uv = V2{h[0] * X + h[1] * Y + h[2], h[3] * X + h[4] * Y + h[5]} / ww;  // (u, v)
      const V2 g01 = V2{X, Y} / ww;                                                    // (X/w, Y/w)
      const double g0 = g01[0], g1 = g01[1], g2 = 1 / w;
      const V2 ab0 = V2{-X, -X} * uv / ww, ab1 = V2{-Y, -Y} * uv / ww;  // (-Xu/w, -Xv/w), (-Yu/w, -Yv/w)
      const V2 r = uv - V2{f[i].x, f[i].y};                             // (ru, rv)
      gg[0] += V2{g0, g0} * g01, gg[1] += V2{g1, g1} * V2{g1, g2}, gg[2] += V2{g0, g2} * V2{g2, g2};
      rgh[0] += V2{g0, g0} * r, rgh[1] += V2{g1, g1} * r, rgh[2] += V2{g2, g2} * r;
      const double gp[3] = {g0, g1, g2};
      for (int p = 0; p < 3; ++p) {
        guv[2 * p] += V2{gp[p], gp[p]} * ab0;
        guv[2 * p + 1] += V2{gp[p], gp[p]} * ab1;
      }
      const V2 t0 = ab0 * r, t1 = ab1 * r, s00 = ab0 * ab0, s01 = ab0 * ab1, s11 = ab1 * ab1;
      rt[0] += t0[0] + t0[1], rt[1] += t1[0] + t1[1];
      uu[0] += s00[0] + s00[1], uu[1] += s01[0] + s01[1], uu[2] += s11[0] + s11[1];
    }
    const double ggs[6] = {gg[0][0], gg[0][1], gg[2][0], gg[1][0], gg[1][1], gg[2][1]};  // g0g0 g0g1 g0g2 g1g1 g1g2 g2g2
    for (int p = 0, k = 0; p < 3; ++p) {
      jtr[p] = rgh[p][0];
      jtr[3 + p] = rgh[p][1];
      for (int q = p; q < 3; ++q, ++k) jtj[p][q] = jtj[3 + p][3 + q] = ggs[k];
      for (int q = 0; q < 2; ++q) {
        jtj[p][6 + q] = guv[2 * p + q][0];
        jtj[3 + p][6 + q] = guv[2 * p + q][1];
      }
    }
    for (int p = 0, k = 0; p < 2; ++p) {
      jtr[6 + p] = rt[p];
      for (int q = p; q < 2; ++q, ++k) jtj[6 + p][6 + q] = uu[k];
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

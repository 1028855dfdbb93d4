// Robust model fitting: argument checks, minimal and least-squares solvers, the RANSAC driver and its
// local optimisation, the final refinement, and the warp dispatch. The maths is documented in
// include/spectrasift/geometry.hpp; the per-point scoring runs in the backend (backend/cpu/ransac.cpp).
#include "spectrasift/geometry.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <limits>
#include <string>

#include "core/context_impl.hpp"
#include "core/dispatch.hpp"
#include "numeric/homography.h"
#include "numeric/philox.h"
#include "spectrasift/error.hpp"

namespace spectrasift {

using Mat3 = std::array<double, 9>;

const char* to_string(GeometryModel m) noexcept {
  switch (m) {
    case GeometryModel::kHomography: return "homography";
    case GeometryModel::kAffine: return "affine";
    case GeometryModel::kSimilarity: return "similarity";
  }
  return "?";
}

GeometryModel parse_geometry_model(const std::string& name) {
  std::string s = name;
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  if (s == "homography" || s == "h") return GeometryModel::kHomography;
  if (s == "affine") return GeometryModel::kAffine;
  if (s == "similarity") return GeometryModel::kSimilarity;
  throw Error(ErrorCode::kInvalidArgument,
              "unknown model '" + name + "' (expected homography, affine or similarity)");
}

int minimal_sample_size(GeometryModel m) noexcept {
  switch (m) {
    case GeometryModel::kHomography: return 4;
    case GeometryModel::kAffine: return 3;
    case GeometryModel::kSimilarity: return 2;
  }
  return 4;
}

void RansacOptions::check() const {
  auto bad = [](const std::string& what) { throw Error(ErrorCode::kInvalidArgument, "RANSAC " + what); };
  if (!(threshold_px > 0.0) || !std::isfinite(threshold_px))
    bad("threshold must be a positive number of pixels, got " + std::to_string(threshold_px));
  if (!(confidence > 0.0 && confidence < 1.0)) bad("confidence must be in (0, 1), got " + std::to_string(confidence));
  if (max_iterations < 1) bad("max_iterations must be >= 1, got " + std::to_string(max_iterations));
  if (min_iterations < 0 || min_iterations > max_iterations)
    bad("min_iterations must be in [0, max_iterations], got " + std::to_string(min_iterations));
  if (min_inliers < 0) bad("min_inliers must be >= 0 (0 = automatic), got " + std::to_string(min_inliers));
  if (model != GeometryModel::kHomography && model != GeometryModel::kAffine && model != GeometryModel::kSimilarity)
    bad("model is not one of homography, affine, similarity");
}

int RansacOptions::required_inliers() const noexcept {
  const int s = minimal_sample_size(model);
  if (min_inliers > 0) return std::max(min_inliers, s);
  return std::max(2 * s, s + 2);
}

// ---- small dense linear algebra -------------------------------------------------------------------

namespace {

/// Solves the n x n system A x = b (A row-major, overwritten) by Gaussian elimination with partial
/// pivoting. Returns false when a pivot is below 1e-12 times the largest entry (singular).
template <int N>
bool solve(double (&a)[N][N], double (&b)[N], double (&x)[N]) {
  double scale = 0;
  for (int r = 0; r < N; ++r)
    for (int c = 0; c < N; ++c) scale = std::max(scale, std::fabs(a[r][c]));
  if (!(scale > 0) || !std::isfinite(scale)) return false;
  for (int c = 0; c < N; ++c) {
    int p = c;
    for (int r = c + 1; r < N; ++r)
      if (std::fabs(a[r][c]) > std::fabs(a[p][c])) p = r;
    if (!(std::fabs(a[p][c]) > 1e-12 * scale)) return false;
    if (p != c) {
      for (int k = 0; k < N; ++k) std::swap(a[p][k], a[c][k]);
      std::swap(b[p], b[c]);
    }
    for (int r = c + 1; r < N; ++r) {
      const double f = a[r][c] / a[c][c];
      if (f == 0) continue;
      for (int k = c; k < N; ++k) a[r][k] -= f * a[c][k];
      b[r] -= f * b[c];
    }
  }
  for (int r = N - 1; r >= 0; --r) {
    double s = b[r];
    for (int k = r + 1; k < N; ++k) s -= a[r][k] * x[k];
    x[r] = s / a[r][r];
  }
  for (int r = 0; r < N; ++r)
    if (!std::isfinite(x[r])) return false;
  return true;
}

/// Eigenvector of the smallest eigenvalue of a symmetric 9x9 matrix, by cyclic Jacobi rotations.
void smallest_eigenvector9(double (&a)[9][9], double (&out)[9]) {
  double v[9][9] = {};
  for (int i = 0; i < 9; ++i) v[i][i] = 1;
  for (int sweep = 0; sweep < 60; ++sweep) {
    double off = 0, diag = 0;
    for (int p = 0; p < 9; ++p) {
      diag += a[p][p] * a[p][p];
      for (int q = p + 1; q < 9; ++q) off += a[p][q] * a[p][q];
    }
    if (off <= 1e-30 * diag || off == 0) break;
    for (int p = 0; p < 8; ++p) {
      for (int q = p + 1; q < 9; ++q) {
        if (a[p][q] == 0) continue;
        const double theta = (a[q][q] - a[p][p]) / (2 * a[p][q]);
        const double t = (theta >= 0 ? 1.0 : -1.0) / (std::fabs(theta) + std::sqrt(theta * theta + 1));
        const double c = 1 / std::sqrt(t * t + 1), s = t * c;
        for (int k = 0; k < 9; ++k) {  // A <- A J (columns p, q)
          const double akp = a[k][p], akq = a[k][q];
          a[k][p] = c * akp - s * akq;
          a[k][q] = s * akp + c * akq;
        }
        for (int k = 0; k < 9; ++k) {  // A <- J^T A (rows p, q)
          const double apk = a[p][k], aqk = a[q][k];
          a[p][k] = c * apk - s * aqk;
          a[q][k] = s * apk + c * aqk;
        }
        for (int k = 0; k < 9; ++k) {
          const double vkp = v[k][p], vkq = v[k][q];
          v[k][p] = c * vkp - s * vkq;
          v[k][q] = s * vkp + c * vkq;
        }
      }
    }
  }
  int best = 0;
  for (int i = 1; i < 9; ++i)
    if (a[i][i] < a[best][best]) best = i;
  for (int k = 0; k < 9; ++k) out[k] = v[k][best];
}

Mat3 mul(const Mat3& a, const Mat3& b) {
  Mat3 c{};
  for (int r = 0; r < 3; ++r)
    for (int k = 0; k < 3; ++k) {
      double s = 0;
      for (int j = 0; j < 3; ++j) s += a[r * 3 + j] * b[j * 3 + k];
      c[r * 3 + k] = s;
    }
  return c;
}

bool all_finite(const Mat3& m) {
  for (double v : m)
    if (!std::isfinite(v)) return false;
  return true;
}

/// Scales so that m[8] = 1 when |m[8]| is not tiny relative to the matrix, else to unit Frobenius norm.
bool normalise(Mat3& m) {
  double norm = 0;
  for (double v : m) norm += v * v;
  norm = std::sqrt(norm);
  if (!(norm > 0) || !std::isfinite(norm)) return false;
  const double d = std::fabs(m[8]) > 1e-12 * norm ? m[8] : norm;
  for (double& v : m) v /= d;
  return all_finite(m);
}

/// Hartley normalisation: translate the centroid to 0 and scale the mean distance to sqrt(2).
/// T maps pixels to normalised coordinates. False when every point coincides.
struct Normaliser {
  double cx = 0, cy = 0, s = 1;
  bool fit(const Point2* p, const int* idx, int n) {
    cx = cy = 0;
    for (int i = 0; i < n; ++i) {
      const Point2& q = p[idx ? idx[i] : i];
      cx += q.x;
      cy += q.y;
    }
    cx /= n;
    cy /= n;
    double d = 0;
    for (int i = 0; i < n; ++i) {
      const Point2& q = p[idx ? idx[i] : i];
      d += std::hypot(q.x - cx, q.y - cy);
    }
    d /= n;
    if (!(d > 1e-12)) return false;
    s = std::sqrt(2.0) / d;
    return true;
  }
  Point2 apply(Point2 q) const { return {(q.x - cx) * s, (q.y - cy) * s}; }
  Mat3 matrix() const { return {s, 0, -s * cx, 0, s, -s * cy, 0, 0, 1}; }
  Mat3 inverse() const { return {1 / s, 0, cx, 0, 1 / s, cy, 0, 0, 1}; }
};

// ---- solvers (all on normalised points; m = moving, f = fixed) -----------------------------------

/// Exact homography through 4 correspondences with h8 = 1 (8x8 system). False if singular.
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

/// Algebraic least-squares homography (DLT): smallest eigenvector of A^T A.
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

/// Levenberg-Marquardt on the one-sided transfer error, parameters h0..h7 with h8 = 1.
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

/// Least-squares affine map (exact for 3 points). False when the moving points are collinear.
bool affine_ls(const Point2* m, const Point2* f, int n, Mat3& a) {
  double mx = 0, my = 0, fx = 0, fy = 0;
  for (int i = 0; i < n; ++i) {
    mx += m[i].x, my += m[i].y, fx += f[i].x, fy += f[i].y;
  }
  mx /= n, my /= n, fx /= n, fy /= n;
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

/// Least-squares similarity x' = s R x + t without reflection (Umeyama 1991 in 2-D). False when the
/// moving points coincide.
bool similarity_ls(const Point2* m, const Point2* f, int n, Mat3& a) {
  double mx = 0, my = 0, fx = 0, fy = 0;
  for (int i = 0; i < n; ++i) {
    mx += m[i].x, my += m[i].y, fx += f[i].x, fy += f[i].y;
  }
  mx /= n, my /= n, fx /= n, fy /= n;
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

// ---- degeneracy -------------------------------------------------------------------------------------

double cross(Point2 a, Point2 b, Point2 c) { return (b.x - a.x) * (c.y - a.y) - (b.y - a.y) * (c.x - a.x); }

/// Coincident points (closer than 1e-3 px) in a sample.
bool has_coincident(const Point2* p, int n) {
  for (int i = 0; i < n; ++i)
    for (int j = i + 1; j < n; ++j)
      if (std::hypot(p[i].x - p[j].x, p[i].y - p[j].y) < 1e-3) return true;
  return false;
}

/// Sine of the angle at a between ab and ac below 0.01 (0.57 degrees): nearly collinear.
bool nearly_collinear(Point2 a, Point2 b, Point2 c) {
  const double lab = std::hypot(b.x - a.x, b.y - a.y), lac = std::hypot(c.x - a.x, c.y - a.y);
  return std::fabs(cross(a, b, c)) <= 0.01 * lab * lac;
}

/// Points whose coordinates are all collinear (used to refuse least-squares fits).
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

// ---- one hypothesis from a minimal sample ---------------------------------------------------------

struct Problem {
  GeometryModel model;
  int s;
  const Point2* moving;
  const Point2* fixed;
  int n;
  std::uint64_t seed;
  Normaliser nm, nf;  // global normalisation for the minimal homography solver
};

/// Indices of the sample of `iteration`: draws j = 0, 1, ... skipping repeats (see geometry.hpp).
bool draw_sample(const Problem& pb, std::uint64_t iteration, int* idx) {
  int got = 0;
  for (std::uint32_t j = 0; got < pb.s && j < std::uint32_t(64 * pb.s); ++j) {
    const int k = int(ss_uniform_index(ss_ransac_draw(pb.seed, iteration, j), std::uint32_t(pb.n)));
    bool repeat = false;
    for (int q = 0; q < got; ++q) repeat = repeat || idx[q] == k;
    if (!repeat) idx[got++] = k;
  }
  return got == pb.s;
}

/// Model from the sample of `iteration`; false when the sample is degenerate.
bool hypothesis(const Problem& pb, std::uint64_t iteration, Mat3& h) {
  int idx[4];
  if (!draw_sample(pb, iteration, idx)) return false;
  Point2 m[4], f[4];
  for (int i = 0; i < pb.s; ++i) {
    m[i] = pb.moving[idx[i]];
    f[i] = pb.fixed[idx[i]];
  }
  if (has_coincident(m, pb.s) || has_coincident(f, pb.s)) return false;
  switch (pb.model) {
    case GeometryModel::kSimilarity: return similarity_ls(m, f, 2, h);
    case GeometryModel::kAffine:
      if (nearly_collinear(m[0], m[1], m[2]) || nearly_collinear(f[0], f[1], f[2])) return false;
      return affine_ls(m, f, 3, h);
    case GeometryModel::kHomography: {
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
        mn[i] = pb.nm.apply(m[i]);
        fn[i] = pb.nf.apply(f[i]);
      }
      Mat3 hn;
      if (!homography_4pt(mn, fn, hn)) return false;
      h = mul(mul(pb.nf.inverse(), hn), pb.nm.matrix());
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
  }
  return false;
}

/// Least-squares fit to a subset (indices), with the non-linear refinement when `nonlinear`.
bool fit_subset(GeometryModel model, const Point2* moving, const Point2* fixed, const std::vector<int>& idx,
                bool nonlinear, Mat3& h) {
  const int n = int(idx.size());
  if (n < minimal_sample_size(model)) return false;
  std::vector<Point2> m(static_cast<std::size_t>(n)), f(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    m[std::size_t(i)] = moving[idx[std::size_t(i)]];
    f[std::size_t(i)] = fixed[idx[std::size_t(i)]];
  }
  switch (model) {
    case GeometryModel::kSimilarity: return similarity_ls(m.data(), f.data(), n, h);
    case GeometryModel::kAffine: return affine_ls(m.data(), f.data(), n, h);
    case GeometryModel::kHomography: {
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
  }
  return false;
}

struct Scored {
  Mat3 h{1, 0, 0, 0, 1, 0, 0, 0, 1};
  int inliers = -1;
  double sum = std::numeric_limits<double>::infinity();
  /// Inlier ranking (DESIGN.md): more inliers, then the lower sum of their squared errors. MSAC ranking:
  /// the lower truncated cost sum + (n - inliers) * t^2, then more inliers.
  bool better_than(const Scored& o, bool msac, int n, double thr2) const {
    if (msac) {
      const double c = sum + double(n - inliers) * thr2, oc = o.inliers < 0 ? HUGE_VAL : o.sum + double(n - o.inliers) * thr2;
      if (c != oc) return c < oc;
      return inliers > o.inliers;
    }
    return inliers > o.inliers || (inliers == o.inliers && sum < o.sum);
  }
};

Scored score_one(const Problem& pb, const Mat3& h, double thr2, std::vector<std::uint8_t>& mask) {
  Scored s;
  s.h = h;
  s.inliers = detail::host_backend().inlier_mask(h.data(), pb.moving, pb.fixed, pb.n, thr2, mask.data(), &s.sum);
  return s;
}

std::vector<int> indices_of(const std::vector<std::uint8_t>& mask) {
  std::vector<int> idx;
  for (std::size_t i = 0; i < mask.size(); ++i)
    if (mask[i]) idx.push_back(int(i));
  return idx;
}

int adaptive_iterations(const RansacOptions& o, int inliers, int n) {
  const double w = double(inliers) / double(n);
  const double ws = std::pow(w, minimal_sample_size(o.model));
  double need;
  if (ws >= 1.0) need = 1;
  else {
    const double denom = std::log1p(-ws);
    need = denom < 0 ? std::ceil(std::log(1.0 - o.confidence) / denom) : double(o.max_iterations);
  }
  need = std::clamp(need, double(std::max(o.min_iterations, 1)), double(o.max_iterations));
  return int(need);
}

void check_points(const std::vector<Point2>& moving, const std::vector<Point2>& fixed) {
  if (moving.size() != fixed.size())
    throw Error(ErrorCode::kInvalidArgument, "estimate_model: " + std::to_string(moving.size()) +
                                                 " moving points but " + std::to_string(fixed.size()) +
                                                 " fixed points");
  if (moving.size() > std::size_t(1) << 30)
    throw Error(ErrorCode::kInvalidArgument, "estimate_model: too many points");
  for (std::size_t i = 0; i < moving.size(); ++i)
    if (!std::isfinite(moving[i].x) || !std::isfinite(moving[i].y) || !std::isfinite(fixed[i].x) ||
        !std::isfinite(fixed[i].y))
      throw Error(ErrorCode::kInvalidArgument, "estimate_model: point " + std::to_string(i) + " is not finite");
}

}  // namespace

// ---- public entry points ----------------------------------------------------------------------------

ModelEstimate estimate_model(Context& ctx, const std::vector<Point2>& moving, const std::vector<Point2>& fixed,
                             const RansacOptions& options) {
  const detail::ContextUse use(ctx.impl(), "estimate_model");
  options.check();
  check_points(moving, fixed);
  const auto t0 = std::chrono::steady_clock::now();
  ModelEstimate result;
  result.model = options.model;
  const int n = int(moving.size());
  result.inlier_mask.assign(std::size_t(n), 0);
  Problem pb{options.model, minimal_sample_size(options.model), moving.data(), fixed.data(), n, options.seed, {}, {}};
  if (n < pb.s) return result;
  if (!pb.nm.fit(pb.moving, nullptr, n) || !pb.nf.fit(pb.fixed, nullptr, n)) return result;  // all points coincide
  // Scoring runs on the host for every backend: it is a small part of the job (hypotheses x points)
  // and keeps the decision sequence identical everywhere.
  const int threads = ctx.impl().cpu_threads();
  const double thr2 = options.threshold_px * options.threshold_px;

  Scored best;
  std::vector<std::uint8_t> mask(static_cast<std::size_t>(n));
  int limit = options.max_iterations;
  int processed = 0;
  constexpr int kBatch = 128;
  std::vector<double> models(std::size_t(kBatch) * 9);
  std::vector<std::uint8_t> valid(kBatch);
  std::vector<int> counts(kBatch);
  std::vector<double> sums(kBatch);
  int batch = 16;  // grows to kBatch: the adaptive limit is often reached within a few dozen iterations
  while (processed < limit) {
    const int base = processed;
    const int b = std::min(batch, limit - base);
    batch = std::min(kBatch, 2 * batch);
    // Threads only pay off for large batches (a parallel region costs more than ~100 small solves).
#pragma omp parallel for schedule(static) num_threads(threads) if (b >= 64 && std::int64_t(b) * n >= (1 << 17))
    for (int k = 0; k < b; ++k) {
      Mat3 h;
      valid[std::size_t(k)] = hypothesis(pb, std::uint64_t(base + k), h) ? 1 : 0;
      std::copy(h.begin(), h.end(), models.begin() + std::ptrdiff_t(k) * 9);
    }
    detail::backend_for(ctx.impl(), detail::Operation::kRansac)
        .score_models(models.data(), valid.data(), b, pb.moving, pb.fixed, n, thr2, threads, counts.data(),
                      sums.data());
    // Decisions are taken strictly in iteration order, so the batch size and the thread count do not
    // change the result.
    for (int k = 0; k < b && base + k < limit; ++k) {
      processed = base + k + 1;
      if (!valid[std::size_t(k)]) continue;
      Scored cand;
      std::copy(models.begin() + std::ptrdiff_t(k) * 9, models.begin() + std::ptrdiff_t(k) * 9 + 9, cand.h.begin());
      cand.inliers = counts[std::size_t(k)];
      cand.sum = sums[std::size_t(k)];
      if (!cand.better_than(best, options.msac, n, thr2)) continue;
      best = cand;
      if (options.local_optimization && best.inliers > pb.s) {
        for (int round = 0; round < 4; ++round) {
          score_one(pb, best.h, thr2, mask);
          Mat3 h;
          if (!fit_subset(options.model, pb.moving, pb.fixed, indices_of(mask), false, h)) break;
          const Scored lo = score_one(pb, h, thr2, mask);
          if (!lo.better_than(best, options.msac, n, thr2)) break;
          best = lo;
        }
      }
      limit = std::max(adaptive_iterations(options, best.inliers, n), processed);
    }
  }
  result.iterations = processed;
  if (best.inliers < 0) return result;

  // Final refinement on the inliers; a refit is kept only when it is at least as good.
  Scored cur = score_one(pb, best.h, thr2, mask);
  std::vector<std::uint8_t> cur_mask = mask;
  if (options.refine) {
    for (int round = 0; round < 3; ++round) {
      Mat3 h;
      if (!fit_subset(options.model, pb.moving, pb.fixed, indices_of(cur_mask), true, h)) break;
      const Scored cand = score_one(pb, h, thr2, mask);
      if (!cand.better_than(cur, options.msac, n, thr2)) break;
      const bool same = mask == cur_mask;
      cur = cand;
      cur_mask = mask;
      if (same) break;
    }
  }
  result.inliers = cur.inliers;
  if (cur.inliers < options.required_inliers()) {
    ctx.impl().log("ransac: best " + std::string(to_string(options.model)) + " has " + std::to_string(cur.inliers) +
                   " inliers of " + std::to_string(n) + ", fewer than the " +
                   std::to_string(options.required_inliers()) + " required: no model");
    return result;
  }
  result.found = true;
  result.matrix = cur.h;
  result.inlier_mask = cur_mask;
  result.rms_px = cur.inliers > 0 ? std::sqrt(cur.sum / cur.inliers) : 0.0;
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ctx.impl().log("ransac: " + std::string(to_string(options.model)) + " " + std::to_string(result.inliers) + "/" +
                 std::to_string(n) + " inliers, rms " + std::to_string(result.rms_px) + " px, " +
                 std::to_string(result.iterations) + " iterations, " + std::to_string(ms) + " ms (host)");
  return result;
}

bool fit_model(GeometryModel model, const std::vector<Point2>& moving, const std::vector<Point2>& fixed,
               std::array<double, 9>& matrix) {
  check_points(moving, fixed);
  std::vector<int> idx(moving.size());
  for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = int(i);
  if (model != GeometryModel::kHomography && moving.size() >= 2) {
    if (model == GeometryModel::kAffine && (all_collinear(moving) || all_collinear(fixed))) return false;
  }
  Mat3 h;
  if (!fit_subset(model, moving.data(), fixed.data(), idx, true, h)) return false;
  matrix = h;
  return true;
}

Point2 apply_model(const std::array<double, 9>& h, Point2 p) noexcept {
  const double w = h[6] * p.x + h[7] * p.y + h[8];
  if (w == 0) return {std::numeric_limits<double>::infinity(), std::numeric_limits<double>::infinity()};
  return {(h[0] * p.x + h[1] * p.y + h[2]) / w, (h[3] * p.x + h[4] * p.y + h[5]) / w};
}

std::array<double, 9> invert_model(const std::array<double, 9>& m) {
  const double c00 = m[4] * m[8] - m[5] * m[7], c01 = m[5] * m[6] - m[3] * m[8], c02 = m[3] * m[7] - m[4] * m[6];
  const double det = m[0] * c00 + m[1] * c01 + m[2] * c02;
  double norm = 0;
  for (double v : m) norm = std::max(norm, std::fabs(v));
  if (!(std::fabs(det) > 1e-15 * norm * norm * norm) || !std::isfinite(det))
    throw Error(ErrorCode::kInvalidArgument, "model matrix is singular and cannot be inverted");
  Mat3 inv = {c00,
              m[2] * m[7] - m[1] * m[8],
              m[1] * m[5] - m[2] * m[4],
              c01,
              m[0] * m[8] - m[2] * m[6],
              m[2] * m[3] - m[0] * m[5],
              c02,
              m[1] * m[6] - m[0] * m[7],
              m[0] * m[4] - m[1] * m[3]};
  for (double& v : inv) v /= det;
  normalise(inv);
  return inv;
}

// ---- warping ------------------------------------------------------------------------------------------

namespace {
void check_warp(const Image& moving, const std::array<double, 9>& matrix, int fixed_w, int fixed_h) {
  if (moving.empty()) throw Error(ErrorCode::kInvalidArgument, "warp_image: the moving image is empty");
  if (moving.data.size() != moving.pixel_count() * std::size_t(moving.channels) * bytes_per_sample(moving.type))
    throw Error(ErrorCode::kInvalidArgument, "warp_image: the moving image's data size does not match its shape");
  if (fixed_w <= 0 || fixed_h <= 0)
    throw Error(ErrorCode::kInvalidArgument, "warp_image: the output size must be positive");
  if (!all_finite(matrix)) throw Error(ErrorCode::kInvalidArgument, "warp_image: the matrix is not finite");
}
}  // namespace

Image warp_image(const Image& moving, const std::array<double, 9>& matrix, int fixed_w, int fixed_h) {
  check_warp(moving, matrix, fixed_w, fixed_h);
  return detail::host_backend().warp(moving, invert_model(matrix), fixed_w, fixed_h, 0);
}

Image warp_image(Context& ctx, const Image& moving, const std::array<double, 9>& matrix, int fixed_w, int fixed_h) {
  const detail::ContextUse use(ctx.impl(), "warp_image");
  check_warp(moving, matrix, fixed_w, fixed_h);
  // Warping is a host operation on every backend for now (one pass over the output).
  return detail::backend_for(ctx.impl(), detail::Operation::kWarp)
      .warp(moving, invert_model(matrix), fixed_w, fixed_h, ctx.impl().cpu_threads());
}

Image warp_coverage(int moving_w, int moving_h, const std::array<double, 9>& matrix, int fixed_w, int fixed_h) {
  Image ones = Image::allocate(moving_w, moving_h, 1, PixelType::kU8);
  std::fill(ones.data.begin(), ones.data.end(), std::uint8_t(255));
  return warp_image(ones, matrix, fixed_w, fixed_h);
}

}  // namespace spectrasift

// Small dense linear algebra for the model estimators (see linalg.hpp).
#include "core/linalg.hpp"

namespace spectrasift::geometry {

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

bool normalise(Mat3& m) {
  double norm = 0;
  for (double v : m) norm += v * v;
  norm = std::sqrt(norm);
  if (!(norm > 0) || !std::isfinite(norm)) return false;
  const double d = std::fabs(m[8]) > 1e-12 * norm ? m[8] : norm;
  for (double& v : m) v /= d;
  return all_finite(m);
}

bool Normaliser::fit(const Point2* p, const int* idx, int n) {
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
    const double dx = q.x - cx, dy = q.y - cy;
    d += std::sqrt(dx * dx + dy * dy);  // not hypot: correctly rounded everywhere (numeric/refit_sums.h)
  }
  d /= n;
  if (!(d > 1e-12)) return false;
  s = std::sqrt(2.0) / d;
  return true;
}

}  // namespace spectrasift::geometry

// Small dense linear algebra for the model estimators (internal): a Gaussian-elimination solver, the
// smallest eigenvector of a symmetric 9x9 matrix, 3x3 products and scaling, and Hartley normalisation.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <utility>

#include "spectrasift/types.hpp"

namespace spectrasift::geometry {

using Mat3 = std::array<double, 9>;

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
void smallest_eigenvector9(double (&a)[9][9], double (&out)[9]);

Mat3 mul(const Mat3& a, const Mat3& b);

bool all_finite(const Mat3& m);

/// Scales so that m[8] = 1 when |m[8]| is not tiny relative to the matrix, else to unit Frobenius norm.
bool normalise(Mat3& m);

/// Hartley normalisation: translate the centroid to 0 and scale the mean distance to sqrt(2).
/// T maps pixels to normalised coordinates. False when every point coincides.
struct Normaliser {
  double cx = 0, cy = 0, s = 1;
  bool fit(const Point2* p, const int* idx, int n);
  Point2 apply(Point2 q) const { return {(q.x - cx) * s, (q.y - cy) * s}; }
  Mat3 matrix() const { return {s, 0, -s * cx, 0, s, -s * cy, 0, 0, 1}; }
  Mat3 inverse() const { return {1 / s, 0, cx, 0, 1 / s, cy, 0, 0, 1}; }
};

}  // namespace spectrasift::geometry

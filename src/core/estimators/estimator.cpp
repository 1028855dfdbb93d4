// Per-model dispatch of the estimators: a model from a minimal sample (with the sample's degeneracy
// checks) and a least-squares fit to a subset of the correspondences.
#include "core/estimators/estimators.hpp"

namespace spectrasift::geometry {

PairCentroids pair_centroids(const Point2* m, const Point2* f, int n) {
  double mx = 0, my = 0, fx = 0, fy = 0;
  for (int i = 0; i < n; ++i) {
    mx += m[i].x, my += m[i].y, fx += f[i].x, fy += f[i].y;
  }
  mx /= n, my /= n, fx /= n, fy /= n;
  return {mx, my, fx, fy};
}

bool minimal_model(GeometryModel model, const Point2* m, const Point2* f, const Normaliser& nm,
                   const Normaliser& nf, Mat3& h) {
  const int s = minimal_sample_size(model);
  if (has_coincident(m, s) || has_coincident(f, s)) return false;
  switch (model) {
    case GeometryModel::kSimilarity: return similarity_ls(m, f, 2, h);
    case GeometryModel::kAffine:
      if (nearly_collinear(m[0], m[1], m[2]) || nearly_collinear(f[0], f[1], f[2])) return false;
      return affine_ls(m, f, 3, h);
    case GeometryModel::kHomography: return homography_minimal(m, f, nm, nf, h);
  }
  return false;
}

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
    case GeometryModel::kHomography: return homography_refit(m, f, nonlinear, h);
  }
  return false;
}

}  // namespace spectrasift::geometry

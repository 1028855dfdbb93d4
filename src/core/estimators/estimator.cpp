// Per-model dispatch of the estimators: a model from a minimal sample (with the sample's degeneracy
// checks) and a least-squares fit to a subset of the correspondences.
#include "core/estimators/estimators.hpp"

namespace spectrasift::geometry {

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

bool fit_subset(GeometryModel model, RefitSums& src, bool nonlinear, Mat3& h) {
  if (src.count() < minimal_sample_size(model)) return false;
  switch (model) {
    case GeometryModel::kSimilarity: return similarity_refit(src, h);
    case GeometryModel::kAffine: return affine_refit(src, h);
    case GeometryModel::kHomography: return homography_refit(src, nonlinear, h);
  }
  return false;
}

}  // namespace spectrasift::geometry

// Geometry models: names, options checks, point checks, the plain least-squares fit_model, and applying
// and inverting a model. The estimators are in core/estimators/, the RANSAC driver in core/ransac.cpp,
// warping in core/warp.cpp; the maths is documented in include/spectrasift/geometry.hpp.
#include "spectrasift/geometry.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <string>

#include "core/estimators/estimators.hpp"
#include "spectrasift/error.hpp"

namespace spectrasift {

using geometry::Mat3;

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

namespace geometry {

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

}  // namespace geometry

// ---- public entry points ----------------------------------------------------------------------------

bool fit_model(GeometryModel model, const std::vector<Point2>& moving, const std::vector<Point2>& fixed,
               std::array<double, 9>& matrix) {
  geometry::check_points(moving, fixed);
  if (model != GeometryModel::kHomography && moving.size() >= 2) {
    if (model == GeometryModel::kAffine && (geometry::all_collinear(moving) || geometry::all_collinear(fixed)))
      return false;
  }
  Mat3 h;
  const int n = int(moving.size());
  geometry::HostRefitSums src(moving.data(), fixed.data(), n, nullptr, n);
  if (!geometry::fit_subset(model, src, true, h)) return false;
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
  geometry::normalise(inv);
  return inv;
}

}  // namespace spectrasift

// assess_model: support (a contrario number of false alarms) and shape checks of a RANSAC model
// (include/spectrasift/verdict.hpp documents the tests and their limits).
#include "spectrasift/verdict.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <limits>

#include "spectrasift/error.hpp"

namespace spectrasift {
namespace {

constexpr double kPi = 3.14159265358979323846;

/// log10 of the binomial coefficient C(n, k).
double log10_choose(int n, int k) {
  return (std::lgamma(double(n) + 1) - std::lgamma(double(k) + 1) - std::lgamma(double(n - k) + 1)) / std::log(10.0);
}

struct Frame {
  double x0, y0, x1, y1;
};

/// The frame [0, w-1] x [0, h-1] (pixel centres), or the bounding box of `pts` when w or h is 0.
Frame frame_of(int w, int h, const std::vector<Point2>& pts) {
  if (w > 0 && h > 0) return {0, 0, double(w - 1), double(h - 1)};
  Frame f{std::numeric_limits<double>::infinity(), std::numeric_limits<double>::infinity(),
          -std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity()};
  for (const Point2& p : pts) {
    f.x0 = std::min(f.x0, p.x), f.y0 = std::min(f.y0, p.y);
    f.x1 = std::max(f.x1, p.x), f.y1 = std::max(f.y1, p.y);
  }
  if (pts.empty()) f = {0, 0, 1, 1};
  return f;
}

/// Jacobian of the model at (x, y): {du/dx, du/dy, dv/dx, dv/dy}, and the denominator w.
std::array<double, 4> jacobian(const std::array<double, 9>& h, double x, double y, double& w) {
  w = h[6] * x + h[7] * y + h[8];
  const double u = (h[0] * x + h[1] * y + h[2]) / w, v = (h[3] * x + h[4] * y + h[5]) / w;
  return {(h[0] - u * h[6]) / w, (h[1] - u * h[7]) / w, (h[3] - v * h[6]) / w, (h[4] - v * h[7]) / w};
}

/// Ratio of the singular values of a 2x2 matrix (>= 1; +inf when singular).
double singular_ratio(const std::array<double, 4>& j) {
  const double a = j[0], b = j[1], c = j[2], d = j[3];
  const double s = a * a + b * b + c * c + d * d, det = std::abs(a * d - b * c);
  const double root = std::sqrt(std::max(0.0, s * s - 4 * det * det));
  const double s1 = std::sqrt((s + root) / 2), s2 = det / std::max(s1, 1e-300);
  return s2 > 0 ? s1 / s2 : std::numeric_limits<double>::infinity();
}

std::string fmt(const char* format, double a, double b = 0, double c = 0) {
  char buf[160];
  std::snprintf(buf, sizeof buf, format, a, b, c);
  return buf;
}

}  // namespace

std::string ModelVerdict::summary() const {
  if (reliable) return {};
  std::string s = "no reliable model: ";
  for (std::size_t i = 0; i < problems.size(); ++i) s += (i ? "; " : "") + problems[i];
  return s;
}

ModelVerdict assess_model(const ModelEstimate& est, const std::vector<Point2>& moving, const std::vector<Point2>& fixed,
                          int moving_w, int moving_h, int fixed_w, int fixed_h, const VerdictOptions& o) {
  if (moving.size() != fixed.size())
    throw Error(ErrorCode::kInvalidArgument, "assess_model: " + std::to_string(moving.size()) + " moving points and " +
                                                 std::to_string(fixed.size()) + " fixed points");
  if (est.found && est.inlier_mask.size() != moving.size())
    throw Error(ErrorCode::kInvalidArgument, "assess_model: the inlier mask has " +
                                                 std::to_string(est.inlier_mask.size()) + " entries for " +
                                                 std::to_string(moving.size()) + " points");
  ModelVerdict v;
  v.matches = int(moving.size());
  v.inliers = est.found ? est.inliers : 0;
  v.inlier_ratio = v.matches > 0 ? double(v.inliers) / v.matches : 0.0;
  v.rms_px = est.rms_px;
  v.log10_nfa = std::numeric_limits<double>::infinity();
  if (!est.found) {
    v.problems.push_back("no model (" + std::to_string(est.inliers) + " inliers at best of " +
                         std::to_string(v.matches) + " matches)");
    return v;
  }

  // Support: the inliers' residuals, sorted; min over k of NFA(k).
  std::vector<double> residuals;
  for (std::size_t i = 0; i < moving.size(); ++i) {
    if (!est.inlier_mask[i]) continue;
    const Point2 p = apply_model(est.matrix, moving[i]);
    residuals.push_back(std::hypot(p.x - fixed[i].x, p.y - fixed[i].y));
  }
  std::sort(residuals.begin(), residuals.end());
  const Frame ff = frame_of(fixed_w, fixed_h, fixed);
  const double area = std::max(1.0, (ff.x1 - ff.x0 + 1) * (ff.y1 - ff.y0 + 1));
  const int n = v.matches, s = minimal_sample_size(est.model);
  // Residuals below a tenth of a pixel are keypoint-localisation noise, not extra evidence.
  constexpr double kResidualFloor = 0.1;
  for (int k = s + 1; k <= int(residuals.size()); ++k) {
    const double e = std::max(residuals[std::size_t(k - 1)], kResidualFloor);
    const double log_p = std::min(0.0, std::log10(kPi * e * e / area));
    const double nfa = std::log10(double(n - s)) + log10_choose(n, k) + log10_choose(k, s) + (k - s) * log_p;
    v.log10_nfa = std::min(v.log10_nfa, nfa);
  }
  if (!(v.log10_nfa < o.max_log10_nfa))
    v.problems.push_back(fmt("weak support: %.0f inliers of %.0f matches, expected by chance (log10 NFA %.1f >= ", v.inliers,
                             v.matches, v.log10_nfa) +
                         fmt("%.1f)", o.max_log10_nfa));

  // Shape over the corners of the moving frame.
  const Frame mf = frame_of(moving_w, moving_h, moving);
  const std::array<Point2, 4> corners{{{mf.x0, mf.y0}, {mf.x1, mf.y0}, {mf.x1, mf.y1}, {mf.x0, mf.y1}}};
  double w_min = std::numeric_limits<double>::infinity(), w_max = -w_min;
  double det_min = std::numeric_limits<double>::infinity(), det_max = 0;
  for (const Point2& c : corners) {
    double w = 0;
    const auto j = jacobian(est.matrix, c.x, c.y, w);
    w_min = std::min(w_min, w), w_max = std::max(w_max, w);
    const double det = std::abs(j[0] * j[3] - j[1] * j[2]);
    det_min = std::min(det_min, det), det_max = std::max(det_max, det);
    v.anisotropy = std::max(v.anisotropy, singular_ratio(j));
  }
  v.folds = !(w_min > 0) && !(w_max < 0);  // w changes sign (or vanishes) inside the frame
  double w_c = 0;
  const auto jc = jacobian(est.matrix, 0.5 * (mf.x0 + mf.x1), 0.5 * (mf.y0 + mf.y1), w_c);
  const double det_c = jc[0] * jc[3] - jc[1] * jc[2];
  v.flips = det_c < 0;
  v.scale = std::sqrt(std::abs(det_c));
  v.scale_range = det_min > 0 ? std::sqrt(det_max / det_min) : std::numeric_limits<double>::infinity();
  if (v.folds) v.problems.push_back("the model folds the image (its line at infinity crosses the moving image)");
  if (v.flips) v.problems.push_back("the model mirrors the image (negative determinant)");
  if (!(v.scale >= 1.0 / o.max_scale && v.scale <= o.max_scale))
    v.problems.push_back(fmt("scale %.3g outside [%.3g, %.3g]", v.scale, 1.0 / o.max_scale, o.max_scale));
  if (!v.folds && !(v.scale_range <= o.max_scale_range))
    v.problems.push_back(fmt("the scale changes %.3gx across the image (limit %.3g)", v.scale_range, o.max_scale_range));
  if (!v.folds && !(v.anisotropy <= o.max_anisotropy))
    v.problems.push_back(fmt("anisotropy %.3g (limit %.3g)", v.anisotropy, o.max_anisotropy));
  v.reliable = v.problems.empty();
  return v;
}

}  // namespace spectrasift

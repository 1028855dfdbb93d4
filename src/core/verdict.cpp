// assess_model: support (a contrario number of false alarms) and shape checks of a RANSAC model
// (include/spectrasift/verdict.hpp documents the tests and their limits).
#include "spectrasift/verdict.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <limits>
#include <unordered_map>
#include <utility>

#include "spectrasift/error.hpp"

namespace spectrasift {
namespace {

constexpr double kPi = 3.14159265358979323846;

/// Two keypoints closer than this (pixels, in either image) are one location for the support: SIFT's extra
/// orientations of one point have exactly its coordinates, and a structure found again at a neighbouring scale
/// lands within a fraction of a pixel; distinct keypoint locations that close are rare (0.7-1.5 % of the
/// locations of camera, coins, graf3 have another within 0.5 px, none within 0.1 px but 2 of graf3's).
constexpr double kSameLocationPx = 0.5;

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

/// Points already counted, bucketed on a grid of kSameLocationPx cells: near(p) tells whether one lies within
/// kSameLocationPx of p (the 3 x 3 cells around p's hold every candidate).
class LocationSet {
 public:
  bool near(Point2 p) const {
    const auto [cx, cy] = cell(p);
    for (std::int64_t dy = -1; dy <= 1; ++dy)
      for (std::int64_t dx = -1; dx <= 1; ++dx) {
        const auto it = cells_.find(key(cx + dx, cy + dy));
        if (it == cells_.end()) continue;
        for (const Point2& q : it->second)
          if (std::hypot(p.x - q.x, p.y - q.y) <= kSameLocationPx) return true;
      }
    return false;
  }
  void add(Point2 p) {
    const auto [cx, cy] = cell(p);
    cells_[key(cx, cy)].push_back(p);
  }

 private:
  static std::pair<std::int64_t, std::int64_t> cell(Point2 p) {
    // Clamped so that a non-finite or huge coordinate still has a cell (such a point is never near another).
    auto c = [](double x) {
      return std::isfinite(x) ? std::int64_t(std::floor(std::clamp(x / kSameLocationPx, -1e9, 1e9)))
                              : std::int64_t(2e9);
    };
    return {c(p.x), c(p.y)};
  }
  static std::uint64_t key(std::int64_t cx, std::int64_t cy) {
    return (std::uint64_t(cx) << 32) ^ (std::uint64_t(cy) & 0xffffffffu);
  }
  std::unordered_map<std::uint64_t, std::vector<Point2>> cells_;
};

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

  // Support: the inliers' residuals, sorted, one per distinct location pair (distinct_inliers); min over k of
  // NFA(k). NFA's chance model takes the fixed points as independent uniform points, which inliers that share a
  // location are not: SIFT's extra orientations give one point several keypoints (and so several matches), and a
  // contracting model can make many moving points "predict" the one fixed keypoint they were all matched to.
  // Counted as separate events they are several chance coincidences for the price of one (camera -> coins,
  // register_test's ImagesWithoutOverlapSimilarityIsRefused). Greedy in ascending residual: an inlier counts
  // when neither its moving nor its fixed point is within kSameLocationPx of an inlier already counted.
  struct Inlier {
    double residual;
    std::size_t index;
  };
  std::vector<Inlier> all;
  for (std::size_t i = 0; i < moving.size(); ++i) {
    if (!est.inlier_mask[i]) continue;
    const Point2 p = apply_model(est.matrix, moving[i]);
    const double e = std::hypot(p.x - fixed[i].x, p.y - fixed[i].y);
    all.push_back({e >= 0 ? e : std::numeric_limits<double>::infinity(), i});  // NaN (a point at infinity): +inf
  }
  // Ties (exact duplicates) broken by index, so that the order is the same on every platform's sort.
  std::sort(all.begin(), all.end(), [](const Inlier& a, const Inlier& b) {
    return a.residual < b.residual || (a.residual == b.residual && a.index < b.index);
  });
  LocationSet seen_moving, seen_fixed;
  std::vector<double> residuals;
  for (const Inlier& in : all) {
    if (seen_moving.near(moving[in.index]) || seen_fixed.near(fixed[in.index])) continue;
    seen_moving.add(moving[in.index]), seen_fixed.add(fixed[in.index]);
    residuals.push_back(in.residual);
  }
  v.distinct_inliers = int(residuals.size());
  const Frame ff = frame_of(fixed_w, fixed_h, fixed);
  const double area = std::max(1.0, (ff.x1 - ff.x0 + 1) * (ff.y1 - ff.y0 + 1));
  // n stays the number of matches (not of distinct ones): more tests, a larger NFA, the conservative side.
  const int n = v.matches, s = minimal_sample_size(est.model);
  // Residuals below a tenth of a pixel are keypoint-localisation noise, not extra evidence.
  constexpr double kResidualFloor = 0.1;
  // k starts at s + 1: the s points of a sample are fitted exactly whatever the data, so they are no evidence
  // (and a point that coincides with one of them was merged into it above). With distinct_inliers <= s there
  // is no evidence at all: log10 NFA stays +inf.
  for (int k = s + 1; k <= int(residuals.size()); ++k) {
    const double e = std::max(residuals[std::size_t(k - 1)], kResidualFloor);
    const double log_p = std::min(0.0, std::log10(kPi * e * e / area));
    const double nfa = std::log10(double(n - s)) + log10_choose(n, k) + log10_choose(k, s) + (k - s) * log_p;
    v.log10_nfa = std::min(v.log10_nfa, nfa);
  }
  if (v.distinct_inliers <= s)
    v.problems.push_back(
        fmt("weak support: the %.0f inliers are %.0f distinct location ", v.inliers, v.distinct_inliers) +
        (v.distinct_inliers == 1 ? "pair" : "pairs") + fmt(", no more than the %.0f points a sample fits exactly", s));
  else if (!(v.log10_nfa < o.max_log10_nfa))
    v.problems.push_back(fmt("weak support: %.0f inliers of %.0f matches, expected by chance (log10 NFA %.1f >= ",
                             v.inliers, v.matches, v.log10_nfa) +
                         fmt("%.1f", o.max_log10_nfa) +
                         (v.distinct_inliers < v.inliers ? fmt("; %.0f distinct location pairs)", v.distinct_inliers)
                                                         : std::string(")")));

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

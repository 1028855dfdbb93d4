#include "register_geo.hpp"

#include <cmath>
#include <cstdio>

#include "spectrasift/geometry.hpp"

namespace spectrasift::cli {

namespace {

using Mat3 = std::array<double, 9>;

Mat3 multiply(const Mat3& a, const Mat3& b) {
  Mat3 c{};
  for (int r = 0; r < 3; ++r)
    for (int k = 0; k < 3; ++k) {
      double s = 0;
      for (int i = 0; i < 3; ++i) s += a[std::size_t(r * 3 + i)] * b[std::size_t(i * 3 + k)];
      c[std::size_t(r * 3 + k)] = s;
    }
  return c;
}

/// pixel (centre convention) -> map of a georeferenced image, as a 3x3 matrix.
Mat3 pixel_to_map(const GeoReference& g) {
  const auto& t = g.geotransform;
  return {t[1], t[2], t[0] + 0.5 * (t[1] + t[2]), t[4], t[5], t[3] + 0.5 * (t[4] + t[5]), 0, 0, 1};
}

/// map -> pixel: the inverse of pixel_to_map (an affine map; invert_model's relative singularity test does not suit
/// map coordinates of millions of metres).
Mat3 map_to_pixel(const GeoReference& g) {
  const Mat3 a = pixel_to_map(g);
  const double det = a[0] * a[4] - a[1] * a[3];
  const double i0 = a[4] / det, i1 = -a[1] / det, i3 = -a[3] / det, i4 = a[0] / det;
  return {i0, i1, -(i0 * a[2] + i1 * a[5]), i3, i4, -(i3 * a[2] + i4 * a[5]), 0, 0, 1};
}

double distance(Point2 a, Point2 b) { return std::hypot(a.x - b.x, a.y - b.y); }

}  // namespace

MapModel map_model(const GeoReference& moving, const GeoReference& fixed, const std::array<double, 9>& h,
                   const std::vector<Point2>& pm, const std::vector<Point2>& pf, const std::vector<std::uint8_t>& inliers) {
  MapModel m;
  if (!moving.georeferenced() || !fixed.georeferenced()) return m;
  m.valid = true;
  m.matrix = multiply(multiply(pixel_to_map(fixed), h), map_to_pixel(moving));
  const double s = m.matrix[8];
  if (s != 0 && std::isfinite(s))
    for (double& v : m.matrix) v /= s;
  double sum2 = 0;
  for (std::size_t i = 0; i < pm.size() && i < inliers.size(); ++i) {
    if (!inliers[i]) continue;
    const double d = distance(fixed.pixel_to_map(apply_model(h, pm[i])), fixed.pixel_to_map(pf[i]));
    sum2 += d * d;
    m.max = std::max(m.max, d);
    ++m.inliers;
  }
  m.rms = m.inliers > 0 ? std::sqrt(sum2 / m.inliers) : 0.0;
  m.unit = crs_linear_unit(fixed.crs_wkt);
  m.same_crs = moving.crs_wkt == fixed.crs_wkt;
  return m;
}

nlohmann::json MapModel::to_json() const {
  const auto& a = matrix;
  nlohmann::json j = {{"matrix", {{a[0], a[1], a[2]}, {a[3], a[4], a[5]}, {a[6], a[7], a[8]}}},
                      {"matrix_maps", "moving -> fixed map coordinates (FIXED's CRS)"},
                      {"crs_unit", unit.name},
                      {"same_crs", same_crs},
                      {"inliers", inliers},
                      {"rms", rms},
                      {"max", max}};
  if (unit.metres > 0) {
    j["rms_m"] = rms * unit.metres;
    j["max_m"] = max * unit.metres;
  }
  return j;
}

std::string MapModel::describe() const {
  char line[256];
  std::string s = "map model (moving -> fixed map coordinates" + (unit.name.empty() ? "" : ", " + unit.name) + "):\n";
  for (int r = 0; r < 3; ++r) {
    std::snprintf(line, sizeof line, "  % .12g  % .12g  % .12g\n", matrix[std::size_t(r * 3)],
                  matrix[std::size_t(r * 3 + 1)], matrix[std::size_t(r * 3 + 2)]);
    s += line;
  }
  if (unit.metres > 0)
    std::snprintf(line, sizeof line, "residuals on the ground over %d inliers: rms %.3f m, max %.3f m\n", inliers,
                  rms * unit.metres, max * unit.metres);
  else
    std::snprintf(line, sizeof line, "residuals over %d inliers: rms %.6g, max %.6g %s\n", inliers, rms, max,
                  unit.name.empty() ? "(CRS units)" : unit.name.c_str());
  return s + line;
}

std::vector<ControlPoint> control_points(const GeoReference& fixed, const std::array<double, 9>& h,
                                         const std::vector<Point2>& pm, const std::vector<Point2>& pf,
                                         const std::vector<std::uint8_t>& inliers, bool inliers_only) {
  std::vector<ControlPoint> out;
  const auto target = [&](Point2 p) { return fixed.georeferenced() ? fixed.pixel_to_map(p) : p; };
  for (std::size_t i = 0; i < pm.size(); ++i) {
    const bool inlier = i < inliers.size() && inliers[i];
    if (inliers_only && !inlier) continue;
    ControlPoint c;
    c.pixel = pm[i];
    c.target = target(pf[i]);
    c.id = std::to_string(out.size() + 1);
    c.residual = distance(target(apply_model(h, pm[i])), c.target);
    c.inlier = inlier;
    out.push_back(c);
  }
  return out;
}

}  // namespace spectrasift::cli

// GeoReference arithmetic (spectrasift/georef.hpp): pixel <-> map through GDAL's geotransform, windows.
// No GDAL here: this file is in every build.
#include <cmath>
#include <cstdio>

#include "spectrasift/error.hpp"
#include "spectrasift/georef.hpp"

namespace spectrasift {

Point2 GeoReference::pixel_to_map(Point2 p) const noexcept {
  // GDAL's geotransform takes pixel edge coordinates; spectrasift's (0, 0) is the centre of the first pixel.
  const double col = p.x + 0.5, row = p.y + 0.5;
  const auto& g = geotransform;
  return {g[0] + col * g[1] + row * g[2], g[3] + col * g[4] + row * g[5]};
}

Point2 GeoReference::map_to_pixel(Point2 m) const {
  const auto& g = geotransform;
  const double det = g[1] * g[5] - g[2] * g[4];
  if (!(std::abs(det) > 0) || !std::isfinite(det))
    throw Error(ErrorCode::kInvalidArgument, "the geotransform is singular: map coordinates have no pixel");
  const double dx = m.x - g[0], dy = m.y - g[3];
  const double col = (g[5] * dx - g[2] * dy) / det, row = (g[1] * dy - g[4] * dx) / det;
  return {col - 0.5, row - 0.5};
}

GeoReference GeoReference::window(int x0, int y0) const {
  GeoReference w = *this;
  if (has_geotransform) {
    const auto& g = geotransform;
    w.geotransform[0] = g[0] + x0 * g[1] + y0 * g[2];
    w.geotransform[3] = g[3] + x0 * g[4] + y0 * g[5];
  }
  return w;
}

double GeoReference::pixel_size() const noexcept {
  const auto& g = geotransform;
  return std::sqrt(std::abs(g[1] * g[5] - g[2] * g[4]));
}

bool put_envi_georeference(const GeoReference& georef, EnviHeader& header) {
  const auto& g = georef.geotransform;
  if (!georef.has_geotransform || g[2] != 0 || g[4] != 0 || !(g[1] > 0) || !(g[5] < 0)) return false;
  char info[256];
  std::snprintf(info, sizeof info, "Arbitrary, 1, 1, %.17g, %.17g, %.17g, %.17g", g[0], g[3], g[1], -g[5]);
  header.fields["map info"] = info;
  if (!georef.crs_wkt.empty()) header.fields["coordinate system string"] = georef.crs_wkt;
  return true;
}

}  // namespace spectrasift

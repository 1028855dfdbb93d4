// `register` with georeferenced inputs: the pixel model in map coordinates, its residuals on the ground, and
// the matches as ground control points (GDAL VRT, GeoJSON).
#pragma once

#include <nlohmann/json.hpp>

#include <array>
#include <string>
#include <vector>

#include "spectrasift/georef.hpp"

namespace spectrasift::cli {

/// The model MOVING -> FIXED in map coordinates, M = A_fixed * H * A_moving^-1 (A: pixel -> map of each image),
/// and the inliers' residuals |A_fixed(H(pm)) - A_fixed(pf)| in FIXED's CRS units (and metres when the unit is
/// linear). Only when both images are georeferenced (`valid`).
struct MapModel {
  bool valid = false;
  std::array<double, 9> matrix{};
  int inliers = 0;
  double rms = 0, max = 0;  ///< CRS units
  LinearUnit unit;          ///< FIXED's CRS unit (metres = 0 when not linear or unknown)
  bool same_crs = false;    ///< both CRS WKT equal
  nlohmann::json to_json() const;
  std::string describe() const;  ///< the text output's lines
};

MapModel map_model(const GeoReference& moving, const GeoReference& fixed, const std::array<double, 9>& h,
                   const std::vector<Point2>& pm, const std::vector<Point2>& pf, const std::vector<std::uint8_t>& inliers);

/// The matches as control points of MOVING: pixel = the moving keypoint, target = the fixed keypoint in FIXED's
/// map coordinates (its pixels when FIXED is not georeferenced), residual = the model's error in target units.
/// inliers_only: the outliers are left out (a GCP VRT for gdalwarp).
std::vector<ControlPoint> control_points(const GeoReference& fixed, const std::array<double, 9>& h,
                                         const std::vector<Point2>& pm, const std::vector<Point2>& pf,
                                         const std::vector<std::uint8_t>& inliers, bool inliers_only);

}  // namespace spectrasift::cli

// Matches as ground control points (spectrasift/georef.hpp): a GDAL VRT of the source raster carrying GCPs,
// which gdalwarp uses to georeference it, and a GeoJSON FeatureCollection of the points for GIS tools.
#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "io/gdal_common.hpp"
#include "spectrasift/error.hpp"
#include "spectrasift/georef.hpp"

#ifdef SPECTRASIFT_HAVE_GDAL
#include <gdal.h>
#include <ogr_srs_api.h>
#endif

namespace spectrasift {

namespace fs = std::filesystem;

namespace {

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
  f.flush();
  if (!f) throw Error(ErrorCode::kIo, path.string() + ": cannot write");
}

}  // namespace

#ifdef SPECTRASIFT_HAVE_GDAL

namespace {

/// XML character escaping for attribute values and text.
std::string xml_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\n': out += "&#10;"; break;
      default: out += c;
    }
  }
  return out;
}

/// A double with every digit that round-trips.
std::string exact(double v) {
  char b[40];
  std::snprintf(b, sizeof b, "%.17g", v);
  return b;
}

}  // namespace

void write_gcp_vrt(const fs::path& path, const fs::path& final_path, const std::string& source,
                   const std::vector<ControlPoint>& points, const std::string& crs_wkt) {
  io_detail::GdalQuiet quiet;
  io_detail::DatasetCloser ds{GDALOpenEx(source.c_str(), GDAL_OF_RASTER | GDAL_OF_READONLY, nullptr, nullptr, nullptr)};
  if (!ds.ds || GDALGetRasterCount(ds.ds) == 0)
    throw Error(ErrorCode::kBadFormat, source + ": GDAL cannot read this raster for the GCP VRT (" +
                                           io_detail::gdal_message("unknown format") + ")");
  // The source by a path relative to the VRT's folder when it exists on disk (the pair can then be moved
  // together), else as given (a subdataset name).
  std::string name = source;
  bool relative = false;
  std::error_code ec;
  if (fs::exists(source, ec)) {
    const fs::path rel = fs::absolute(source).lexically_relative(fs::absolute(final_path).parent_path());
    if (!rel.empty()) {
      name = rel.generic_string();
      relative = true;
    }
  }
  std::string x = "<VRTDataset rasterXSize=\"" + std::to_string(GDALGetRasterXSize(ds.ds)) + "\" rasterYSize=\"" +
                  std::to_string(GDALGetRasterYSize(ds.ds)) + "\">\n";
  x += "  <GCPList Projection=\"" + xml_escape(crs_wkt) + "\">\n";
  for (const ControlPoint& p : points)  // GDAL's GCP pixel/line are edge coordinates: centre (0,0) is 0.5
    x += "    <GCP Id=\"" + xml_escape(p.id) + "\" Pixel=\"" + exact(p.pixel.x + 0.5) + "\" Line=\"" +
         exact(p.pixel.y + 0.5) + "\" X=\"" + exact(p.target.x) + "\" Y=\"" + exact(p.target.y) + "\"/>\n";
  x += "  </GCPList>\n";
  for (int i = 1; i <= GDALGetRasterCount(ds.ds); ++i) {
    GDALRasterBandH b = GDALGetRasterBand(ds.ds, i);
    x += "  <VRTRasterBand dataType=\"" + std::string(GDALGetDataTypeName(GDALGetRasterDataType(b))) + "\" band=\"" +
         std::to_string(i) + "\">\n";
    int has = 0;
    const double nd = GDALGetRasterNoDataValue(b, &has);
    if (has) x += "    <NoDataValue>" + exact(nd) + "</NoDataValue>\n";
    x += "    <SimpleSource>\n      <SourceFilename relativeToVRT=\"" + std::string(relative ? "1" : "0") + "\">" +
         xml_escape(name) + "</SourceFilename>\n      <SourceBand>" + std::to_string(i) +
         "</SourceBand>\n    </SimpleSource>\n  </VRTRasterBand>\n";
  }
  x += "</VRTDataset>\n";
  write_text(path, x);
}

#else

void write_gcp_vrt(const fs::path& path, const fs::path&, const std::string&, const std::vector<ControlPoint>&,
                   const std::string&) {
  throw io_detail::gdal_missing(path.string() + ": writing a GCP VRT");
}

#endif

void write_control_points_geojson(const fs::path& path, const std::vector<ControlPoint>& points,
                                  const std::string& crs_wkt) {
  std::vector<Point2> lonlat(points.size());
  bool geographic = false;
#ifdef SPECTRASIFT_HAVE_GDAL
  if (!crs_wkt.empty()) {
    io_detail::GdalQuiet quiet;
    OGRSpatialReferenceH src = OSRNewSpatialReference(crs_wkt.c_str());
    OGRSpatialReferenceH wgs84 = OSRNewSpatialReference(nullptr);
    if (src && OSRSetWellKnownGeogCS(wgs84, "WGS84") == OGRERR_NONE) {
      // RFC 7946 orders longitude first, whatever the CRS's own axis order.
      OSRSetAxisMappingStrategy(src, OAMS_TRADITIONAL_GIS_ORDER);
      OSRSetAxisMappingStrategy(wgs84, OAMS_TRADITIONAL_GIS_ORDER);
      if (OGRCoordinateTransformationH ct = OCTNewCoordinateTransformation(src, wgs84)) {
        geographic = true;
        for (std::size_t i = 0; i < points.size() && geographic; ++i) {
          double x = points[i].target.x, y = points[i].target.y;
          geographic = OCTTransform(ct, 1, &x, &y, nullptr) != 0;
          lonlat[i] = {x, y};
        }
        OCTDestroyCoordinateTransformation(ct);
      }
    }
    if (src) OSRDestroySpatialReference(src);
    OSRDestroySpatialReference(wgs84);
  }
#endif
  nlohmann::json features = nlohmann::json::array();
  for (std::size_t i = 0; i < points.size(); ++i) {
    const ControlPoint& p = points[i];
    const Point2 c = geographic ? lonlat[i] : p.target;
    nlohmann::json props = {{"id", p.id},           {"pixel_x", p.pixel.x},   {"pixel_y", p.pixel.y},
                            {"target_x", p.target.x}, {"target_y", p.target.y}, {"residual", p.residual},
                            {"inlier", p.inlier}};
    features.push_back({{"type", "Feature"},
                        {"geometry", {{"type", "Point"}, {"coordinates", {c.x, c.y}}}},
                        {"properties", props}});
  }
  nlohmann::json doc = {{"type", "FeatureCollection"}, {"features", features}};
  doc["spectrasift_coordinates"] =
      geographic ? "WGS 84 longitude, latitude (RFC 7946); target_x/target_y: map coordinates of the reference's CRS"
                 : "the targets as given (the reference's pixels or map coordinates; no CRS known to transform)";
  write_text(path, doc.dump(1) + "\n");
}

}  // namespace spectrasift

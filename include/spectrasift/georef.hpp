// spectrasift/georef.hpp — georeferenced rasters: where the pixels are on the ground (GDAL's model: an
// affine geotransform, a CRS as WKT, a nodata value), reading any raster GDAL opens, writing GeoTIFF, and
// exporting matches as ground control points.
//
// Everything that needs GDAL works only in a build linked with it (CMake SPECTRASIFT_WITH_GDAL, on when
// libgdal-dev is found; gdal_supported() tells); without it those functions throw Error(kUnsupported) with a
// message that says how to get them. GeoReference's arithmetic and the GeoJSON writer need no GDAL.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "spectrasift/cube.hpp"
#include "spectrasift/io.hpp"
#include "spectrasift/types.hpp"

namespace spectrasift {

/// True when this build reads and writes rasters through GDAL.
bool gdal_supported() noexcept;

/// Georeferencing of a raster, as GDAL keeps it.
struct GeoReference {
  /// GDAL's geotransform: the map position of pixel EDGE coordinates (col, row), i.e. (0, 0) is the
  /// top-left corner of the top-left pixel:  X = gt[0] + col gt[1] + row gt[2],  Y = gt[3] + col gt[4] + row gt[5].
  /// spectrasift's pixel coordinates put (0, 0) at the pixel's centre: col = x + 0.5 (pixel_to_map does it).
  std::array<double, 6> geotransform{0, 1, 0, 0, 0, 1};
  bool has_geotransform = false;  ///< false: the raster has no geotransform (geotransform is the identity)
  std::string crs_wkt;            ///< the CRS as WKT (GDAL's form); empty when unknown
  std::optional<double> nodata;   ///< the nodata value of the raster's (first) band

  /// True when the raster has a geotransform (a CRS alone does not place pixels).
  bool georeferenced() const noexcept { return has_geotransform; }
  /// Map coordinates of a point in spectrasift pixel coordinates ((0, 0) = centre of the top-left pixel).
  Point2 pixel_to_map(Point2 p) const noexcept;
  /// The inverse; throws Error(kInvalidArgument) when the geotransform is singular.
  Point2 map_to_pixel(Point2 m) const;
  /// The georeferencing of the window of this raster whose top-left pixel is (x0, y0) (gdal_translate -srcwin).
  GeoReference window(int x0, int y0) const;
  /// The size of a pixel on the ground: sqrt(|det| of the geotransform's 2x2 part), in CRS units.
  double pixel_size() const noexcept;
};

/// Puts a north-up georeferencing into an ENVI header's "map info" ({Arbitrary, 1, 1, x, y, dx, dy}: the map position
/// of the top-left pixel's corner and the pixel size) and "coordinate system string" (the WKT), which GDAL and ENVI
/// read; a rotated geotransform, or none, leaves the header as it is. Returns whether it wrote them.
bool put_envi_georeference(const GeoReference& georef, EnviHeader& header);

/// The CRS's linear unit name ("metre", "US survey foot", "degree" for a geographic CRS) and its size in
/// metres (0 for angular units); ("", 0) when unknown or without GDAL.
struct LinearUnit {
  std::string name;
  double metres = 0;
};
LinearUnit crs_linear_unit(const std::string& crs_wkt);

/// The georeferencing GDAL finds for a raster (any format it opens; ENVI "map info", world files, ...).
/// Without GDAL, or for a file GDAL cannot open, an empty GeoReference (georeferenced() false).
GeoReference read_georeference(const std::string& name);

// ---- reading through GDAL --------------------------------------------------------------------------

/// One band of a raster read through GDAL, with its georeferencing.
struct GeoImage {
  Image image;           ///< one channel: Byte -> U8, UInt16 -> U16, every other type -> F32 holding the values as stored
  GeoReference georef;   ///< nodata of the band read
  int band = 1;          ///< the band read (1-based, GDAL's numbering)
  int band_count = 0;    ///< bands in the raster
  std::string driver;    ///< GDAL's short driver name ("GTiff", "JP2OpenJPEG", "netCDF", ...)
};

/// Reads band `band` (1-based; 0 = the first) of any raster GDAL opens: a file name, or a subdataset in GDAL's
/// syntax (NETCDF:"file.nc":var, HDF5:"file.h5"://path). Complex bands are refused (kUnsupported); a missing band
/// is kInvalidArgument; a raster GDAL cannot open is kBadFormat (kIo when the file does not exist);
/// limits.max_pixels is checked before the pixels are read.
GeoImage read_raster_image(const std::string& name, int band = 0, const ImageLimits& limits = {});

/// Every band of a raster read through GDAL into memory, band after band (BSQ), in its own sample type.
class RasterCube {
 public:
  /// The in-memory view for spectral_match and the reference helpers (name = the raster's name).
  const CubeRef& ref() const noexcept { return ref_; }
  const GeoReference& georef() const noexcept { return georef_; }
  const std::vector<std::string>& band_names() const noexcept { return band_names_; }
  const std::string& driver() const noexcept { return driver_; }

 private:
  friend RasterCube read_raster_cube(const std::string&, std::uint64_t);
  std::vector<std::uint8_t> data_;
  CubeRef ref_;
  GeoReference georef_;
  std::vector<std::string> band_names_;
  std::string driver_;
};

/// Reads all bands of any raster GDAL opens (multiband GeoTIFF, ENVI, HDF/NetCDF subdatasets, ...).
/// Byte, (U)Int16, (U)Int32, Float32 and Float64 keep their type; others are refused (kUnsupported). The
/// first band's nodata value becomes the view's data_ignore_value; wavelengths are taken from the band
/// metadata "wavelength" (ENVI driver) when every band has one. max_pixels (0 = none) is checked first.
RasterCube read_raster_cube(const std::string& name, std::uint64_t max_pixels = 0);

// ---- writing GeoTIFF --------------------------------------------------------------------------------

/// Bands to write: band b's pixel (x, y) is data[((b * height + y) * width + x)] when `band_sequential`,
/// data[(y * width + x) * bands + b] otherwise (an Image's interleaved channels).
struct RasterBands {
  const void* data = nullptr;
  SampleType type = SampleType::kF32;  ///< kU8, kU16, kI16, kI32, kU32, kF32, kF64
  int width = 0, height = 0, bands = 1;
  bool band_sequential = true;
  std::vector<std::string> band_names;  ///< band descriptions, empty or one per band
};

/// Writes a GeoTIFF: tiled 256 x 256 (strips for rasters narrower than a tile), DEFLATE with the predictor
/// that suits the type, BIGTIFF when needed, the geotransform and CRS of `georef` when it has them, and
/// its nodata value when set (GDAL_NODATA tag). The file is written directly at `path` (give an OutputSet's
/// temporary name for all-or-nothing output). Needs GDAL (kUnsupported otherwise).
void write_geotiff(const std::filesystem::path& path, const RasterBands& bands, const GeoReference& georef);
/// An image (U8, U16 or F32; its channels as bands).
void write_geotiff(const std::filesystem::path& path, const Image& image, const GeoReference& georef);

// ---- matches as ground control points ------------------------------------------------------------

/// One control point: a pixel of the image to be georeferenced and where it is.
struct ControlPoint {
  Point2 pixel;        ///< in the image to georeference (spectrasift pixel coordinates)
  Point2 target;       ///< its position: map coordinates of the target CRS (or the reference image's pixels)
  std::string id;      ///< GCP id ("1", "2", ...)
  double residual = 0; ///< distance between the model's image of `pixel` and `target`, in target units
  bool inlier = true;
};

/// Writes a GDAL VRT of the raster `source` (every band, by reference: the VRT names `source` relative to its
/// own folder when it can) that carries the control points as GCPs in `crs_wkt` (empty: no CRS), so that
///   gdalwarp -r bilinear OUT.vrt georeferenced.tif   (or gdalwarp -tps / -order 1)
/// georeferences it. GDAL's GCPs use pixel edge coordinates: pixel (x, y) is written as (x + 0.5, y + 0.5).
/// `path` is written directly (give an OutputSet's temporary name; `final_path` is the name the file will have,
/// so that the relative source path is right). Needs GDAL.
void write_gcp_vrt(const std::filesystem::path& path, const std::filesystem::path& final_path,
                   const std::string& source, const std::vector<ControlPoint>& points, const std::string& crs_wkt);

/// Writes the control points as a GeoJSON FeatureCollection of Points (RFC 7946). With a CRS that GDAL can
/// transform, the coordinates are WGS 84 longitude/latitude and the properties keep the map coordinates
/// ("target_x", "target_y"); without one (or without GDAL) the coordinates are the targets as given and the file says
/// so in "spectrasift_coordinates". Properties: id, pixel_x, pixel_y (source image), target_x, target_y,
/// residual, inlier. Written directly at `path`.
void write_control_points_geojson(const std::filesystem::path& path, const std::vector<ControlPoint>& points,
                                  const std::string& crs_wkt);

}  // namespace spectrasift

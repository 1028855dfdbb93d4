// Writing GeoTIFF through GDAL (spectrasift/georef.hpp): tiled, DEFLATE-compressed, with the geotransform,
// CRS and nodata value of a GeoReference. Without GDAL: Error(kUnsupported) saying how to get it.
#include <string>

#include "io/gdal_common.hpp"
#include "spectrasift/error.hpp"
#include "spectrasift/georef.hpp"

#ifdef SPECTRASIFT_HAVE_GDAL
#include <cpl_string.h>
#include <gdal.h>
#endif

namespace spectrasift {

namespace {

void check_bands(const std::filesystem::path& path, const RasterBands& b) {
  if (!b.data || b.width <= 0 || b.height <= 0 || b.bands <= 0)
    throw Error(ErrorCode::kInvalidArgument, path.string() + ": nothing to write (empty raster)");
  if (!b.band_names.empty() && int(b.band_names.size()) != b.bands)
    throw Error(ErrorCode::kInvalidArgument, path.string() + ": " + std::to_string(b.band_names.size()) +
                                                 " band names for " + std::to_string(b.bands) + " bands");
}

}  // namespace

#ifdef SPECTRASIFT_HAVE_GDAL

namespace {

GDALDataType gdal_write_type(const std::filesystem::path& path, SampleType t) {
  const GDALDataType g = io_detail::gdal_type(t);
  if (g == GDT_Unknown)
    throw Error(ErrorCode::kUnsupported, path.string() + ": GeoTIFF output of " + to_string(t) + " samples is not supported");
  return g;
}

}  // namespace

void write_geotiff(const std::filesystem::path& path, const RasterBands& b, const GeoReference& georef) {
  check_bands(path, b);
  const GDALDataType type = gdal_write_type(path, b.type);
  io_detail::GdalQuiet quiet;
  GDALDriverH driver = GDALGetDriverByName("GTiff");
  if (!driver) throw Error(ErrorCode::kUnsupported, path.string() + ": this GDAL has no GTiff driver");
  const bool is_float = b.type == SampleType::kF32 || b.type == SampleType::kF64;
  // Predictor 2 (horizontal differences) suits integers, 3 (floating point) floats: both lossless.
  const std::string predictor = std::string("PREDICTOR=") + (is_float ? "3" : "2");
  const std::string interleave = std::string("INTERLEAVE=") + (b.band_sequential && b.bands > 1 ? "BAND" : "PIXEL");
  const char* options[] = {"TILED=YES",         "BLOCKXSIZE=256",     "BLOCKYSIZE=256",   "COMPRESS=DEFLATE",
                           predictor.c_str(),   interleave.c_str(),   "BIGTIFF=IF_SAFER", nullptr};
  io_detail::DatasetCloser ds{GDALCreate(driver, path.c_str(), b.width, b.height, b.bands, type,
                                         const_cast<char**>(options))};
  if (!ds.ds) throw Error(ErrorCode::kIo, path.string() + ": cannot create the GeoTIFF (" + io_detail::gdal_message() + ")");
  if (georef.has_geotransform) {
    double gt[6];
    for (int i = 0; i < 6; ++i) gt[i] = georef.geotransform[std::size_t(i)];
    GDALSetGeoTransform(ds.ds, gt);
  }
  if (!georef.crs_wkt.empty()) GDALSetProjection(ds.ds, georef.crs_wkt.c_str());
  for (int i = 1; i <= b.bands; ++i) {
    GDALRasterBandH band = GDALGetRasterBand(ds.ds, i);
    if (georef.nodata) GDALSetRasterNoDataValue(band, *georef.nodata);
    if (!b.band_names.empty()) GDALSetDescription(band, b.band_names[std::size_t(i - 1)].c_str());
  }
  const GSpacing es = GSpacing(sample_size(b.type));
  const GSpacing w = b.width, h = b.height, n = b.bands;
  const GSpacing pixel = b.band_sequential ? es : es * n;
  const GSpacing line = pixel * w;
  const GSpacing band = b.band_sequential ? es * w * h : es;
  if (GDALDatasetRasterIOEx(ds.ds, GF_Write, 0, 0, b.width, b.height, const_cast<void*>(b.data), b.width, b.height,
                            type, b.bands, nullptr, pixel, line, band, nullptr) != CE_None)
    throw Error(ErrorCode::kIo, path.string() + ": writing the pixels failed (" + io_detail::gdal_message() + ")");
  CPLErrorReset();
  GDALClose(ds.ds);  // flushes: compression and the directory are written here
  ds.ds = nullptr;
  if (CPLGetLastErrorType() >= CE_Failure)
    throw Error(ErrorCode::kIo, path.string() + ": writing the GeoTIFF failed (" + io_detail::gdal_message() + ")");
}

#else

void write_geotiff(const std::filesystem::path& path, const RasterBands& b, const GeoReference&) {
  check_bands(path, b);
  throw io_detail::gdal_missing(path.string() + ": writing GeoTIFF");
}

#endif

void write_geotiff(const std::filesystem::path& path, const Image& image, const GeoReference& georef) {
  RasterBands b;
  b.data = image.data.data();
  b.type = image.type == PixelType::kU8 ? SampleType::kU8 : image.type == PixelType::kU16 ? SampleType::kU16 : SampleType::kF32;
  b.width = image.width;
  b.height = image.height;
  b.bands = image.channels;
  b.band_sequential = false;
  write_geotiff(path, b, georef);
}

}  // namespace spectrasift

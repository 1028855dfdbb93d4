// Reading rasters through GDAL (spectrasift/georef.hpp): one band as an Image, or every band as an in-memory
// cube, with the geotransform, CRS and nodata value. In a build without GDAL the readers throw
// Error(kUnsupported) saying how to get them, and read_georeference() finds nothing.
#include <bit>
#include <cmath>
#include <filesystem>
#include <string>

#include "core/limits.hpp"
#include "io/gdal_common.hpp"
#include "spectrasift/error.hpp"
#include "spectrasift/georef.hpp"

#ifdef SPECTRASIFT_HAVE_GDAL
#include <cpl_string.h>
#include <gdal.h>
#include <ogr_srs_api.h>
#endif

namespace spectrasift {

bool gdal_supported() noexcept {
#ifdef SPECTRASIFT_HAVE_GDAL
  return true;
#else
  return false;
#endif
}

#ifdef SPECTRASIFT_HAVE_GDAL

namespace {

using io_detail::DatasetCloser;
using io_detail::gdal_type;
using io_detail::gdal_message;
using io_detail::GdalQuiet;

/// Opens a raster; the error tells a missing file (kIo) from one GDAL cannot read (kBadFormat), and lists the
/// subdatasets of a container (HDF, NetCDF) that holds no raster of its own.
GDALDatasetH open_raster(const std::string& name) {
  GDALDatasetH ds = GDALOpenEx(name.c_str(), GDAL_OF_RASTER | GDAL_OF_READONLY, nullptr, nullptr, nullptr);
  if (!ds) {
    std::error_code ec;
    if (!std::filesystem::exists(name, ec) && name.find(':') == std::string::npos)
      throw Error(ErrorCode::kIo, name + ": no such file");
    throw Error(ErrorCode::kBadFormat, name + ": GDAL cannot read this raster (" + gdal_message("unknown format") + ")");
  }
  if (GDALGetRasterCount(ds) == 0) {
    std::string list;
    char** sub = GDALGetMetadata(ds, "SUBDATASETS");
    for (int i = 0; sub && sub[i]; ++i) {
      const std::string item = sub[i];
      const auto eq = item.find('=');
      if (item.find("_NAME=") != std::string::npos && eq != std::string::npos) list += "\n  " + item.substr(eq + 1);
    }
    GDALClose(ds);
    if (!list.empty())
      throw Error(ErrorCode::kInvalidArgument, name + ": a container of subdatasets; name one in GDAL's syntax:" + list);
    throw Error(ErrorCode::kBadFormat, name + ": GDAL finds no raster band in it");
  }
  return ds;
}

GeoReference georef_of(GDALDatasetH ds, GDALRasterBandH band) {
  GeoReference g;
  double gt[6];
  if (GDALGetGeoTransform(ds, gt) == CE_None) {
    for (int i = 0; i < 6; ++i) g.geotransform[std::size_t(i)] = gt[i];
    g.has_geotransform = true;
  }
  if (const char* wkt = GDALGetProjectionRef(ds)) g.crs_wkt = wkt;
  int has = 0;
  const double nd = GDALGetRasterNoDataValue(band, &has);
  if (has) g.nodata = nd;
  CPLErrorReset();  // "no geotransform" is not an error of the read
  return g;
}

void check_pixels(const std::string& name, int w, int h, std::uint64_t max_pixels) {
  detail::check_pixel_limit(name + ": raster of ", std::uint64_t(w), std::uint64_t(h), max_pixels);
}

/// The in-memory type of a GDAL band type, or nothing for types the cube path does not take.
bool cube_type(GDALDataType t, SampleType& out) {
  switch (t) {
    case GDT_Byte: out = SampleType::kU8; return true;
    case GDT_UInt16: out = SampleType::kU16; return true;
    case GDT_Int16: out = SampleType::kI16; return true;
    case GDT_UInt32: out = SampleType::kU32; return true;
    case GDT_Int32: out = SampleType::kI32; return true;
    case GDT_Float32: out = SampleType::kF32; return true;
    case GDT_Float64: out = SampleType::kF64; return true;
    default: return false;
  }
}

}  // namespace

LinearUnit crs_linear_unit(const std::string& crs_wkt) {
  if (crs_wkt.empty()) return {};
  GdalQuiet quiet;
  OGRSpatialReferenceH srs = OSRNewSpatialReference(crs_wkt.c_str());
  if (!srs) return {};
  LinearUnit u;
  if (OSRIsGeographic(srs)) {
    u.name = "degree";
  } else {
    char* name = nullptr;
    u.metres = OSRGetLinearUnits(srs, &name);
    u.name = name ? name : "";
  }
  OSRDestroySpatialReference(srs);
  return u;
}

GeoReference read_georeference(const std::string& name) {
  GdalQuiet quiet;
  GDALDatasetH ds = GDALOpenEx(name.c_str(), GDAL_OF_RASTER | GDAL_OF_READONLY, nullptr, nullptr, nullptr);
  if (!ds) return {};
  DatasetCloser close{ds};
  if (GDALGetRasterCount(ds) == 0) return {};
  return georef_of(ds, GDALGetRasterBand(ds, 1));
}

GeoImage read_raster_image(const std::string& name, int band, const ImageLimits& limits) {
  GdalQuiet quiet;
  DatasetCloser ds{open_raster(name)};
  GeoImage out;
  out.band_count = GDALGetRasterCount(ds.ds);
  out.band = band == 0 ? 1 : band;
  if (out.band < 1 || out.band > out.band_count)
    throw Error(ErrorCode::kInvalidArgument, name + ": band " + std::to_string(band) + " does not exist (the raster has " +
                                                 std::to_string(out.band_count) + " band" +
                                                 (out.band_count == 1 ? ")" : "s, 1.." + std::to_string(out.band_count) + ")"));
  GDALRasterBandH b = GDALGetRasterBand(ds.ds, out.band);
  const GDALDataType t = GDALGetRasterDataType(b);
  if (GDALDataTypeIsComplex(t))
    throw Error(ErrorCode::kUnsupported, name + ": band " + std::to_string(out.band) + " is complex (" +
                                             GDALGetDataTypeName(t) + "); take its amplitude first");
  const int w = GDALGetRasterXSize(ds.ds), h = GDALGetRasterYSize(ds.ds);
  check_pixels(name, w, h, limits.max_pixels);
  const PixelType pt = t == GDT_Byte ? PixelType::kU8 : t == GDT_UInt16 ? PixelType::kU16 : PixelType::kF32;
  const GDALDataType read_as = pt == PixelType::kU8 ? GDT_Byte : pt == PixelType::kU16 ? GDT_UInt16 : GDT_Float32;
  out.image = Image::allocate(w, h, 1, pt);
  if (GDALRasterIO(b, GF_Read, 0, 0, w, h, out.image.data.data(), w, h, read_as, 0, 0) != CE_None)
    throw Error(ErrorCode::kIo, name + ": reading band " + std::to_string(out.band) + " failed (" + gdal_message() + ")");
  out.georef = georef_of(ds.ds, b);
  out.driver = GDALGetDriverShortName(GDALGetDatasetDriver(ds.ds));
  return out;
}

RasterCube read_raster_cube(const std::string& name, std::uint64_t max_pixels) {
  GdalQuiet quiet;
  DatasetCloser ds{open_raster(name)};
  const int w = GDALGetRasterXSize(ds.ds), h = GDALGetRasterYSize(ds.ds), bands = GDALGetRasterCount(ds.ds);
  check_pixels(name, w, h, max_pixels);
  GDALRasterBandH first = GDALGetRasterBand(ds.ds, 1);
  const GDALDataType t = GDALGetRasterDataType(first);
  SampleType st{};
  if (!cube_type(t, st))
    throw Error(ErrorCode::kUnsupported, name + ": band type " + std::string(GDALGetDataTypeName(t)) +
                                             " is not supported for cubes (Byte, (U)Int16, (U)Int32, Float32, Float64)");
  const std::size_t es = sample_size(st);
  std::size_t bytes = 0;
  if (__builtin_mul_overflow(std::size_t(w) * std::size_t(h), std::size_t(bands) * es, &bytes))
    throw Error(ErrorCode::kInvalidArgument, name + ": the cube's size overflows the address space");
  RasterCube cube;
  cube.data_.resize(bytes);
  // Band after band (BSQ), in the first band's type (GDAL converts a band of another type).
  if (GDALDatasetRasterIO(ds.ds, GF_Read, 0, 0, w, h, cube.data_.data(), w, h, gdal_type(st), bands, nullptr, 0, 0, 0) !=
      CE_None)
    throw Error(ErrorCode::kIo, name + ": reading the bands failed (" + gdal_message() + ")");
  cube.georef_ = georef_of(ds.ds, first);
  cube.driver_ = GDALGetDriverShortName(GDALGetDatasetDriver(ds.ds));
  CubeRef& r = cube.ref_;
  r.data = cube.data_.data();
  r.size_bytes = cube.data_.size();
  r.type = st;
  r.samples = w;
  r.lines = h;
  r.bands = bands;
  r.interleave = Interleave::kBsq;
  r.big_endian = std::endian::native == std::endian::big;
  r.data_ignore_value = cube.georef_.nodata;
  r.name = name;
  std::vector<double> wavelength;
  for (int i = 1; i <= bands; ++i) {
    GDALRasterBandH b = GDALGetRasterBand(ds.ds, i);
    const char* d = GDALGetDescription(b);
    cube.band_names_.push_back(d ? d : "");
    const char* wl = GDALGetMetadataItem(b, "wavelength", nullptr);
    if (wl && *wl) wavelength.push_back(std::atof(wl));
  }
  if (int(wavelength.size()) == bands) r.wavelength = wavelength;
  return cube;
}

#else  // no GDAL

LinearUnit crs_linear_unit(const std::string&) { return {}; }

GeoReference read_georeference(const std::string&) { return {}; }

GeoImage read_raster_image(const std::string& name, int, const ImageLimits&) {
  throw io_detail::gdal_missing(name + ": reading this raster");
}

RasterCube read_raster_cube(const std::string& name, std::uint64_t) {
  throw io_detail::gdal_missing(name + ": reading this raster as a cube");
}

#endif

}  // namespace spectrasift

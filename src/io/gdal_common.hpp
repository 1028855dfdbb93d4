// Internal helpers of the GDAL adapter (gdal_raster.cpp, geotiff_write.cpp, gcp_export.cpp): registering the
// drivers once, GDAL's messages kept for our Errors instead of printed, and the error of a build without GDAL.
#pragma once

#include <string>

#include "spectrasift/error.hpp"

namespace spectrasift::io_detail {

/// The error of a GDAL feature in a build without GDAL: what was asked and how to get it.
inline Error gdal_missing(const std::string& what) {
  return Error(ErrorCode::kUnsupported,
               what + " needs GDAL, and this build has none: install libgdal-dev (Debian; scripts/setup-debian.sh) "
                      "and rebuild spectrasift (CMake finds it: SPECTRASIFT_WITH_GDAL=AUTO or ON)");
}

}  // namespace spectrasift::io_detail

#ifdef SPECTRASIFT_HAVE_GDAL
#include <cpl_error.h>
#include <gdal.h>

#include <mutex>

#include "spectrasift/envi.hpp"

namespace spectrasift::io_detail {

/// Registers GDAL's drivers once per process.
inline void gdal_init() {
  static std::once_flag once;
  std::call_once(once, [] { GDALAllRegister(); });
}

/// While alive, GDAL's errors and warnings on this thread are kept (CPLGetLastErrorMsg) instead of printed.
class GdalQuiet {
 public:
  GdalQuiet() {
    gdal_init();
    CPLPushErrorHandler(CPLQuietErrorHandler);
    CPLErrorReset();
  }
  ~GdalQuiet() { CPLPopErrorHandler(); }
  GdalQuiet(const GdalQuiet&) = delete;
  GdalQuiet& operator=(const GdalQuiet&) = delete;
};

/// GDAL's last message on this thread, or `fallback`.
inline std::string gdal_message(const char* fallback = "GDAL error") {
  const char* m = CPLGetLastErrorMsg();
  return (m && *m) ? std::string(m) : std::string(fallback);
}

/// GDAL's band type of a sample type; GDT_Unknown for the 64-bit integers, which GDAL 3.6 does not have.
inline GDALDataType gdal_type(SampleType t) {
  switch (t) {
    case SampleType::kU8: return GDT_Byte;
    case SampleType::kU16: return GDT_UInt16;
    case SampleType::kI16: return GDT_Int16;
    case SampleType::kU32: return GDT_UInt32;
    case SampleType::kI32: return GDT_Int32;
    case SampleType::kF32: return GDT_Float32;
    case SampleType::kF64: return GDT_Float64;
    default: return GDT_Unknown;
  }
}

/// Closes a dataset at the end of a scope.
struct DatasetCloser {
  GDALDatasetH ds = nullptr;
  ~DatasetCloser() {
    if (ds) GDALClose(ds);
  }
};

}  // namespace spectrasift::io_detail
#endif

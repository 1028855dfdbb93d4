// spectrasift/cube.hpp — a cube already in memory (a NumPy array, a GDAL read, a decoded file), matched
// without writing an ENVI file. The view does not own or copy the samples: they must stay valid and
// unchanged during the call that uses the view.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "spectrasift/envi.hpp"

namespace spectrasift {

/// A read-only view of a cube in memory. Element (line y, sample x, band b) is the sample of `type` at
///   data + (y * line_stride + x * sample_stride + b * band_stride) * sample_size(type)  (bytes).
/// Strides are in elements; all three 0 = the dense layout of `interleave`. Non-zero strides must
/// describe a dense BSQ, BIL or BIP layout (the interleave is then taken from them): for a C-ordered
/// NumPy array they are array.strides / itemsize, e.g. shape (lines, samples, bands) is BIP and
/// (bands, lines, samples) is BSQ. Padded or sliced views: copy into a dense array first.
/// spectral_match() checks the view and throws Error(kInvalidArgument) naming what is wrong.
struct CubeRef {
  const void* data = nullptr;
  std::size_t size_bytes = 0;  ///< bytes readable at data (checked against the shape and strides)
  SampleType type = SampleType::kF32;
  int samples = 0, lines = 0, bands = 0;
  Interleave interleave = Interleave::kBsq;  ///< the layout when the strides are 0
  std::size_t line_stride = 0, sample_stride = 0, band_stride = 0;
  bool big_endian = false;  ///< byte order of the samples (false: little-endian)
  // Optional metadata, as in an ENVI header (EnviHeader's fields of the same names):
  std::vector<double> wavelength;                   ///< empty when unknown
  std::vector<int> bbl;                             ///< bad band list: 1 = good, 0 = bad; empty = all good
  std::optional<double> data_ignore_value;          ///< a pixel holding it in any used band is no-data
  std::optional<double> reflectance_scale_factor;  ///< samples are divided by it
  std::string name = "in-memory cube";              ///< used in messages
};

/// The view of an opened ENVI cube (its memory map, header metadata and path as the name).
CubeRef cube_ref(const EnviCube& cube);

/// One value of a view converted to double (byte order handled; no scale factor), for small reads. The view is
/// not checked (spectral_match checks it); line, sample and band must be inside it.
double cube_value(const CubeRef& cube, int line, int sample, int band) noexcept;

}  // namespace spectrasift

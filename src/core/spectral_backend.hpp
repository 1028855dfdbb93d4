// The contract between src/core/spectral.cpp (checks, references, output) and the three backends' entry
// BackendImpl::spectral_match (backend/backend.hpp).
// core prepares everything backend-independent; a backend streams the cube in chunks of whole
// lines, converts samples from their native type and byte order itself, and writes the reduction.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/context_impl.hpp"
#include "spectrasift/cube.hpp"
#include "spectrasift/spectral.hpp"

namespace spectrasift::detail {

/// The cube as stored: element (y, x, b) at data + (y*line_stride + x*sample_stride + b*band_stride)
/// * sample_size(type). Values are multiplied by `scale` after conversion (1/reflectance scale factor).
struct CubeView {
  const std::uint8_t* data = nullptr;
  SampleType type = SampleType::kF32;
  Interleave interleave = Interleave::kBsq;
  bool big_endian = false;
  int samples = 0, lines = 0, bands = 0;
  std::size_t line_stride = 0, sample_stride = 0, band_stride = 0;  ///< in elements
  float scale = 1.0f;
  bool has_ignore = false;
  double ignore_value = 0;  ///< a pixel is no-data when ANY used band equals it (before scaling)
};

/// References restricted to the used bands, with per-reference constants precomputed in double
/// (and rounded to float) so that every backend uses the same numbers.
struct PreparedReferences {
  int count = 0;
  int used_bands = 0;
  std::vector<int> band_index;     ///< used_bands indices into the cube's bands (bbl == 1)
  std::vector<float> values;       ///< count * used_bands, the metric's input form (see numeric/spectral_metrics.h)
  std::vector<float> norm;         ///< per reference: |r| (ed, sam), |r - mean r| (scc), sum r' (sid)
  std::vector<float> mean;         ///< per reference mean of r over the used bands (every metric)
  // ---- added with the implementation (additive; see numeric/spectral_metrics.h section 3) ----
  Metric metric = Metric::kSpectralAngle;  ///< the metric the rows were prepared for
  std::vector<float> values2;      ///< count * used_bands: log b for sid; empty for the other metrics
  std::vector<double> constant;    ///< per reference: sum r^2 (ed), |r| (sam), |r - mean r| (scc), sum b log b (sid)
  std::vector<std::string> names;  ///< per reference, for logs and legends
  /// sam with two or more references: count * used_bands, the references as given (float), the input of the
  /// exact rescoring of the reported angles (spectral_sam_exact_*, with |r| = constant); empty otherwise.
  std::vector<float> raw;
};

/// The view of an opened cube (strides from the header, scale = 1 / reflectance scale factor).
CubeView make_cube_view(const EnviCube& cube);
/// The view of an in-memory cube (core/cube.cpp); throws Error(kInvalidArgument) for a null pointer, an
/// empty shape, strides that overlap or are not a dense BSQ/BIL/BIP layout, a buffer too small for them,
/// or metadata whose length differs from the band count.
CubeView make_cube_view(const CubeRef& cube);
/// Used bands (bbl == 1 and finite in every reference) and the metric's reference rows and constants,
/// computed in double (see numeric/spectral_metrics.h section 3). Throws Error(kInvalidArgument) for a
/// band count that differs from the cube's, no used band, a zero-norm (sam) or constant (scc) reference.
PreparedReferences prepare_references(const CubeRef& cube, const SpectralLibrary& refs, Metric metric);
PreparedReferences prepare_references(const EnviCube& cube, const SpectralLibrary& refs, Metric metric);

}  // namespace spectrasift::detail

// spectrasift/spectral.hpp — every pixel of a cube against one or many reference spectra.
//
// Metrics, for a pixel p and a reference r over the used bands (bad bands of "bbl" left out):
//   ed   Euclidean distance        sqrt(sum (p_i - r_i)^2)                          lower is better
//   sam  spectral angle (radians)  acos(clamp(p.r / (|p| |r|), -1, 1))             lower is better
//   scc  Pearson correlation       sum (p_i - mean p)(r_i - mean r) / (n sd_p sd_r) higher is better
//   sid  spectral information div. sum a_i log(a_i/b_i) + b_i log(b_i/a_i),
//        a = p / sum p, b = r / sum r (values <= 0 are clamped to 1e-12 first)     lower is better
// A zero-norm pixel (sam), a constant pixel (scc) or a pixel equal to the data ignore value gives NaN
// ("no data") in score bands and -1 in index bands; such pixels never crash and never match.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "spectrasift/context.hpp"
#include "spectrasift/cube.hpp"
#include "spectrasift/envi.hpp"

namespace spectrasift {

enum class Metric : std::uint8_t { kEuclidean, kSpectralAngle, kCorrelation, kInformationDivergence };
const char* to_string(Metric m) noexcept;            ///< "ed", "sam", "scc", "sid"
Metric parse_metric(const std::string& name);        ///< inverse of to_string; throws Error(kInvalidArgument)
bool higher_is_better(Metric m) noexcept;            ///< true for scc only

/// What is computed per pixel.
enum class Reduction : std::uint8_t {
  kAll,        ///< one score band per reference (the full score cube)
  kBest,       ///< index of the best reference and its score
  kTopK,       ///< indices and scores of the k best references, best first
  kThreshold,  ///< like kBest, but pixels whose best score fails `threshold` get index -1 and score NaN
};

struct SpectralOptions {
  Metric metric = Metric::kSpectralAngle;
  Reduction reduction = Reduction::kAll;
  int top_k = 1;              ///< k for kTopK, 1..number of references
  double threshold = 0;       ///< for kThreshold, in the metric's unit and direction (sam: max angle, rad)
  int chunk_lines = 0;        ///< lines per streamed chunk; 0 = chosen from the device's memory
  /// Allow tensor cores (TF32) for the many-reference matrix product, followed by an exact float32
  /// re-ranking of the candidates (CUDA only). Default true; false forces plain FP32 everywhere.
  bool allow_tensor_cores = true;
  void check() const;
};

/// Per-stage wall times in milliseconds (read, upload, compute, download, write), as the CLI reports.
/// spectral_match() fills upload/compute/download (the backend's own stages; the CPU backend reads the
/// memory-mapped cube inside compute) and total (the whole call); read_ms and write_ms are left for the
/// caller (opening the cube and preparing references; writing outputs), as the CLI does.
struct StageTimes {
  double read_ms = 0, upload_ms = 0, compute_ms = 0, download_ms = 0, total_ms = 0;
  double write_ms = 0;  ///< added with the implementation (additive)
};

struct SpectralResult {
  int samples = 0, lines = 0, references = 0;
  Reduction reduction = Reduction::kAll;
  int k = 0;                        ///< number of index/score bands (refs for kAll, 1 for best, k for top)
  std::vector<float> scores;        ///< k bands of samples*lines, band after band (BSQ)
  std::vector<std::int32_t> index;  ///< k bands (empty for kAll): reference indices, -1 = no data / rejected
  StageTimes times;
  std::string backend;              ///< Context::describe() of the device that ran
};

// Progress: ProgressFn (context.hpp), the fraction of lines done; empty: the Context's (Context::set_progress).

/// The references as the cube's bands see them: `spectra` holds count rows of header().bands values
/// (all bands, bad ones included; the metric skips them). Throws Error(kInvalidArgument) when the
/// band count differs from the cube's.
SpectralResult spectral_match(Context& ctx, const EnviCube& cube, const SpectralLibrary& references,
                              const SpectralOptions& options, const ProgressFn& progress = {});
/// The same for a cube already in memory (cube.hpp); the ENVI overload above is this one on
/// cube_ref(cube), so both give the same bits for the same samples. Throws Error(kInvalidArgument) for a
/// bad view (null data, empty shape, overlapping or non-dense strides, a buffer smaller than the layout).
SpectralResult spectral_match(Context& ctx, const CubeRef& cube, const SpectralLibrary& references,
                              const SpectralOptions& options, const ProgressFn& progress = {});

/// Reference helpers (all values in the cube's units, after the reflectance scale factor).
SpectralLibrary reference_from_pixels(const EnviCube& cube, const std::vector<std::pair<int, int>>& xy);
SpectralLibrary reference_from_mask(const EnviCube& cube, const std::vector<std::uint8_t>& mask, const std::string& name);
/// The same for a cube in memory (cube.hpp); the ENVI overloads are these on cube_ref(cube), so both give the same
/// values. The view is read as given (check it with spectral_match's rules first).
SpectralLibrary reference_from_pixels(const CubeRef& cube, const std::vector<std::pair<int, int>>& xy);
SpectralLibrary reference_from_mask(const CubeRef& cube, const std::vector<std::uint8_t>& mask, const std::string& name);
/// Resamples a library onto the cube's wavelengths with Gaussian band responses of the cube's FWHM
/// (as Spectral Python's BandResampler); bands with no overlap become NaN and are excluded.
SpectralLibrary resample_library(const SpectralLibrary& lib, const std::vector<double>& wavelength,
                                 const std::vector<double>& fwhm);

}  // namespace spectrasift

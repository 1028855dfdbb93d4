// tests/tolerances.hpp — the one table of tolerances for comparisons between implementations.
//
// A score s is accepted against a reference value t when |s - t| <= abs + rel * |t|; for sam the
// comparison is made on cos(angle) instead of the angle, because acos is ill-conditioned near 0
// (a float32 dot product off by 1e-7 moves a zero angle by 4.5e-4 rad). NaN must match NaN.
// ed is compared with the tolerance below on float cubes; on integer cubes it must be bit-identical
// (see src/numeric/spectral_metrics.h), which the tests check separately.
// Backends add their rows here (keep one row per comparison; say why a number is what it is).
#pragma once

#include <cmath>

#include "spectrasift/spectral.hpp"
#include "spectrasift/types.hpp"

namespace spectrasift::test {

struct Tolerance {
  double abs = 0;
  double rel = 0;
};

/// CPU backend (float32 dot products, double pixel statistics) against the float64 reference.
inline Tolerance cpu_vs_f64(Metric m) {
  switch (m) {
    case Metric::kEuclidean: return {1e-5, 2e-6};      // double sums; float conversion of the output
    case Metric::kSpectralAngle: return {3e-6, 0};      // on cos: float dot over <= 256 bands
    case Metric::kCorrelation: return {1e-5, 0};       // float dot with the centred reference
    case Metric::kInformationDivergence: return {2e-5, 1e-4};  // cancellation of ~log(n)-sized terms
  }
  return {};
}

/// Any backend against the CPU backend on the same input (FP32 everywhere; TF32 is re-ranked in FP32).
inline Tolerance backend_vs_cpu(Backend b, Metric m) {
  (void)b;  // one row for OpenCL and CUDA until a backend needs its own
  switch (m) {
    case Metric::kEuclidean: return {1e-5, 2e-6};  // CUDA one reference on small integers: ed's split form
                                                    // (exact for integer references, else ~2^-24 sum |q rf|)
    case Metric::kSpectralAngle: return {4e-6, 0};
    case Metric::kCorrelation: return {2e-5, 0};
    case Metric::kInformationDivergence: return {4e-5, 2e-4};
  }
  return {};
}

/// SIFT on a device against the CPU backend on the same image. The sums follow the fixed reduction order of
/// DESIGN.md (Conventions, Determinism), so the only differences come from the device's exp / sqrt / sin /
/// cos (OpenCL exp 3 ulp, CUDA expf 2 ulp) in the Gaussian taps' use, window weights and rotations; a
/// keypoint whose refinement or peak test sits on a threshold may appear on one side only, so matching
/// keypoints are paired by position first and the unpaired share is bounded separately.
struct SiftTolerance {
  double position_px = 0.05;        ///< |x - x'|, |y - y'| in input pixels
  double scale_rel = 1e-3;          ///< |size - size'| / size
  double angle_deg = 0.5;           ///< circular |angle - angle'|
  double descriptor_max_abs = 1e-3; ///< max |d - d'| over a row, descriptors normalised to unit L2 norm (issues 18/19)
};

inline SiftTolerance sift_backend_vs_cpu(Backend b) {
  (void)b;  // one row for OpenCL and CUDA until a device needs its own
  return {};
}

/// Whether score s agrees with t for metric m within tol (NaN agrees only with NaN).
inline bool scores_agree(Metric m, double s, double t, Tolerance tol) {
  if (std::isnan(s) || std::isnan(t)) return std::isnan(s) && std::isnan(t);
  if (m == Metric::kSpectralAngle) {
    s = std::cos(s);
    t = std::cos(t);
  }
  return std::abs(s - t) <= tol.abs + tol.rel * std::abs(t);
}

}  // namespace spectrasift::test

// CPU SIFT (OpenCV 4.6 compatible), internal interface used by src/core/sift.cpp.
//
// The plan keeps the Gaussian levels 1..S of every octave of the last image (the levels that orientations
// and descriptors read) and reuses its buffers for the next image; the DoG planes and the other levels live
// only while their octave is scanned. Memory for a W x H input (upsampled): about 11 planes of 4WH floats.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "backend/cpu/sift_parallel.hpp"
#include "core/context_impl.hpp"
#include "spectrasift/sift.hpp"

namespace spectrasift::cpu {

/// A float image with its own buffer, reused when a later image of at most the same size comes.
struct SiftPlane {
  int w = 0;
  int h = 0;
  std::size_t capacity = 0;
  std::unique_ptr<float[]> buffer;  // uninitialised on purpose: every pixel is written before it is read

  void resize(int width, int height);
  float* row(int y) noexcept { return buffer.get() + std::size_t(y) * std::size_t(w); }
  const float* row(int y) const noexcept { return buffer.get() + std::size_t(y) * std::size_t(w); }
};

class SiftPlan {
 public:
  /// Builds the scale space of `gray` and returns every keypoint (one per orientation peak) with OpenCV's
  /// final fields (input pixels; octave -1 = doubled image). The order is deterministic but not canonical:
  /// the caller deduplicates and sorts.
  std::vector<Keypoint> detect(const ImageF& gray, const SiftOptions& options, int threads);

  /// Writes the 128 descriptor values of each keypoint (which must come from the last detect()) into
  /// out[i * 128 ...], OpenCV style (integer-valued floats 0..255).
  void describe(const std::vector<Keypoint>& keypoints, float* out, int threads) const;

 private:
  void build_octave_base(const ImageF& gray, int octave, SiftThreadPool& pool);
  void build_octave_levels(int octave, SiftThreadPool& pool);
  void scan_octave(int octave, std::vector<std::vector<Keypoint>>& per_thread, SiftThreadPool& pool) const;
  SiftThreadPool& pool(int threads) const;

  SiftOptions options_;
  int first_octave_ = -1;
  int octaves_ = 0;
  std::vector<double> level_sigma_;               // incremental blur of level i from level i - 1
  std::vector<std::vector<float>> level_kernel_;  // its half kernel k[0..R]
  std::vector<std::vector<SiftPlane>> gauss_;     // [octave][layer - 1], layers 1..S
  std::vector<SiftPlane> dog_;                    // S + 2 planes, the DoG of the octave being scanned
  SiftPlane base_;                                // level 0 of the octave being built
  SiftPlane upper_;                               // level S + 1 of the octave being built
  mutable std::unique_ptr<SiftThreadPool> pool_;  // kept between calls (threads sleep when idle)
};

/// The half kernel k[0..R] of OpenCV's float Gaussian for a sigma (notes §2): ksize = round(8 sigma + 1) | 1,
/// taps exp(-x^2 / (2 sigma^2)) rounded to float, normalised by their sum (computed in double).
std::vector<float> sift_gaussian_half_kernel(double sigma);

/// The plan stored in the context (created on first use).
SiftPlan& sift_plan(detail::ContextImpl& ctx);

}  // namespace spectrasift::cpu

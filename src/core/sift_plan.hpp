// The SIFT plan: everything about one SIFT run that depends only on the image shape and the options, computed
// once by core and consumed by every backend (the numbers a device uploads: Gaussian taps, thresholds, octave
// shapes, buffer sizes). Plain data; the arrays are flat so that a backend copies them to a device as they are.
//
// Derivation (OpenCV 4.6 cv::SIFT, notes §2-5): the base is the input, doubled with bilinear interpolation when
// upsample (first octave -1), blurred from an assumed 0.5 px (1 px doubled) to sigma; octave o + 1 starts
// from the even pixels of level S of octave o; level i of an octave (i = 1 .. S + 2) is level i - 1 blurred
// by the incremental sigma sqrt(s_i^2 - s_(i-1)^2), s_i = sigma 2^(i/S).
#pragma once

#include <cstddef>
#include <vector>

#include "core/context_impl.hpp"
#include "spectrasift/sift.hpp"

namespace spectrasift::detail {

struct SiftOctaveShape {
  int width = 0;   ///< pixels of every level and DoG plane of the octave
  int height = 0;
};

struct SiftPlan {
  // ---- the key: what the plan was computed for ----
  int input_width = 0;
  int input_height = 0;
  SiftOptions options;

  // ---- geometry ----
  bool upsample = true;        ///< octave -1 is the input doubled
  int first_octave = -1;       ///< -1 when upsample, else 0 (the public Keypoint::octave of pyramid index 0)
  int octaves = 0;             ///< octave count (0: the image is too small, the run finds nothing)
  int layers = 3;              ///< S: DoG layers searched per octave (options.octave_layers)
  int levels = 6;              ///< Gaussian levels per octave, S + 3 (0 .. S + 2)
  int dog_levels = 5;          ///< DoG planes per octave, S + 2 (DoG i = level i + 1 - level i)
  int border = 5;              ///< extrema are searched this many octave pixels from the edges (SIFT_IMG_BORDER)
  std::vector<SiftOctaveShape> octave_shape;  ///< [octave index], index 0 = first_octave
  std::vector<float> octave_scale;            ///< [octave index]: 2^index, octave pixels -> base pixels
  /// The octave -1 rescale rule: keypoints are built in base pixels (x = (c + xc) * octave_scale, size =
  /// sigma 2^((layer + xi) / S) * octave_scale * 2), then multiplied by output_scale (0.5 when upsample:
  /// OpenCV reports octave -1 in input pixels), in that order. The descriptor stage maps back with
  /// 2^-octave (public octave, so octave -1 doubles).
  float output_scale = 0.5f;

  // ---- blur: kernel 0 takes the (upsampled) input to level 0; kernel i (1 .. S + 2) level i - 1 to i ----
  float base_sigma_diff = 0;        ///< sqrt(max(sigma^2 - init^2, 0.01)) in float, init = 0.5 (1 doubled)
  std::vector<double> level_sigma;  ///< [i]: the incremental sigma of kernel i (i = 0: base_sigma_diff)
  /// Half kernels k[0..R] of every kernel, concatenated: kernel i has taps[tap_offset[i] .. tap_offset[i] +
  /// tap_radius[i]] (OpenCV's float Gaussian, see sift_gaussian_half_kernel).
  std::vector<float> taps;
  std::vector<int> tap_offset;      ///< [i], i = 0 .. S + 2
  std::vector<int> tap_radius;      ///< [i]: R, the kernel has 2R + 1 taps

  // ---- thresholds (float, as every stage compares them) ----
  float prefilter_threshold = 0;  ///< floor(0.5 * contrast_threshold / S * 255): |DoG| above it is a candidate
  float contrast_threshold = 0;   ///< |interpolated DoG| * S must reach it
  float edge_threshold = 0;       ///< r of the edge test tr^2 r < (r + 1)^2 det
  float sigma = 0;                ///< options.sigma in float (keypoint size)

  // ---- selection and output ----
  int max_features = 0;  ///< 0 = keep all (ties at the cut are all kept)
  bool root_sift = false;
  bool u8_descriptors = false;  ///< options.descriptor_type is kU8: the backend fills Features::descriptor_bytes

  // ---- buffer sizes (floats or records) ----
  std::size_t gauss_floats = 0;     ///< every Gaussian level of every octave
  std::size_t dog_floats = 0;       ///< every DoG plane of every octave
  std::size_t candidate_bound = 0;  ///< interior pixels of layers 1..S over all octaves: no run finds more
  /// Initial candidate buffer a device allocates (extrema return the true count; a larger one means grow
  /// and run the extrema stage again).
  std::size_t candidate_capacity = 0;
  /// Orientation peaks per refined point at most (strict local maxima of 36 circular bins).
  static constexpr int kMaxPeaksPerPoint = 18;
  /// Keypoint records that the orientation stage can write for `refined` refined points.
  static std::size_t keypoint_capacity(std::size_t refined) { return refined * std::size_t(kMaxPeaksPerPoint); }

  /// Whether this plan was computed for this shape and these options.
  bool matches(int width, int height, const SiftOptions& o) const noexcept;
  const float* kernel(int i) const noexcept { return taps.data() + tap_offset[std::size_t(i)]; }
};

/// Computes the plan (options must have passed check(); width, height > 0).
SiftPlan make_sift_plan(int width, int height, const SiftOptions& options);

/// The plan stored in the context for this shape and options, recomputed only when they change.
const SiftPlan& sift_plan(ContextImpl& ctx, int width, int height, const SiftOptions& options);

/// The half kernel k[0..R] of OpenCV's float Gaussian for a sigma (notes §2): ksize = round(8 sigma + 1) | 1,
/// taps exp(-x^2 / (2 sigma^2)) rounded to float, normalised by their sum (computed in double).
std::vector<float> sift_gaussian_half_kernel(double sigma);

}  // namespace spectrasift::detail

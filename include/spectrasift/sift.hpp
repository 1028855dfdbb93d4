// spectrasift/sift.hpp — SIFT keypoints and descriptors (Lowe 2004), OpenCV 4.6 compatible by default.
//
// The pipeline, per octave o (o = -1 is the input doubled with bilinear interpolation, each further
// octave halves the previous one by taking its even pixels from level S):
//   G[o][i] = Gaussian blur to total sigma * 2^(i/S), i = 0..S+2       (S = octave_layers)
//   D[o][i] = G[o][i+1] - G[o][i], i = 0..S+1
//   candidates: |D| > 0.5 * contrast_threshold / S * 255 and D is the max (min) of its 26 neighbours
//   refinement: up to 5 Newton steps on the 3-D quadratic; reject |D^| * S < contrast_threshold and
//               tr(H)^2 / det(H) >= (r + 1)^2 / r with r = edge_threshold
//   orientation: 36-bin histogram of gradient directions in a Gaussian window of 1.5 sigma, peaks
//               >= 0.8 of the maximum each give a keypoint
//   descriptor: 4x4 cells x 8 orientations, trilinear binning, clamp at 0.2, L2 normalised, x512
// Keypoint fields follow OpenCV (types.hpp): size = 2 sigma, angle in degrees with y down, and the
// +0.25 px offset that OpenCV 4.6 reports (opencv/opencv#23123) is reproduced so positions agree.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "spectrasift/context.hpp"
#include "spectrasift/types.hpp"

namespace spectrasift {

struct SiftOptions {
  /// Layers S per octave in which extrema are searched (OpenCV nOctaveLayers). Default 3; 1..10.
  int octave_layers = 3;
  /// Blur of the base level, in pixels of the first octave (OpenCV sigma). Default 1.6; > 0.
  double sigma = 1.6;
  /// Minimum |interpolated DoG| * S, in units of the full grey range (OpenCV contrastThreshold).
  /// Default 0.04; >= 0. Larger gives fewer, stronger features.
  double contrast_threshold = 0.04;
  /// Maximum principal-curvature ratio r of accepted points (OpenCV edgeThreshold). Default 10; > 0.
  double edge_threshold = 10.0;
  /// Start at the input doubled (octave -1), as OpenCV always does. Default true.
  bool upsample = true;
  /// Keep only the max_features strongest by response (ties at the cut are all kept, as OpenCV does).
  /// 0 = keep all. Default 0.
  int max_features = 0;
  /// Return RootSIFT descriptors (Arandjelovic & Zisserman 2012): L1-normalise, square root, then
  /// scale to L2 norm 512 so that they have the magnitude of the default ones. Default false.
  bool root_sift = false;
  /// The descriptors' element type (OpenCV's descriptorType): kF32 fills Features::descriptors, kU8
  /// Features::descriptor_bytes with the same values (a quarter of the host memory; GPU backends skip the
  /// conversion to floats: elephants 4K's 121k features 8 ms faster on CUDA). kU8 cannot hold RootSIFT's
  /// values. Default kF32.
  DescriptorType descriptor_type = DescriptorType::kF32;

  /// Intensity normalisation before detection, for 16-bit and low-contrast scenes (a 12-bit Landsat or
  /// Sentinel scene stored in 16 bits reaches only 1/16 of the grey range, so the contrast threshold, a
  /// fraction of that range, rejects most of its features). kPercentile maps the grey values between the
  /// stretch_low and stretch_high percentiles of the image's valid pixels linearly onto 0..255 (clamped); kAuto
  /// does so only for U16 and F32 images whose percentile range spans less than half of the grey range
  /// (128 levels) or leaves 0..255, so 8-bit images and full-range 16-bit ones keep their pixels exactly;
  /// kNone uses the grey values as they are (to_gray_float). Default kNone (the command line's default is
  /// auto). A stretched image is handed to the backends as grey F32.
  enum class Stretch : std::uint8_t { kNone, kAuto, kPercentile };
  Stretch stretch = Stretch::kNone;
  double stretch_low = 1.0;    ///< lower percentile, percent; default 1; 0 <= low < high <= 100
  double stretch_high = 99.0;  ///< upper percentile, percent; default 99
  /// A nodata value (a raster's, e.g. GDAL's or ENVI's "data ignore value"): pixels holding it in any channel,
  /// and pixels within nodata_margin of them, are masked out of detection (keypoints there are dropped, as by
  /// the mask argument) and left out of the stretch's percentiles. Default none.
  std::optional<double> nodata;
  /// Pixels around a nodata pixel also masked (a square of radius nodata_margin): the step from data to the
  /// fill value is an edge that would make keypoints of its own. Default 3; 0..64.
  int nodata_margin = 3;

  void check() const;
};

/// Detects keypoints and computes their descriptors. `image` may be U8, U16 or F32 with 1..4 channels
/// (converted with to_gray_float). `mask`, when given, must be a one-channel image of the same size:
/// keypoints whose rounded position falls on a zero mask pixel are dropped (after max_features, as
/// OpenCV does). The result is in canonical order: by octave, layer, y, x, then angle, so it is the
/// same on every run and every backend. Deterministic for any thread count.
Features detect_and_compute(Context& ctx, const Image& image, const SiftOptions& options = {},
                            const Image* mask = nullptr);

/// The same on an image in the caller's memory (types.hpp ImageView), read in place: the same bits as the
/// Image overload on the same samples.
Features detect_and_compute(Context& ctx, const ImageView& image, const SiftOptions& options = {},
                            const Image* mask = nullptr);

/// The same from an already grey float image (values in grey levels, 0..255 nominal).
Features detect_and_compute(Context& ctx, const ImageF& gray, const SiftOptions& options = {},
                            const Image* mask = nullptr);

/// Batch: the features of every image of `images`, in their order, with the same options (and the same mask,
/// when given, for every image: it must have every image's size). Each result has the bits of the
/// single-image call on that image. Images of one size share one plan and the buffers; on the CUDA backend
/// image i + 1's upload overlaps image i's computation (DESIGN.md, Data flow). Every image is checked before
/// any work: a bad one (empty, too many channels, too large, or not the mask's size) is
/// Error(kInvalidArgument) whose message starts "sift: images[i]: "; an error during image i's run carries
/// the same prefix, the backend and the native status of the original error. An empty span gives an empty
/// result. The progress callback sees the batch as one operation (image i covers [i/n, (i+1)/n]).
std::vector<Features> detect_and_compute(Context& ctx, std::span<const ImageView> images,
                                         const SiftOptions& options = {}, const Image* mask = nullptr);

/// The same, handing image i's features to on_features(i, features) as soon as they are read back (i in
/// increasing order), so that the caller can write or use them while the following images run and holds one
/// image's features at a time. An exception thrown by on_features stops the batch and propagates unchanged.
void detect_and_compute(Context& ctx, std::span<const ImageView> images, const SiftOptions& options,
                        const Image* mask, const std::function<void(std::size_t, Features&&)>& on_features);

}  // namespace spectrasift

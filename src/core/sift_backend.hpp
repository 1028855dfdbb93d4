// The contract between src/core/sift.cpp and the backends for SIFT (modelled on core/spectral_backend.hpp):
// core checks the arguments and computes the plan (core/sift_plan.hpp); a backend runs the stages below, in
// this order, on its own memory. On a device the whole sequence stays on the device and the host reads back
// twice (DESIGN.md, Data flow): the candidate count that extrema() returns and the features of download().
//
// What each stage leaves behind (on the backend's side) is the contract; a backend may fuse stages internally
// (then the fused entries do nothing and say so). The per-element formulas and the comparison rules come from
// src/numeric/ (sift_gray.h, sift_extrema.h, sift_refine.h, sift_orientation.h, sift_descriptor.h,
// sift_select.h; records are numeric/sift_keypoint.h), so that every backend computes the same numbers.
#pragma once

#include <cstddef>
#include <memory>

#include "core/context_impl.hpp"
#include "core/sift_plan.hpp"
#include "spectrasift/sift.hpp"
#include "spectrasift/types.hpp"

namespace spectrasift::detail {

/// The user's image as given, in its own type: u8, u16 or f32 with 1..4 channels, interleaved, rows of
/// width * channels samples. grey_levels: one f32 channel already in grey levels (the ImageF overload), used
/// as it is; otherwise the grey value of a pixel is numeric/sift_gray.h's (to_gray_float's) formula.
struct SiftImageView {
  const void* data = nullptr;
  PixelType type = PixelType::kU8;
  int width = 0;
  int height = 0;
  int channels = 1;
  bool grey_levels = false;
};

/// Counts a backend reports with the features (read back together with them on a device).
struct SiftCounts {
  std::size_t candidates = 0;  ///< extrema candidates (extrema())
  std::size_t refined = 0;     ///< candidates that passed refinement, contrast and edge tests
  std::size_t oriented = 0;    ///< keypoints after orientation assignment (one per peak)
  std::size_t kept = 0;        ///< keypoints after select (duplicates, cap, mask)
};

class SiftStages {
 public:
  virtual ~SiftStages() = default;

  /// 1. upload / grey: takes the image (its size is the plan's input size) and leaves the grey float image
  ///    (grey levels 0..255 nominal) on the backend. The view's memory is the caller's; it stays valid until
  ///    download() returns, so a host backend may read it in place. Starts a run: results of an earlier run
  ///    are dropped. The plan stays valid (and unchanged) until download() returns.
  virtual void upload(const SiftPlan& plan, const SiftImageView& image) = 0;
  /// 2. pyramid: Gaussian levels 0 .. S + 2 of every octave (plan.octave_shape, kernels plan.kernel(i)).
  virtual void pyramid() = 0;
  /// 3. DoG: planes 0 .. S + 1 of every octave, DoG i = level i + 1 - level i.
  virtual void dog() = 0;
  /// 4. extrema: the candidates (octave, layer 1..S, row, column) that pass numeric/sift_extrema.h with
  ///    plan.prefilter_threshold, in rows and columns plan.border .. size - border - 1. Returns their count
  ///    (read-back 1: a device sizes the refinement from it).
  virtual std::size_t extrema() = 0;
  /// 5. refine: sub-pixel refinement, contrast and edge tests (numeric/sift_refine.h) of every candidate;
  ///    leaves one SiftKeypoint per accepted candidate, angle 0, fields in the plan's output units.
  virtual void refine() = 0;
  /// 6. orientations: the 36-bin histogram of each refined point (numeric/sift_orientation.h, summed in the
  ///    order that header states); leaves one SiftKeypoint per peak (angle set).
  virtual void orientations() = 0;
  /// 7. select: duplicates, the plan.max_features cap, the mask (one channel, the input's size; may be
  ///    null), then the canonical order, with the rules of numeric/sift_select.h. Decided from the records
  ///    alone (by response, then canonical order), so a device decides it without the host.
  virtual void select(const Image* mask) = 0;
  /// 8. descriptors: 128 values per selected keypoint (numeric/sift_descriptor.h, summed in the order that
  ///    header states), RootSIFT when plan.root_sift.
  virtual void descriptors() = 0;
  /// 9. download (read-back 2): the selected keypoints in canonical order and their descriptors into out
  ///    (image_width/height set), and the counts of the run.
  virtual void download(Features& out, SiftCounts& counts) = 0;

  /// Batch hint (the batch call of sift.hpp), between upload() and download() of a run: the next run's
  /// upload() takes `next`, whose plan has this run's input size. A device may start copying it now, beside
  /// this run's compute (CUDA does); the next upload() then uses that copy when it is given the same view, and
  /// drops it otherwise. The view's memory stays valid until the next upload() returns or drop_prefetch() is
  /// called. Default: nothing (the host backends read the image in place).
  virtual void prefetch(const SiftImageView& next) { (void)next; }
  /// The batch stopped before the next upload() (an error): on return the backend no longer reads the view
  /// given to prefetch(). Default: nothing.
  virtual void drop_prefetch() noexcept {}
};

}  // namespace spectrasift::detail

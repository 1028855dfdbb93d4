// What the device backends' SIFT stages (backend/cuda/sift*.cu, backend/opencl/sift*.cpp) share on the host,
// beside the stage contract of core/sift_backend.hpp: the stage table and its timing log, the sizes a plan
// gives (the octave table of numeric/sift_device.h, the capacities), the growth rule of the feature buffers
// and the download sequence (read-back 2). A device backend derives from SiftDeviceStages and keeps only what
// is its own: buffers, transfers, launches and events.
#pragma once

#include <array>
#include <cstddef>
#include <vector>

#include "core/sift_backend.hpp"
#include "numeric/sift_device.h"

namespace spectrasift::detail {

class SiftDeviceStages : public SiftStages {
 public:
  /// Stage indices of the timing table (stage_ms()).
  enum Stage { kUpload, kPyramid, kDog, kExtrema, kRefine, kOrientations, kSelect, kDescriptors, kDownload, kStages };
  static const char* stage_name(int stage) noexcept;

  /// 9. download (read-back 2): the counters; when more orientation peaks or kept keypoints were found than
  /// the buffers hold, the buffers grow and orientations, select and descriptors run again; then the kept
  /// records and descriptors (read_features) and the counts.
  void download(Features& out, SiftCounts& counts) final;

  /// Device time per stage of the last run in ms, filled by download() when set_profiling(true) or the
  /// context is verbose (which logs them).
  void set_profiling(bool on) noexcept { profiling_ = on; }
  const std::array<double, kStages>& stage_ms() const noexcept { return stage_ms_; }
  /// Keypoint records allocated per candidate (default 2; a test sets a tiny value to force the regrowth).
  void set_keypoints_per_candidate(double v) noexcept { keypoints_per_candidate_ = v; }
  /// How often a buffer was found too small and stages ran again (candidates, keypoints), since construction.
  int regrowths() const noexcept { return regrowths_; }

 protected:
  explicit SiftDeviceStages(ContextImpl& ctx) : ctx_(ctx) {}

  // ---- what a backend implements for download() ----
  /// The device counters into counters_ (waits for the work before them).
  virtual void read_counters() = 0;
  /// Zeroes the oriented, unique and kept counters on the device (before orientations run again).
  virtual void clear_feature_counters() = 0;
  /// The kept records (canonical order) and descriptors into out (keypoints_from_records), and the
  /// device copy of the descriptors (Features::device); kept may be 0.
  virtual void read_features(Features& out, std::size_t kept) = 0;
  /// The end of a run: stage_ms_ from the run's events when profile_run_, then log_stage_times.
  virtual void finish_profile() = 0;
  /// Called by download() on the counters just read: true when select() left the stage undone and must run
  /// again (with descriptors()) now that the counts are known. OpenCL: its one-work-group select was queued
  /// alone on a guess that the oriented count fits it, and the device found more (sift_features.cpp).
  virtual bool select_again() { return false; }

  /// The start of a run (upload()): the plan and the per-run state reset; returns the image's bytes (the
  /// memory check and the upload size).
  std::size_t begin_run(const SiftPlan& plan, const SiftImageView& image);

  // ---- plan ----
  /// Whether the per-plan state (tables, launch geometry) was prepared for this plan. The descriptors' type is
  /// left out: only download() reads it (from the run's plan), so switching between f32 and u8 at one image size
  /// keeps the prepared state (and CUDA's captured pyramid graph).
  bool prepared_for(const SiftPlan& p) const noexcept {
    SiftOptions o = prepared_options_;
    o.descriptor_type = p.options.descriptor_type;
    return prepared_ && p.matches(prepared_w_, prepared_h_, o);
  }
  /// The octave table (octave_info_, 4 values per octave), max_plane_ and candidate_capacity_ of a plan.
  void size_from_plan(const SiftPlan& p);
  /// The plan's octave scales as a device uploads them (one entry at least).
  static std::vector<float> octave_scales(const SiftPlan& p);
  /// Records that the per-plan state is the one of p.
  void mark_prepared(const SiftPlan& p);
  /// The keypoint records a memory check counts before the count is known (an estimate: set from the
  /// count later).
  static std::size_t keypoint_estimate(const SiftPlan& p);

  /// Logs stage_ms_ and the run's counts when the context is verbose ("sift: <backend> device time ...").
  void log_stage_times(const char* backend) const;
  /// out.keypoints from n SiftKeypoint records (the public fields).
  static void keypoints_from_records(const SiftKeypoint* records, std::size_t n, Features& out);

  ContextImpl& ctx_;
  const SiftPlan* plan_ = nullptr;
  bool profiling_ = false;
  bool profile_run_ = false;  // this run records events: profiling_ or the context is verbose
  // What the geometry buffers were uploaded for (a new plan uploads them again).
  int prepared_w_ = 0, prepared_h_ = 0;
  SiftOptions prepared_options_;
  bool prepared_ = false;
  std::vector<long long> octave_info_;      // [4 o + k]: w, h, gauss offset, dog offset
  std::size_t max_plane_ = 0;               // floats of the largest octave plane
  std::size_t candidate_capacity_ = 0;      // candidate and refined records
  std::size_t keypoint_capacity_ = 0;       // oriented records
  std::size_t descriptor_capacity_ = 0;     // descriptor rows
  std::size_t positions_ = 0;               // sort positions: the power of two >= keypoint_capacity_
  std::size_t candidates_ = 0;              // the count read back by extrema()
  std::array<unsigned int, SIFT_COUNTERS> counters_{};  // the SIFT_COUNT_* slots, read back by download()
  int mask_type_ = -1;                      // select(): -1 none, 0 u8, 1 u16, 2 f32
  int mask_w_ = 0, mask_h_ = 0;
  double keypoints_per_candidate_ = 2.0;
  int regrowths_ = 0;
  std::array<double, kStages> stage_ms_{};
};

}  // namespace spectrasift::detail

// OpenCL SIFT: the stages of core/sift_backend.hpp on an OpenCL device, the whole pipeline on the device
// with two read-backs (the candidate count after extrema(), the features in download()).
//
// One program (kernels/sift.cl, which includes one file per kernel family) built once per State. Buffers
// are named buffers of the State ("sift.*"), sized from the plan and reused across images of one size;
// the candidate, keypoint and descriptor buffers grow (and the stages that fill them run again) when a
// run finds more than they hold. Launch geometry comes from the kernels' work-group limits and the
// device's local memory (sift.cpp), never from constants that assume a GPU or a CPU.
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backend/opencl/state.hpp"
#include "core/sift_backend.hpp"
#include "numeric/sift_keypoint.h"

namespace spectrasift::opencl {

/// Sets the arguments 0 .. n-1 of a kernel from values (buffers, scalars), in order.
template <class T> void set_arg(cl_kernel k, cl_uint i, const T& v) {
  SPECTRASIFT_CL_CHECK(clSetKernelArg(k, i, sizeof(T), &v));
}
template <class... T> void set_args(cl_kernel k, const T&... v) {
  cl_uint i = 0;
  (set_arg(k, i++, v), ...);
}
/// v rounded up to a multiple of m.
inline std::size_t round_up(std::size_t v, std::size_t m) { return (v + m - 1) / m * m; }

class SiftStagesOpenCL final : public detail::SiftStages {
 public:
  /// Stage indices of the timing table (stage_ms()).
  enum Stage { kUpload, kPyramid, kDog, kExtrema, kRefine, kOrientations, kSelect, kDescriptors, kDownload, kStages };
  static const char* stage_name(int stage) noexcept;

  explicit SiftStagesOpenCL(detail::ContextImpl& ctx);

  void upload(const detail::SiftPlan& plan, const detail::SiftImageView& image) override;
  void pyramid() override;
  void dog() override;
  std::size_t extrema() override;
  void refine() override;
  void orientations() override;
  void select(const Image* mask) override;
  void descriptors() override;
  void download(Features& out, detail::SiftCounts& counts) override;

  /// Device time per stage of the last run in ms (profiling events), filled by download() when
  /// set_profiling(true) or the context is verbose (which logs them); kernel launches and the transfers of
  /// upload and download.
  void set_profiling(bool on) noexcept { profiling_ = on; }
  const std::array<double, kStages>& stage_ms() const noexcept { return stage_ms_; }
  /// Keypoint records allocated per candidate (default 2; a test sets a tiny value to force the regrowth).
  void set_keypoints_per_candidate(double v) noexcept { keypoints_per_candidate_ = v; }
  /// Behave as on a device without cl_khr_fp64 (tests: the errors of the inputs that need doubles).
  void assume_no_fp64() noexcept { fp64_ = false; }
  /// How often a buffer was found too small and stages ran again (candidates, keypoints), since construction.
  int regrowths() const noexcept { return regrowths_; }

 private:
  // sift.cpp
  void prepare(const detail::SiftPlan& plan, const detail::SiftImageView& image);
  void check_memory(const detail::SiftPlan& plan, std::size_t input_bytes) const;
  cl_kernel kernel(const char* name);
  void launch(cl_kernel k, cl_uint dims, const std::size_t* global, const std::size_t* local, Stage stage);
  void launch_1d(cl_kernel k, std::size_t items, std::size_t want_local, Stage stage);
  void launch_2d(cl_kernel k, std::size_t x, std::size_t y, Stage stage);
  void finish_profile();
  void attach_device_copy(Features& out, std::size_t kept);
  // The named buffers every stage reads (sized from the plan).
  cl_mem levels();          // "sift.gauss": every Gaussian level of every octave
  cl_mem octave_table();    // "sift.info": octave_info_
  cl_mem counter_buffer();  // "sift.counters": counters_ on the device
  void read_counters();
  // sift_pyramid.cpp
  void blur(cl_mem src, cl_mem dst, std::size_t src_off, std::size_t dst_off, int w, int h, int kernel_index);
  void size_blur_tiles();
  static std::size_t blur_tile_bytes(std::size_t tx, std::size_t ty, int r) {
    return (2 * ty + 2 * std::size_t(r)) * (tx + 2 * std::size_t(r)) * sizeof(float);
  }
  // sift_features.cpp
  void sort(cl_mem order, int count_slot, int mode);
  void compact(cl_mem in, int in_slot, int out_slot, cl_mem out);
  void group_sizes();

  detail::ContextImpl& ctx_;
  State& st_;
  const detail::SiftPlan* plan_ = nullptr;
  std::string options_;        // build options of the sift.cl program
  bool fp64_ = false;          // the device has cl_khr_fp64
  bool profiling_ = false;
  bool profile_run_ = false;   // this run records events: profiling_ or the context is verbose
  // What the geometry buffers were uploaded for (a new plan re-uploads them).
  int prepared_w_ = 0, prepared_h_ = 0;
  SiftOptions prepared_options_;
  bool prepared_ = false;
  std::vector<long long> octave_info_;        // [4 o + k]: w, h, gauss offset, dog offset
  std::size_t max_plane_ = 0;                 // floats of the largest octave plane
  std::size_t candidate_capacity_ = 0;        // candidate and refined records
  std::size_t keypoint_capacity_ = 0;         // oriented records
  std::size_t descriptor_capacity_ = 0;       // descriptor rows
  std::size_t positions_ = 0;                 // sort positions: the power of two >= keypoint_capacity_
  std::size_t candidates_ = 0;                // the count read back by extrema()
  std::array<cl_uint, 8> counters_{};         // read back by download()
  int mask_type_ = -1;                        // select(): -1 none, 0 u8, 1 u16, 2 f32
  int mask_w_ = 0, mask_h_ = 0;
  // Launch geometry (from the device's limits).
  std::size_t blur_tx_ = 0, blur_ty_ = 0;     // tile of the separable blur
  int blur_r_ = -1;                           // the largest radius the tiles were sized for
  std::size_t ori_local_ = 0, ori_chunk_ = 0, ori_ex_ = 0;
  std::size_t desc_local_ = 0, desc_ex_ = 0;
  std::size_t compact_local_ = 0;
  std::size_t sort_local_ = 1;                // work-items of sift_sort_local (blocks of twice as many positions)
  std::size_t groups_ = 0;                    // work-groups of the per-keypoint kernels
  double keypoints_per_candidate_ = 2.0;
  int regrowths_ = 0;
  std::vector<std::pair<int, Event>> events_;
  std::array<double, kStages> stage_ms_{};
};

/// The OpenCL backend's SIFT stages for an OpenCL context.
std::unique_ptr<detail::SiftStages> make_sift_stages(detail::ContextImpl& ctx);

}  // namespace spectrasift::opencl

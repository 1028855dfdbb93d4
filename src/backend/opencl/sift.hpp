// OpenCL SIFT: the stages of core/sift_backend.hpp on an OpenCL device, the whole pipeline on the device
// with two read-backs (the candidate count after extrema(), the features in download()).
//
// One program (kernels/sift.cl, which includes one file per kernel family) built once per State. Buffers
// are named buffers of the State ("sift.*"), sized from the plan and reused across images of one size;
// the candidate, keypoint and descriptor buffers grow (and the stages that fill them run again) when a
// run finds more than they hold. Launch geometry comes from the kernels' work-group limits and the
// device's local memory (sift.cpp), never from constants that assume a GPU or a CPU. What every device
// backend does alike on the host (the stage table, the sizes from the plan, the growth rule, the download
// sequence) is core/sift_device_stages.hpp's SiftDeviceStages.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backend/opencl/state.hpp"
#include "backend/upload_chunks.hpp"
#include "core/sift_device_stages.hpp"

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

class SiftStagesOpenCL final : public detail::SiftDeviceStages {
 public:
  explicit SiftStagesOpenCL(detail::ContextImpl& ctx);

  void upload(const detail::SiftPlan& plan, const detail::SiftImageView& image) override;
  void pyramid() override;
  void dog() override;
  std::size_t extrema() override;
  void refine() override;
  void orientations() override;
  void select(const Image* mask) override;
  void descriptors() override;

  /// Tests: stage every upload through the pinned buffer, in chunks of `chunk` bytes (0: the default rule,
  /// staged on GPUs from kStagedUploadMin bytes in split_upload's chunks; sift_upload.cpp).
  void force_staged_upload(std::size_t chunk) noexcept { forced_chunk_ = chunk; }

  /// The first octave of the last pyramid() that sift_blur_small_octaves computed (the plan's octave count:
  /// none; tests check the small-octave cases exist).
  int small_octaves_from() const noexcept { return small_from_; }

  /// Tests: whether the last run's select stage ran in a small-count path (the rank select or sift_select_small
  /// set its counter slot).
  bool last_select_was_small() const noexcept { return counters_[SIFT_COUNT_SELECT_SMALL] == 1; }
  /// Tests: whether that small-count path was the rank select (kernels/sift_select_rank.cl): the last select()
  /// queued it and its counter slot says it ran.
  bool last_select_was_rank() const noexcept { return select_rank_queued_ && last_select_was_small(); }
  /// The positions sift_select_small handles with the State's switch and local memory now (0: not run).
  std::size_t select_small_positions();
  /// The records the rank select takes with the State's switches and the kernels' limits now (0: not run;
  /// else SIFT_RANK_MAX_RECORDS).
  std::size_t select_rank_records();

  /// Tests: the work-group size the last descriptors() ran sift_descriptor_staged or sift_descriptor_staged_rows
  /// with (128 for State::descriptor_variant 1 and 4, 32 for 2 and 3, on a GPU path where the device allows
  /// it), 0 when the walkers or the serial kernel ran.
  std::size_t last_descriptors_staged_local() const noexcept { return desc_staged_used_; }
  /// Tests: whether that staged kernel was the row walk (sift_descriptor_staged_rows).
  bool last_descriptors_row_walk() const noexcept { return desc_row_walk_used_; }

  /// Behave as on a device without cl_khr_fp64 (tests: the errors of the inputs that need doubles).
  void assume_no_fp64() noexcept { fp64_ = false; }

 private:
  // sift.cpp
  void prepare(const detail::SiftPlan& plan, const detail::SiftImageView& image);
  void check_memory(const detail::SiftPlan& plan, std::size_t input_bytes) const;
  cl_kernel kernel(const char* name);
  void launch(cl_kernel k, cl_uint dims, const std::size_t* global, const std::size_t* local, Stage stage);
  void launch_1d(cl_kernel k, std::size_t items, std::size_t want_local, Stage stage);
  void launch_2d(cl_kernel k, std::size_t x, std::size_t y, Stage stage);
  /// Submits what is queued (clFlush) without waiting: at stage boundaries before long runs of launches, so
  /// that the device works while the host queues the rest (a driver may hold commands until a flush or a
  /// blocking call).
  void flush() { SPECTRASIFT_CL_CHECK(clFlush(st_.queue)); }
  void finish_profile() override;  // stage_ms_ from the profiling events (launches and transfers)
  void read_counters() override;
  void clear_feature_counters() override;
  bool select_again() override;  // sift_features.cpp: the small-count path queued alone fell back
  // sift_upload.cpp: bytes of the caller's memory into dst (directly, or staged through pinned memory).
  void write_input(cl_mem dst, const void* src, std::size_t bytes);
  // sift_download.cpp
  void read_features(Features& out, std::size_t kept) override;
  // read_features on a GPU, through the pinned "sift.download_host"; run(n, fn) runs fn(piece) for piece in
  // [0, n) on the WorkPool.
  template <class Run> void read_staged(Features& out, std::size_t kept, const Run& run);
  /// Features::device: a copy of the kept descriptor rows, whose host values (of `type`) have digest `digest`.
  void attach_device_copy(Features& out, std::size_t kept, std::uint64_t digest, DescriptorType type);
  // The named buffers every stage reads (sized from the plan).
  cl_mem levels();          // "sift.gauss": every Gaussian level of every octave
  cl_mem octave_table();    // "sift.info": octave_info_
  cl_mem counter_buffer();  // "sift.counters": counters_ on the device
  // sift_pyramid.cpp
  // dog_off >= 0: the blur also writes the level's DoG plane (dst - src) at dog_off of "sift.dog".
  void blur(cl_mem src, cl_mem dst, std::size_t src_off, std::size_t dst_off, int w, int h, int kernel_index,
            cl_long dog_off = -1);
  void size_blur_tiles();
  int small_octaves_first();            // the first octave sift_blur_small_octaves computes (p.octaves: none)
  void blur_small_octaves(int first);   // its launch
  static std::size_t blur_tile_bytes(std::size_t tx, std::size_t ty, int r) {
    return (2 * ty + 2 * std::size_t(r)) * (tx + 2 * std::size_t(r)) * sizeof(float);
  }
  // sift_features.cpp
  void sort(cl_mem order, int count_slot, int mode);
  void compact(cl_mem in, int in_slot, int out_slot, cl_mem out);
  void select_rank(std::size_t bound);  // the rank select's launches over at most `bound` records
  // The bucketed rank select's launches over at most `bound` records (no cap; band_bits from the plan, >= 0).
  void select_buckets(std::size_t bound, int band_bits);
  void group_sizes();

  State& st_;
  std::string options_;        // build options of the sift.cl program
  bool fp64_ = false;          // the device has cl_khr_fp64
  std::uint64_t tables_generation_ = 0;  // State::sift_tables_generation when prepare() wrote the plan tables
  // Launch geometry (from the device's limits).
  std::size_t blur_tx_ = 0, blur_ty_ = 0;     // tile of the separable blur
  int blur_r_ = -1;                           // the largest radius the tiles were sized for
  std::vector<cl_kernel> blur_tiles_;         // [r]: sift_blur_tiles built for radius r, or null (sift_blur)
  std::vector<cl_kernel> blur_small_tiles_;   // [r]: sift_blur_small_tiles of the same program, or null
  int small_from_ = 0;                        // small_octaves_from()
  std::size_t small_fixed_local_ = ~std::size_t(0);  // sift_blur_small_octaves' local memory besides its planes
  std::size_t ori_local_ = 0, ori_chunk_ = 0, ori_ex_ = 0;
  std::size_t desc_local_ = 0, desc_ex_ = 0;
  // sift_descriptor_staged / _rows: samples per band and slice, their local memory besides the arguments (the
  // larger of the two), the work-group the last descriptors() ran one with (0: the walkers or the serial kernel
  // ran) and whether it was the row walk.
  std::size_t desc_chunk_ = 0, desc_staged_fixed_ = 0, desc_staged_used_ = 0;
  bool desc_row_walk_used_ = false;
  // kernels/sift_descriptor_staged.cl: SIFT_DESCR_ACC (a slice's accumulator, floats; checked against
  // numeric/sift_common.h in sift_features.cpp), SIFT_DESCR_LEN (its output row) and SIFT_DESCR_PAD (records
  // and codes after the last slice's).
  static constexpr std::size_t kDescStagedAcc = 160, kDescStagedLen = 128, kDescStagedPad = 4;
  // Their local-memory arguments for a work-group of `local` (local / 32 slices): per slice the weights (ex_cap
  // floats), records (chunk float4), codes, accumulator and output row (128 floats); kDescStagedPad records and
  // codes more.
  std::size_t desc_staged_local_bytes(std::size_t local) const noexcept {
    const std::size_t rec = 4 * sizeof(float) + sizeof(cl_int);
    return local / 32 *
               (desc_ex_ * sizeof(float) + desc_chunk_ * rec + (kDescStagedAcc + kDescStagedLen) * sizeof(float)) +
           kDescStagedPad * rec;
  }
  // Whether the device runs kernel `name` with a work-group of `local` (its kernel limit and local memory).
  bool desc_staged_fits(const char* name, std::size_t local);
  std::size_t oriented_bound_ = ~std::size_t(0);  // select(): the oriented count read back (CPU devices), else the capacity
  std::size_t compact_local_ = 0;
  bool select_deferred_ = false;    // select() queued the small-count path alone on a guess (select_again checks it)
  bool select_rank_queued_ = false;  // the last select() queued the rank select (last_select_was_rank())
  std::size_t rank_local_ = ~std::size_t(0);  // work-items of the rank select's slice kernels (select_rank_records())
  bool select_multi_now_ = false;   // select_again(): the next select() runs the multi-launch path on the count read
  std::size_t select_small_local_ = 0;        // work-items of sift_select_small (select_small_positions())
  std::size_t select_small_fixed_ = ~std::size_t(0);  // its local memory besides `shared` (measured once)
  std::size_t sort_local_ = 1;                // work-items of sift_sort_local (blocks of twice as many positions)
  std::size_t groups_ = 0;                    // work-groups of the per-keypoint kernels
  std::vector<std::pair<int, Event>> events_;
  std::size_t forced_chunk_ = 0;                    // force_staged_upload()
  std::vector<detail::ByteRange> upload_chunks_;    // scratch of write_input()
  Event upload_first_;  // a profiled staged upload's first write
  Event staged_last_;   // the last staged write: the staging buffer is free once it completed
  std::vector<SiftKeypoint> records_;  // read_features(): the kept records (CPU devices), reused across calls
  std::vector<std::uint64_t> digest_sums_;  // read_features(): one digest sum per piece of rows
  std::vector<Event> read_chunks_;          // read_staged(): the descriptor chunks' reads
};

/// The OpenCL backend's SIFT stages for an OpenCL context.
std::unique_ptr<detail::SiftStages> make_sift_stages(detail::ContextImpl& ctx);

}  // namespace spectrasift::opencl

// CUDA SIFT: the stages of core/sift_backend.hpp on a CUDA device, the whole pipeline on the State's compute
// stream (inside the pyramid's graph also on a second stream of its own, for the extrema) with two read-backs
// (the candidate count after extrema(), the features in download()). The kernels
// (kernels/sift_*.cuh, one family per header) are the OpenCL backend's GPU kernels in CUDA: the same maths in
// the same order, so that the results are the CPU backend's bits.
//
// Buffers are named buffers of the State ("sift.*"), sized from the plan and reused across images of one
// size; the candidate, keypoint and descriptor buffers grow (and the stages that fill them run again) when a
// run finds more than they hold. The features' descriptors stay on the device too, as a DeviceFeatures copy
// attached to Features::device (device_features.hpp), for matching on this backend.
//
// What every device backend does alike on the host (the stage table, the sizes from the plan, the growth
// rule, the download sequence) is core/sift_device_stages.hpp's SiftDeviceStages.
//
// This header includes no CUDA header (tests reach the stages' knobs through it); the device code is in
// sift.cu (construction, memory checks, the counters, timing), sift_pyramid.cu (upload and grey, pyramid, DoG,
// extrema, refinement) with sift_upload.cu (the image copy: staged or direct), sift_features.cu (orientations,
// select, descriptors) and sift_download.cu (read_features: the packed read-back and the device copy of the
// descriptors).
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <vector>

#include "backend/cuda/host/bitonic_plan.hpp"
#include "backend/cuda/host/upload_chunks.hpp"
#include "backend/cuda/host_copy.hpp"
#include "core/sift_device_stages.hpp"

struct CUevent_st;      // cudaEvent_t is a CUevent_st*
struct CUstream_st;     // cudaStream_t is a CUstream_st*
struct CUgraphExec_st;  // cudaGraphExec_t is a CUgraphExec_st*

namespace spectrasift::cuda {

struct State;
class EventSet;
class DeviceBlockPool;
namespace kernels {
struct SiftMask;  // kernels/sift_select.cuh
}

class SiftStagesCuda final : public detail::SiftDeviceStages {
 public:
  explicit SiftStagesCuda(detail::ContextImpl& ctx);
  ~SiftStagesCuda() override;

  void upload(const detail::SiftPlan& plan, const detail::SiftImageView& image) override;
  void pyramid() override;
  void dog() override;
  std::size_t extrema() override;
  void refine() override;
  void orientations() override;
  void select(const Image* mask) override;
  void descriptors() override;
  /// The batch's next image (sift_upload.cu): copied now on the copy stream into one of two device buffers
  /// (pageable memory staged through one of two pinned buffers), so that its copy overlaps this run's
  /// compute; the next upload() of the same view waits for that copy on the compute stream instead of copying.
  void prefetch(const detail::SiftImageView& next) override;
  void drop_prefetch() noexcept override;

  /// Tests: behave as on a device with this many bytes of global memory / of shared memory per block
  /// (0: the device's own).
  void set_device_memory_limit(std::size_t bytes) noexcept { memory_limit_ = bytes; }
  void set_shared_memory_limit(std::size_t bytes) noexcept { shared_limit_ = bytes; }
  /// The blur kernel of the levels of radius 1 .. 16 (larger radii always take sift_blur_dog): kRuntimeRadius =
  /// every level through sift_blur_dog, kTilesRound2 = the per-radius sift_blur_tiles_r2<R> (kept for A/B runs),
  /// kTiles = sift_blur_tiles<R> (float4 staging and write-out in the blocks away from the borders) at every
  /// size, kTilesSmall (default) = the same for the large planes and sift_blur_small<R> (32 x 16 tiles, a chain a
  /// quarter as long) for a level whose 64 x 32 grid has fewer than two blocks an SM.
  enum class BlurForm { kRuntimeRadius, kTilesRound2, kTiles, kTilesSmall };
  /// Tests and timing: the blur form. The same bits in every form; the pyramid graph is captured again.
  void set_blur_form(BlurForm f) noexcept {
    blur_form_ = f;
    pyramid_generation_ = 0;
  }
  /// Tests and timing: whether the pyramid's levels are launched as programmatic dependents of the level before
  /// them (default true; Hopper and later only, kernels/sift_blur.cuh). The same bits either way; the pyramid
  /// graph is captured again.
  void set_blur_pdl(bool on) noexcept {
    blur_pdl_ = on;
    pyramid_generation_ = 0;
  }
  /// Tests: whether select() may run the whole stage in one small-count path (the rank select or the one-block
  /// select, set_select_form), decided on the device (default true; false: the multi-launch path always).
  void set_select_small(bool on) noexcept { select_small_allowed_ = on; }
  /// The small-count path of select(): kRank (default) = kernels/sift_select_rank.cuh (every record compared
  /// with every other, a warp per eight records: three launches without a cap or a mask), kOneBlock =
  /// kernels::sift_select_small (one block sorting in shared memory, kept for A/B runs). The same bits.
  enum class SelectForm { kRank, kOneBlock };
  void set_select_form(SelectForm f) noexcept { select_form_ = f; }
  /// Tests: whether select() queues the small-count path alone when the buffers could hold more records than it
  /// takes: -1 (default) when the candidates are at most twice its limit, 0 never, 1 always (a wrong guess
  /// runs the multi-launch path in a second round, select_again()). The same bits either way.
  void set_select_defer(int mode) noexcept { select_defer_ = mode; }
  /// Tests and A/B runs: whether the path above the small-count paths is the bucketed rank select (default
  /// true, kernels/sift_select_buckets.cuh; only without a cap) or the sorting path (false). The same bits.
  void set_select_buckets(bool on) noexcept { select_buckets_ = on; }
  /// Tests: whether the last run's select stage ran in the small-count path (rank or one block).
  bool last_select_was_small() const noexcept;
  /// Tests: whether the last run's select() queued the small-count path alone on a guess (set_select_defer).
  bool last_select_deferred() const noexcept { return select_guessed_; }
  /// The descriptor kernel: kWalkers = kernels::sift_descriptor (a block of 36 walkers per keypoint),
  /// kStaged = kernels::sift_descriptor_staged<false> (a warp per keypoint, each sample computed once, each owner
  /// walking its box), kStagedRows = kernels::sift_descriptor_staged<true> (the same with decoded records and each
  /// owner visiting only the columns of its rotated square, row by row), kStagedRowsWide = the row walk compiled
  /// for 6 blocks an SM instead of 8 (80 registers: no spills around the bands, 24 warps an SM; the default). The
  /// same bits every way; the staged forms run the walkers where the device's shared memory cannot hold their bands.
  enum class DescriptorForm { kWalkers, kStaged, kStagedRows, kStagedRowsWide };
  // The row walk by default, compiled for 6 blocks an SM: on the H200 (sixth session of 2026-12-02, StageTimes) it
  // gave the walkers' bits (SiftCuda.DescriptorFormsGiveTheSameFeatures) in 0.266 / 0.797 / 6.01 ms against the
  // 8-block row walk's 0.299 / 0.841 / 6.24, the box walk's 0.463 / 1.182 / 8.79 and the walkers' 0.56 / 2.39 / 18.4
  // (kleiber 1080p, elephants 1080p, elephants 4K, upsampled; faster at every count of the eight photo runs).
  static constexpr DescriptorForm kDefaultDescriptorForm = DescriptorForm::kStagedRowsWide;
  /// Tests and timing: the form descriptors() runs (default kDefaultDescriptorForm).
  void set_descriptor_form(DescriptorForm form) noexcept { descriptor_form_ = form; }
  /// The form descriptors() runs for the current plan (kWalkers when a staged form was asked for and does not fit).
  DescriptorForm descriptor_form_in_use() const noexcept {
    return descriptor_form_ != DescriptorForm::kWalkers && desc_staged_fits_ ? descriptor_form_ : DescriptorForm::kWalkers;
  }

 private:
  // sift.cu
  void prepare(const detail::SiftPlan& plan);
  void check_memory(const detail::SiftPlan& plan, std::size_t input_bytes) const;
  std::size_t shared_memory_per_block() const noexcept;
  /// Device memory of a named State buffer ("sift.*"), at least `bytes`.
  void* buffer(const char* name, std::size_t bytes);
  float* levels();                  // "sift.gauss": every Gaussian level of every octave
  float* dog_planes();              // "sift.dog": every DoG plane of every octave
  const long long* octave_table();  // "sift.info": octave_info_
  unsigned int* counters();         // "sift.counters": kernels::kCounters slots
  void read_counters() override;    // counters() -> counters_ (synchronises the compute stream)
  bool select_again() override;     // a guess of select() was wrong: run the multi-launch path (download())
  void clear_feature_counters() override;
  void mark(Stage stage);           // a stage starts (timing runs only)
  void finish_profile() override;
  // sift_upload.cu
  bool upload_bytes(void* dst, const void* src, std::size_t bytes);
  /// The copy of upload_bytes on `stream`, staged through the pinned buffer `staging` (pageable memory);
  /// returns true when it reads page-locked memory directly (asynchronously).
  bool upload_bytes(void* dst, const void* src, std::size_t bytes, CUstream_st* stream, const char* staging);
  CUevent_st* copy_done();  // (a cudaEvent_t) the direct copy of the caller's page-locked image has run
  /// upload()'s raw image on the device, for the grey kernel: the prefetched copy when prefetch() was given
  /// this view, else copied now into "sift.input". wait: the caller waits for copy_done() before returning.
  const unsigned char* raw_input(const detail::SiftImageView& image, std::size_t bytes, bool& wait);
  // sift_pyramid.cu
  void size_blur_tiles();
  struct BlurSource {  // kernels::SiftBlurSource: value (y, x) is data[step y pitch + step x]
    const float* data;
    long long pitch;
    int step;
  };
  void blur(const BlurSource& src, float* dst, int w, int h, int kernel_index, const float* taps, float* dog,
            float* level0);
  /// Every launch of pyramid(): the levels on the compute stream and, forked onto side_stream() as soon as an
  /// octave's last DoG plane is written, that octave's extrema (into cand, capacity cap), joined back at the end.
  void launch_pyramid(const float* grey, float* gauss, float* dog, const float* taps, void* cand, unsigned cap);
  void launch_extrema(int octave, void* cand, unsigned cap, CUstream_st* stream);  // one octave's sift_extrema
  CUstream_st* side_stream();  // the pyramid graph's second branch (created on first use)
  // sift_features.cu
  void size_feature_kernels();
  std::size_t staged_descriptor_shared() const noexcept;  // dynamic shared memory of sift_descriptor_staged
  void sort(int* order, int count_slot, int mode);
  void compact(const int* in, int in_slot, int out_slot, int* out);
  void select_rank(unsigned cap);  // the small-count path of SelectForm::kRank
  // The path above the small-count paths without a cap (set_select_buckets); band_bits from the plan, >= 0.
  void select_buckets(unsigned cap, const kernels::SiftMask& m, int band_bits);
  // sift_download.cu
  /// Read-back 2's features: one copy of the packed layout into a reused pinned buffer, unpacked into out,
  /// and the device copy of the float descriptors (Features::device) in a recycled block.
  void read_features(Features& out, std::size_t kept) override;
  bool packs_bytes() const noexcept;  // the descriptors travel as bytes (lossless for the plan's options)
  void pack_features();               // kept records + descriptor rows -> "sift.packed" (one read-back)

  State& st_;
  std::shared_ptr<DeviceBlockPool> feature_blocks_;  // the descriptor copies of Features::device, recycled
  unsigned long long prepared_generation_ = 0;       // counts the plans prepare() set up
  // pyramid(): its launches captured once per plan and buffers as a CUDA graph (the launches take only the
  // plan, the tile and these buffers), replayed for every image of that plan.
  CUgraphExec_st* pyramid_graph_ = nullptr;
  unsigned long long pyramid_generation_ = 0;
  std::array<const void*, 5> pyramid_buffers_{};  // grey, gauss, dog, taps, candidates the graph was captured with
  unsigned pyramid_cap_ = 0;                      // and the candidate capacity
  CUstream_st* side_ = nullptr;                   // side_stream()
  // Launch geometry (from the device's limits and the plan).
  int blur_tx_ = 0, blur_ty_ = 0;  // output tile of sift_blur_dog
  int blur_r_ = -1;                // the largest radius the tile was sized for
  BlurForm blur_form_ = BlurForm::kTilesSmall;  // set_blur_form()
  bool blur_pdl_ = true;                   // set_blur_pdl()
  int ori_chunk_ = 0, ori_ex_ = 0, desc_ex_ = 0;
  int blocks_ = 0;                 // block cap of the per-keypoint kernels
  DescriptorForm descriptor_form_ = kDefaultDescriptorForm;  // set_descriptor_form()
  int desc_chunk_ = 0;             // samples per band and warp of sift_descriptor_staged
  bool desc_staged_fits_ = false;  // the device's shared memory holds sift_descriptor_staged's bands
  bool select_small_ = false;      // the device runs kernels::sift_select_small (enough shared memory)
  bool select_small_allowed_ = true;  // set_select_small
  SelectForm select_form_ = SelectForm::kRank;  // set_select_form
  int select_defer_ = -1;             // set_select_defer
  bool select_buckets_ = true;        // set_select_buckets
  bool select_deferred_ = false;      // this run's select() queued the block alone on a guess (until select_again)
  bool select_guessed_ = false;       // the same, kept for last_select_deferred()
  bool select_multi_now_ = false;     // the next select() runs the multi-launch path only (select_again)
  std::size_t memory_limit_ = 0, shared_limit_ = 0;
  // Timing: events in order, the stage each one starts.
  std::unique_ptr<EventSet> events_;
  std::unique_ptr<EventSet> ordering_;  // [0]: copy_done(); [1], [2]: the prefetch slots; [3], [4]: the graph's fork, join
  // prefetch(): the batch's next image, copied into slot `slot` ("sift.prefetch<slot>", staged through
  // "sift.prefetch_host<slot>", its copy done at ordering event 1 + slot). Two slots, used in turn: the copy
  // into one overlaps the grey kernel reading the other.
  struct Prefetch {
    const void* data = nullptr;
    std::size_t bytes = 0;
    int slot = 0;
    bool page_locked = false;
    bool pending = false;
  };
  Prefetch prefetch_;
  int next_prefetch_slot_ = 0;
  std::vector<ByteRange> upload_chunks_;       // scratch of upload_bytes()
  std::vector<CopyPiece> copy_piece_;
  std::vector<BitonicLaunch> sort_plan_;       // scratch of sort()
  std::vector<int> marks_;
};

/// The CUDA backend's SIFT stages for a CUDA context.
std::unique_ptr<detail::SiftStages> make_sift_stages(detail::ContextImpl& ctx);

}  // namespace spectrasift::cuda

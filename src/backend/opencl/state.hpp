// The OpenCL backend's part of a Context, and its BackendImpl (backend/backend.hpp): one device, an in-order
// queue (profiling enabled), the programs built from the embedded sources (cached per source name and build
// options) and named buffers. It implements SIFT (sift*.cpp), descriptor matching (match.cpp), spectral
// matching (spectral.cpp), and on devices with doubles RANSAC scoring (ransac.cpp) and warping (warp.cpp).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "backend/backend.hpp"
#include "backend/opencl/check.hpp"
#include "core/context_impl.hpp"
#include "core/spectral_backend.hpp"

namespace spectrasift::opencl {

/// The text of an embedded source file (kernels/*.cl or numeric/*.h), empty when unknown.
std::string_view embedded_source(std::string_view name);

/// A cl_mem that releases itself and grows (never shrinks) when asked for more bytes.
struct Buffer {
  cl_mem mem = nullptr;
  std::size_t bytes = 0;
  Buffer() = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  Buffer(Buffer&& o) noexcept : mem(o.mem), bytes(o.bytes) { o.mem = nullptr; o.bytes = 0; }
  Buffer& operator=(Buffer&& o) noexcept;
  ~Buffer();
};

/// A host buffer the driver can DMA from directly (CL_MEM_ALLOC_HOST_PTR, mapped once for the life of
/// the buffer): the staging area of streamed uploads. Unmapped and released by the State's deleter.
struct PinnedBuffer {
  cl_mem mem = nullptr;
  void* host = nullptr;
  std::size_t bytes = 0;
};

/// What the device allows for one compiled kernel (clGetKernelWorkGroupInfo).
struct KernelLimits {
  std::size_t work_group_size = 1;     ///< CL_KERNEL_WORK_GROUP_SIZE
  std::size_t preferred_multiple = 1;  ///< CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE
  std::size_t local_mem = 0;           ///< CL_KERNEL_LOCAL_MEM_SIZE (static __local arrays)
};

/// An OpenCL event that releases itself.
struct Event {
  cl_event ev = nullptr;
  Event() = default;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  Event(Event&& o) noexcept : ev(o.ev) { o.ev = nullptr; }
  Event& operator=(Event&& o) noexcept;
  ~Event();
  void reset() noexcept;
  /// Milliseconds between CL_PROFILING_COMMAND_START and _END (the queue has profiling enabled).
  double elapsed_ms() const;
};

struct State final : detail::BackendImpl {
  State() = default;
  ~State() override;  ///< finishes the queues, then releases buffers, kernels, programs, queues, context

  Backend kind() const noexcept override { return Backend::kOpenCL; }
  bool takes_byte_views() const noexcept override { return true; }  // match.*: packed or converted there
  bool implements(detail::Operation op) const noexcept override {
    if (op == detail::Operation::kRansac || op == detail::Operation::kWarp) return has_fp64();  // doubles (ransac.cpp)
    return op == detail::Operation::kSift || op == detail::Operation::kMatch || op == detail::Operation::kSpectral;
  }
  /// ransac.cpp / warp.cpp: RANSAC scoring and the inlier mask, and the bilinear warp, on the device.
  void score_models(const double* models, const std::uint8_t* valid, int count, const detail::PointPairs& pairs,
                    double threshold2, int threads, int* inliers, double* sums) override;
  int inlier_mask(const double* model, const detail::PointPairs& pairs, double threshold2, std::uint8_t* mask,
                  double* sum2) override;
  Image warp(const Image& moving, const std::array<double, 9>& inverse, int fixed_w, int fixed_h,
             int threads) override;
  /// ransac.cpp: the refits' sums of a chain of passes on the device (numeric/refit_sums.h's order, so the
  /// host's bits); false (the host computes them) by default (refit_variant), and without doubles or a
  /// work-group of 256.
  bool refit_sums(const int* passes, int npasses, const double* given, const detail::PointPairs& pairs,
                  const detail::RefitSelection& sel, double* out) override;
  /// Whether the device has cl_khr_fp64 (RANSAC scoring and warping need doubles; ransac.cpp).
  bool has_fp64() const noexcept;
  void match_top2(detail::ContextImpl& ctx, const detail::FeatureView& query, const detail::FeatureView& train,
                  Top2* out) override;
  void match_filtered(detail::ContextImpl& ctx, const detail::FeatureView& query, const detail::FeatureView& train,
                      const MatchOptions& options, std::vector<Match>& out) override;
  std::unique_ptr<detail::SiftStages> make_sift_stages(detail::ContextImpl& ctx) override;
  void spectral_match(detail::ContextImpl& ctx, const detail::CubeView& cube, const detail::PreparedReferences& refs,
                      const SpectralOptions& options, SpectralResult& result, const ProgressFn& progress) override;
  /// CL_DEVICE_GLOBAL_MEM_SIZE (also as available: OpenCL cannot tell what is free) and
  /// CL_DEVICE_MAX_MEM_ALLOC_SIZE.
  detail::DeviceMemory device_memory() const override { return {global_mem, global_mem, max_alloc}; }

  cl_platform_id platform = nullptr;
  cl_device_id device = nullptr;
  cl_context context = nullptr;
  cl_command_queue queue = nullptr;           ///< in-order, profiling: kernels and downloads
  cl_command_queue upload_queue = nullptr;    ///< second in-order queue (created on first use): uploads
  bool is_cpu = false;               ///< PoCL and other CPU devices take their own kernel variants
  std::size_t max_work_group = 0;
  std::size_t local_mem = 0;
  std::size_t compute_units = 1;              ///< CL_DEVICE_MAX_COMPUTE_UNITS
  std::size_t global_mem = 0;
  std::size_t max_alloc = 0;                  ///< CL_DEVICE_MAX_MEM_ALLOC_SIZE
  /// Streamed uploads go through pinned host staging (GPU default) or straight from the caller's memory
  /// with rectangular copies (default on a CPU device, where a staging copy is only an extra memcpy).
  bool host_staging = true;
  /// Which spectral product kernel: -1 = by device (the row kernel on CPU devices, the tiled one otherwise),
  /// 0 = tiled, 1 = rows. Both give the same bits; tests run both on any device.
  int gemm_variant = -1;
  /// Which matching kernel: -1 = by device (match_l2_top2_rows on CPU devices; on GPUs match_u8_top2 for
  /// descriptors of integers 0..255 when NVIDIA's dp4a built, else the tiled match_l2_top2),
  /// 0 = tiled, 1 = rows, 2 = u8 where the values allow (else tiled). All give the same bits; the tests run
  /// each on any device.
  int match_variant = -1;
  /// The packed dot product match_u8_top2 was built with (match.cpp): -1 not probed yet, 0 four integer
  /// multiply-adds, 1 cl_khr_integer_dot_product (never probed: only when a test sets it), 2 NVIDIA's dp4a
  /// through inline PTX.
  int match_dot4 = -1;
  /// The last upload from the pinned "match.u8.staging" (match.cpp): waited for before the buffer is refilled
  /// (a call that threw may have left it in flight).
  Event match_staging_upload;
  /// Whether spectral_one_ref / spectral_prepare stage the samples through __local memory: -1 = by device
  /// and layout (GPUs reading bip), 0 = never, 1 = always. The results are the same bits either way.
  int stage_samples = -1;
  /// Where refit_sums computes the refits' sums: -1 = by device (the host everywhere until the device form is
  /// measured faster on a GPU: on PoCL the host's sums cost ~0.07 ms a refit where the launches and work-groups
  /// of 256 cost ~0.75 ms a chain, ransac.md; NVIDIA OpenCL is predicted no faster), 0 = the host (refit_sums
  /// returns false), 1 = the device. The same bits either way; ransac_backend_test
  /// runs the device form on any device.
  int refit_variant = -1;
  /// Which SIFT blur: -1 = by device (the row kernels on CPU devices, the tiles otherwise), 0 = tiles
  /// (sift_blur_tiles per radius, sift_blur above radius 16), 1 = rows, 2 = sift_blur only. All give the same
  /// bits; the tests run the tiled forms on PoCL.
  int blur_variant = -1;
  /// Whether the tiled (GPU) blur takes sift_blur_small_tiles (32 x 16 tiles, a work-group's chain a quarter as
  /// long; sift_pyramid.cpp) for a level of radius up to 16: -1 = by device (the small planes, as 2: on the
  /// H200's NVIDIA OpenCL the pyramid stage 0.06-0.08 ms faster at every photo, docs/performance/sift.md), 0 =
  /// never, 1 = every such level (tests force it on PoCL with blur_variant 0), 2 = the small planes (where
  /// sift_blur_tiles' 64 x 32 grid has fewer than two work-groups a compute unit, CUDA's rule). The same bits
  /// every way.
  int small_tiles = -1;
  /// Whether the tiled (GPU) blur computes the trailing small octaves in one launch of
  /// sift_blur_small_octaves (one work-group, the planes in local memory; sift_pyramid.cpp): -1 = by device
  /// (GPUs), 0 = never, 1 = where they fit (tests force it on PoCL with blur_variant 0 or 2). The row
  /// kernels (blur_variant 1, CPU devices) never take it. The same bits either way.
  int small_octaves = -1;
  /// Whether SIFT's select stage runs a small-count path first (the whole stage when the oriented count is small,
  /// decided on the device; sift_features.cpp; which path: select_rank): -1 = by device (GPUs), 0 = never (the
  /// multi-launch path alone), 1 = where the device allows it (tests force it on PoCL). The same bits either way.
  int select_small = -1;
  /// Which small-count path select_small lets run: -1 = by device (the rank select on GPUs, sift_select_small on
  /// CPU devices), 0 = sift_select_small (kernels/sift_select.cl: one work-group sorting in local memory, up to
  /// its positions), 1 = the rank select (kernels/sift_select_rank.cl: every record compared with every other, a
  /// slice of 32 work-items per 8 records, three or four launches, up to SIFT_RANK_MAX_RECORDS = 16,384 records;
  /// tests force it on PoCL with select_small 1). The same bits either way.
  int select_rank = -1;
  /// Which SIFT descriptor kernel on GPUs (sift_features.cpp): -1 = by device (the row walk in work-groups of
  /// 32, as 3: the fastest of the five on the H200 through NVIDIA OpenCL), 0 = the walkers (sift_descriptor),
  /// 1 = the staged form (sift_descriptor_staged: each sample computed once, each owner walking its box) with
  /// four keypoints a work-group of 128, 2 = the same with one keypoint a work-group of 32, 3 and 4 = the staged
  /// form's row walk (sift_descriptor_staged_rows, CUDA's kStagedRows) in work-groups of 32 and 128; 1 to 4
  /// where the device allows the work-group and local memory, else the walkers. CPU devices always run sift_descriptor_serial. The same bits in every
  /// form; tests force each on PoCL with is_cpu = false.
  int descriptor_variant = -1;
  /// When the host's bound on the oriented count (the keypoint capacity, 2 x the candidates) exceeds what the
  /// small-count path takes (the rank select's records or sift_select_small's positions): -1 = queue it alone
  /// when the candidates are at most twice that (the oriented count is then most likely within it; the rare miss
  /// runs the multi-launch path from download() once the count is read), else with the multi-launch kernels
  /// behind it; 0 = always with them (they return at once when it did the stage); 1 = always alone. Tests force
  /// each. The same bits either way.
  int select_small_defer = -1;
  /// Above the small-count path (or in its place where it does not run), without a cap: 1 = the bucketed rank
  /// select (kernels/sift_select_buckets.cl, seven launches; CUDA's default), 0 = the multi-launch sorts; -1 = by
  /// device (see sift_features.cpp's select()). With a cap the sorts always run. The same bits either way.
  int select_buckets = -1;
  /// The GPU extrema search (sift_extrema) launches an octave on its own while its launch has at least this
  /// many work-groups, the remaining octaves in one launch (0: 2 x compute_units). Tests set it huge to search
  /// every octave in one launch. The same candidates either way (their order is never used).
  std::size_t extrema_split_groups = 0;
  std::size_t program_builds = 0;             ///< builds from source so far (the caches are tested with it)
  std::size_t program_binary_loads = 0;       ///< programs created from a binary of the disk cache
  /// Named and pinned buffers created (or re-created to grow) so far: a steady run of one image size adds
  /// none (sift_opencl_test's hot-path test reads it).
  std::size_t buffer_allocations = 0;
  /// The on-disk program cache (program_cache.hpp), read from the environment when the State is created;
  /// empty: disabled.
  std::string cache_dir;
  /// What a cached binary must have been built for: platform name and version, device name, driver version.
  std::vector<std::string> device_identity;
  std::map<std::string, cl_program> programs;  ///< key: source name + '\n' + options
  std::map<std::string, cl_kernel> kernels;    ///< key: program key + '\n' + kernel name
  std::map<std::string, Buffer> buffers;
  std::map<std::string, PinnedBuffer> pinned_buffers;
  /// Bumped by every SIFT stages object that writes the plan tables "sift.info", "sift.oscale" and "sift.taps"
  /// (sift.cpp prepare()): another stages object of the same State (the context's and a test's) then knows
  /// that the tables are no longer its plan's.
  std::uint64_t sift_tables_generation = 0;
  /// The PointPairs::id of the RANSAC pairs in buffer "ransac.pairs" (0: none), uploaded once per run.
  std::uint64_t ransac_pairs_id = 0;

  /// Builds (once) the program of an embedded .cl source with the given -D options. Every program
  /// gets "-cl-std=CL1.2", the numeric headers inlined in place of their #include lines, and no
  /// fast-math flag (DESIGN.md: strict numerics). A build failure throws with the build log. With a
  /// cache folder, the binary is loaded from it when it holds this program, and stored there after a build.
  cl_program program(const std::string& source_name, const std::string& options = {});
  /// A kernel of that program, created once and reused (set its arguments before every launch).
  cl_kernel kernel(const std::string& source_name, const std::string& kernel_name, const std::string& options = {});
  /// A named buffer of at least `bytes`, reused across calls; contents are lost when it grows.
  cl_mem buffer(const std::string& name, std::size_t bytes, cl_mem_flags flags = CL_MEM_READ_WRITE);
  /// A named pinned staging buffer of at least `bytes`, mapped for host writes; reused across calls.
  PinnedBuffer& pinned(const std::string& name, std::size_t bytes);
  /// The upload queue (created once).
  cl_command_queue transfer_queue();
  /// The device's limits for one kernel.
  KernelLimits limits(cl_kernel k) const;
  /// A 1-D work-group size for a kernel: the largest multiple of its preferred multiple that is at most
  /// min(want, the kernel's and the device's limits) (at least 1).
  std::size_t work_group_1d(cl_kernel k, std::size_t want) const;
};

/// The OpenCL state of a context, or Error(kInternal) if the context is not an OpenCL one.
State& state(detail::ContextImpl& ctx);

/// match.cpp: the nearest two train descriptors of every query (State::match_top2 forwards to it).
void match_top2(detail::ContextImpl& ctx, const detail::FeatureView& query, const detail::FeatureView& train, Top2* out);
/// match.cpp: match_features' matches with the tests on the device (State::match_filtered forwards to it on
/// devices with doubles).
void match_filtered(detail::ContextImpl& ctx, const detail::FeatureView& query, const detail::FeatureView& train,
                    const MatchOptions& options, std::vector<Match>& out);

/// spectral.cpp: the spectral entry (State::spectral_match forwards to it).
void spectral_match(detail::ContextImpl& ctx, const detail::CubeView& cube, const detail::PreparedReferences& refs,
                    const SpectralOptions& options, SpectralResult& result, const ProgressFn& progress);

}  // namespace spectrasift::opencl

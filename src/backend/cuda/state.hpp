// The CUDA backend's part of a Context, and its BackendImpl (backend/backend.hpp): one device, one stream for
// compute and one for copies, a lazily created cuBLAS handle, and a pool of device and pinned buffers reused
// across calls. It implements every operation: spectral matching (spectral.cu), SIFT (sift*.cu), descriptor
// matching (match.cu), RANSAC scoring (ransac.cu) and warping (warp.cu).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "backend/cuda/host_copy.hpp"
#include "backend/cuda/stream_pipeline.hpp"
#include "backend/cuda/tuning.hpp"
#include "core/context_impl.hpp"
#include "core/spectral_backend.hpp"

namespace spectrasift::cuda {

/// A device allocation that frees itself. Grows (never shrinks) when asked for more bytes.
struct DeviceBuffer {
  void* ptr = nullptr;
  std::size_t bytes = 0;
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr(o.ptr), bytes(o.bytes) { o.ptr = nullptr; o.bytes = 0; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  ~DeviceBuffer();
  void reserve(std::size_t n);  ///< at least n bytes; contents are lost when it grows
  template <class T> T* as() const noexcept { return static_cast<T*>(ptr); }
};

/// A page-locked host allocation (for overlapped copies). Grows like DeviceBuffer.
struct PinnedBuffer {
  void* ptr = nullptr;
  std::size_t bytes = 0;
  PinnedBuffer() = default;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  PinnedBuffer(PinnedBuffer&& o) noexcept : ptr(o.ptr), bytes(o.bytes) { o.ptr = nullptr; o.bytes = 0; }
  PinnedBuffer& operator=(PinnedBuffer&& o) noexcept;
  ~PinnedBuffer();
  void reserve(std::size_t n);
  template <class T> T* as() const noexcept { return static_cast<T*>(ptr); }
};

struct State final : detail::BackendImpl {
  State() = default;
  ~State() override;  ///< synchronises the device, then frees buffers, pools, events, cuBLAS and streams

  Backend kind() const noexcept override { return Backend::kCuda; }
  bool takes_byte_views() const noexcept override { return true; }  // match.*: packed or converted there
  bool implements(detail::Operation) const noexcept override { return true; }
  /// context.cpp: cudaMemGetInfo (total; free for messages: it excludes this context's own reused buffers, so
  /// it is not the budget); no per-buffer limit of its own.
  detail::DeviceMemory device_memory() const override;
  /// match.cu: the nearest two train descriptors of every query (exactly backend/cpu/match.cpp's results).
  void match_top2(detail::ContextImpl& ctx, const detail::FeatureView& query, const detail::FeatureView& train,
                  Top2* out) override;
  /// match.cu: match_features' matches: both directions from one upload, the tests and the compaction on the
  /// device, only the kept matches read back.
  void match_filtered(detail::ContextImpl& ctx, const detail::FeatureView& query, const detail::FeatureView& train,
                      const MatchOptions& options, std::vector<Match>& out) override;
  /// ransac.cu / warp.cu: RANSAC scoring and the inlier mask, and the bilinear warp, on the device (the CPU
  /// backend's bits).
  void score_models(const double* models, const std::uint8_t* valid, int count, const detail::PointPairs& pairs,
                    double threshold2, int threads, int* inliers, double* sums) override;
  int inlier_mask(const double* model, const detail::PointPairs& pairs, double threshold2, std::uint8_t* mask,
                  double* sum2) override;
  /// ransac.cu: the refits' sums on the device, a chain per round trip (numeric/refit_sums.h's order: the
  /// host's bits).
  bool refit_sums(const int* passes, int npasses, const double* given, const detail::PointPairs& pairs,
                  const detail::RefitSelection& sel, double* out) override;
  Image warp(const Image& moving, const std::array<double, 9>& inverse, int fixed_w, int fixed_h,
             int threads) override;
  /// sift.cu: the CUDA SIFT stages (sift.hpp).
  std::unique_ptr<detail::SiftStages> make_sift_stages(detail::ContextImpl& ctx) override;
  void spectral_match(detail::ContextImpl& ctx, const detail::CubeView& cube, const detail::PreparedReferences& refs,
                      const SpectralOptions& options, SpectralResult& result, const ProgressFn& progress) override;

  int device = 0;
  cudaDeviceProp props{};
  cudaStream_t compute = nullptr;
  cudaStream_t copy = nullptr;
  cudaStream_t aux = nullptr;  ///< a second compute stream (a GEMM epilogue overlapping the next GEMM)
  cudaStream_t download = nullptr;  ///< device -> host copies, beside the uploads of `copy` (PCIe is full duplex)
  cublasHandle_t cublas = nullptr;  ///< created on first use by cublas_handle()
  /// Named scratch buffers, reused across calls of the same operation ("spectral.cube0", ...).
  std::map<std::string, DeviceBuffer> buffers;
  std::map<std::string, PinnedBuffer> pinned;
  /// The PointPairs::id of the RANSAC pairs in buffer "ransac.pairs" (0: none), uploaded once per run.
  std::uint64_t ransac_pairs_id = 0;

  /// Host threads for the staging copies (mmap -> pinned), created on first use.
  std::unique_ptr<HostCopyPool> host_pool;
  /// Spectral matching: the events of its streaming loop and the ordering events of its GEMM path (score
  /// block i%2 computed / selected, the aux stream joined back), owned here so that no other operation uses them.
  StreamPipeline spectral_stream;
  EventSet spectral_gemm_events{EventSet::kOrdering};
  /// Matching: [0] recorded after the last upload from the pinned "match.u8.staging" (match.cu), waited for
  /// before the buffer is refilled (a call that threw may have left that upload in flight).
  EventSet match_events{EventSet::kOrdering};
  /// Knobs with their production defaults (set only by the bench hooks) and the last call's measurements.
  SpectralTuning tuning;
  SpectralTelemetry telemetry;

  cublasHandle_t cublas_handle();
  HostCopyPool& host_copy_pool(int threads);
  DeviceBuffer& buffer(const std::string& name, std::size_t bytes);
  PinnedBuffer& pinned_buffer(const std::string& name, std::size_t bytes);
  /// Makes this state's device current on the calling thread.
  void activate() const;
};

/// The CUDA state of a context, or Error(kInternal) if the context is not a CUDA one.
State& state(detail::ContextImpl& ctx);

/// spectral.cu: the spectral entry (State::spectral_match forwards to it).
void spectral_match(detail::ContextImpl& ctx, const detail::CubeView& cube, const detail::PreparedReferences& refs,
                    const SpectralOptions& options, SpectralResult& result, const ProgressFn& progress);

}  // namespace spectrasift::cuda

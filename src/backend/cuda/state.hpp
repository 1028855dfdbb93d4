// The CUDA backend's part of a Context, and its BackendImpl (backend/backend.hpp): one device, one stream for
// compute and one for copies, a lazily created cuBLAS handle, and a pool of device and pinned buffers reused
// across calls. It implements spectral matching (spectral.cu).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "backend/cuda/host_copy.hpp"

#include "core/context_impl.hpp"
#include "core/sample_pack.hpp"
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
  bool implements(detail::Operation op) const noexcept override { return op == detail::Operation::kSpectral; }
  void spectral_match(detail::ContextImpl& ctx, const detail::CubeView& cube, const detail::PreparedReferences& refs,
                      const SpectralOptions& options, SpectralResult& result, const ProgressFn& progress) override;

  int device = 0;
  cudaDeviceProp props{};
  cudaStream_t compute = nullptr;
  cudaStream_t copy = nullptr;
  cudaStream_t aux = nullptr;
  cudaStream_t download = nullptr;  ///< device -> host copies, beside the uploads of `copy` (PCIe is full duplex)       ///< a second compute stream (e.g. a GEMM epilogue overlapping the next GEMM)
  cublasHandle_t cublas = nullptr;  ///< created on first use by cublas_handle()
  /// Named scratch buffers, reused across calls of the same operation ("spectral.cube0", ...).
  std::map<std::string, DeviceBuffer> buffers;
  std::map<std::string, PinnedBuffer> pinned;

  /// Host threads for the staging copies (mmap -> pinned), created on first use.
  std::unique_ptr<HostCopyPool> host_pool;
  /// Timing events, created on first use and reused (event(i) for i < any count).
  std::vector<cudaEvent_t> events;
  /// Bytes of one GEMM score block of spectral matching (two are used). Measured on the H200 (best of
  /// 3,000 on the AVIRIS-sized cube): 6 MiB 71 ms, 24 MiB 24 ms, 96 MiB 12 ms: every block costs a
  /// latency-bound selection launch, so fewer, larger blocks win over keeping the scores in L2.
  std::size_t score_block_bytes = std::size_t(96) << 20;
  /// Spectral streaming of BIL/BIP cubes: page-lock the mapped file chunk by chunk and upload in place
  /// (true), or copy each chunk into pinned staging buffers (false, the default). EXPERIMENTAL: on the
  /// H200 machine (Firecracker VM, driver 580.159) cudaHostRegister of a fresh file mapping did not return
  /// within 60 s, and of a populated one it took 97 ms for 140 MB (bench/NOTES.md step 42), 38x the
  /// upload; keep it off unless measured on the target machine.
  bool register_staging = false;
  /// Best/threshold of many references with tensor cores allowed (ed, sam, scc): the fused FP16 kernel
  /// (spectral_best_fp16 + spectral_rescore, true, the default) or cuBLAS TF32 + spectral_select (false).
  bool fused_best = true;
  /// The fused kernel in its wgmma form where it exists (sm_90a build, compute capability 9.0; true, the
  /// default) or the mma.sync form (false; bench comparison).
  bool fused_wgmma = true;
  /// One reference on small-integer cubes: spectral_one_ref_rows (true, default) or the general
  /// spectral_one_ref (false; tests of equal bits, bench comparison).
  bool one_ref_rows = true;
  /// Streamed spectral matching, copy staging: raw bytes per chunk (0: kDefaultChunkBytes of spectral.cu),
  /// streaming (non-temporal) stores into the pinned buffers (true) or plain copies (false). Bench knobs
  /// (set_staging). Plain copies are the default: on the H200 machine they ran 3.29 ms end to end against
  /// 3.62 ms streaming.
  std::size_t stage_chunk_bytes = 0;
  /// Streamed spectral matching of 16-bit cubes, where the host has the vector packer: when a chunk is
  /// packed losslessly (and unpacked by the GPU) rather than copied raw. bench/NOTES.md steps 51-52.
  PackPolicy pack_policy = PackPolicy::kBalanced;
  /// The widest packer instruction set to use. Bench knob: below kAvx512Gfni it forces that packer, which
  /// streamed calls otherwise never use (bench/NOTES.md step 59: slower than raw uploads).
  detail::PackIsa pack_max_isa = detail::PackIsa::kAvx512Gfni;
  double last_pack_ratio = 0;  ///< of the last streamed call: packed / raw bytes of its packed chunks (0: none)
  double last_packed_share = 0;  ///< of the last streamed call: raw bytes of its packed chunks / all raw bytes
  /// Threads of the staging copy (caller included; 0: the context's CPU threads). Bench knob.
  int copy_threads = 0;
  bool stage_streaming = false;
  /// Copy staging with plain stores: the last chunk's copy demoted to the shared cache (CLDEMOTE). Bench knob.
  bool demote_last_chunk = true;
  /// Ordering-only events (no timing), created on first use and reused.
  std::vector<cudaEvent_t> sync_events;
  /// Bench knob: record a timeline of each streamed spectral call (host and GPU milliseconds since the call
  /// started) into `trace` (set_trace / last_trace).
  bool trace_on = false;
  std::string trace;

  cublasHandle_t cublas_handle();
  HostCopyPool& host_copy_pool(int threads);
  cudaEvent_t event(std::size_t i);
  cudaEvent_t sync_event(std::size_t i);
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

// Measurement hooks of the CUDA backend for the benchmarks and tests: they set the knobs of SpectralTuning
// (src/backend/cuda/tuning.hpp) and read the telemetry. No CUDA header here, so that a program compiled by the
// host compiler can include it. Defined in cuda_hooks.cu, in the spectrasift_bench_hooks library (CUDA builds
// only; programs see SPECTRASIFT_HAVE_CUDA), which the library itself never links. Times are medians of `reps`
// runs after one warm-up, measured with CUDA events on the context's streams.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "core/spectral_backend.hpp"
#include "spectrasift/context.hpp"

namespace spectrasift::cuda::bench {

/// Device-to-device cudaMemcpy of `bytes`: GB/s counting the bytes read plus the bytes written.
double device_copy_gbps(Context& ctx, std::size_t bytes, int reps);
/// Tuning knob of the many-reference path: bytes of one GEMM score block (default 96 MiB).
void set_score_block_bytes(Context& ctx, std::size_t bytes);
/// Copy staging of the streamed path: raw bytes per chunk (0 = the default, 16 MiB).
void set_stage_chunk_bytes(Context& ctx, std::size_t chunk_bytes);
/// Copy staging with plain stores: the last chunk's lines demoted to the shared cache after its copy (true,
/// the default) or left in the copying cores' caches.
void set_demote_last_chunk(Context& ctx, bool on);
/// Threads of the staging copy, the calling thread included (0 = the context's CPU threads).
void set_copy_threads(Context& ctx, int threads);
/// Many references, best/threshold with tensor cores: the fused FP16 kernel (true, default) or cuBLAS TF32.
void set_fused_best(Context& ctx, bool on);
/// The fused kernel's form: wgmma (true, default, where built and supported) or mma.sync (false).
void set_fused_wgmma(Context& ctx, bool on);
/// One reference on small-integer cubes: the 4-pixels-per-thread kernel (true, default) or the general one.
void set_one_ref_rows(Context& ctx, bool on);
/// Streamed uploads of 16-bit cubes: packed losslessly never, always, or balanced against the upload engine
/// (the default; see PackPolicy in host_copy.hpp). 0, 1, 2 as in PackPolicy.
void set_pack_policy(Context& ctx, int policy);
/// Packed bytes / raw bytes of the chunks that the last streamed call uploaded packed (0: none was).
double last_pack_ratio(Context& ctx);
/// The share of the last streamed call's raw bytes that it uploaded packed (0: none, 1: every chunk).
double last_packed_share(Context& ctx);
/// The widest instruction set of the packer (0 scalar, 1 AVX-512BW, 2 AVX-512 VBMI+GFNI, the default; capped by
/// the processor's). Streamed calls pack only with VBMI+GFNI unless this forces a narrower packer (bench rows).
void set_pack_isa(Context& ctx, int isa);
/// Timeline of each streamed spectral call (on) and the last one's text: host and GPU milliseconds since
/// the call started, one "what at ms" line per point, in time order.
void set_trace(Context& ctx, bool on);
std::string last_trace(Context& ctx);
/// Whether this build and device run the wgmma form (an sm_90a build on a compute capability 9.0 GPU).
bool fused_wgmma_available(Context& ctx);
/// Pixels of the last chunk of the last fused FP16 call with more keys within the GEMM error bound than
/// the candidates it rescores (kBestCandidates, the best keys).
unsigned long long fused_overflow_pixels(Context& ctx);
/// Device memory in use on the context's GPU (total - free from cudaMemGetInfo, after a device sync).
std::size_t device_memory_used_bytes(Context& ctx);
/// Pinned host -> device cudaMemcpyAsync of `bytes`: milliseconds.
double pinned_upload_ms(Context& ctx, std::size_t bytes, int reps);
/// Page-locked host memory (cudaMallocHost on the context's device) of `bytes`, and its release: what a
/// caller that keeps its images pinned hands to detect_and_compute (tests of the direct upload path).
void* pinned_host_alloc(Context& ctx, std::size_t bytes);
void pinned_host_free(void* p);

/// Tests: the first `floats` floats of the context's named device buffer (e.g. "sift.gauss", "sift.dog"), read
/// after the device has finished its work; throws when the buffer is missing or smaller.
std::vector<float> read_float_buffer(Context& ctx, const std::string& name, std::size_t floats);
/// Tests: every byte of the context's named device buffer set to `byte` (0xff: NaN floats), so that a plane a
/// kernel failed to write cannot keep an earlier run's values.
void fill_buffer(Context& ctx, const std::string& name, unsigned char byte);

/// The device compute alone: the whole cube is uploaded once (as one chunk) and the kernels of
/// spectral matching run `reps` times over it; median milliseconds. `result` (sized as for
/// spectral_match) receives the outputs of the last run when not null. force_exact: many references
/// go through the exact multi-reference kernel instead of the GEMM (the FP32 ground truth of the GEMM path).
double resident_compute_ms(Context& ctx, const detail::CubeView& cube, const detail::PreparedReferences& refs,
                           const SpectralOptions& options, int reps, SpectralResult* result = nullptr,
                           bool force_exact = false);

}  // namespace spectrasift::cuda::bench

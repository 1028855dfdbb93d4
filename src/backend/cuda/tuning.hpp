// The knobs that the CUDA backend's spectral matching reads, with their production defaults, and what a
// streamed call leaves behind for measurement. The library never changes a knob: only the bench hooks
// (bench/hooks/, linked by tests and benchmarks, never by the library) set them and read the telemetry.
// Figures: docs/performance/spectral.md.
#pragma once

#include <cstddef>
#include <string>

#include "backend/cuda/host/sample_packer.hpp"
#include "backend/cuda/host_copy.hpp"

namespace spectrasift::cuda {

struct SpectralTuning {
  /// Bytes of one GEMM score block of spectral matching (two are used). Measured on the H200 (best of
  /// 3,000 on the AVIRIS-sized cube): 6 MiB 71 ms, 24 MiB 24 ms, 96 MiB 12 ms: every block costs a
  /// latency-bound selection launch, so fewer, larger blocks win over keeping the scores in L2.
  std::size_t score_block_bytes = std::size_t(96) << 20;
  /// Best/threshold of many references with tensor cores allowed (ed, sam, scc): the fused FP16 kernel
  /// (spectral_best_fp16 + spectral_rescore, true, the default) or cuBLAS TF32 + spectral_select (false).
  bool fused_best = true;
  /// The fused kernel in its wgmma form where it exists (sm_90a build, compute capability 9.0; true, the
  /// default) or the mma.sync form (false; bench comparison).
  bool fused_wgmma = true;
  /// One reference on small-integer cubes: spectral_one_ref_rows (true, default) or the general
  /// spectral_one_ref (false; tests of equal bits, bench comparison).
  bool one_ref_rows = true;
  /// Many references: the exact spectral_multi kernel instead of the GEMM paths (false, the default; true
  /// gives the FP32 ground truth that the bench compares the GEMM paths with).
  bool force_exact = false;
  /// Streamed spectral matching, copy staging: raw bytes per chunk (0: kDefaultChunkBytes of spectral_plan.hpp).
  std::size_t stage_chunk_bytes = 0;
  /// Streamed spectral matching of 16-bit cubes, where the host has the vector packer: when a chunk is
  /// packed losslessly (and unpacked by the GPU) rather than copied raw (docs/performance/spectral.md,
  /// 'Packed uploads').
  PackPolicy pack_policy = PackPolicy::kBalanced;
  /// The widest packer instruction set to use. Below kAvx512Gfni it forces that packer, which streamed calls
  /// otherwise never use (docs/performance/spectral.md, 'Packed uploads': slower than raw uploads).
  detail::PackIsa pack_max_isa = detail::PackIsa::kAvx512Gfni;
  /// Threads of the staging copy (caller included; 0: the context's CPU threads).
  int copy_threads = 0;
  /// Copy staging: the last chunk's copy demoted to the shared cache (CLDEMOTE).
  bool demote_last_chunk = true;
  /// Record a timeline of each streamed spectral call (host and GPU milliseconds since the call started)
  /// into SpectralTelemetry::trace. Off: nothing is recorded and no string is built.
  bool trace_on = false;
};

/// What the last streamed spectral call measured.
struct SpectralTelemetry {
  double last_pack_ratio = 0;    ///< packed / raw bytes of its packed chunks (0: none)
  double last_packed_share = 0;  ///< raw bytes of its packed chunks / all raw bytes
  std::string trace;             ///< the timeline, when SpectralTuning::trace_on
};

}  // namespace spectrasift::cuda

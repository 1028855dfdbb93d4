// spectrasift/options.hpp — options of a Context (backend choice, threads, limits).
#pragma once

#include <cstdint>
#include <string>

#include "spectrasift/types.hpp"

namespace spectrasift {

/// How a Context is created. Every field has a documented default; check() throws Error(kInvalidArgument).
struct ContextOptions {
  /// Which backend. kAuto: CUDA, then an OpenCL GPU, then the CPU (the choice is logged when verbose).
  /// A backend asked for explicitly that is missing is an error, never a silent fallback.
  Backend backend = Backend::kAuto;
  /// Device index within the backend (CUDA device ordinal; OpenCL: index in the flat list that
  /// `spectrasift devices` prints). -1 = the first suitable device.
  int device = -1;
  /// CPU threads used by the CPU backend (and host-side work). 0 = all hardware threads.
  int threads = 0;
  /// Log which implementation ran, and the timing of each stage, to stderr.
  bool verbose = false;
  /// Largest image or cube accepted, in pixels (width * height); 0 = no limit. Checked before allocating.
  /// The CLI's --max-pixels N and the environment variable SPECTRASIFT_MAX_PIXELS set it.
  std::uint64_t max_pixels = std::uint64_t(1) << 30;
  /// Working-memory budget of one job, in bytes: SIFT (from its plan: pyramid, DoG, candidates) and
  /// spectral matching (scores and index of the output, K or all references) estimate what they need and
  /// refuse, before allocating, a job that exceeds it, saying how to lower it. 0 = the default: half of
  /// the physical memory for a job in host memory; for a job on a GPU (CUDA, OpenCL) the device's total
  /// memory (cudaMemGetInfo) or global memory (CL_DEVICE_GLOBAL_MEM_SIZE), and no single buffer may exceed
  /// the device's largest allocation (CL_DEVICE_MAX_MEM_ALLOC_SIZE). UINT64_MAX = no limit. The CLI's
  /// --max-memory and the environment variable SPECTRASIFT_MAX_MEMORY set it (parse_memory_size).
  std::uint64_t max_memory = 0;

  void check() const;

  /// Reads SPECTRASIFT_BACKEND, SPECTRASIFT_DEVICE, SPECTRASIFT_MAX_PIXELS and SPECTRASIFT_MAX_MEMORY from the
  /// environment (unset or empty: the defaults above). A malformed value throws Error(kInvalidArgument) naming
  /// the variable.
  static ContextOptions from_env();
};

/// A memory size as --max-memory and SPECTRASIFT_MAX_MEMORY take it: BYTES with an optional K, M, G or T
/// suffix (powers of 1024, any case), or "none" (no limit: UINT64_MAX). Throws Error(kInvalidArgument)
/// quoting the text otherwise; 0 is refused (it is not a budget).
std::uint64_t parse_memory_size(const std::string& text);

/// The host-memory budget of one job under these options: max_memory, or half of the physical memory when
/// it is 0. (For what callers allocate themselves at a job's size, e.g. the CLI's pictures.)
std::uint64_t host_memory_budget(const ContextOptions& options);

}  // namespace spectrasift

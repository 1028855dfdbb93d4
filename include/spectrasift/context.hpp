// spectrasift/context.hpp — one device and everything that lives on it.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "spectrasift/options.hpp"
#include "spectrasift/types.hpp"

namespace spectrasift {

/// A device that a backend can run on, as `spectrasift devices` lists it.
struct DeviceInfo {
  Backend backend = Backend::kCpu;
  int index = 0;                       ///< index to pass as ContextOptions::device
  std::string name;                    ///< device name as the driver reports it
  std::string platform;                ///< OpenCL platform / "CUDA <runtime version>" / "OpenMP"
  std::string type;                    ///< "gpu", "cpu", "accelerator"
  std::uint64_t global_memory = 0;     ///< bytes
  std::uint64_t local_memory = 0;      ///< bytes of shared/local memory per work-group (block)
  int compute_units = 0;               ///< SMs, OpenCL compute units or CPU hardware threads
  int max_work_group_size = 0;         ///< largest work-group (block) size
  std::string version;                 ///< driver / OpenCL version / compute capability
};

/// Every backend compiled into this build, and whether it found a device.
std::vector<Backend> compiled_backends();
/// Every device of every compiled backend. Never throws for a missing driver: such a backend lists no device.
std::vector<DeviceInfo> list_devices();

namespace detail { struct ContextImpl; }

/// Progress of a long operation: the fraction done, 0..1, nondecreasing within one operation and 1.0 last
/// when it succeeds. Called from the calling thread only, between pieces of work (keep it cheap). The library
/// never prints progress; the CLI draws its bar from this.
using ProgressFn = std::function<void(double)>;

/// Owns one device of one backend: queues/streams, memory pool, compiled kernels, reusable plans.
/// Create it once and reuse it; it is move-only. A Context is not thread-safe: use one per thread.
///
/// Threads: one Context must NOT be used by two threads at the same time (its plans, buffers, queues
/// and kernel cache are reused between calls without locks); calls on it from one thread at a time,
/// in any order, are fine. This is checked: every operation that takes a Context (detect_and_compute,
/// match_features, nearest_two, estimate_model, warp_image, spectral_match) claims it for the length of
/// the call with one atomic compare-exchange, and a call from a second thread while another one runs
/// throws Error(kInvalidArgument, "... Context used from two threads at the same time ...") before it
/// touches anything (the first call goes on undisturbed). A call made from inside another one on the
/// same thread (e.g. from a spectral_match progress callback) is allowed. Moving or destroying a Context
/// while another thread uses it is not checked (it is a bug like any use after free).
/// Several Contexts, on the same device or on different ones, may run in parallel from different
/// threads and give exactly the results of running them one after the other (tests/concurrency_test.cpp
/// checks this for SIFT, matching, RANSAC and spectral matching on the CPU and OpenCL backends, and the
/// check above). The CPU backend's SIFT worker pool belongs to its Context and is not shared; its OpenMP
/// parts use one OpenMP team per calling thread.
class Context {
 public:
  explicit Context(const ContextOptions& options = ContextOptions::from_env());
  ~Context();
  Context(Context&&) noexcept;
  Context& operator=(Context&&) noexcept;
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  Backend backend() const noexcept;
  const DeviceInfo& device() const noexcept;
  const ContextOptions& options() const noexcept;
  /// "cuda:0 NVIDIA H200", "opencl:1 pthread-... (Portable Computing Language)", "cpu:0 (16 threads)".
  std::string describe() const;
  /// The progress callback of the operations on this Context (empty, the default: none): detect_and_compute
  /// after each stage and, on the CPU backend, each octave; match_features and nearest_two per pass (on the
  /// CPU backend per sixteenth of the queries); estimate_model per batch of RANSAC iterations; spectral_match
  /// per chunk of lines (unless the call gives its own). Each operation reports from 0 to 1.0.
  void set_progress(ProgressFn progress);

  /// Backend-private state; not part of the public API.
  detail::ContextImpl& impl() noexcept { return *impl_; }

 private:
  std::unique_ptr<detail::ContextImpl> impl_;
};

/// The library version, "MAJOR.MINOR.PATCH".
const char* version() noexcept;

}  // namespace spectrasift

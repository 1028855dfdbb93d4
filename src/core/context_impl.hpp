// Backend-private state behind spectrasift::Context: the options, the device, and the context's backend
// (one opaque BackendImpl, see backend/backend.hpp; a backend reaches its own type through its state(ctx)).
#pragma once

#include <any>
#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "backend/backend.hpp"
#include "spectrasift/context.hpp"

namespace spectrasift::detail {

struct ContextImpl {
  ContextOptions options;
  DeviceInfo device;
  /// The context's device: the CPU, CUDA or OpenCL backend (never null once the Context is constructed).
  /// Which backend runs an operation is decided by core/dispatch.hpp.
  std::unique_ptr<BackendImpl> backend_impl;
  /// Reusable per-operation plans (buffers sized for the last input shape), keyed by operation name.
  std::map<std::string, std::any> plans;
  /// The thread inside a public operation on this context; a default id when none (see ContextUse).
  std::atomic<std::thread::id> user{};

  /// Context::set_progress, and the range [progress_lo, progress_hi] of the running operation that the
  /// current stage covers (see OperationProgress).
  ProgressFn progress;
  double progress_lo = 0, progress_hi = 1, progress_last = -1;
  bool progress_active = false;
  int progress_depth = 0;  ///< OperationProgress objects alive: reports come only from the outermost (depth 1)

  /// Reports `fraction` (0..1) of the current stage: progress(lo + fraction * (hi - lo)), never lower than the
  /// last value reported. Nothing outside an operation's OperationProgress, nor inside a nested operation.
  void report_progress(double fraction);

  Backend backend() const noexcept { return device.backend; }
  /// Threads for the CPU backend: options.threads, or every hardware thread when 0.
  int cpu_threads() const noexcept;
  /// Writes one line to stderr when options.verbose ("[spectrasift] ...").
  void log(const std::string& line) const;
};

/// The progress of one public operation (ContextImpl::progress): 0 on construction, stage(lo, hi) sets the
/// range that report_progress then covers (reporting lo), finish() reports 1.0, and so does the destructor
/// on a normal return (not while an exception leaves the operation). Nested in another operation's (a call
/// made from inside one), it reports nothing, so that the outer operation's fractions stay monotone.
class OperationProgress {
 public:
  explicit OperationProgress(ContextImpl& impl);
  ~OperationProgress();
  OperationProgress(const OperationProgress&) = delete;
  OperationProgress& operator=(const OperationProgress&) = delete;
  void stage(double lo, double hi);
  void finish();

 private:
  ContextImpl& impl_;
  bool owner_ = false;  ///< false when nested or when no callback is set
  int exceptions_ = 0;  ///< std::uncaught_exceptions() on construction
};

/// Claims a Context for one public operation (held for the whole call): a Context must not be used by two
/// threads at the same time (context.hpp), and this turns such use into Error(kInvalidArgument) in the
/// thread that came second, before it touches any state, instead of a data race. A nested operation on
/// the same thread (detect_and_compute(Image) calling the ImageF overload, a progress callback calling
/// another operation) passes; only the outermost claim releases. Cost: one compare-exchange and one store.
class ContextUse {
 public:
  ContextUse(ContextImpl& impl, const char* operation);
  ~ContextUse();
  ContextUse(const ContextUse&) = delete;
  ContextUse& operator=(const ContextUse&) = delete;

 private:
  ContextImpl* claimed_ = nullptr;  ///< set when this is the outermost claim
};

}  // namespace spectrasift::detail

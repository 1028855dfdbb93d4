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

  Backend backend() const noexcept { return device.backend; }
  /// Threads for the CPU backend: options.threads, or every hardware thread when 0.
  int cpu_threads() const noexcept;
  /// Writes one line to stderr when options.verbose ("[spectrasift] ...").
  void log(const std::string& line) const;
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

// Backend-private state behind spectrasift::Context. Backends reach their own state through the
// pointers below; each backend defines its State type and deleter in its own folder.
#pragma once

#include <any>
#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "spectrasift/context.hpp"

namespace spectrasift::cuda {
struct State;
struct StateDeleter { void operator()(State*) const noexcept; };
/// Creates the CUDA state for a device (stream, cuBLAS handle, pools); throws Error when absent.
std::unique_ptr<State, StateDeleter> create_state(int device, DeviceInfo& info);
std::vector<DeviceInfo> list_devices();
}  // namespace spectrasift::cuda

namespace spectrasift::opencl {
struct State;
struct StateDeleter { void operator()(State*) const noexcept; };
/// Creates the OpenCL state for a device index of list_devices(); throws Error when absent.
std::unique_ptr<State, StateDeleter> create_state(int device, DeviceInfo& info);
std::vector<DeviceInfo> list_devices();
}  // namespace spectrasift::opencl

namespace spectrasift::detail {

struct ContextImpl {
  ContextOptions options;
  DeviceInfo device;
  std::unique_ptr<cuda::State, cuda::StateDeleter> cuda;
  std::unique_ptr<opencl::State, opencl::StateDeleter> opencl;
  /// Reusable per-operation plans (buffers sized for the last input shape), keyed by operation name.
  std::map<std::string, std::any> plans;
  /// The thread inside a public operation on this context; a default id when none (see ContextUse).
  std::atomic<std::thread::id> user{};

  Backend backend() const noexcept { return device.backend; }
  /// Threads for the CPU backend: options.threads, or every hardware thread when 0.
  int cpu_threads() const noexcept;
  /// Writes one line to stderr when options.verbose ("[spectrasift] ...").
  void log(const std::string& line) const;
  /// For an operation that this context's backend does not implement yet: when the backend was picked
  /// by `auto`, logs that the operation runs on the host CPU backend instead and returns; when the user
  /// asked for the backend explicitly, throws Error(kUnsupported) (DESIGN.md: never a silent fallback).
  void require_host_fallback(const std::string& operation) const;
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

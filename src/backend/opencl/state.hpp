// The OpenCL backend's part of a Context: one device, an in-order queue (profiling enabled), the
// programs built from the embedded sources (cached per source name and build options) and named buffers.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <string_view>

#include "backend/opencl/check.hpp"
#include "core/context_impl.hpp"

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

struct State {
  cl_platform_id platform = nullptr;
  cl_device_id device = nullptr;
  cl_context context = nullptr;
  cl_command_queue queue = nullptr;
  bool is_cpu = false;               ///< PoCL and other CPU devices take their own kernel variants
  std::size_t max_work_group = 0;
  std::size_t local_mem = 0;
  std::map<std::string, cl_program> programs;  ///< key: source name + '\n' + options
  std::map<std::string, cl_kernel> kernels;    ///< key: program key + '\n' + kernel name
  std::map<std::string, Buffer> buffers;

  /// Builds (once) the program of an embedded .cl source with the given -D options. Every program
  /// gets "-cl-std=CL1.2", the numeric headers inlined in place of their #include lines, and no
  /// fast-math flag (DESIGN.md: strict numerics). A build failure throws with the build log.
  cl_program program(const std::string& source_name, const std::string& options = {});
  /// A kernel of that program, created once and reused (set its arguments before every launch).
  cl_kernel kernel(const std::string& source_name, const std::string& kernel_name, const std::string& options = {});
  /// A named buffer of at least `bytes`, reused across calls; contents are lost when it grows.
  cl_mem buffer(const std::string& name, std::size_t bytes, cl_mem_flags flags = CL_MEM_READ_WRITE);
};

State& state(detail::ContextImpl& ctx);

}  // namespace spectrasift::opencl

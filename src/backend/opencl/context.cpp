// OpenCL device enumeration, per-context state and the program cache (in-process; on disk through
// program_cache.hpp).
#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "backend/opencl/state.hpp"

#include "backend/opencl/program_cache.hpp"

namespace spectrasift::opencl {

const char* status_name(cl_int s) noexcept {
  switch (s) {
#define SPECTRASIFT_CASE(x) case x: return #x;
    SPECTRASIFT_CASE(CL_DEVICE_NOT_FOUND) SPECTRASIFT_CASE(CL_DEVICE_NOT_AVAILABLE)
    SPECTRASIFT_CASE(CL_COMPILER_NOT_AVAILABLE) SPECTRASIFT_CASE(CL_MEM_OBJECT_ALLOCATION_FAILURE)
    SPECTRASIFT_CASE(CL_OUT_OF_RESOURCES) SPECTRASIFT_CASE(CL_OUT_OF_HOST_MEMORY)
    SPECTRASIFT_CASE(CL_BUILD_PROGRAM_FAILURE) SPECTRASIFT_CASE(CL_INVALID_VALUE)
    SPECTRASIFT_CASE(CL_INVALID_DEVICE) SPECTRASIFT_CASE(CL_INVALID_CONTEXT)
    SPECTRASIFT_CASE(CL_INVALID_COMMAND_QUEUE) SPECTRASIFT_CASE(CL_INVALID_MEM_OBJECT)
    SPECTRASIFT_CASE(CL_INVALID_PROGRAM) SPECTRASIFT_CASE(CL_INVALID_KERNEL_NAME)
    SPECTRASIFT_CASE(CL_INVALID_KERNEL) SPECTRASIFT_CASE(CL_INVALID_ARG_INDEX)
    SPECTRASIFT_CASE(CL_INVALID_ARG_VALUE) SPECTRASIFT_CASE(CL_INVALID_ARG_SIZE)
    SPECTRASIFT_CASE(CL_INVALID_KERNEL_ARGS) SPECTRASIFT_CASE(CL_INVALID_WORK_DIMENSION)
    SPECTRASIFT_CASE(CL_INVALID_WORK_GROUP_SIZE) SPECTRASIFT_CASE(CL_INVALID_WORK_ITEM_SIZE)
    SPECTRASIFT_CASE(CL_INVALID_GLOBAL_OFFSET) SPECTRASIFT_CASE(CL_INVALID_BUFFER_SIZE)
    SPECTRASIFT_CASE(CL_INVALID_BUILD_OPTIONS) SPECTRASIFT_CASE(CL_INVALID_PLATFORM)
    case -1001: return "CL_PLATFORM_NOT_FOUND_KHR";
#undef SPECTRASIFT_CASE
    default: return "CL_ERROR";
  }
}

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    if (mem) clReleaseMemObject(mem);
    mem = o.mem; bytes = o.bytes; o.mem = nullptr; o.bytes = 0;
  }
  return *this;
}
Buffer::~Buffer() { if (mem) clReleaseMemObject(mem); }

Event& Event::operator=(Event&& o) noexcept {
  if (this != &o) {
    reset();
    ev = o.ev;
    o.ev = nullptr;
  }
  return *this;
}
Event::~Event() { reset(); }
void Event::reset() noexcept {
  if (ev) clReleaseEvent(ev);
  ev = nullptr;
}
double Event::elapsed_ms() const {
  if (!ev) return 0.0;
  cl_ulong t0 = 0, t1 = 0;
  SPECTRASIFT_CL_CHECK(clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_START, sizeof t0, &t0, nullptr));
  SPECTRASIFT_CL_CHECK(clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof t1, &t1, nullptr));
  return t1 > t0 ? double(t1 - t0) * 1e-6 : 0.0;
}

namespace {

std::string device_string(cl_device_id d, cl_device_info what) {
  std::size_t n = 0;
  if (clGetDeviceInfo(d, what, 0, nullptr, &n) != CL_SUCCESS || n == 0) return {};
  std::string s(n, '\0');
  clGetDeviceInfo(d, what, n, s.data(), nullptr);
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}

std::string platform_string(cl_platform_id p, cl_platform_info what) {
  std::size_t n = 0;
  if (clGetPlatformInfo(p, what, 0, nullptr, &n) != CL_SUCCESS || n == 0) return {};
  std::string s(n, '\0');
  clGetPlatformInfo(p, what, n, s.data(), nullptr);
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}

template <class T> T device_value(cl_device_id d, cl_device_info what) {
  T v{};
  clGetDeviceInfo(d, what, sizeof v, &v, nullptr);
  return v;
}

struct FlatDevice {
  cl_platform_id platform;
  cl_device_id device;
};

extern "C" char** environ;

/// The process environment as NAME -> VALUE.
std::map<std::string, std::string> environment_now() {
  std::map<std::string, std::string> env;
  for (char** e = environ; e && *e; ++e) {
    const std::string entry(*e);
    const auto eq = entry.find('=');
    if (eq != std::string::npos) env.emplace(entry.substr(0, eq), entry.substr(eq + 1));
  }
  return env;
}

/// Runs `fn` with the process environment kept as it was. An ICD may edit the environment while it loads or
/// sets up its devices: on the H200 host, after the platforms and devices were listed, OCL_ICD_FILENAMES had
/// gone from "libpocl.so.2:libnvidia-opencl.so.1" to "libpocl.so.2" and HWLOC_PLUGINS_PATH had appeared, so every
/// process this one started afterwards (a CLI run from a test, a subprocess of a Python user) saw no NVIDIA OpenCL
/// device. The variables it changed are put back (nothing is written when nothing changed).
std::mutex& environment_mutex() {
  static std::mutex mutex;
  return mutex;
}

template <class Fn> auto with_environment_kept(Fn&& fn) {
  const std::lock_guard<std::mutex> lock(environment_mutex());
  const auto before = environment_now();
  auto result = fn();
  const auto after = environment_now();
  if (after != before) {
    for (const auto& [name, value] : after)
      if (!before.count(name)) unsetenv(name.c_str());
    for (const auto& [name, value] : before) {
      const auto now = after.find(name);
      if (now == after.end() || now->second != value) setenv(name.c_str(), value.c_str(), 1);
    }
  }
  return result;
}

/// Every device of every platform, in platform order, as the ICDs list them.
std::vector<FlatDevice> flat_devices_as_found() {
  cl_uint np = 0;
  if (clGetPlatformIDs(0, nullptr, &np) != CL_SUCCESS || np == 0) return {};
  std::vector<cl_platform_id> platforms(np);
  if (clGetPlatformIDs(np, platforms.data(), nullptr) != CL_SUCCESS) return {};
  std::vector<FlatDevice> out;
  for (auto p : platforms) {
    cl_uint nd = 0;
    if (clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 0, nullptr, &nd) != CL_SUCCESS || nd == 0) continue;
    std::vector<cl_device_id> devs(nd);
    if (clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, nd, devs.data(), nullptr) != CL_SUCCESS) continue;
    for (auto d : devs) out.push_back({p, d});
  }
  return out;
}

/// Every device of every platform, in platform order: the flat index is the user-visible device index.
std::vector<FlatDevice> flat_devices() {
  return with_environment_kept([] { return flat_devices_as_found(); });
}

DeviceInfo info_from(int index, const FlatDevice& f) {
  DeviceInfo d;
  d.backend = Backend::kOpenCL;
  d.index = index;
  d.name = device_string(f.device, CL_DEVICE_NAME);
  d.platform = platform_string(f.platform, CL_PLATFORM_NAME);
  const auto type = device_value<cl_device_type>(f.device, CL_DEVICE_TYPE);
  d.type = (type & CL_DEVICE_TYPE_GPU) ? "gpu" : (type & CL_DEVICE_TYPE_CPU) ? "cpu" : "accelerator";
  d.global_memory = device_value<cl_ulong>(f.device, CL_DEVICE_GLOBAL_MEM_SIZE);
  d.local_memory = device_value<cl_ulong>(f.device, CL_DEVICE_LOCAL_MEM_SIZE);
  d.compute_units = int(device_value<cl_uint>(f.device, CL_DEVICE_MAX_COMPUTE_UNITS));
  d.max_work_group_size = int(device_value<std::size_t>(f.device, CL_DEVICE_MAX_WORK_GROUP_SIZE));
  d.version = device_string(f.device, CL_DEVICE_VERSION);
  return d;
}

/// The NAME of a line `#include "NAME"` (blanks allowed around `#` and the words), or nothing. Hand-written
/// rather than std::regex: the Python module may share a process with another libstdc++ whose locale facets
/// std::regex's constructor picks up, and it crashed there on the GPU machine (its compile is slow, too).
std::optional<std::string> include_target(std::string_view line) {
  auto skip_blanks = [&line] {
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
  };
  skip_blanks();
  if (line.empty() || line.front() != '#') return std::nullopt;
  line.remove_prefix(1);
  skip_blanks();
  constexpr std::string_view kInclude = "include";
  if (line.substr(0, kInclude.size()) != kInclude) return std::nullopt;
  line.remove_prefix(kInclude.size());
  skip_blanks();
  if (line.empty() || line.front() != '"') return std::nullopt;
  line.remove_prefix(1);
  const auto close = line.find('"');
  if (close == std::string_view::npos || close == 0) return std::nullopt;
  std::string name(line.substr(0, close));
  line.remove_prefix(close + 1);
  while (!line.empty() && (line.back() == ' ' || line.back() == '\t' || line.back() == '\r')) line.remove_suffix(1);
  if (!line.empty()) return std::nullopt;
  return name;
}

/// Replaces every `#include "NAME"` line of an embedded source by the embedded text of NAME (once each),
/// so that kernels share the numeric headers of src/numeric without a file system at run time.
std::string inline_includes(std::string_view text, std::vector<std::string>& seen) {
  std::string out;
  std::istringstream in{std::string(text)};
  std::string line;
  while (std::getline(in, line)) {
    if (auto quoted = include_target(line)) {
      std::string name = std::move(*quoted);
      if (auto slash = name.rfind('/'); slash != std::string::npos) name = name.substr(slash + 1);
      bool done = false;
      for (const auto& s : seen) done = done || s == name;
      if (done) continue;
      const auto inc = embedded_source(name);
      if (inc.empty()) throw Error(ErrorCode::kInternal, "OpenCL source includes unknown file " + name, "opencl");
      seen.push_back(name);
      out += inline_includes(inc, seen);
      out += '\n';
    } else {
      out += line;
      out += '\n';
    }
  }
  return out;
}

}  // namespace

std::vector<DeviceInfo> list_devices() {
  std::vector<DeviceInfo> out;
  const auto flat = flat_devices();
  for (std::size_t i = 0; i < flat.size(); ++i) out.push_back(info_from(int(i), flat[i]));
  return out;
}

State::~State() {
  State* s = this;
  if (s->queue) clFinish(s->queue);
  if (s->upload_queue) clFinish(s->upload_queue);
  s->match_staging_upload.reset();
  for (auto& [k, p] : s->pinned_buffers) {
    if (p.host && s->queue) clEnqueueUnmapMemObject(s->queue, p.mem, p.host, 0, nullptr, nullptr);
    if (s->queue) clFinish(s->queue);
    if (p.mem) clReleaseMemObject(p.mem);
  }
  s->pinned_buffers.clear();
  s->buffers.clear();
  for (auto& [k, kern] : s->kernels) clReleaseKernel(kern);
  for (auto& [k, prog] : s->programs) clReleaseProgram(prog);
  if (s->upload_queue) clReleaseCommandQueue(s->upload_queue);
  if (s->queue) clReleaseCommandQueue(s->queue);
  if (s->context) clReleaseContext(s->context);
}

void State::spectral_match(detail::ContextImpl& ctx, const detail::CubeView& cube,
                           const detail::PreparedReferences& refs, const SpectralOptions& options,
                           SpectralResult& result, const ProgressFn& progress) {
  opencl::spectral_match(ctx, cube, refs, options, result, progress);
}

std::unique_ptr<detail::BackendImpl> create_state(int device, DeviceInfo& info) {
  const auto flat = flat_devices();
  if (flat.empty())
    throw Error(ErrorCode::kBackendUnavailable,
                "the OpenCL backend was asked for but no OpenCL platform/device is present (is an ICD such as "
                "pocl-opencl-icd installed?)",
                "opencl");
  if (device < 0 || std::size_t(device) >= flat.size())
    throw Error(ErrorCode::kBackendUnavailable,
                "OpenCL device " + std::to_string(device) + " does not exist (" + std::to_string(flat.size()) +
                    " present; see `spectrasift devices`)",
                "opencl");
  auto s = std::make_unique<State>();
  s->platform = flat[std::size_t(device)].platform;
  s->device = flat[std::size_t(device)].device;
  cl_int err = CL_SUCCESS;
  const cl_context_properties props[] = {CL_CONTEXT_PLATFORM, cl_context_properties(s->platform), 0};
  s->context = with_environment_kept([&] { return clCreateContext(props, 1, &s->device, nullptr, nullptr, &err); });
  SPECTRASIFT_CL_CHECK(err);
  s->queue = clCreateCommandQueue(s->context, s->device, CL_QUEUE_PROFILING_ENABLE, &err);
  SPECTRASIFT_CL_CHECK(err);
  info = info_from(device, flat[std::size_t(device)]);
  s->is_cpu = info.type == "cpu";
  s->max_work_group = std::size_t(info.max_work_group_size);
  s->local_mem = std::size_t(info.local_memory);
  s->compute_units = std::size_t(std::max(info.compute_units, 1));
  s->global_mem = std::size_t(info.global_memory);
  s->max_alloc = std::size_t(device_value<cl_ulong>(s->device, CL_DEVICE_MAX_MEM_ALLOC_SIZE));
  s->host_staging = !s->is_cpu;
  s->cache_dir = program_cache_dir();
  s->device_identity = {platform_string(s->platform, CL_PLATFORM_NAME), platform_string(s->platform, CL_PLATFORM_VERSION),
                        device_string(s->device, CL_DEVICE_NAME), device_string(s->device, CL_DRIVER_VERSION)};
  return s;
}

State& state(detail::ContextImpl& ctx) {
  auto* s = dynamic_cast<State*>(ctx.backend_impl.get());
  if (!s) throw Error(ErrorCode::kInternal, "OpenCL operation on a context that is not an OpenCL context", "opencl");
  return *s;
}

namespace {

/// The program's binary for the device (CL_PROGRAM_BINARIES), empty if the driver gives none.
std::vector<unsigned char> program_binary(cl_program prog) {
  std::size_t size = 0;
  if (clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof size, &size, nullptr) != CL_SUCCESS || size == 0) return {};
  std::vector<unsigned char> bin(size);
  unsigned char* p = bin.data();
  if (clGetProgramInfo(prog, CL_PROGRAM_BINARIES, sizeof p, &p, nullptr) != CL_SUCCESS) return {};
  return bin;
}

}  // namespace

cl_program State::program(const std::string& source_name, const std::string& options) {
  const std::string key = source_name + '\n' + options;
  if (auto it = programs.find(key); it != programs.end()) return it->second;
  const auto text = embedded_source(source_name);
  if (text.empty()) throw Error(ErrorCode::kInternal, "no embedded OpenCL source named " + source_name, "opencl");
  std::vector<std::string> seen;
  const std::string src = inline_includes(text, seen);
  const std::string opts = "-cl-std=CL1.2 " + options;
  cl_int err = CL_SUCCESS;
  // 1. The disk cache: a binary made for this device, driver, options and source. Any failure to create or
  //    build it falls through to the source build (the file is then replaced).
  const std::string disk_key = cache_dir.empty() ? std::string() : program_cache_key(device_identity, opts, src);
  if (!disk_key.empty()) {
    const std::vector<unsigned char> bin = load_program_binary(cache_dir, disk_key);
    if (!bin.empty()) {
      const unsigned char* b = bin.data();
      const std::size_t n = bin.size();
      cl_int status = CL_SUCCESS;
      cl_program prog = clCreateProgramWithBinary(context, 1, &device, &n, &b, &status, &err);
      if (err == CL_SUCCESS && status == CL_SUCCESS &&
          clBuildProgram(prog, 1, &device, opts.c_str(), nullptr, nullptr) == CL_SUCCESS) {
        ++program_binary_loads;
        programs.emplace(key, prog);
        return prog;
      }
      if (prog) clReleaseProgram(prog);
    }
  }
  // 2. The source.
  const char* p = src.c_str();
  const std::size_t len = src.size();
  cl_program prog = clCreateProgramWithSource(context, 1, &p, &len, &err);
  SPECTRASIFT_CL_CHECK(err);
  ++program_builds;
  err = clBuildProgram(prog, 1, &device, opts.c_str(), nullptr, nullptr);
  if (err != CL_SUCCESS) {
    std::size_t n = 0;
    clGetProgramBuildInfo(prog, device, CL_PROGRAM_BUILD_LOG, 0, nullptr, &n);
    std::string log(n, '\0');
    clGetProgramBuildInfo(prog, device, CL_PROGRAM_BUILD_LOG, n, log.data(), nullptr);
    clReleaseProgram(prog);
    while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
    throw Error(ErrorCode::kBackend,
                "OpenCL build of " + source_name + " with options '" + opts + "' failed (" + status_name(err) +
                    "); build log:\n" + log,
                "opencl", long(err));
  }
  if (!disk_key.empty()) store_program_binary(cache_dir, disk_key, program_binary(prog));
  programs.emplace(key, prog);
  return prog;
}

cl_kernel State::kernel(const std::string& source_name, const std::string& kernel_name, const std::string& options) {
  const std::string key = source_name + '\n' + options + '\n' + kernel_name;
  if (auto it = kernels.find(key); it != kernels.end()) return it->second;
  cl_int err = CL_SUCCESS;
  cl_kernel k = clCreateKernel(program(source_name, options), kernel_name.c_str(), &err);
  SPECTRASIFT_CL_CHECK(err);
  kernels.emplace(key, k);
  return k;
}

cl_mem State::buffer(const std::string& name, std::size_t bytes, cl_mem_flags flags) {
  auto& b = buffers[name];
  if (b.bytes < bytes) {
    b = Buffer{};
    cl_int err = CL_SUCCESS;
    b.mem = clCreateBuffer(context, flags, bytes, nullptr, &err);
    SPECTRASIFT_CL_CHECK(err);
    b.bytes = bytes;
    ++buffer_allocations;
  }
  return b.mem;
}

PinnedBuffer& State::pinned(const std::string& name, std::size_t bytes) {
  auto& p = pinned_buffers[name];
  if (p.bytes < bytes) {
    if (p.mem) {
      if (p.host) SPECTRASIFT_CL_CHECK(clEnqueueUnmapMemObject(queue, p.mem, p.host, 0, nullptr, nullptr));
      SPECTRASIFT_CL_CHECK(clFinish(queue));
      clReleaseMemObject(p.mem);
      p = PinnedBuffer{};
    }
    cl_int err = CL_SUCCESS;
    p.mem = clCreateBuffer(context, CL_MEM_ALLOC_HOST_PTR | CL_MEM_READ_WRITE, bytes, nullptr, &err);
    SPECTRASIFT_CL_CHECK(err);
    p.host = clEnqueueMapBuffer(queue, p.mem, CL_TRUE, CL_MAP_WRITE, 0, bytes, 0, nullptr, nullptr, &err);
    SPECTRASIFT_CL_CHECK(err);
    p.bytes = bytes;
    ++buffer_allocations;
  }
  return p;
}

cl_command_queue State::transfer_queue() {
  if (!upload_queue) {
    cl_int err = CL_SUCCESS;
    upload_queue = clCreateCommandQueue(context, device, CL_QUEUE_PROFILING_ENABLE, &err);
    SPECTRASIFT_CL_CHECK(err);
  }
  return upload_queue;
}

KernelLimits State::limits(cl_kernel k) const {
  KernelLimits l;
  cl_ulong lm = 0;
  SPECTRASIFT_CL_CHECK(clGetKernelWorkGroupInfo(k, device, CL_KERNEL_WORK_GROUP_SIZE, sizeof l.work_group_size,
                                                &l.work_group_size, nullptr));
  SPECTRASIFT_CL_CHECK(clGetKernelWorkGroupInfo(k, device, CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE,
                                                sizeof l.preferred_multiple, &l.preferred_multiple, nullptr));
  SPECTRASIFT_CL_CHECK(clGetKernelWorkGroupInfo(k, device, CL_KERNEL_LOCAL_MEM_SIZE, sizeof lm, &lm, nullptr));
  l.local_mem = std::size_t(lm);
  if (l.preferred_multiple == 0) l.preferred_multiple = 1;
  return l;
}

std::size_t State::work_group_1d(cl_kernel k, std::size_t want) const {
  const KernelLimits l = limits(k);
  std::size_t cap = std::min({want, l.work_group_size, max_work_group});
  if (cap == 0) cap = 1;
  if (cap >= l.preferred_multiple) cap -= cap % l.preferred_multiple;
  return cap;
}

}  // namespace spectrasift::opencl

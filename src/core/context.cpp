// Context creation and backend selection (DESIGN.md "Backends and devices").
#include "spectrasift/context.hpp"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <thread>

#include "core/context_impl.hpp"
#include "core/cpu_features.hpp"
#include "core/thread_pool.hpp"
#include "spectrasift/error.hpp"

namespace spectrasift {

#ifndef SPECTRASIFT_VERSION
#define SPECTRASIFT_VERSION "0.0.0"
#endif

const char* version() noexcept { return SPECTRASIFT_VERSION; }

// Backends that are not compiled in still need their factories to link; they report the backend as missing
// from this build.
#ifndef SPECTRASIFT_HAVE_CUDA
namespace cuda {
std::unique_ptr<detail::BackendImpl> create_state(int, DeviceInfo&) {
  throw Error(ErrorCode::kBackendUnavailable, "the CUDA backend is not compiled into this build", "cuda");
}
std::vector<DeviceInfo> list_devices() { return {}; }
}  // namespace cuda
#endif
#ifndef SPECTRASIFT_HAVE_OPENCL
namespace opencl {
std::unique_ptr<detail::BackendImpl> create_state(int, DeviceInfo&) {
  throw Error(ErrorCode::kBackendUnavailable, "the OpenCL backend is not compiled into this build", "opencl");
}
std::vector<DeviceInfo> list_devices() { return {}; }
}  // namespace opencl
#endif

namespace {

DeviceInfo cpu_device_info() {
  DeviceInfo d;
  d.backend = Backend::kCpu;
  d.index = 0;
  d.platform = "host threads";
  d.type = "cpu";
  d.compute_units = int(std::thread::hardware_concurrency());
  d.max_work_group_size = 1;
  d.version = std::string("WorkPool, ") + to_string(cpu_isa()) + " kernels";
  d.name = "host CPU";
  // Model name and memory from /proc (Linux); absent elsewhere.
  if (FILE* f = std::fopen("/proc/cpuinfo", "r")) {
    char line[512];
    while (std::fgets(line, sizeof line, f)) {
      std::string s(line);
      if (s.rfind("model name", 0) == 0) {
        auto p = s.find(':');
        if (p != std::string::npos) {
          d.name = s.substr(p + 2);
          while (!d.name.empty() && (d.name.back() == '\n' || d.name.back() == ' ')) d.name.pop_back();
        }
        break;
      }
    }
    std::fclose(f);
  }
  if (FILE* f = std::fopen("/proc/meminfo", "r")) {
    unsigned long long kb = 0;
    if (std::fscanf(f, "MemTotal: %llu kB", &kb) == 1) d.global_memory = kb * 1024ull;
    std::fclose(f);
  }
  return d;
}

}  // namespace

void ContextOptions::check() const {
  if (device < -1) throw Error(ErrorCode::kInvalidArgument, "device index must be >= 0 (or -1 for the first)");
  if (threads < 0) throw Error(ErrorCode::kInvalidArgument, "threads must be >= 0 (0 = all hardware threads)");
}

ContextOptions ContextOptions::from_env() {
  ContextOptions o;
  if (const char* b = std::getenv("SPECTRASIFT_BACKEND"); b && *b) o.backend = parse_backend(b);
  if (const char* d = std::getenv("SPECTRASIFT_DEVICE"); d && *d) {
    char* end = nullptr;
    const long v = std::strtol(d, &end, 10);
    if (end == d || *end != '\0' || v < 0 || v > 1024)
      throw Error(ErrorCode::kInvalidArgument, std::string("SPECTRASIFT_DEVICE='") + d + "' is not a device index");
    o.device = int(v);
  }
  if (const char* m = std::getenv("SPECTRASIFT_MAX_PIXELS"); m && *m) {
    // Digits only: no sign, spaces or suffix (std::from_chars also refuses values beyond 64 bits).
    const char* end = m + std::char_traits<char>::length(m);
    std::uint64_t v = 0;
    const auto [next, ec] = std::from_chars(m, end, v);
    if (ec != std::errc() || next != end)
      throw Error(ErrorCode::kInvalidArgument, std::string("SPECTRASIFT_MAX_PIXELS='") + m +
                                                   "' is not a pixel count (a whole number of pixels, 0 = no limit)");
    o.max_pixels = v;
  }
  if (const char* m = std::getenv("SPECTRASIFT_MAX_MEMORY"); m && *m) {
    try {
      o.max_memory = parse_memory_size(m);
    } catch (const Error& e) {
      throw Error(ErrorCode::kInvalidArgument, std::string("SPECTRASIFT_MAX_MEMORY: ") + e.what());
    }
  }
  return o;
}

std::vector<Backend> compiled_backends() {
  std::vector<Backend> b{Backend::kCpu};
#ifdef SPECTRASIFT_HAVE_CUDA
  b.push_back(Backend::kCuda);
#endif
#ifdef SPECTRASIFT_HAVE_OPENCL
  b.push_back(Backend::kOpenCL);
#endif
  return b;
}

std::vector<DeviceInfo> list_devices() {
  std::vector<DeviceInfo> all{cpu_device_info()};
  for (auto& d : cuda::list_devices()) all.push_back(std::move(d));
  for (auto& d : opencl::list_devices()) all.push_back(std::move(d));
  return all;
}

namespace detail {

int ContextImpl::cpu_threads() const noexcept {
  if (options.threads > 0) return options.threads;
  return default_thread_count();
}

void ContextImpl::log(const std::string& line) const {
  if (options.verbose) std::cerr << "[spectrasift] " << line << '\n';
}

void ContextImpl::report_progress(double fraction) {
  if (!progress_active || progress_depth != 1) return;  // none, or from inside a nested operation
  const double f = progress_lo + std::clamp(fraction, 0.0, 1.0) * (progress_hi - progress_lo);
  if (f <= progress_last) return;
  progress_last = f;
  progress(f);
}

OperationProgress::OperationProgress(ContextImpl& impl) : impl_(impl), exceptions_(std::uncaught_exceptions()) {
  ++impl.progress_depth;
  if (!impl.progress || impl.progress_active) return;
  owner_ = true;
  impl.progress_active = true;
  impl.progress_last = -1;
  stage(0, 1);
}

OperationProgress::~OperationProgress() {
  if (owner_ && std::uncaught_exceptions() == exceptions_) {
    try {
      finish();
    } catch (...) {  // a callback that throws here cannot be reported from a destructor
    }
  }
  if (owner_) impl_.progress_active = false;
  --impl_.progress_depth;
}

void OperationProgress::stage(double lo, double hi) {
  if (!owner_) return;
  impl_.progress_lo = lo;
  impl_.progress_hi = hi;
  impl_.report_progress(0);
}

void OperationProgress::finish() {
  if (!owner_) return;
  stage(1, 1);
  impl_.progress_active = false;
  owner_ = false;
}

ContextUse::ContextUse(ContextImpl& impl, const char* operation) {
  std::thread::id none{};
  const std::thread::id me = std::this_thread::get_id();
  // acquire/release: a thread that claims the context after another one released it sees all its writes.
  if (impl.user.compare_exchange_strong(none, me, std::memory_order_acquire, std::memory_order_relaxed)) {
    claimed_ = &impl;
    return;
  }
  if (none == me) return;  // nested call on the thread that holds it
  throw Error(ErrorCode::kInvalidArgument,
              std::string(operation) +
                  ": Context used from two threads at the same time (another thread is inside an operation on "
                  "it); a Context is not thread-safe: use one Context per thread (see spectrasift/context.hpp)");
}

ContextUse::~ContextUse() {
  if (claimed_) claimed_->user.store(std::thread::id{}, std::memory_order_release);
}

}  // namespace detail

Context::Context(const ContextOptions& options) : impl_(std::make_unique<detail::ContextImpl>()) {
  options.check();
  auto& im = *impl_;
  im.options = options;
  const int dev = options.device < 0 ? 0 : options.device;
  switch (options.backend) {
    case Backend::kCpu:
      if (options.device > 0) throw Error(ErrorCode::kBackendUnavailable, "the CPU backend has one device (0)", "cpu");
      im.device = cpu_device_info();
      im.backend_impl = detail::make_cpu_backend();
      break;
    case Backend::kCuda:
      im.backend_impl = cuda::create_state(dev, im.device);
      break;
    case Backend::kOpenCL:
      im.backend_impl = opencl::create_state(dev, im.device);
      break;
    case Backend::kAuto: {
      // CUDA first, then an OpenCL GPU, then the CPU backend.
      if (!cuda::list_devices().empty()) {
        im.backend_impl = cuda::create_state(dev, im.device);
        break;
      }
      const auto ocl = opencl::list_devices();
      int gpu = -1;
      for (const auto& d : ocl) {
        if (d.type == "gpu") { gpu = d.index; break; }
      }
      if (gpu >= 0) {
        im.backend_impl = opencl::create_state(gpu, im.device);
        break;
      }
      im.device = cpu_device_info();
      im.backend_impl = detail::make_cpu_backend();
      break;
    }
  }
  if (im.device.backend == Backend::kCpu && options.threads > 0) im.device.compute_units = options.threads;
  im.log("backend " + describe() + (options.backend == Backend::kAuto ? " (picked by auto)" : ""));
}

Context::~Context() = default;
Context::Context(Context&&) noexcept = default;
Context& Context::operator=(Context&&) noexcept = default;

Backend Context::backend() const noexcept { return impl_->device.backend; }
const DeviceInfo& Context::device() const noexcept { return impl_->device; }
const ContextOptions& Context::options() const noexcept { return impl_->options; }

void Context::set_progress(ProgressFn progress) { impl_->progress = std::move(progress); }

std::string Context::describe() const {
  const auto& d = impl_->device;
  std::string s = std::string(to_string(d.backend)) + ":" + std::to_string(d.index) + " " + d.name;
  if (d.backend == Backend::kCpu) s += " (" + std::to_string(impl_->cpu_threads()) + " threads)";
  else if (!d.platform.empty()) s += " (" + d.platform + ")";
  return s;
}

}  // namespace spectrasift

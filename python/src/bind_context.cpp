// Context (with its per-Context lock), devices() and the version.
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <string>

#include "common.hpp"
#include "spectrasift/error.hpp"

namespace spectrasift::python {

namespace {

std::atomic<std::uintptr_t> g_last_input{0};
std::atomic<double> g_last_call_ms{0};

nb::dict device_dict(const DeviceInfo& d) {
  nb::dict r;
  r["backend"] = to_string(d.backend);
  r["index"] = d.index;
  r["name"] = d.name;
  r["platform"] = d.platform;
  r["type"] = d.type;
  r["global_memory"] = d.global_memory;
  r["local_memory"] = d.local_memory;
  r["compute_units"] = d.compute_units;
  r["max_work_group_size"] = d.max_work_group_size;
  r["version"] = d.version;
  return r;
}

}  // namespace

void record_input(const void* data) noexcept {
  g_last_input.store(reinterpret_cast<std::uintptr_t>(data));
}
std::uintptr_t last_input() noexcept {
  return g_last_input.load();
}
CallTimer::~CallTimer() {
  g_last_call_ms.store(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0_).count());
}
double last_call_ms() noexcept {
  return g_last_call_ms.load();
}

ContextCall::ContextCall(PyContext& c, const char* operation) : lock_(c.busy, std::try_to_lock) {
  if (!lock_.owns_lock())
    throw nb::builtin_exception(
        nb::exception_type::runtime_error,
        (std::string(operation) + ": this Context is in use by another thread; a Context must be used by one thread "
                                  "at a time (create one per thread)")
            .c_str());
  if (!c.context) {
    lock_.unlock();
    throw nb::builtin_exception(nb::exception_type::runtime_error,
                                (std::string(operation) + ": this Context is closed").c_str());
  }
  ctx_ = c.context.get();
}

void bind_context(nb::module_& m) {
  nb::class_<PyContext>(m, "Context")
      .def(
          "__init__",
          [](PyContext* self, const std::string& backend, int device, int threads, bool verbose,
             std::uint64_t max_pixels, std::uint64_t max_memory) {
            ContextOptions o;
            o.backend = parse_backend(backend);
            o.device = device;
            o.threads = threads;
            o.verbose = verbose;
            o.max_pixels = max_pixels;
            o.max_memory = max_memory;
            o.check();
            std::unique_ptr<Context> context;
            {
              nb::gil_scoped_release release;  // device discovery and kernel set-up can take a while
              context = std::make_unique<Context>(o);
            }
            new (self) PyContext();
            self->context = std::move(context);
          },
          nb::arg("backend"), nb::arg("device"), nb::arg("threads"), nb::arg("verbose"), nb::arg("max_pixels"),
          nb::arg("max_memory"))
      .def_prop_ro("backend",
                   [](PyContext& c) {
                     ContextCall call(c, "Context.backend");
                     return std::string(to_string(call.ctx().backend()));
                   })
      .def_prop_ro("device",
                   [](PyContext& c) {
                     ContextCall call(c, "Context.device");
                     return device_dict(call.ctx().device());
                   })
      .def("describe",
           [](PyContext& c) {
             ContextCall call(c, "Context.describe");
             return call.ctx().describe();
           })
      .def_prop_ro("closed", [](PyContext& c) { return c.context == nullptr; })
      .def("close", [](PyContext& c) {
        ContextCall call(c, "Context.close");
        std::unique_ptr<Context> gone = std::move(c.context);
        nb::gil_scoped_release release;
        gone.reset();
      });

  m.def("devices", [] {
    std::vector<DeviceInfo> all;
    {
      nb::gil_scoped_release release;
      all = list_devices();
    }
    nb::list r;
    for (const auto& d : all) r.append(device_dict(d));
    return r;
  });
  m.def("compiled_backends", [] {
    nb::list r;
    for (Backend b : compiled_backends()) r.append(std::string(to_string(b)));
    return r;
  });
}

}  // namespace spectrasift::python

// Backend dispatch (see dispatch.hpp).
#include "core/dispatch.hpp"

#include <string>

#include "spectrasift/error.hpp"

namespace spectrasift::detail {

BackendImpl& host_backend() {
  static const std::unique_ptr<BackendImpl> cpu = make_cpu_backend();
  return *cpu;
}

BackendImpl& backend_for(ContextImpl& ctx, Operation op) {
  BackendImpl& own = *ctx.backend_impl;
  if (own.implements(op)) return own;
  // A backend without RANSAC scoring or warping (an OpenCL device without doubles) hands them to the CPU
  // backend: the results are the same bits (numeric/ransac_score.h, numeric/warp.h), so this is no fallback.
  if (op == Operation::kRansac || op == Operation::kWarp) return host_backend();
  const std::string operation = to_string(op);
  const char* name = spectrasift::to_string(own.kind());
  if (ctx.options.backend != Backend::kAuto)
    throw Error(ErrorCode::kUnsupported,
                operation + " is not implemented on the " + name + " backend yet (use --backend cpu or auto)", name);
  ctx.log(operation + ": not implemented on " + name + " yet, running on the CPU backend (" +
          std::to_string(ctx.cpu_threads()) + " threads)");
  return host_backend();
}

const DeviceFeatures* device_copy_for(const Features& f, const BackendImpl& backend) noexcept {
  const DeviceFeatures* d = f.device.get();
  return d && d->owned_by(backend) && d->mirrors(f) ? d : nullptr;
}

}  // namespace spectrasift::detail

// Which backend runs an operation: the one place that owns the rule of DESIGN.md "Decisions" (an operation
// a GPU backend does not have yet runs on the CPU backend when the context was made with `auto`, and is an
// error when the backend was asked for explicitly). core/ only; backends never include this header.
#pragma once

#include "backend/backend.hpp"
#include "core/context_impl.hpp"

namespace spectrasift::detail {

/// The backend that runs `op` on this context:
/// - the context's backend when it implements `op`;
/// - else, for RANSAC scoring and warping (on the device for CUDA, and for OpenCL where the device has doubles;
///   the CPU backend gives the same bits), the CPU backend, silently;
/// - else, when the backend was picked by `auto`, the CPU backend, with the log line
///   "<op>: not implemented on <backend> yet, running on the CPU backend (N threads)";
/// - else Error(kUnsupported): "<op> is not implemented on the <backend> backend yet (use --backend cpu or auto)".
BackendImpl& backend_for(ContextImpl& ctx, Operation op);

/// The process-wide CPU backend: the fallback of backend_for and the backend of context-free calls
/// (warp_image without a Context). The CPU backend holds no state, so one instance serves every context.
BackendImpl& host_backend();

/// The device-resident copy of `f`'s descriptors that `backend` may use, or null: f.device when it belongs
/// to `backend` and still mirrors f's host descriptors (DeviceFeatures::mirrors), else null (matching then
/// uploads the host descriptors).
const DeviceFeatures* device_copy_for(const Features& f, const BackendImpl& backend) noexcept;

}  // namespace spectrasift::detail

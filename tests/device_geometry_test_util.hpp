// The device Context of the RANSAC and warp backend tests (ransac_backend_test, warp_backend_test): CUDA, or the
// OpenCL device of opencl_test_util.hpp, with 2 host threads.
#pragma once

#include <memory>
#include <string>

#include "core/context_impl.hpp"
#include "core/dispatch.hpp"
#include "opencl_test_util.hpp"
#include "sift_device_test_util.hpp"
#include "spectrasift/context.hpp"

namespace spectrasift::test {

/// A Context on backend b whose own backend runs `op`, or null with `why` set: the machine has no such device,
/// or the device does not run `op` (an OpenCL device without doubles keeps RANSAC and warping on the CPU).
inline std::unique_ptr<Context> device_context_for(Backend b, detail::Operation op, std::string& why) {
  if (!have_device(b) || (b == Backend::kOpenCL && opencl_device() < 0)) {
    why = std::string("no ") + to_string(b) + " device on this machine";
    return nullptr;
  }
  ContextOptions o = b == Backend::kOpenCL ? opencl_options() : ContextOptions{};
  o.backend = b;
  o.threads = 2;
  auto ctx = std::make_unique<Context>(o);
  detail::ContextImpl& im = ctx->impl();
  if (!im.backend_impl->implements(op) || &detail::backend_for(im, op) != im.backend_impl.get()) {
    why = std::string("the ") + to_string(b) + " device does not run " + detail::to_string(op) +
          " (no doubles): it stays on the CPU backend";
    return nullptr;
  }
  return ctx;
}

}  // namespace spectrasift::test

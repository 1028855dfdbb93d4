// Placeholder until the OpenCL spectral kernels land (the OpenCL helper replaces this file).
#include "core/spectral_backend.hpp"
#include "spectrasift/error.hpp"
namespace spectrasift::opencl {
void spectral_match(detail::ContextImpl&, const detail::CubeView&, const detail::PreparedReferences&,
                    const SpectralOptions&, SpectralResult&, const ProgressFn&) {
  throw Error(ErrorCode::kUnsupported, "spectral matching on OpenCL is not implemented yet", "opencl");
}
}  // namespace spectrasift::opencl

// Measurement hooks of the OpenCL backend for the benchmarks (bench/spectral_opencl_bench.cpp: the
// ceilings that the spectral figures are quoted against; bench/sift_bench.cpp: SIFT time per stage;
// bench/geometry_bench.cpp: where the refits' sums run). No OpenCL type appears here. Defined in opencl_hooks.cpp, in
// the spectrasift_bench_hooks library (OpenCL builds only), which the library never links.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "core/context_impl.hpp"

namespace spectrasift::opencl::bench {

/// Device-to-device copy bandwidth in GB/s, counting bytes read plus bytes written (clEnqueueCopyBuffer of
/// `bytes`, profiling events, median of `reps` after one warm-up).
double device_copy_gbps(detail::ContextImpl& ctx, std::size_t bytes, int reps);

/// Milliseconds to upload `bytes` from a pinned host buffer (CL_MEM_ALLOC_HOST_PTR, mapped) to a device
/// buffer (one clEnqueueWriteBuffer; profiling events, median of `reps` after one warm-up).
double pinned_upload_ms(detail::ContextImpl& ctx, std::size_t bytes, int reps);

/// Turns the device-time profile of the context's OpenCL SIFT stages on or off (the stages are the ones core
/// keeps in the context: run detect_and_compute once before). Returns false when the context has none.
bool set_sift_profiling(detail::ContextImpl& ctx, bool on);

/// The device time per stage of the last OpenCL SIFT run with profiling on, in ms (stage name, time), in
/// pipeline order; empty when the context has no OpenCL SIFT stages.
std::vector<std::pair<std::string, double>> sift_stage_ms(detail::ContextImpl& ctx);

/// Where the context's OpenCL backend computes the RANSAC refits' sums (State::refit_variant: -1 by device,
/// 0 the host, 1 the device). Returns false when the context's backend is not OpenCL.
bool set_refit_variant(detail::ContextImpl& ctx, int variant);

}  // namespace spectrasift::opencl::bench

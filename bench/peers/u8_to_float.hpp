// u8_to_float.hpp — the device conversion of an 8-bit grey image to the float image CudaSift takes
// (bench/peers/cudasift_bench.cpp's end-to-end figure includes it).
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace spectrasift::peers {

/// dst(x, y) = float(src(x, y)) for a width x height image: src rows packed (width bytes), dst rows
/// dst_pitch floats apart. Enqueued on `stream`; returns the launch's error.
cudaError_t u8_to_float(const std::uint8_t* src, int width, int height, float* dst, int dst_pitch,
                        cudaStream_t stream);

}  // namespace spectrasift::peers

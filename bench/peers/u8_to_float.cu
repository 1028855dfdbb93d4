// u8_to_float.cu — see u8_to_float.hpp.
#include "u8_to_float.hpp"

namespace spectrasift::peers {
namespace {

// Launch geometry: blocks of 32 x 8 threads, one thread per pixel, grid ceil(width / 32) x ceil(height / 8);
// a warp reads 32 consecutive bytes of a row and writes 32 consecutive floats.
__global__ void u8_to_float_kernel(const std::uint8_t* src, int width, int height, float* dst, int dst_pitch) {
  const int x = int(blockIdx.x * blockDim.x + threadIdx.x);
  const int y = int(blockIdx.y * blockDim.y + threadIdx.y);
  if (x >= width || y >= height) return;
  dst[std::size_t(y) * std::size_t(dst_pitch) + std::size_t(x)] = float(src[std::size_t(y) * std::size_t(width) + std::size_t(x)]);
}

}  // namespace

cudaError_t u8_to_float(const std::uint8_t* src, int width, int height, float* dst, int dst_pitch,
                        cudaStream_t stream) {
  const dim3 block(32, 8);
  const dim3 grid(unsigned((width + 31) / 32), unsigned((height + 7) / 8));
  u8_to_float_kernel<<<grid, block, 0, stream>>>(src, width, height, dst, dst_pitch);
  return cudaGetLastError();
}

}  // namespace spectrasift::peers

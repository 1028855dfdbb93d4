// CUDA bilinear warp (BackendImpl::warp) on the device, kernels/warp.cuh: one thread per output pixel with
// the per-pixel maths of numeric/warp.h, so the output is the CPU backend's bit for bit. The moving image is
// uploaded in its own type and the output read back once, through named device buffers reused across calls.
#include <string>

#include "backend/cuda/check.hpp"
#include "backend/cuda/kernels/warp.cuh"
#include "backend/cuda/state.hpp"

namespace spectrasift::cuda {

namespace {

template <class T>
void launch_warp(State& st, const Image& moving, const void* src, void* dst, int fixed_w, int fixed_h,
                 const kernels::WarpModel& inv) {
  const dim3 block(kernels::kWarpBlockX, kernels::kWarpBlockY);
  const dim3 grid(unsigned((fixed_w + kernels::kWarpBlockX - 1) / kernels::kWarpBlockX),
                  unsigned((fixed_h + kernels::kWarpBlockY - 1) / kernels::kWarpBlockY));
  kernels::warp_bilinear<T><<<grid, block, 0, st.compute>>>(static_cast<const T*>(src), moving.width, moving.height,
                                                            moving.channels, static_cast<T*>(dst), fixed_w, fixed_h,
                                                            inv);
  SPECTRASIFT_CUDA_CHECK_LAUNCH();
}

}  // namespace

Image State::warp(const Image& moving, const std::array<double, 9>& inverse, int fixed_w, int fixed_h, int) {
  activate();
  Image out = Image::allocate(fixed_w, fixed_h, moving.channels, moving.type);
  const std::size_t in_bytes = moving.data.size(), out_bytes = out.data.size();
  DeviceBuffer& src = buffer("warp.src", in_bytes);
  DeviceBuffer& dst = buffer("warp.dst", out_bytes);
  SPECTRASIFT_CUDA_CHECK(cudaMemcpyAsync(src.ptr, moving.data.data(), in_bytes, cudaMemcpyHostToDevice, compute));
  kernels::WarpModel inv{};
  for (int k = 0; k < 9; ++k) inv.h[k] = inverse[std::size_t(k)];
  switch (moving.type) {
    case PixelType::kU8: launch_warp<std::uint8_t>(*this, moving, src.ptr, dst.ptr, fixed_w, fixed_h, inv); break;
    case PixelType::kU16: launch_warp<std::uint16_t>(*this, moving, src.ptr, dst.ptr, fixed_w, fixed_h, inv); break;
    case PixelType::kF32: launch_warp<float>(*this, moving, src.ptr, dst.ptr, fixed_w, fixed_h, inv); break;
  }
  SPECTRASIFT_CUDA_CHECK(cudaMemcpyAsync(out.data.data(), dst.ptr, out_bytes, cudaMemcpyDeviceToHost, compute));
  SPECTRASIFT_CUDA_CHECK(cudaStreamSynchronize(compute));
  return out;
}

}  // namespace spectrasift::cuda

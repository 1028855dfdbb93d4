// warp.cuh — the bilinear warp on the device (backend/cuda/warp.cu): every output (FIXED) pixel samples
// MOVING through the inverse model with the per-pixel maths of numeric/warp.h (--fmad=false: each double
// operation rounds as the host's), so the output is the CPU backend's (backend/cpu/warp.cpp) bit for bit.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "numeric/warp.h"

namespace spectrasift::cuda::kernels {

constexpr int kWarpBlockX = 32, kWarpBlockY = 8;  // a warp along a row, 8 rows per block

// The inverse model (FIXED -> MOVING, row-major), passed by value.
struct WarpModel {
  double h[9];
};

// Launch: grid = (ceil(out_w / 32), ceil(out_h / 8)), block = (32, 8): one thread per output pixel writing
// all its channels (0 where the pixel maps outside MOVING). T: std::uint8_t, std::uint16_t or float,
// channels interleaved.
template <class T>
__global__ void __launch_bounds__(kWarpBlockX* kWarpBlockY) warp_bilinear(const T* src, int width, int height,
                                                                           int channels, T* dst, int out_w, int out_h,
                                                                           WarpModel inv) {
  const int x = blockIdx.x * kWarpBlockX + threadIdx.x, y = blockIdx.y * kWarpBlockY + threadIdx.y;
  if (x >= out_w || y >= out_h) return;
  T* o = dst + (std::size_t(y) * std::size_t(out_w) + std::size_t(x)) * std::size_t(channels);
  ss_warp_tap t;
  if (!ss_warp_tap_at(inv.h, x, y, width, height, &t)) {
    for (int c = 0; c < channels; ++c) o[c] = T(0);
    return;
  }
  const T* p00 = src + (std::size_t(t.y0) * std::size_t(width) + std::size_t(t.x0)) * std::size_t(channels);
  const T* p01 = src + (std::size_t(t.y0) * std::size_t(width) + std::size_t(t.x1)) * std::size_t(channels);
  const T* p10 = src + (std::size_t(t.y1) * std::size_t(width) + std::size_t(t.x0)) * std::size_t(channels);
  const T* p11 = src + (std::size_t(t.y1) * std::size_t(width) + std::size_t(t.x1)) * std::size_t(channels);
  for (int c = 0; c < channels; ++c) {
    const double v = ss_warp_mix(double(p00[c]), double(p01[c]), double(p10[c]), double(p11[c]), t.ax, t.ay);
    if constexpr (std::is_same_v<T, float>) o[c] = float(v);
    else o[c] = T(ss_warp_round(v, std::is_same_v<T, std::uint8_t> ? 255.0 : 65535.0));
  }
}

}  // namespace spectrasift::cuda::kernels

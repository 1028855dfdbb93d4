// CPU bilinear warp: every output (FIXED) pixel samples MOVING at inverse * (x, y, 1), with the per-pixel
// maths of numeric/warp.h (shared with the CUDA and OpenCL warps, which give the same bits): a sample point
// inside [-0.5, w - 0.5] x [-0.5, h - 0.5] is interpolated from its four neighbours with indices clamped to
// the image (so the border half pixel repeats the edge); beyond it the output is 0. U8/U16 are rounded to
// nearest; F32 is kept as is. Chunks of rows run on the WorkPool (core/thread_pool.hpp); each output value
// depends only on the input, so the result is deterministic.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "backend/cpu/operations.hpp"
#include "core/thread_pool.hpp"
#include "numeric/warp.h"

namespace spectrasift::cpu {

namespace {

template <class T>
void warp_rows(const Image& src, const std::array<double, 9>& h, Image& dst, int y_begin, int y_end) {
  const int w = src.width, ht = src.height, ch = src.channels;
  const T* in = src.as<T>();
  T* out = dst.as<T>();
  for (int y = y_begin; y < y_end; ++y) {
    for (int x = 0; x < dst.width; ++x) {
      T* o = out + (std::size_t(y) * dst.width + x) * ch;
      ss_warp_tap t;
      if (!ss_warp_tap_at(h.data(), x, y, w, ht, &t)) continue;
      const T* p00 = in + (std::size_t(t.y0) * w + t.x0) * ch;
      const T* p01 = in + (std::size_t(t.y0) * w + t.x1) * ch;
      const T* p10 = in + (std::size_t(t.y1) * w + t.x0) * ch;
      const T* p11 = in + (std::size_t(t.y1) * w + t.x1) * ch;
      for (int c = 0; c < ch; ++c) {
        const double v = ss_warp_mix(double(p00[c]), double(p01[c]), double(p10[c]), double(p11[c]), t.ax, t.ay);
        if constexpr (std::is_same_v<T, float>) o[c] = float(v);
        else o[c] = T(ss_warp_round(v, double(std::numeric_limits<T>::max())));
      }
    }
  }
}

template <class T>
void warp_typed(const Image& src, const std::array<double, 9>& h, Image& dst, int threads) {
  WorkPool& pool = calling_thread_pool(threads);
  const int rows = std::max(1, dst.height / (4 * pool.size()));
  pool.run(dst.height, rows, [&](int y0, int y1, int) { warp_rows<T>(src, h, dst, y0, y1); });
}

}  // namespace

Image warp(const Image& moving, const std::array<double, 9>& inverse, int fixed_w, int fixed_h, int threads) {
  Image out = Image::allocate(fixed_w, fixed_h, moving.channels, moving.type);
  switch (moving.type) {
    case PixelType::kU8: warp_typed<std::uint8_t>(moving, inverse, out, threads); break;
    case PixelType::kU16: warp_typed<std::uint16_t>(moving, inverse, out, threads); break;
    case PixelType::kF32: warp_typed<float>(moving, inverse, out, threads); break;
  }
  return out;
}

}  // namespace spectrasift::cpu

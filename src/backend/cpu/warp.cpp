// CPU bilinear warp: every output (FIXED) pixel samples MOVING at inverse * (x, y, 1).
// A sample point inside [-0.5, w - 0.5] x [-0.5, h - 0.5] is interpolated from its four neighbours
// with indices clamped to the image (so the border half pixel repeats the edge); beyond it the
// output is 0. U8/U16 are rounded to nearest; F32 is kept as is. Chunks of rows run on the WorkPool
// (core/thread_pool.hpp); each output value depends only on the input, so the result is deterministic.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "backend/cpu/operations.hpp"
#include "core/thread_pool.hpp"

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
      const double wz = h[6] * x + h[7] * y + h[8];
      if (!(std::fabs(wz) > 1e-12)) continue;
      const double sx = (h[0] * x + h[1] * y + h[2]) / wz;
      const double sy = (h[3] * x + h[4] * y + h[5]) / wz;
      if (!(sx >= -0.5 && sx <= w - 0.5 && sy >= -0.5 && sy <= ht - 0.5)) continue;
      const double fx = std::floor(sx), fy = std::floor(sy);
      const double ax = sx - fx, ay = sy - fy;
      const int x0 = std::clamp(int(fx), 0, w - 1), x1 = std::clamp(int(fx) + 1, 0, w - 1);
      const int y0 = std::clamp(int(fy), 0, ht - 1), y1 = std::clamp(int(fy) + 1, 0, ht - 1);
      const T* p00 = in + (std::size_t(y0) * w + x0) * ch;
      const T* p01 = in + (std::size_t(y0) * w + x1) * ch;
      const T* p10 = in + (std::size_t(y1) * w + x0) * ch;
      const T* p11 = in + (std::size_t(y1) * w + x1) * ch;
      for (int c = 0; c < ch; ++c) {
        const double top = double(p00[c]) + ax * (double(p01[c]) - double(p00[c]));
        const double bot = double(p10[c]) + ax * (double(p11[c]) - double(p10[c]));
        const double v = top + ay * (bot - top);
        if constexpr (std::is_same_v<T, float>) {
          o[c] = float(v);
        } else {
          const double hi = double(std::numeric_limits<T>::max());
          o[c] = T(std::clamp(std::nearbyint(v), 0.0, hi));
        }
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

/* warp.cl — the bilinear warp on the device (src/backend/opencl/warp.cpp): every output (FIXED) pixel
 * samples MOVING through the inverse model, with the per-pixel maths of numeric/warp.h, so the output is the
 * CPU backend's (backend/cpu/warp.cpp) bit for bit: same taps, same border rule, same rounding.
 * Doubles throughout (the device needs cl_khr_fp64; without it dispatch keeps warping on the host).
 *
 * Build options: -DWARP_T=<uchar | ushort | float> (the sample type, interleaved channels), and
 * -DWARP_MAX=<255.0 | 65535.0> for the integer types (rounded to nearest and clamped) or -DWARP_FLOAT. */
#pragma OPENCL FP_CONTRACT OFF
#pragma OPENCL EXTENSION cl_khr_fp64 : enable

#include "warp.h"

/* Launch: 2-D, global = (out_w, out_h) rounded up to the work-group (e.g. 16 x 16), one work-item per output
 * pixel writing all its channels (0 where the pixel maps outside MOVING). The inverse model (FIXED -> MOVING,
 * row-major) comes as nine scalars, so a launch needs no upload besides the image. */
__kernel void warp_bilinear(__global const WARP_T* src, int width, int height, int channels, __global WARP_T* dst,
                            int out_w, int out_h, double i0, double i1, double i2, double i3, double i4, double i5,
                            double i6, double i7, double i8) {
  const int x = (int)get_global_id(0), y = (int)get_global_id(1);
  if (x >= out_w || y >= out_h) return;
  const double inv[9] = {i0, i1, i2, i3, i4, i5, i6, i7, i8};
  __global WARP_T* o = dst + ((size_t)y * (size_t)out_w + (size_t)x) * (size_t)channels;
  ss_warp_tap t;
  if (!ss_warp_tap_at(inv, x, y, width, height, &t)) {
    for (int c = 0; c < channels; ++c) o[c] = (WARP_T)0;
    return;
  }
  __global const WARP_T* p00 = src + ((size_t)t.y0 * (size_t)width + (size_t)t.x0) * (size_t)channels;
  __global const WARP_T* p01 = src + ((size_t)t.y0 * (size_t)width + (size_t)t.x1) * (size_t)channels;
  __global const WARP_T* p10 = src + ((size_t)t.y1 * (size_t)width + (size_t)t.x0) * (size_t)channels;
  __global const WARP_T* p11 = src + ((size_t)t.y1 * (size_t)width + (size_t)t.x1) * (size_t)channels;
  for (int c = 0; c < channels; ++c) {
    const double v = ss_warp_mix((double)p00[c], (double)p01[c], (double)p10[c], (double)p11[c], t.ax, t.ay);
#if defined(WARP_FLOAT)
    o[c] = (float)v;
#else
    o[c] = (WARP_T)ss_warp_round(v, WARP_MAX);
#endif
  }
}

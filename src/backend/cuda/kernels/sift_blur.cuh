// sift_blur.cuh — one Gaussian level of the scale space per launch, with the octave downsample and the
// difference of Gaussians fused in (the separable blur is the CUDA form of backend/opencl/kernels/
// sift_blur.cl's GPU kernel, same float operations).
//
// Level i = blur(level i - 1) with the half kernel k[0..R] of the plan (OpenCV's float taps): a vertical
// pass, then a horizontal pass over its results, each value computed with the CPU backend's float
// operations in its order (k0 * centre, then + k_i * (before_i + after_i) for i = 1..R; the library compiles
// CUDA with --fmad=false, so no product is contracted into an fma), borders by BORDER_REFLECT_101, so that
// the levels are the CPU's bits. DoG i - 1 = level i - level i - 1 is the same float subtraction that a
// separate pass over the two planes would do, taken while the block holds both values.
#pragma once

#include "backend/cuda/kernels/sift_common.cuh"

namespace spectrasift::cuda::kernels {

// Index of p in a line of len samples under BORDER_REFLECT_101, reflecting as often as needed.
__device__ inline int sift_reflect101(int p, int len) {
  if (len == 1) return 0;
  while (p < 0 || p >= len) p = p < 0 ? -p : 2 * len - 2 - p;
  return p;
}

// The source plane of a level as the blur reads it: value (y, x) of a w x h plane is
// data[(step y) pitch + step x]; step 2 reads level 0 of an octave straight from the even pixels of level S
// of the octave before (the downsample), step 1 a plane itself.
struct SiftBlurSource {
  const float* data;
  long long pitch;  // floats per row of data
  int step;         // 1, or 2 for the downsample
};

// sift_blur_dog: grid (ceil(w / TX), ceil(h / TY)), block (min(32, TX), min(8, TY)); output tile TX x TY per
// block (the host picks it from the device's shared memory and the plan's largest radius: 64 x 32, smaller
// for large radii), each thread TX TY / (block size) outputs, strided over the tile.
// Dynamic shared memory (floats): taps[R + 1], in[(TY + 2R) (TX + 2R)], mid[TY (TX + 2R)]. The block stages
// the source rows y0 - R .. y0 + TY - 1 + R and columns x0 - R .. x0 + TX - 1 + R (reflected) in `in`,
// computes the vertical pass of its TY rows over all those columns into `mid`, then the horizontal pass (the
// CPU's order: the horizontal pass reads vertical results) and writes:
//   dst[y w + x]    the blurred level;
//   dog[y w + x]    (when not null) dst - source value at (y, x): the DoG plane below this level;
//   level0[y w + x] (when not null) the source value at (y, x): level 0 of the octave when the source is
//                   the downsample of the octave before (step 2).
__global__ void sift_blur_dog(SiftBlurSource src, int w, int h, const float* k, int r, int tile_w, int tile_h,
                              float* dst, float* dog, float* level0) {
  extern __shared__ float sift_blur_shared[];
  const int lx = threadIdx.x, ly = threadIdx.y;
  const int bx = blockDim.x, by = blockDim.y;
  const int x0 = blockIdx.x * tile_w, y0 = blockIdx.y * tile_h;
  const int cols = tile_w + 2 * r, rows = tile_h + 2 * r;
  float* taps = sift_blur_shared;
  float* in = taps + (r + 1);
  float* mid = in + rows * cols;
  const int lid = ly * bx + lx;
  for (int i = lid; i <= r; i += bx * by) taps[i] = k[i];
  for (int t = ly; t < rows; t += by) {
    const float* row = src.data + (long long)sift_reflect101(y0 - r + t, h) * src.step * src.pitch;
    for (int c = lx; c < cols; c += bx) in[t * cols + c] = row[(long long)sift_reflect101(x0 - r + c, w) * src.step];
  }
  __syncthreads();
  for (int t = ly; t < tile_h; t += by) {
    for (int c = lx; c < cols; c += bx) {
      const int at = (t + r) * cols + c;
      float acc = taps[0] * in[at];
      for (int i = 1; i <= r; ++i) acc += taps[i] * (in[at - i * cols] + in[at + i * cols]);
      mid[t * cols + c] = acc;
    }
  }
  __syncthreads();
  for (int t = ly; t < tile_h; t += by) {
    const int y = y0 + t;
    if (y >= h) break;
    for (int c = lx; c < tile_w; c += bx) {
      const int x = x0 + c;
      if (x >= w) break;
      const int at = t * cols + c + r;
      float acc = taps[0] * mid[at];
      for (int i = 1; i <= r; ++i) acc += taps[i] * (mid[at - i] + mid[at + i]);
      const size_t o = (size_t)y * (size_t)w + (size_t)x;
      dst[o] = acc;
      const float centre = in[(t + r) * cols + c + r];
      if (dog) dog[o] = acc - centre;
      if (level0) level0[o] = centre;
    }
  }
}

}  // namespace spectrasift::cuda::kernels

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

// sift_blur_tiles<R>: the same values as sift_blur_dog for a radius R fixed at compile time (1 .. 16; the host
// picks the instance by the level's radius, larger radii take sift_blur_dog), and the CUDA form of
// backend/opencl/kernels/sift_blur.cl's sift_blur_tiles. With R known the loops unroll, the taps live in
// registers, and each thread computes a run of consecutive outputs from a window of values it reads from
// shared memory once (register blocking), instead of reading 2R + 1 shared values per output and pass.
// Grid (ceil(w / 64), ceil(h / 32)), block (32, 8); output tile 64 x 32; static shared memory
// (32 + 2R) (64 + 2R) + 32 (65 + 2R) floats (37 KB at R = 16).
//   1. stage the reflected source rows y0 - R .. y0 + 31 + R, columns x0 - R .. x0 + 63 + R in `in` (the
//      columns of a tile away from the side borders need no reflection);
//   2. vertical pass: 2 (64 + 2R) items (a column, one half of the tile's rows), each 16 outputs of the
//      column from a window of 16 + 2R values, into `mid` (row pitch odd);
//   3. horizontal pass: thread (lx, ly) computes row lx, columns 8 ly .. 8 ly + 7 from a window of 8 + 2R
//      values of `mid` (a warp reads 32 rows: the odd pitch keeps the banks apart), and puts them back in
//      `mid` as the output tile (pitch 65) once every thread has read its window;
//   4. the tile leaves in rows (coalesced): dst, dog and level0 as sift_blur_dog writes them.
constexpr int kBlurTileW = 64, kBlurTileH = 32, kBlurTilesMaxRadius = 16;

template <int R>
__global__ void __launch_bounds__(256) sift_blur_tiles(SiftBlurSource src, int w, int h, const float* taps, float* dst,
                                                       float* dog, float* level0) {
  constexpr int kVRun = 16, kHRun = 8;
  constexpr int kCols = kBlurTileW + 2 * R, kRows = kBlurTileH + 2 * R;
  constexpr int kMidPitch = kCols + 1, kOutPitch = kBlurTileW + 1;  // odd: 32 rows fall in 32 banks
  __shared__ float in[kRows * kCols];
  __shared__ float mid[kBlurTileH * kMidPitch];
  const int lx = threadIdx.x, ly = threadIdx.y, lid = ly * 32 + lx;
  const int x0 = blockIdx.x * kBlurTileW, y0 = blockIdx.y * kBlurTileH;
  float k[R + 1];
#pragma unroll
  for (int i = 0; i <= R; ++i) k[i] = taps[i];
  const bool inside = x0 >= R && x0 + kBlurTileW + R <= w;  // no column reflects
  for (int t = ly; t < kRows; t += 8) {
    const float* row = src.data + (long long)sift_reflect101(y0 - R + t, h) * src.step * src.pitch;
    for (int c = lx; c < kCols; c += 32) {
      const int x = x0 - R + c;
      in[t * kCols + c] = row[(long long)(inside ? x : sift_reflect101(x, w)) * src.step];
    }
  }
  __syncthreads();
  for (int item = lid; item < 2 * kCols; item += 256) {
    const int c = item % kCols, t0 = (item / kCols) * kVRun;
    float win[kVRun + 2 * R];
#pragma unroll
    for (int j = 0; j < kVRun + 2 * R; ++j) win[j] = in[(t0 + j) * kCols + c];
#pragma unroll
    for (int j = 0; j < kVRun; ++j) {
      float acc = k[0] * win[j + R];
#pragma unroll
      for (int i = 1; i <= R; ++i) acc += k[i] * (win[j + R - i] + win[j + R + i]);
      mid[(t0 + j) * kMidPitch + c] = acc;
    }
  }
  __syncthreads();
  float out[kHRun];
  {
    float win[kHRun + 2 * R];
#pragma unroll
    for (int j = 0; j < kHRun + 2 * R; ++j) win[j] = mid[lx * kMidPitch + ly * kHRun + j];
#pragma unroll
    for (int j = 0; j < kHRun; ++j) {
      float acc = k[0] * win[j + R];
#pragma unroll
      for (int i = 1; i <= R; ++i) acc += k[i] * (win[j + R - i] + win[j + R + i]);
      out[j] = acc;
    }
  }
  __syncthreads();
#pragma unroll
  for (int j = 0; j < kHRun; ++j) mid[lx * kOutPitch + ly * kHRun + j] = out[j];
  __syncthreads();
  for (int t = ly; t < kBlurTileH; t += 8) {
    const int y = y0 + t;
    if (y >= h) break;
    for (int c = lx; c < kBlurTileW; c += 32) {
      const int x = x0 + c;
      if (x >= w) break;
      const float v = mid[t * kOutPitch + c];
      const size_t o = (size_t)y * (size_t)w + (size_t)x;
      dst[o] = v;
      const float centre = in[(t + R) * kCols + c + R];
      if (dog) dog[o] = v - centre;
      if (level0) level0[o] = centre;
    }
  }
}

}  // namespace spectrasift::cuda::kernels

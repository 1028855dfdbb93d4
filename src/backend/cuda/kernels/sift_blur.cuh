// sift_blur.cuh — the separable Gaussian of the scale space and the octave downsample (the CUDA form of
// backend/opencl/kernels/sift_blur.cl's GPU kernel, same float operations).
//
// Level i = blur(level i - 1) with the half kernel k[0..R] of the plan (OpenCV's float taps): a vertical
// pass, then a horizontal pass over its results, each value computed with the CPU backend's float
// operations in its order (k0 * centre, then + k_i * (before_i + after_i) for i = 1..R), borders by
// BORDER_REFLECT_101, so that the levels are the CPU's bits.
#pragma once

#include "backend/cuda/kernels/sift_common.cuh"

namespace spectrasift::cuda::kernels {

// Index of p in a line of len samples under BORDER_REFLECT_101, reflecting as often as needed.
__device__ inline int sift_reflect101(int p, int len) {
  if (len == 1) return 0;
  while (p < 0 || p >= len) p = p < 0 ? -p : 2 * len - 2 - p;
  return p;
}

// sift_blur: grid (ceil(w / TX), ceil(h / TY)), block (TX, TY) (the host picks the tile from the device's
// shared memory and the plan's largest radius); one thread per output pixel, both passes in one launch.
// Dynamic shared memory: in[(TY + 2R) (TX + 2R)] then mid[TY (TX + 2R)] floats. The block stages the input
// rows y0 - R .. y0 + TY - 1 + R and columns x0 - R .. x0 + TX - 1 + R (reflected), computes the vertical
// pass of its TY rows over all those columns into mid, then the horizontal pass (the CPU's order: the
// horizontal pass reads vertical results). src and dst are the planes themselves (offsets applied).
__global__ void sift_blur(const float* src, float* dst, int w, int h, const float* k, int r) {
  extern __shared__ float sift_blur_shared[];
  const int lx = threadIdx.x, ly = threadIdx.y;
  const int tx = blockDim.x, ty = blockDim.y;
  const int x0 = blockIdx.x * tx, y0 = blockIdx.y * ty;
  const int cols = tx + 2 * r, rows = ty + 2 * r;
  float* in = sift_blur_shared;
  float* mid = sift_blur_shared + rows * cols;
  for (int t = ly; t < rows; t += ty) {
    const float* row = src + (size_t)sift_reflect101(y0 - r + t, h) * (size_t)w;
    for (int c = lx; c < cols; c += tx) in[t * cols + c] = row[sift_reflect101(x0 - r + c, w)];
  }
  __syncthreads();
  for (int c = lx; c < cols; c += tx) {
    const int at = (ly + r) * cols + c;
    float acc = k[0] * in[at];
    for (int i = 1; i <= r; ++i) acc += k[i] * (in[at - i * cols] + in[at + i * cols]);
    mid[ly * cols + c] = acc;
  }
  __syncthreads();
  const int x = x0 + lx, y = y0 + ly;
  if (x >= w || y >= h) return;
  const int at = ly * cols + lx + r;
  float acc = k[0] * mid[at];
  for (int i = 1; i <= r; ++i) acc += k[i] * (mid[at - i] + mid[at + i]);
  dst[(size_t)y * (size_t)w + (size_t)x] = acc;
}

// sift_downsample: grid (ceil(w / 32), ceil(h / 8)), block (32, 8) over the new octave; one thread per
// pixel. Level 0 of octave o + 1 (dst) is the even pixels of level S of octave o (src, sw floats a row).
__global__ void sift_downsample(const float* src, int sw, float* dst, int w, int h) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= w || y >= h) return;
  dst[(size_t)y * (size_t)w + (size_t)x] = src[(size_t)(2 * y) * (size_t)sw + (size_t)(2 * x)];
}

}  // namespace spectrasift::cuda::kernels

// sift_convert.cuh — the user's image to grey levels on the device, and the doubled first octave (the CUDA
// form of backend/opencl/kernels/sift_convert.cl, same float operations).
#pragma once

#include "backend/cuda/kernels/sift_common.cuh"
#include "numeric/sift_upsample.h"

namespace spectrasift::cuda::kernels {

// Pixel types of the raw upload (the host maps PixelType to these).
constexpr int kRawU8 = SIFT_RAW_U8;
constexpr int kRawU16 = SIFT_RAW_U16;
constexpr int kRawF32 = SIFT_RAW_F32;

// sift_grey: grid (ceil(width / 32), ceil(height / 8)), block (32, 8); one thread per pixel. The grey value
// of pixel (x, y) of an interleaved image of `channels` samples per pixel (numeric/sift_gray.h): channels
// 1-2 take the first sample, 3-4 the RGB formula (u16 and f32 colour in double, as the CPU).
__global__ void sift_grey(const unsigned char* raw, int type, int channels, int width, int height, float* grey) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= width || y >= height) return;
  const size_t p = (size_t)y * (size_t)width + (size_t)x;
  const size_t i = p * (size_t)channels;
  grey[p] = sift_gray_raw(raw, type, channels, i);
}

// sift_upsample: grid (ceil(2w / 32), ceil(2h / 8)), block (32, 8); one thread per output pixel. Output
// pixel (X, Y) is numeric/sift_upsample.h's sift_upsampled_pixel (OpenCV's INTER_LINEAR, the CPU backend's
// float operations).
__global__ void sift_upsample(const float* in, int w, int h, float* out) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  const int w2 = 2 * w, h2 = 2 * h;
  if (x >= w2 || y >= h2) return;
  out[(size_t)y * (size_t)w2 + (size_t)x] = sift_upsampled_pixel(in, w, h, x, y);
}

}  // namespace spectrasift::cuda::kernels

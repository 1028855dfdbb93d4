// sift_convert.cuh — the user's image to grey levels on the device, and the doubled first octave (the CUDA
// form of backend/opencl/kernels/sift_convert.cl, same float operations).
#pragma once

#include "backend/cuda/kernels/sift_common.cuh"

namespace spectrasift::cuda::kernels {

// Pixel types of the raw upload (the host maps PixelType to these).
constexpr int kRawU8 = 0;
constexpr int kRawU16 = 1;
constexpr int kRawF32 = 2;

// sift_grey: grid (ceil(width / 32), ceil(height / 8)), block (32, 8); one thread per pixel. The grey value
// of pixel (x, y) of an interleaved image of `channels` samples per pixel (numeric/sift_gray.h): channels
// 1-2 take the first sample, 3-4 the RGB formula (u16 and f32 colour in double, as the CPU).
__global__ void sift_grey(const unsigned char* raw, int type, int channels, int width, int height, float* grey) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= width || y >= height) return;
  const size_t p = (size_t)y * (size_t)width + (size_t)x;
  const size_t i = p * (size_t)channels;
  float v;
  if (type == kRawU8) {
    v = channels >= 3 ? sift_gray_u8_rgb(raw[i], raw[i + 1], raw[i + 2]) : sift_gray_u8(raw[i]);
  } else if (type == kRawU16) {
    const unsigned short* s = reinterpret_cast<const unsigned short*>(raw);
    v = channels >= 3 ? sift_gray_u16_rgb(s[i], s[i + 1], s[i + 2]) : sift_gray_u16(s[i]);
  } else {
    const float* s = reinterpret_cast<const float*>(raw);
    v = channels >= 3 ? sift_gray_f32_rgb(s[i], s[i + 1], s[i + 2]) : sift_gray_f32(s[i]);
  }
  grey[p] = v;
}

// Column X of an input row doubled with half-pixel bilinear weights, edges replicated (the CPU backend's
// upsample_row, same float operations).
__device__ inline float sift_upsampled_at(const float* row, int w, int x) {
  if (x == 0) return row[0];
  if (x == 2 * w - 1) return row[w - 1];
  const int k = x / 2;
  if ((x & 1) == 0) return row[k - 1] * 0.25f + row[k] * 0.75f;
  return row[k] * 0.75f + row[k + 1] * 0.25f;
}

// sift_upsample: grid (ceil(2w / 32), ceil(2h / 8)), block (32, 8); one thread per output pixel. Output
// pixel (X, Y) samples input ((X + 0.5) / 2 - 0.5, (Y + 0.5) / 2 - 0.5) (OpenCV's INTER_LINEAR), rows
// blended after the columns as the CPU backend does.
__global__ void sift_upsample(const float* in, int w, int h, float* out) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  const int w2 = 2 * w, h2 = 2 * h;
  if (x >= w2 || y >= h2) return;
  const int k = y / 2;
  float v;
  if (y == 0 || y == h2 - 1) {
    v = sift_upsampled_at(in + (size_t)k * (size_t)w, w, x);
  } else {
    const int ya = (y % 2 == 0) ? k - 1 : k;
    const float wa = (y % 2 == 0) ? 0.25f : 0.75f;
    const float a = sift_upsampled_at(in + (size_t)ya * (size_t)w, w, x);
    const float b = sift_upsampled_at(in + (size_t)(ya + 1) * (size_t)w, w, x);
    v = a * wa + b * (1.0f - wa);
  }
  out[(size_t)y * (size_t)w2 + (size_t)x] = v;
}

}  // namespace spectrasift::cuda::kernels

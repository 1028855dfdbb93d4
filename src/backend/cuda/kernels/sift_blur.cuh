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

namespace spectrasift::cuda::kernels {

// The small octaves of the pyramid in one launch. Each per-level launch above costs ~7-10 us on the H200
// whatever the plane's size (one 64 x 32 tile is a serial chain: staging, vertical pass, barrier, horizontal
// pass, write), so the last octaves (kleiber 1080p upsampled: 120 x 67 down to 7 x 4, 25 launches) took ~0.2 ms
// of a ~0.9 ms pyramid for a few thousand pixels. Here one block computes every level of every trailing small
// octave one after the other, with the plane in shared memory.
constexpr int kSmallOctavesThreads = 1024;
// Pixels: one block takes about n cycles per level for an n-pixel plane (n / 1024 outputs a thread, ~65
// instructions each per pass at R = 13, 8 warps a scheduler), i.e. ~4 us at 8192 against ~8 us for a launch.
constexpr int kSmallOctavesMaxPlane = 8192;
constexpr int kSmallOctavesMaxLevels = 16;

// The plan as the kernel needs it: octaves first .. end - 1 (first >= 1), `levels` Gaussian levels each (S + 3),
// level S of an octave is the next one's source; level i's half kernel is taps[tap_offset[i] .. + tap_radius[i]].
struct SiftSmallOctaves {
  int first, end, levels, layers, tap_floats;
  int tap_offset[kSmallOctavesMaxLevels];
  int tap_radius[kSmallOctavesMaxLevels];
};

// Dynamic shared memory of sift_blur_small_octaves for planes of up to plane_cap pixels (floats: the taps,
// then three planes).
__host__ __device__ inline unsigned long long sift_blur_small_octaves_bytes(int tap_floats, int plane_cap) {
  return (unsigned long long)(tap_floats + 3 * plane_cap) * sizeof(float);
}

// sift_blur_small_octaves: grid 1, block kSmallOctavesThreads, dynamic shared memory
// sift_blur_small_octaves_bytes(q.tap_floats, largest plane of the set). Per octave o of the set: level 0 =
// the even pixels of level S of octave o - 1 (read from global memory: the octave before was written by the
// per-level launches or by this block before a barrier) into `a` and the octave's level 0; then per level i:
// the vertical pass of `a` into `m`, the horizontal pass of `m` into `b`, written as level i and, minus `a`,
// as DoG plane i - 1; `b` is the next level's source. Every value is sift_blur_tiles' (and sift_blur_dog's):
// k0 * centre, then + k_t * (before_t + after_t) for t = 1 .. R in that order, vertical first, BORDER_REFLECT_101
// (the vertical pass is per column, so reflecting the column index in the horizontal pass reads the values the
// tiles compute at reflected columns), no contraction (--fmad=false), so the planes are the same bits.
__global__ void __launch_bounds__(kSmallOctavesThreads)
    sift_blur_small_octaves(const long long* info, SiftSmallOctaves q, const float* taps, float* gauss, float* dog,
                            int plane_cap) {
  extern __shared__ float sift_small_shared[];
  float* k_all = sift_small_shared;
  float* a = k_all + q.tap_floats;
  float* m = a + plane_cap;
  float* b = m + plane_cap;
  const int tid = int(threadIdx.x), nt = int(blockDim.x);
  for (int i = tid; i < q.tap_floats; i += nt) k_all[i] = taps[i];
  for (int o = q.first; o < q.end; ++o) {
    const int w = sift_oct_w(info, o), h = sift_oct_h(info, o), n = w * h;
    const int pw = sift_oct_w(info, o - 1), ph = sift_oct_h(info, o - 1);
    const float* prev = gauss + sift_oct_gauss(info, o - 1) + (size_t)q.layers * (size_t)pw * (size_t)ph;
    float* g = gauss + sift_oct_gauss(info, o);
    float* d = dog + sift_oct_dog(info, o);
    __syncthreads();  // level S of the octave before is in global memory; the planes' last reads are done
    for (int p = tid; p < n; p += nt) {
      const int y = p / w, x = p - y * w;
      const float v = prev[(size_t)(2 * y) * (size_t)pw + (size_t)(2 * x)];
      a[p] = v;
      g[p] = v;
    }
    __syncthreads();
    for (int i = 1; i < q.levels; ++i) {
      const float* k = k_all + q.tap_offset[i];
      const int r = q.tap_radius[i];
      for (int p = tid; p < n; p += nt) {
        const int y = p / w, x = p - y * w;
        float acc = k[0] * a[p];
        if (y >= r && y + r < h) {  // no row reflects (sift_reflect101 is the identity inside the plane)
          for (int t = 1; t <= r; ++t) acc += k[t] * (a[p - t * w] + a[p + t * w]);
        } else {
          for (int t = 1; t <= r; ++t)
            acc += k[t] * (a[sift_reflect101(y - t, h) * w + x] + a[sift_reflect101(y + t, h) * w + x]);
        }
        m[p] = acc;
      }
      __syncthreads();
      float* gi = g + (size_t)i * (size_t)n;
      float* di = d + (size_t)(i - 1) * (size_t)n;
      for (int p = tid; p < n; p += nt) {
        const int y = p / w, x = p - y * w;
        const float* row = m + y * w;
        float acc = k[0] * row[x];
        if (x >= r && x + r < w) {
          for (int t = 1; t <= r; ++t) acc += k[t] * (row[x - t] + row[x + t]);
        } else {
          for (int t = 1; t <= r; ++t) acc += k[t] * (row[sift_reflect101(x - t, w)] + row[sift_reflect101(x + t, w)]);
        }
        b[p] = acc;
        gi[p] = acc;
        di[p] = acc - a[p];
      }
      __syncthreads();
      float* s = a;
      a = b;
      b = s;
    }
  }
}

}  // namespace spectrasift::cuda::kernels

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

// Programmatic dependent launch (Hopper and later; the host launches the pyramid's levels with the
// programmatic-serialisation attribute, SiftStagesCuda::blur). Every blur kernel opens with this: a grid of at
// most kBlurEarlyLaunchBlocks blocks (the small octaves: all of it resident at once) lets the next level's grid
// launch at once, so that its blocks are resident and waiting when this grid ends instead of being launched
// then; a larger grid lets it launch as its blocks exit (early blocks of the next level would take the slots
// its later waves need). Then it waits until the grid before it has completed and its writes are visible:
// nothing is read or written before that, so the results are those of a plain launch. On older devices, and
// for a grid launched without the attribute, both instructions do nothing.
constexpr unsigned kBlurEarlyLaunchBlocks = 128;

__device__ inline void sift_blur_wait_for_previous_level() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (gridDim.x * gridDim.y * gridDim.z <= kBlurEarlyLaunchBlocks) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
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
  sift_blur_wait_for_previous_level();
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

// sift_blur_tiles_r2<R>: round 2 of the per-radius blur (docs/performance/sift.md "GPU blur, round 2"), kept
// unchanged for A/B runs (SiftStagesCuda::set_blur_form(BlurForm::kTilesRound2)); sift_blur_tiles<R> below is the
// default and gives the same bits. The same values as sift_blur_dog for a radius R fixed at compile time (1 .. 16;
// the host picks the instance by the level's radius, larger radii take sift_blur_dog), and the CUDA form of
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

// Output j of a register window of one pass (R values on each side of the run): k0 * centre, then
// + k_i * (before_i + after_i) for i = 1 .. R, the CPU backend's operations in its order (no contraction:
// --fmad=false). Every tile kernel's two passes take their values from here.
template <int R>
__device__ __forceinline__ float sift_blur_tap_sum(const float* win, const float (&k)[R + 1], int j) {
  float acc = k[0] * win[j + R];
#pragma unroll
  for (int i = 1; i <= R; ++i) acc += k[i] * (win[j + R - i] + win[j + R + i]);
  return acc;
}

template <int R>
__global__ void __launch_bounds__(256) sift_blur_tiles_r2(SiftBlurSource src, int w, int h, const float* taps, float* dst,
                                                       float* dog, float* level0) {
  sift_blur_wait_for_previous_level();
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
      mid[(t0 + j) * kMidPitch + c] = sift_blur_tap_sum<R>(win, k, j);
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
      out[j] = sift_blur_tap_sum<R>(win, k, j);
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

// sift_blur_tiles<R> (round 3, issue 19): the values of sift_blur_tiles_r2<R> (the same taps, the same float
// operations in the same order for every output) with fewer non-FP instructions. The H200 profile of round 2
// (ncu, octave 0 of kleiber 1080p upsampled, R = 5) spent 45 % of the warp instructions and 65 % of the stall
// samples in the staging (a reflect loop and 64-bit address arithmetic with the runtime step per staged float,
// each STS waiting on its own LDG) and 20-30 % in the write-out (bounds tests and address arithmetic per float);
// the two tap passes were already ~80 % FMUL/FADD. So:
//   - the staged tile starts kA = R rounded up to 4 columns left of the output tile, its row pitch a multiple of
//     4: a block whose source window lies inside the plane (and step 1, 16-byte aligned rows) stages it with
//     float4 loads (lanes 0 .. kQuads - 1 of each warp, warp ly the rows ly + 8 i), all issued before the first
//     shared store, at compile-time shared offsets; border blocks (and the downsample, step 2) take the
//     general path: reflected scalars, as round 2;
//   - the horizontal pass puts its 8 outputs back into shared memory as 2 float4 (pitch 68: conflict-free per
//     quarter warp), and a block whose output tile lies inside the plane (w a multiple of 4, aligned planes)
//     writes the level, DoG and level-0 rows as float4 (a half warp per row of 64, 2 rows per warp and step);
//     border blocks keep the scalar, bounds-tested loop.
// Both choices depend on the block's position and the launch's arguments only, so they are uniform per block.
// Grid (ceil(w / 64), ceil(h / 32)), block (32, 8); output tile 64 x 32; static shared memory
// (32 + 2R) (64 + 2 kA) + 32 max(65 + 2R, 68) floats (37 KB at R = 16).
//   1. stage the source rows y0 - R .. y0 + 31 + R, columns x0 - kA .. x0 + 63 + kA in `in` (reflected);
//   2. vertical pass: 2 (64 + 2R) items (a column x0 - R + c, one half of the tile's rows), each 16 outputs of
//      the column from a window of 16 + 2R values, into `mid` (row pitch odd);
//   3. horizontal pass: thread (lx, ly) computes row lx, columns 8 ly .. 8 ly + 7 from a window of 8 + 2R
//      values of `mid`, and puts them back in `mid` as the output tile (pitch 68) once every thread has read
//      its window;
//   4. the tile leaves in rows (coalesced): dst, dog and level0 as sift_blur_dog writes them.
constexpr int kBlurOutPitch = kBlurTileW + 4;  // the output tile in `mid`: float4 rows, 4-way distinct banks

__device__ inline bool sift_blur_aligned16(const void* p) { return (reinterpret_cast<unsigned long long>(p) & 15u) == 0; }

template <int R>
__global__ void __launch_bounds__(256) sift_blur_tiles(SiftBlurSource src, int w, int h, const float* taps, float* dst,
                                                       float* dog, float* level0) {
  sift_blur_wait_for_previous_level();
  constexpr int kVRun = 16, kHRun = 8;
  constexpr int kA = (R + 3) / 4 * 4;                  // staged halo columns: R rounded up to a float4
  constexpr int kCols = kBlurTileW + 2 * R;            // columns of the vertical pass
  constexpr int kInPitch = kBlurTileW + 2 * kA;        // staged columns x0 - kA .. x0 + 63 + kA
  constexpr int kQuads = kInPitch / 4;                 // float4 per staged row (at most 24: one warp row)
  constexpr int kRows = kBlurTileH + 2 * R;            // staged rows y0 - R .. y0 + 31 + R
  constexpr int kFullSteps = kRows / 8, kTailRows = kRows % 8;  // rows ly + 8 i: whole steps, then a tail
  constexpr int kMidPitch = kCols + 1;                 // odd: the horizontal pass's 32 rows fall in 32 banks
  constexpr int kMid = kBlurTileH * (kMidPitch > kBlurOutPitch ? kMidPitch : kBlurOutPitch);
  static_assert(kQuads <= 32 && 2 * kCols <= 256, "one warp row per staged row, one vertical item per thread");
  __shared__ __align__(16) float in[kRows * kInPitch];
  __shared__ __align__(16) float mid[kMid];
  const int lx = threadIdx.x, ly = threadIdx.y, lid = ly * 32 + lx;
  const int x0 = blockIdx.x * kBlurTileW, y0 = blockIdx.y * kBlurTileH;
  float k[R + 1];
#pragma unroll
  for (int i = 0; i <= R; ++i) k[i] = taps[i];
  const bool cols_inside = x0 >= kA && x0 + kBlurTileW + kA <= w;  // no staged column reflects
  const bool rows_inside = y0 >= R && y0 + kBlurTileH + R <= h;    // no staged row reflects
  if (cols_inside && rows_inside && src.step == 1 && (src.pitch & 3) == 0 && sift_blur_aligned16(src.data)) {
    if (lx < kQuads) {  // float4 lx of rows ly, ly + 8, ..: every load in flight before the first store
      const float* p = src.data + (long long)(y0 - R + ly) * src.pitch + (x0 - kA + 4 * lx);
      const long long step8 = 8 * src.pitch;
      float4 v[kFullSteps + 1];
#pragma unroll
      for (int i = 0; i < kFullSteps; ++i) v[i] = *reinterpret_cast<const float4*>(p + i * step8);
      if (kTailRows > 0 && ly < kTailRows) v[kFullSteps] = *reinterpret_cast<const float4*>(p + kFullSteps * step8);
      float4* s = reinterpret_cast<float4*>(in) + ly * kQuads + lx;
#pragma unroll
      for (int i = 0; i < kFullSteps; ++i) s[i * 8 * kQuads] = v[i];
      if (kTailRows > 0 && ly < kTailRows) s[kFullSteps * 8 * kQuads] = v[kFullSteps];
    }
  } else {
    for (int t = ly; t < kRows; t += 8) {
      const int y = y0 - R + t;
      const float* row = src.data + (long long)(rows_inside ? y : sift_reflect101(y, h)) * src.step * src.pitch;
      for (int c = lx; c < kInPitch; c += 32) {
        const int x = x0 - kA + c;
        in[t * kInPitch + c] = row[(long long)(cols_inside ? x : sift_reflect101(x, w)) * src.step];
      }
    }
  }
  __syncthreads();
  if (lid < 2 * kCols) {  // column x0 - R + c, rows t0 .. t0 + 15 of the tile
    const int c = lid % kCols, t0 = (lid / kCols) * kVRun;
    const float* col = in + t0 * kInPitch + c + (kA - R);
    float win[kVRun + 2 * R];
#pragma unroll
    for (int j = 0; j < kVRun + 2 * R; ++j) win[j] = col[j * kInPitch];
    float* out = mid + t0 * kMidPitch + c;
#pragma unroll
    for (int j = 0; j < kVRun; ++j) {
      out[j * kMidPitch] = sift_blur_tap_sum<R>(win, k, j);
    }
  }
  __syncthreads();
  float out[kHRun];
  {
    const float* row = mid + lx * kMidPitch + ly * kHRun;
    float win[kHRun + 2 * R];
#pragma unroll
    for (int j = 0; j < kHRun + 2 * R; ++j) win[j] = row[j];
#pragma unroll
    for (int j = 0; j < kHRun; ++j) {
      out[j] = sift_blur_tap_sum<R>(win, k, j);
    }
  }
  __syncthreads();
  {
    float4* o = reinterpret_cast<float4*>(mid + lx * kBlurOutPitch + ly * kHRun);
    o[0] = make_float4(out[0], out[1], out[2], out[3]);
    o[1] = make_float4(out[4], out[5], out[6], out[7]);
  }
  __syncthreads();
  if (x0 + kBlurTileW <= w && y0 + kBlurTileH <= h && (w & 3) == 0 && sift_blur_aligned16(dst) &&
      sift_blur_aligned16(dog) && sift_blur_aligned16(level0)) {
    const int c = 4 * (lx & 15);  // half warp (lx >> 4) per row of 64: rows 16 i + 2 ly + (lx >> 4)
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int t = 16 * i + 2 * ly + (lx >> 4);
      const float4 v = *reinterpret_cast<const float4*>(mid + t * kBlurOutPitch + c);
      const size_t o = (size_t)(y0 + t) * (size_t)w + (size_t)(x0 + c);
      *reinterpret_cast<float4*>(dst + o) = v;
      if (dog || level0) {
        const float4 centre = *reinterpret_cast<const float4*>(in + (t + R) * kInPitch + kA + c);
        if (dog) *reinterpret_cast<float4*>(dog + o) = make_float4(v.x - centre.x, v.y - centre.y, v.z - centre.z, v.w - centre.w);
        if (level0) *reinterpret_cast<float4*>(level0 + o) = centre;
      }
    }
    return;
  }
  for (int t = ly; t < kBlurTileH; t += 8) {
    const int y = y0 + t;
    if (y >= h) break;
    for (int c = lx; c < kBlurTileW; c += 32) {
      const int x = x0 + c;
      if (x >= w) break;
      const float v = mid[t * kBlurOutPitch + c];
      const size_t o = (size_t)y * (size_t)w + (size_t)x;
      dst[o] = v;
      const float centre = in[(t + R) * kInPitch + c + kA];
      if (dog) dog[o] = v - centre;
      if (level0) level0[o] = centre;
    }
  }
}

// sift_blur_small<R> (session 7): the small octaves' levels. A level of sift_blur_tiles<R> costs 6-8 us from
// 480 x 270 down to 15 x 8 pixels whatever the size (bench/probes/pyramid_octave_probe.cu): one block's serial
// chain (taps, staging, two passes of 16 and 8 outputs a thread, write-out) over a 64 x 32 tile, far more than
// those planes hold. Here the output tile is 32 x 16 and each thread computes 4 vertical and 2 horizontal
// outputs, so that a block's chain is about a quarter as long and a plane spreads over four times the blocks.
// The same values as sift_blur_tiles<R> (the same taps in registers, the same float operations in the same
// order, BORDER_REFLECT_101: a vertical value at a reflected column is the value at the column it reflects to).
// The host takes it for a level whose 64 x 32 grid would not fill the GPU twice over (SiftStagesCuda::blur).
// Grid (ceil(w / 32), ceil(h / 16)), block (32, 8); static shared memory (16 + 2R) (32 + 2R) + 16 (33 + 2R)
// floats (20 KB at R = 16).
//   1. stage the source rows y0 - R .. y0 + 15 + R, columns x0 - R .. x0 + 31 + R in `in` (reflected), every
//      load of a thread in flight before its first store;
//   2. vertical pass: 4 (32 + 2R) items (a column x0 - R + c, a quarter of the tile's rows), each 4 outputs
//      from a window of 4 + 2R values, into `mid`;
//   3. horizontal pass: thread lid computes row lid / 16, columns 2 (lid % 16) and + 1 from a window of 2 + 2R
//      values of `mid`, and writes them, with the DoG and level-0 values, as sift_blur_dog does.
constexpr int kBlurSmallTileW = 32, kBlurSmallTileH = 16;

template <int R>
__global__ void __launch_bounds__(256) sift_blur_small(SiftBlurSource src, int w, int h, const float* taps, float* dst,
                                                       float* dog, float* level0) {
  sift_blur_wait_for_previous_level();
  constexpr int kVRun = 4, kHRun = 2;
  constexpr int kCols = kBlurSmallTileW + 2 * R, kRows = kBlurSmallTileH + 2 * R;
  constexpr int kMidPitch = kCols + 1;
  constexpr int kRowSteps = (kRows + 7) / 8, kColSteps = (kCols + 31) / 32;
  static_assert(kBlurSmallTileH / kVRun * kCols <= 256 && kBlurSmallTileW * kBlurSmallTileH == 256 * kHRun,
                "one vertical item and two outputs a thread");
  __shared__ float in[kRows * kCols];
  __shared__ float mid[kBlurSmallTileH * kMidPitch];
  const int lx = threadIdx.x, ly = threadIdx.y, lid = ly * 32 + lx;
  const int x0 = blockIdx.x * kBlurSmallTileW, y0 = blockIdx.y * kBlurSmallTileH;
  float k[R + 1];
#pragma unroll
  for (int i = 0; i <= R; ++i) k[i] = taps[i];
  {
    float v[kRowSteps][kColSteps];
#pragma unroll
    for (int i = 0; i < kRowSteps; ++i) {
      const int t = ly + 8 * i;
      const float* row = src.data + (long long)sift_reflect101(y0 - R + (t < kRows ? t : 0), h) * src.step * src.pitch;
#pragma unroll
      for (int j = 0; j < kColSteps; ++j) {
        const int c = lx + 32 * j;
        if (t < kRows && c < kCols) v[i][j] = row[(long long)sift_reflect101(x0 - R + c, w) * src.step];
      }
    }
#pragma unroll
    for (int i = 0; i < kRowSteps; ++i)
#pragma unroll
      for (int j = 0; j < kColSteps; ++j) {
        const int t = ly + 8 * i, c = lx + 32 * j;
        if (t < kRows && c < kCols) in[t * kCols + c] = v[i][j];
      }
  }
  __syncthreads();
  if (lid < kBlurSmallTileH / kVRun * kCols) {  // column x0 - R + c, rows t0 .. t0 + 3 of the tile
    const int c = lid % kCols, t0 = (lid / kCols) * kVRun;
    float win[kVRun + 2 * R];
#pragma unroll
    for (int j = 0; j < kVRun + 2 * R; ++j) win[j] = in[(t0 + j) * kCols + c];
#pragma unroll
    for (int j = 0; j < kVRun; ++j) {
      mid[(t0 + j) * kMidPitch + c] = sift_blur_tap_sum<R>(win, k, j);
    }
  }
  __syncthreads();
  const int t = lid >> 4, cx = 2 * (lid & 15);  // output row t, columns cx and cx + 1 of the tile
  const int y = y0 + t;
  if (y >= h) return;
  float win[kHRun + 2 * R];
#pragma unroll
  for (int j = 0; j < kHRun + 2 * R; ++j) win[j] = mid[t * kMidPitch + cx + j];
#pragma unroll
  for (int j = 0; j < kHRun; ++j) {
    const int x = x0 + cx + j;
    if (x >= w) break;
    const float acc = sift_blur_tap_sum<R>(win, k, j);
    const size_t o = (size_t)y * (size_t)w + (size_t)x;
    dst[o] = acc;
    const float centre = in[(t + R) * kCols + cx + j + R];
    if (dog) dog[o] = acc - centre;
    if (level0) level0[o] = centre;
  }
}

}  // namespace spectrasift::cuda::kernels

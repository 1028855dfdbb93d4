// CUDA kernels of spectral matching. Every per-element formula comes from numeric/spectral_metrics.h
// (the same code the CPU and OpenCL backends run); these kernels only decide who computes what.
//
// Chunk layout on the device. A chunk is `lines` whole lines of the cube, uploaded without any host
// reorganisation, so element (line yl of the chunk, sample x, stored band b) sits at
//   yl * ls + x * ss + b * bs          (elements, ChunkLayout)
//   BSQ: only the used bands travel, one plane after another: ls = samples, ss = 1, bs = lines*samples
//        (and b counts used bands, band_index = identity);
//   BIL: ls = bands*samples, ss = 1, bs = samples;     BIP: ls = samples*bands, ss = bands, bs = 1.
// Pixels of a chunk are numbered p = yl * samples + x (the order of the output bands).
//
// Kernels (all with 256-thread blocks), one family per header:
//   spectral_one_ref       (spectral_one_ref.cuh)       8 threads per pixel, native samples -> one score
//                                                        (bandwidth-bound path)
//   spectral_one_ref_rows  (spectral_one_ref_rows.cuh)  one thread per pixel, same partial sums: BSQ/BIL
//                                                        small-integer cubes
//   spectral_convert       (spectral_convert.cuh)       one thread per pixel, native samples -> float planes
//                                                        F[j][p] + stats + no-data flag
//   spectral_convert_rows  (spectral_convert.cuh)       the same for BSQ/BIL small-integer cubes, V pixels per
//                                                        thread, vector loads
//   spectral_gemm_rows     (spectral_gemm_rows.cuh)     32x32 tiles, F -> the GEMM operand X, one row per pixel
//                                                        (sid: [p'/P, log p'])
//   spectral_multi         (spectral_multi.cuh)         one thread per pixel, F against references tiled
//                                                        through shared memory
//   spectral_select        (spectral_select.cuh)        one warp per pixel, GEMM scores -> top candidates ->
//                                                        exact rescoring -> reduction
// This header holds what they share: the chunk layout, the output view, sample loads, the one-reference
// operands, launch constants and the cp.async primitives.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "numeric/spectral_metrics.h"

namespace spectrasift::cuda::kernels {

constexpr int kBlock = 256;          ///< threads per block of every kernel here
constexpr int kMultiTile = 16;       ///< references per shared-memory tile in spectral_multi
constexpr int kCandidates = 32;      ///< GEMM candidates rescored exactly per pixel (one per lane, spectral_select)

/// What a kernel writes per pixel (SpectralOptions::reduction, same order as the enum).
enum OutMode : int { kOutAll = 0, kOutBest = 1, kOutTopK = 2, kOutThreshold = 3 };

struct ChunkLayout {
  long long ls = 0, ss = 0, bs = 0;
};

/// Where a kernel writes: score band t of chunk pixel p at score[t * stride + p] (index likewise).
/// `score`/`index` already point at the chunk's first pixel of band 0.
struct OutView {
  float* score = nullptr;
  int* index = nullptr;
  long long stride = 0;  ///< elements between output bands
  int k = 1;             ///< number of index/score bands (top-k), 1 for best/threshold
  int mode = kOutAll;
  float threshold = 0;
};

// ---- samples: raw bits of the stored element type, byte swap, conversion by the shared formula ----

template <int kType> struct Storage;
template <> struct Storage<SPECTRAL_TYPE_U8> { using type = unsigned char; };
template <> struct Storage<SPECTRAL_TYPE_I16> { using type = unsigned short; };
template <> struct Storage<SPECTRAL_TYPE_U16> { using type = unsigned short; };
template <> struct Storage<SPECTRAL_TYPE_I32> { using type = unsigned int; };
template <> struct Storage<SPECTRAL_TYPE_U32> { using type = unsigned int; };
template <> struct Storage<SPECTRAL_TYPE_F32> { using type = unsigned int; };
template <> struct Storage<SPECTRAL_TYPE_F64> { using type = unsigned long long; };
template <> struct Storage<SPECTRAL_TYPE_I64> { using type = unsigned long long; };
template <> struct Storage<SPECTRAL_TYPE_U64> { using type = unsigned long long; };

__device__ __forceinline__ unsigned char byte_swap(unsigned char v) { return v; }
__device__ __forceinline__ unsigned short byte_swap(unsigned short v) {
  return (unsigned short)(((unsigned)v >> 8) | ((unsigned)v << 8));
}
__device__ __forceinline__ unsigned int byte_swap(unsigned int v) { return __byte_perm(v, 0u, 0x0123); }
__device__ __forceinline__ unsigned long long byte_swap(unsigned long long v) {
  const unsigned lo = (unsigned)v, hi = (unsigned)(v >> 32);
  return ((unsigned long long)__byte_perm(lo, 0u, 0x0123) << 32) | __byte_perm(hi, 0u, 0x0123);
}

/// The converted (unscaled) value of element i; `big_endian` is uniform across the grid.
template <int kType>
__device__ __forceinline__ float load_sample(const typename Storage<kType>::type* __restrict__ base, long long i,
                                             int big_endian) {
  typename Storage<kType>::type v = __ldg(base + i);
  if (big_endian) v = byte_swap(v);
  return spectral_sample_from_bits(kType, (spectral_u64)v);
}

/// Reference data of spectral_one_ref, copied to shared memory by the block.
struct OneRef {
  const float* v1 = nullptr;       ///< refs.values row (used bands)
  const float* v2 = nullptr;       ///< refs.values2 row (sid), else nullptr
  const int* band_index = nullptr; ///< used bands -> stored bands of the chunk
  int n = 0;                       ///< used bands
  double constant = 0;             ///< refs.constant
  // ed on small-integer cubes: the split form of numeric/spectral_metrics.h (r = ri + rf), when every
  // value passes spectral_ed_split_ok (ed_split); the one-reference kernels then use it.
  const int* ri = nullptr;         ///< nearest integers of v1
  const float* rf = nullptr;       ///< v1 - ri, exact
  double rf2 = 0;                  ///< sum rf^2 in band order, double
  int ed_split = 0;
};

/// Cube constants shared by the per-pixel kernels.
struct CubeConst {
  int samples = 0;
  int npix = 0;          ///< pixels of the chunk
  float scale = 1.0f;
  int has_ignore = 0;
  float ignore = 0;
  int big_endian = 0;
};

/// One reference: the best is reference 0 unless its score is NaN (no data, undefined, or rejected by
/// the threshold, which the caller already turned into NaN).
__device__ __forceinline__ void write_single(const OutView& out, int p, float score) {
  out.score[p] = score;
  if (out.mode != kOutAll) out.index[p] = (score == score) ? 0 : -1;
}

/// Partial sums of one pixel over a subset of its bands; merged in a fixed order (deterministic). For
/// integer-valued data every double sum is exact, so the merge order cannot change ed or the statistics.
struct Partial {
  SpectralPixelStats st;
  SpectralPairAcc acc;
  int ignored;
};

constexpr int kOneRefGroups = 8;                       ///< band groups (one per warp) of spectral_one_ref
constexpr int kOneRefPixels = kBlock / kOneRefGroups;  ///< pixels per block of spectral_one_ref

/// Small-integer cubes (u8/i16/u16, no scale factor, not sid): the conversion-free loop of
/// spectral_one_ref applies (see there). Uniform across the grid.
template <int kType, int kMetric>
constexpr bool kOneRefIntegerPath = (kType == SPECTRAL_TYPE_U8 || kType == SPECTRAL_TYPE_I16 ||
                                     kType == SPECTRAL_TYPE_U16) && kMetric != SPECTRAL_METRIC_SID;

/* spectral_one_ref<kType, kMetric>: every pixel of a chunk against ONE reference, reading the chunk in
 * its native type. Launch: grid ceil(npix / 32), block 256, dynamic shared memory n * 20 bytes (the
 * reference row in float and double, sid's second row, the band indices) + the static partial sums. A block handles 32 pixels; its 256
 * threads split each pixel's bands into 8 groups, so that a thread walks ~n/8 bands (short dependency
 * chains, ~8 times more threads than pixels: enough loads in flight to run at the memory bandwidth):
 * thread of band group g reads bands g, g+8, g+16, ... of its pixel:
 *   ss == 1 (BSQ, BIL): warp g = band group g, lane = pixel: a warp reads 32 consecutive samples of one
 *                       band (coalesced);
 *   ss != 1 (BIP):      8 consecutive threads share a pixel: a warp load reads 8 consecutive bands of 4
 *                       pixels.
 * The 8 partial sums of a pixel are merged in group order by one thread, which finalises the score with
 * the shared formulas. Each element of the chunk is read exactly once. */

// cp.async (sm_80+): 16 bytes global -> shared without registers; commit groups and wait for all but N.
__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_addr(smem)), "l"(gmem));
}
/// The same, with zeros instead of the bytes when !valid (nothing is read then), and the L2 prefetch size
/// hint .L2::128B: on a miss the L2 fetches the whole 128-byte line from DRAM (kRowsBip's staging).
__device__ __forceinline__ void cp_async16_or_zero_line(void* smem, const void* gmem, bool valid) {
  asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16, %2;\n" ::"r"(smem_addr(smem)), "l"(gmem), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }
__device__ __forceinline__ void cp_async_wait_all() { cp_async_wait<0>(); }

}  // namespace spectrasift::cuda::kernels

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
// Kernels (all with 256-thread blocks):
//   spectral_one_ref   8 threads per pixel, native samples -> one score (bandwidth-bound path)
//   spectral_one_ref_rows  one thread per pixel, same partial sums: BSQ/BIL small-integer cubes
//   spectral_convert   one thread per pixel, native samples -> float planes F[j][p] + stats + no-data flag
//   spectral_convert_rows  the same for BSQ/BIL small-integer cubes, V pixels per thread, vector loads
//   spectral_gemm_rows 32x32 tiles, F -> the GEMM operand X, one row per pixel (sid: [p'/P, log p'])
//   spectral_multi     one thread per pixel, F against references tiled through shared memory
//   spectral_select    one warp per pixel, GEMM scores -> top candidates -> exact rescoring -> reduction
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
template <int kType, int kMetric>
__global__ void __launch_bounds__(kBlock) spectral_one_ref(const typename Storage<kType>::type* __restrict__ chunk,
                                                           ChunkLayout layout, CubeConst cube, OneRef ref,
                                                           OutView out) {
  extern __shared__ double smem_d[];
  __shared__ Partial part[kOneRefGroups][kOneRefPixels];
  double* r1d = smem_d;  // the reference row in double (ed's integer fast path)
  float* r1 = reinterpret_cast<float*>(smem_d + ref.n);
  float* r2 = r1 + ref.n;
  int* bidx = reinterpret_cast<int*>(r2 + ref.n);
  constexpr bool kSmallInt = kOneRefIntegerPath<kType, kMetric>;
  // ed's split form (small integers, no scale): ri in the double row's place, rf in the second row's.
  const bool split = kSmallInt && kMetric == SPECTRAL_METRIC_ED && ref.ed_split && cube.scale == 1.0f;
  int* rint = reinterpret_cast<int*>(r1d);
  for (int j = threadIdx.x; j < ref.n; j += blockDim.x) {
    r1[j] = ref.v1[j];
    if (split) {
      rint[j] = ref.ri[j];
      r2[j] = ref.rf[j];
    } else {
      r1d[j] = (double)ref.v1[j];
      r2[j] = ref.v2 ? ref.v2[j] : 0.0f;
    }
    bidx[j] = ref.band_index[j];
  }
  __syncthreads();
  // Group g sums bands g, g+8, g+16, ... in order: the same partition, hence the same float sums, for
  // every layout, so that BSQ, BIL and BIP give identical bits.
  int slot, group;
  if (layout.ss == 1) {
    slot = threadIdx.x & 31;
    group = threadIdx.x >> 5;
  } else {
    slot = threadIdx.x / kOneRefGroups;
    group = threadIdx.x % kOneRefGroups;
  }
  const int p = blockIdx.x * kOneRefPixels + slot;
  Partial pt;
  spectral_stats_init(&pt.st);
  spectral_pair_init(&pt.acc);
  pt.ignored = 0;
  if (p < cube.npix) {
    const int yl = p / cube.samples, x = p - yl * cube.samples;
    const long long base = (long long)yl * layout.ls + (long long)x * layout.ss;
    bool done = false;
    if constexpr (kSmallInt) {
      if (cube.scale == 1.0f) {
        // Small integers, no scale: the same numbers as the generic loop, with fewer conversions (the
        // conversion units, not the memory, bound the generic loop). v = (float)iv exactly through the
        // 1.5 * 2^23 trick; sum p and sum p^2 are exact integers, so summing them as integers and
        // converting once gives the double the shared formula would; ed's (double)p - (double)r is the
        // same subtraction with (double)r precomputed.
        long long s1 = 0;
        unsigned long long s2 = 0;
#pragma unroll 4
        for (int j = group; j < ref.n; j += kOneRefGroups) {
          typename Storage<kType>::type raw = __ldg(chunk + base + (long long)bidx[j] * layout.bs);
          if (cube.big_endian) raw = byte_swap(raw);
          const int iv = kType == SPECTRAL_TYPE_I16 ? (int)(short)raw : (int)raw;
          const float v = __int_as_float(0x4B400000 + iv) - 12582912.0f;
          pt.ignored |= spectral_is_ignored(v, cube.has_ignore, cube.ignore);
          if constexpr (kMetric == SPECTRAL_METRIC_ED) {
            if (split) {  // sum q^2 exactly, q . rf in float (spectral_ed_d2_split), as spectral_one_ref_rows
              const int q = iv - rint[j];
              s2 += (unsigned long long)((long long)q * q);
              pt.acc.dot = __fmaf_rn(__int_as_float(0x4B400000 + q) - 12582912.0f, r2[j], pt.acc.dot);
            } else {
              const double d = (double)iv - r1d[j];
              pt.acc.d2 += d * d;
            }
          } else {
            s1 += iv;
            s2 += (unsigned long long)((unsigned)iv * (unsigned)iv);  // < 2^32, also for negative i16
            pt.acc.dot += v * r1[j];
          }
        }
        pt.st.sum_p = (double)s1;
        pt.st.sum_p2 = (double)s2;
        done = true;
      }
    }
    if (!done) {
#pragma unroll 4
      for (int j = group; j < ref.n; j += kOneRefGroups) {
        const float v = load_sample<kType>(chunk, base + (long long)bidx[j] * layout.bs, cube.big_endian);
        pt.ignored |= spectral_is_ignored(v, cube.has_ignore, cube.ignore);
        const float pv = v * cube.scale;
        spectral_stats_add(&pt.st, kMetric, pv);
        spectral_pair_add(&pt.acc, kMetric, pv, r1[j], r2[j]);
      }
    }
  }
  part[group][slot] = pt;
  __syncthreads();
  if (threadIdx.x >= kOneRefPixels) return;
  const int q = blockIdx.x * kOneRefPixels + threadIdx.x;
  if (q >= cube.npix) return;
  Partial t = part[0][threadIdx.x];
  for (int g = 1; g < kOneRefGroups; ++g) {
    const Partial& o = part[g][threadIdx.x];
    t.st.sum_p += o.st.sum_p;
    t.st.sum_p2 += o.st.sum_p2;
    t.st.sum_plp += o.st.sum_plp;
    t.acc.d2 += o.acc.d2;
    t.acc.dot += o.acc.dot;
    t.acc.dot2 += o.acc.dot2;
    t.ignored |= o.ignored;
  }
  float score;
  if (t.ignored)
    score = SPECTRASIFT_NAN_F;
  else if (split)
    score = spectral_finalise_ed(spectral_ed_d2_split(t.st.sum_p2, t.acc.dot, ref.rf2));
  else
    score = spectral_finalise(kMetric, &t.st, &t.acc, ref.n, ref.constant);
  if (out.mode == kOutThreshold && !spectral_passes(score, out.threshold, spectral_higher_is_better(kMetric)))
    score = SPECTRASIFT_NAN_F;
  write_single(out, q, score);
}

constexpr int kOneRefRowsBlock = 64;         ///< threads per block of spectral_one_ref_rows
constexpr int kOneRefRowsPixels = 4;         ///< pixels per thread (V) of spectral_one_ref_rows
constexpr int kOneRefRowsMaxBands = 32767;   ///< used bands it takes: sum p of u16 samples stays in an int

/// How spectral_one_ref_rows maps threads to pixels and loads their samples.
enum OneRefRowsForm : int {
  kRowsFlat = 0,  ///< BSQ, or BIL with samples % 4 == 0: thread t takes pixels 4t .. 4t+3, one 4-wide load per band
  kRowsLine = 1,  ///< BIL otherwise: ceil(samples / 4) threads per line, 4 / W loads of W samples per band
  kRowsBip = 2,   ///< BIP, every band used in order: a warp's 128 pixels through shared-memory stages (cp.async)
};

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

/// The PRMT selector that turns sample k of a 32-bit word (k < 4 / sample size, memory order) into an int:
/// the sample's bytes in the cube's byte order, then its sign (i16) or zeros (u8, u16).
__host__ __device__ constexpr unsigned sample_selector(int type, bool big_endian, int k) {
  if (type == SPECTRAL_TYPE_U8) return 0x4440u | unsigned(k);
  const unsigned lo = 2u * unsigned(k), hi = lo + 1u;
  const unsigned first = big_endian ? hi : lo, second = big_endian ? lo : hi;  // result bytes 0 and 1
  const unsigned ext = type == SPECTRAL_TYPE_I16 ? (0x8u | second) : 0x4u;     // bytes 2, 3: sign or zero
  return first | (second << 4) | (ext << 8) | (ext << 12);
}

__device__ __forceinline__ int prmt_sample(unsigned word, unsigned selector) {
  unsigned r;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(word), "r"(0u), "r"(selector));
  return (int)r;
}

/// kBytes consecutive bytes (1, 2, 4, 8 or 16, aligned) as 32-bit words, memory order (a short load sits in
/// the low bytes of word 0).
template <int kBytes> struct Words {
  unsigned w[(kBytes + 3) / 4];
};
template <int kBytes>
__device__ __forceinline__ Words<kBytes> load_words(const void* p) {
  Words<kBytes> r;
  if constexpr (kBytes == 16) {
    const uint4 v = __ldg(static_cast<const uint4*>(p));
    r.w[0] = v.x; r.w[1] = v.y; r.w[2] = v.z; r.w[3] = v.w;
  } else if constexpr (kBytes == 8) {
    const uint2 v = __ldg(static_cast<const uint2*>(p));
    r.w[0] = v.x; r.w[1] = v.y;
  } else if constexpr (kBytes == 4) {
    r.w[0] = __ldg(static_cast<const unsigned*>(p));
  } else if constexpr (kBytes == 2) {
    r.w[0] = __ldg(static_cast<const unsigned short*>(p));
  } else {
    r.w[0] = __ldg(static_cast<const unsigned char*>(p));
  }
  return r;
}

/// Byte offset of byte `b` of pixel `pl`'s two-round slab in a kRowsBip stage (kSlab bytes per pixel). With
/// 32-byte slabs the two 16-byte halves swap places for every other group of 4 pixels, so that the 8 lanes of
/// a 16-byte shared-memory load phase (pixels l .. l+7, same half) hit 8 different bank groups.
template <int kSlab>
__device__ __forceinline__ int bip_stage_offset(int pl, int b) {
  if constexpr (kSlab == 32) return pl * 32 + (b ^ (((pl >> 2) & 1) << 4));
  else return pl * kSlab + b;
}

/* spectral_one_ref_rows<kType, kMetric, kIgnore, kForm, W>: the one-reference pass of small-integer cubes
 * (u8/i16/u16) without a scale factor, for ed (split form, OneRef::ed_split), sam and scc; the caller checks
 * kOneRefIntegerPath, cube.scale == 1, n <= kOneRefRowsMaxBands and that the chunk has < 2^31 elements.
 * Launch: block 64, 4 pixels per thread, dynamic shared memory n * 12 bytes (the reference row, ed's integer
 * parts, the band indices) + kRowsBip's stages (one_ref_rows_stage_bytes); grid = ceil(npix / 256) blocks
 * (kRowsLine: lines * ceil(samples / 4) threads).
 *   kRowsFlat (layout.ss == 1): 4 CONSECUTIVE pixels, one aligned 4-wide load per band; the caller guarantees
 *     layout.bs % 4 == 0 (BSQ planes are padded to 8 samples) and, for BIL, samples % 4 == 0. A warp reads
 *     128 consecutive samples of a band.
 *   kRowsLine (BIL, samples % 4 != 0): a line's samples in units of 4, the last one partial; each unit's
 *     samples of a band come in 4 / W loads of W (W divides samples, so a load never crosses a row).
 *   kRowsBip (BIP, every band used in stored order, a pixel's bands a multiple of 16 bytes, so n % 8 == 0):
 *     a warp takes 128 consecutive pixels, lane l pixels l, l+32, l+64, l+96; the warp copies 16 bands of
 *     all of them at a time into a shared-memory stage (cp.async, two stages per warp: 16 KiB per block for
 *     i16), and each thread reads a round of 8 bands of one pixel (= the 8 band groups) in one 16-byte load.
 *     The copies carry the L2::128B prefetch hint: one copy instruction touches 32 bytes of each of 16
 *     pixels 448 bytes apart, and without the hint the L2 fetches those sectors from DRAM piecemeal
 *     (70 -> 61-64 us on the H200; 64B changes nothing and 256B is slower, 82 us: bench/NOTES.md step 36).
 * Each thread keeps spectral_one_ref's eight band-group partial sums (group g = bands g, g+8, ..., each summed
 * in band order) per pixel and merges them in group order, so its scores are bit-identical to
 * spectral_one_ref's (which the other types and layouts take): one partition for every layout.
 * The loop is issue-bound, so every instruction counts (~7 per element): the 8 loads of a round are issued
 * back to back with no predicate (the addresses of pixels past the end of a line or chunk, and of bands past
 * n in the last round, are clamped to valid ones and their values never used); a sample becomes an int with
 * one PRMT that also applies the byte order; floats of integers by the 1.5 * 2^23 trick; sums of p and p^2 as
 * integers with the 64-bit adds amortised; the no-data test only when the cube has an ignore value (kIgnore).
 * Registers are capped at 96 (kOneRefRowsMinBlocks) so that an AVIRIS-sized grid is resident at once. */
constexpr int kOneRefRowsMinBlocks = 10;
/// Dynamic shared memory of kRowsBip's stages per block (two per warp, 16 bands of 128 pixels each).
constexpr int one_ref_rows_stage_bytes(int sample_size) {
  return 2 * (kOneRefRowsBlock / 32) * 32 * kOneRefRowsPixels * 2 * kOneRefGroups * sample_size;
}
template <int kType, int kMetric, bool kIgnore, int kForm, int W = kOneRefRowsPixels>
__global__ void __launch_bounds__(kOneRefRowsBlock, kOneRefRowsMinBlocks) spectral_one_ref_rows(
    const typename Storage<kType>::type* __restrict__ chunk, ChunkLayout layout, CubeConst cube, OneRef ref,
    OutView out) {
  static_assert(kOneRefIntegerPath<kType, kMetric>, "spectral_one_ref_rows: small-integer cubes only");
  constexpr int V = kOneRefRowsPixels;
  static_assert(V % W == 0 && (kForm == kRowsLine || W == V), "spectral_one_ref_rows: W divides V (kRowsLine only)");
  using Raw = typename Storage<kType>::type;
  constexpr int G = kOneRefGroups;
  constexpr int kEs = int(sizeof(Raw));
  constexpr int kPerWord = 4 / kEs;  // samples per 32-bit word
  constexpr bool kEd = kMetric == SPECTRAL_METRIC_ED;
  constexpr bool kScc = kMetric == SPECTRAL_METRIC_SCC;
  extern __shared__ uint4 smem_v[];
  // kRowsBip: each warp's two stages first (16-byte aligned), then the reference.
  constexpr int kSlabBytes = 2 * G * kEs;  // kRowsBip: bytes of one pixel per stage (two rounds)
  constexpr int kStageBytes = kForm == kRowsBip ? 32 * V * kSlabBytes : 0;
  unsigned char* stages = reinterpret_cast<unsigned char*>(smem_v);
  float* r1 = reinterpret_cast<float*>(stages + 2 * (kOneRefRowsBlock / 32) * kStageBytes);  // sam/scc: the reference row; ed: its parts rf
  int* rint = reinterpret_cast<int*>(r1 + ref.n);        // ed: the integer parts ri
  int* bidx = rint + ref.n;
  for (int j = threadIdx.x; j < ref.n; j += blockDim.x) {
    r1[j] = kEd ? ref.rf[j] : ref.v1[j];
    rint[j] = kEd ? ref.ri[j] : 0;
    bidx[j] = ref.band_index[j];
  }
  __syncthreads();
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  int p0, nv;        // first pixel, valid pixels of this thread (kRowsLine: a multiple of W)
  unsigned base = 0; // element offset of the first pixel's band 0 in the chunk
  if constexpr (kForm == kRowsBip) {
    // A warp takes 32 V consecutive pixels, lane l pixels p0 + 32 v (coalesced writes, conflict-free stages).
    const int first = (t >> 5) * (32 * V);
    if (first >= cube.npix) return;  // whole warps only: the stages are filled by all 32 lanes
    p0 = first + (t & 31);
    nv = max(0, min(V, (cube.npix - p0 + 31) / 32));
  } else if constexpr (kForm == kRowsLine) {
    const int units = (cube.samples + V - 1) / V;
    const int yl = t / units, x0 = (t - yl * units) * V;
    p0 = yl * cube.samples + x0;
    if (p0 >= cube.npix) return;
    nv = min(V, cube.samples - x0);
    base = unsigned(yl) * unsigned(layout.ls) + unsigned(x0);
  } else {
    p0 = t * V;
    if (p0 >= cube.npix) return;
    nv = min(V, cube.npix - p0);
    const int yl = p0 / cube.samples, x = p0 - yl * cube.samples;
    base = unsigned(yl) * unsigned(layout.ls) + unsigned(x);
  }
  constexpr int kPixStep = kForm == kRowsBip ? 32 : 1;  // between the pixels of a thread
  const unsigned bs = unsigned(layout.bs), ss = unsigned(layout.ss);
  const int n = ref.n;
  unsigned sel[kPerWord];
#pragma unroll
  for (int k = 0; k < kPerWord; ++k)
    sel[k] = cube.big_endian ? sample_selector(kType, true, k) : sample_selector(kType, false, k);
  // Offsets of the loads of one band (kRowsLine: clamped inside the line).
  constexpr int kLoads = kForm == kRowsBip ? 1 : V / W;
  unsigned load_off[kLoads];
#pragma unroll
  for (int w = 0; w < kLoads; ++w) {
    if constexpr (kForm == kRowsLine) load_off[w] = base + unsigned(min(w * W, nv - W));
    else load_off[w] = base;  // one load; past the chunk's last pixel it reads plane padding or whole lines
  }
  // Squares summed in 32 bits before the 64-bit sum: u8 8 per word, i16 2 (2 * 2^30), u16 1.
  constexpr int kSqPerWord = kType == SPECTRAL_TYPE_U8 ? 8 : kType == SPECTRAL_TYPE_I16 ? 2 : 1;
  float dot[V][G];          // sam/scc: p . r; ed: q . rf
  unsigned long long s2[V]; // sam/scc: sum p^2; ed: sum q^2
  int s1[V];                // scc: sum p (|sum| < 32767 * 65535 < 2^31)
  int ignored = 0;          // bit v: pixel v
#pragma unroll
  for (int v = 0; v < V; ++v) {
    s1[v] = 0;
    s2[v] = 0;
#pragma unroll
    for (int g = 0; g < G; ++g) dot[v][g] = 0.0f;
  }
  // The float test v == ignore on exact integers: an ignore value that is not an integer never matches.
  int ign_int = 0;
  bool ign_is_int = false;
  if (kIgnore && fabsf(cube.ignore) < 2147483648.0f) {
    ign_int = (int)cube.ignore;
    ign_is_int = (float)ign_int == cube.ignore;
  }
  // One round: bands j0 .. j0+7 (kFull: all below n) of the V pixels (kRowsBip: round r of `stage`).
  auto round = [&](int j0, auto full, const unsigned char* stage, int r) {
    constexpr bool kFull = decltype(full)::value;
    constexpr int kBytes = (kForm == kRowsBip ? G : W) * kEs;
    Words<kBytes> raw[kForm == kRowsBip ? V : G][kForm == kRowsBip ? 1 : kLoads];
    if constexpr (kForm == kRowsBip) {
#pragma unroll
      for (int v = 0; v < V; ++v) {
        const int pl = (t & 31) + 32 * v;  // pixel of the warp
        raw[v][0] = *reinterpret_cast<const Words<kBytes>*>(stage + bip_stage_offset<kSlabBytes>(pl, r * kBytes));
      }
    } else {
#pragma unroll
      for (int e = 0; e < G; ++e) {
        const unsigned boff = unsigned(bidx[kFull ? j0 + e : min(j0 + e, n - 1)]) * bs;
#pragma unroll
        for (int w = 0; w < kLoads; ++w) raw[e][w] = load_words<kBytes>(chunk + (load_off[w] + boff));
      }
    }
    unsigned s2r[V];  // sums of kSqPerWord squares (sam/scc)
#pragma unroll
    for (int v = 0; v < V; ++v) s2r[v] = 0;
#pragma unroll
    for (int e = 0; e < G; ++e) {
      if (!kFull && j0 + e >= n) break;
      const float rf = r1[j0 + e];
      [[maybe_unused]] const int ri = kEd ? rint[j0 + e] : 0;
#pragma unroll
      for (int v = 0; v < V; ++v) {
        // Sample (band j0 + e, pixel v): its word and position.
        const int i = kForm == kRowsBip ? e : v % W;
        const unsigned word = kForm == kRowsBip ? raw[v][0].w[i / kPerWord] : raw[e][v / W].w[i / kPerWord];
        const int iv = prmt_sample(word, sel[i % kPerWord]);
        if constexpr (kIgnore) ignored |= (ign_is_int && iv == ign_int) << v;  // == the float test: iv is exact
        if constexpr (kEd) {
          const int q = iv - ri;  // |q| < 2^22 (spectral_ed_split_ok): exact as float below
          s2[v] += (unsigned long long)((long long)q * q);
          dot[v][e] = __fmaf_rn(__int_as_float(0x4B400000 + q) - 12582912.0f, rf, dot[v][e]);
        } else {
          const float f = __int_as_float(0x4B400000 + iv) - 12582912.0f;  // (float)iv, exactly
          if constexpr (kScc) s1[v] += iv;
          s2r[v] += (unsigned)iv * (unsigned)iv;  // iv^2 < 2^32, also for negative i16
          if ((e + 1) % kSqPerWord == 0) {
            s2[v] += s2r[v];
            s2r[v] = 0;
          }
          dot[v][e] += f * rf;
        }
      }
    }
    if constexpr (!kEd) {
#pragma unroll
      for (int v = 0; v < V; ++v) s2[v] += s2r[v];
    }
  };
  if constexpr (kForm == kRowsBip) {
    // Stages of two rounds (16 bands) for the warp's 32 V pixels, double-buffered: cp.async copies whole
    // 16-byte pieces, two lanes per pixel when a stage holds 32 bytes of it, so every sector read is used
    // whole (a thread loading its own pixels would touch 32 sectors per instruction and use half of each).
    const int lane = t & 31, first = p0 - lane;
    unsigned char* my = stages + 2 * (threadIdx.x >> 5) * kStageBytes;
    constexpr int kPieces = kSlabBytes / 16;  // 16-byte pieces per pixel per stage
    constexpr int kPerLane = 32 * V * kPieces / 32;
    const int slabs = (n + 2 * G - 1) / (2 * G);
    auto issue = [&](int sl) {
      unsigned char* stage = my + (sl & 1) * kStageBytes;
#pragma unroll
      for (int i = 0; i < kPerLane; ++i) {
        const int c = i * 32 + lane, pl = c / kPieces, h = c % kPieces;
        const int band0 = sl * 2 * G + h * (16 / kEs);
        const bool ok = first + pl < cube.npix && band0 < n;
        const Raw* src = chunk + (ok ? unsigned(first + pl) * ss + unsigned(band0) : 0u);
        cp_async16_or_zero_line(stage + bip_stage_offset<kSlabBytes>(pl, h * 16), src, ok);
      }
      cp_async_commit();
    };
    issue(0);
    for (int sl = 0; sl < slabs; ++sl) {
      if (sl + 1 < slabs) issue(sl + 1);
      else cp_async_commit();  // an empty group: "all but the newest" is then always this stage
      cp_async_wait<1>();
      __syncwarp();
      const unsigned char* stage = my + (sl & 1) * kStageBytes;
      round(sl * 2 * G, std::true_type{}, stage, 0);
      if (sl * 2 * G + G < n) round(sl * 2 * G + G, std::true_type{}, stage, 1);  // n % 8 == 0 (caller)
      __syncwarp();  // the stage is refilled two slabs later
    }
  } else {
    int j0 = 0;
    for (; j0 + G <= n; j0 += G) round(j0, std::true_type{}, nullptr, 0);
    if (j0 < n) round(j0, std::false_type{}, nullptr, 0);
  }
  const int higher = spectral_higher_is_better(kMetric);
#pragma unroll
  for (int v = 0; v < V; ++v) {
    if (v >= nv) break;
    // Merge in group order, exactly as spectral_one_ref does.
    float d = dot[v][0];
#pragma unroll
    for (int g = 1; g < G; ++g) d += dot[v][g];
    float score;
    if (((ignored >> v) & 1)) {
      score = SPECTRASIFT_NAN_F;
    } else if constexpr (kEd) {
      score = spectral_finalise_ed(spectral_ed_d2_split((double)s2[v], d, ref.rf2));
    } else {
      SpectralPixelStats st;
      spectral_stats_init(&st);
      SpectralPairAcc acc;
      spectral_pair_init(&acc);
      st.sum_p = (double)s1[v];
      st.sum_p2 = (double)s2[v];
      acc.dot = d;
      score = spectral_finalise(kMetric, &st, &acc, n, ref.constant);
    }
    if (out.mode == kOutThreshold && !spectral_passes(score, out.threshold, higher)) score = SPECTRASIFT_NAN_F;
    write_single(out, p0 + kPixStep * v, score);
  }
}

/// V consecutive stored samples, loaded with one vector instruction (V * sizeof(Raw) = 2..16 bytes).
template <class Raw, int V> struct alignas(V * sizeof(Raw)) SampleVec {
  Raw v[V];
};

/// Per-pixel products of spectral_convert, for the multi-reference paths.
struct PixelPlanes {
  float* f = nullptr;            ///< F[j * pitch + p]: scaled value of used band j
  long long pitch = 0;           ///< elements between planes (>= npix, a multiple of 32 for aligned GEMM rows)
  double* sum_p = nullptr;       ///< SpectralPixelStats per pixel
  double* sum_p2 = nullptr;
  double* sum_plp = nullptr;
  unsigned char* valid = nullptr;  ///< 0 = no data (ignore value in a used band)
};

/* spectral_convert<kType>: native chunk -> float planes, statistics and no-data flags; with `absmax`
 * (not null) also the largest finite |value| of the chunk, as float bits through atomicMax (the maximum
 * does not depend on the order). Launch: grid ceil(npix / 256), block 256, one thread per pixel; no
 * shared memory. Writes are coalesced (plane j is contiguous in p). */
template <int kType>
__global__ void __launch_bounds__(kBlock) spectral_convert(const typename Storage<kType>::type* __restrict__ chunk,
                                                           ChunkLayout layout, CubeConst cube,
                                                           const int* __restrict__ band_index, int n, int metric,
                                                           PixelPlanes planes, unsigned* absmax) {
  const int p = blockIdx.x * blockDim.x + threadIdx.x;
  if (p >= cube.npix) return;
  const int yl = p / cube.samples, x = p - yl * cube.samples;
  const long long base = (long long)yl * layout.ls + (long long)x * layout.ss;
  SpectralPixelStats st;
  spectral_stats_init(&st);
  int ignored = 0;
  float amax = 0.0f;
#pragma unroll 4
  for (int j = 0; j < n; ++j) {
    const float v = load_sample<kType>(chunk, base + (long long)__ldg(band_index + j) * layout.bs, cube.big_endian);
    ignored |= spectral_is_ignored(v, cube.has_ignore, cube.ignore);
    const float pv = v * cube.scale;
    planes.f[(long long)j * planes.pitch + p] = pv;
    spectral_stats_add(&st, metric, pv);
    const float a = fabsf(pv);
    if (a <= 3.402823466e38f) amax = fmaxf(amax, a);  // finite values only
  }
  if (absmax && amax > 0.0f) atomicMax(absmax, __float_as_uint(amax));
  planes.sum_p[p] = st.sum_p;
  planes.sum_p2[p] = st.sum_p2;
  planes.sum_plp[p] = st.sum_plp;
  planes.valid[p] = ignored ? 0 : 1;
}

/* spectral_convert_rows<kType, V, kIgnore>: spectral_convert for BSQ/BIL chunks of small-integer cubes
 * without a scale factor, for ed/sam/scc (the caller checks; sid needs logarithms). Same outputs, bit for
 * bit: the float of an integer sample is exact, and sum p / sum p^2 are exact integers (summed as such).
 * Launch: grid ceil(npix / (256 V)), block 256, V consecutive pixels per thread (alignment as in
 * spectral_one_ref_rows: layout.bs % V == 0, BIL samples % V == 0), one vector load per band and one
 * V-float store per plane (planes.pitch is a multiple of 32). */
template <int kType, int V, bool kIgnore>
__global__ void __launch_bounds__(kBlock) spectral_convert_rows(const typename Storage<kType>::type* __restrict__ chunk,
                                                                ChunkLayout layout, CubeConst cube,
                                                                const int* __restrict__ band_index, int n,
                                                                PixelPlanes planes, unsigned* absmax) {
  using Raw = typename Storage<kType>::type;
  using Vec = SampleVec<Raw, V>;
  const int p0 = (blockIdx.x * blockDim.x + threadIdx.x) * V;
  if (p0 >= cube.npix) return;
  const int yl = p0 / cube.samples, x = p0 - yl * cube.samples;
  const Raw* px = chunk + (long long)yl * layout.ls + (long long)x * layout.ss;
  long long s1[V];
  unsigned long long s2[V];
  int ignored = 0, amax = 0;
  int ign_int = 0;
  bool ign_is_int = false;
  if (kIgnore && fabsf(cube.ignore) < 2147483648.0f) {
    ign_int = (int)cube.ignore;
    ign_is_int = (float)ign_int == cube.ignore;
  }
#pragma unroll
  for (int v = 0; v < V; ++v) {
    s1[v] = 0;
    s2[v] = 0;
  }
#pragma unroll 4
  for (int j = 0; j < n; ++j) {
    const Vec raw = *reinterpret_cast<const Vec*>(px + (long long)__ldg(band_index + j) * layout.bs);
    float f[V];
#pragma unroll
    for (int v = 0; v < V; ++v) {
      Raw rv = raw.v[v];
      if (cube.big_endian) rv = byte_swap(rv);
      const int iv = kType == SPECTRAL_TYPE_I16 ? (int)(short)rv : (int)rv;
      f[v] = __int_as_float(0x4B400000 + iv) - 12582912.0f;  // (float)iv, exactly
      if constexpr (kIgnore) ignored |= (ign_is_int && iv == ign_int) << v;
      s1[v] += iv;
      s2[v] += (unsigned long long)((unsigned)iv * (unsigned)iv);
      amax = max(amax, abs(iv));
    }
    float* dst = planes.f + (long long)j * planes.pitch + p0;
    if constexpr (V == 4) *reinterpret_cast<float4*>(dst) = make_float4(f[0], f[1], f[2], f[3]);
    else if constexpr (V == 2) *reinterpret_cast<float2*>(dst) = make_float2(f[0], f[1]);
    else dst[0] = f[0];
  }
#pragma unroll
  for (int v = 0; v < V; ++v) {
    const int p = p0 + v;
    if (p >= cube.npix) break;
    planes.sum_p[p] = (double)s1[v];
    planes.sum_p2[p] = (double)s2[v];
    planes.sum_plp[p] = 0.0;
    planes.valid[p] = ((ignored >> v) & 1) ? 0 : 1;
  }
  if (absmax && amax > 0) atomicMax(absmax, __float_as_uint((float)amax));
}

/* spectral_gemm_rows: the GEMM operand X, one row of kpad floats per pixel (pixel-major, so that the
 * product is a "TN" GEMM with the pixels' rows contiguous): ed/sam/scc: the pixel's values; sid:
 * [p'_j / P (j < n), log p'_j] (see numeric/spectral_metrics.h, sid without a second pass); zeros up
 * to kpad. Launch: grid (ceil(npix / 32), ceil(kpad / 32)), block (32, 8): a 32 x 32 tile goes through
 * shared memory so that both the plane reads and the row writes are coalesced. */
__global__ void __launch_bounds__(kBlock) spectral_gemm_rows(PixelPlanes planes, int npix, int n, int kdim, int kpad,
                                                             int sid, float* __restrict__ x) {
  __shared__ float tile[32][33];
  const int p0 = blockIdx.x * 32, c0 = blockIdx.y * 32;
  for (int i = threadIdx.y; i < 32; i += 8) {
    const int c = c0 + i, p = p0 + threadIdx.x;
    float v = 0.0f;
    if (p < npix && c < kdim) {
      if (!sid) {
        v = planes.f[(long long)c * planes.pitch + p];
      } else if (c < n) {
        v = (float)((double)spectral_sid_clamp(planes.f[(long long)c * planes.pitch + p]) / planes.sum_p[p]);
      } else {
        v = spectral_sid_log(spectral_sid_clamp(planes.f[(long long)(c - n) * planes.pitch + p]));
      }
    }
    tile[i][threadIdx.x] = v;
  }
  __syncthreads();
  for (int i = threadIdx.y; i < 32; i += 8) {
    const int p = p0 + i, c = c0 + threadIdx.x;
    if (p < npix && c < kpad) x[(long long)p * kpad + c] = tile[threadIdx.x][i];
  }
}

/// References of the multi-reference kernels (device arrays of PreparedReferences).
struct RefSet {
  const float* v1 = nullptr;        ///< count * n
  const float* v2 = nullptr;        ///< count * n (sid) or nullptr
  const double* constant = nullptr; ///< count
  int count = 0;
  int n = 0;
};

__device__ __forceinline__ void load_stats(const PixelPlanes& planes, int p, SpectralPixelStats* st) {
  st->sum_p = planes.sum_p[p];
  st->sum_p2 = planes.sum_p2[p];
  st->sum_plp = planes.sum_plp[p];
}

/// Inserts (score, idx) into the k-list of pixel p kept in the output bands (best first); the same rule
/// as spectral_topk_insert of numeric/spectral_metrics.h, on strided storage.
__device__ __forceinline__ void topk_insert_strided(const OutView& out, int p, float score, int idx, int higher) {
  if (score != score) return;
  float* s = out.score + p;
  int* ix = out.index + p;
  const long long st = out.stride;
  const int k = out.k;
  if (ix[(k - 1) * st] >= 0 && !spectral_better(score, idx, s[(k - 1) * st], ix[(k - 1) * st], higher)) return;
  int i = k - 1;
  while (i > 0 && (ix[(i - 1) * st] < 0 || spectral_better(score, idx, s[(i - 1) * st], ix[(i - 1) * st], higher))) {
    s[i * st] = s[(i - 1) * st];
    ix[i * st] = ix[(i - 1) * st];
    --i;
  }
  s[i * st] = score;
  ix[i * st] = idx;
}

/* spectral_multi<kMetric>: every pixel against every reference, exactly (the single-pass formulas),
 * for kAll and for small reference counts. Launch: grid ceil(npix / 256), block 256, one thread per
 * pixel; the references pass through shared memory kMultiTile at a time (dynamic shared memory
 * 2 * kMultiTile * n floats). A thread keeps kMultiTile accumulators and reads its pixel's planes once
 * per tile (coalesced). Outputs: kAll writes every score band; kBest/kThreshold keep the running best in
 * registers (references visited in increasing index, ties to the lower index); kTopK inserts into the
 * output bands, which the host initialised to (NaN, -1). */
template <int kMetric>
__global__ void __launch_bounds__(kBlock) spectral_multi(PixelPlanes planes, int npix, RefSet refs, OutView out) {
  extern __shared__ float smem[];
  float* t1 = smem;
  float* t2 = smem + kMultiTile * refs.n;
  const int p = blockIdx.x * blockDim.x + threadIdx.x;
  const bool live = p < npix;
  const int higher = spectral_higher_is_better(kMetric);
  SpectralPixelStats st;
  spectral_stats_init(&st);
  bool valid = false;
  if (live) {
    load_stats(planes, p, &st);
    valid = planes.valid[p] != 0;
  }
  float best_s = SPECTRASIFT_NAN_F;
  int best_i = -1;
  for (int r0 = 0; r0 < refs.count; r0 += kMultiTile) {
    const int tile = min(kMultiTile, refs.count - r0);
    __syncthreads();  // the previous tile is no longer read
    for (int e = threadIdx.x; e < tile * refs.n; e += blockDim.x) {
      t1[e] = refs.v1[(long long)r0 * refs.n + e];
      t2[e] = refs.v2 ? refs.v2[(long long)r0 * refs.n + e] : 0.0f;
    }
    __syncthreads();
    if (!live) continue;
    SpectralPairAcc acc[kMultiTile];
#pragma unroll
    for (int t = 0; t < kMultiTile; ++t) spectral_pair_init(&acc[t]);
    for (int j = 0; j < refs.n; ++j) {
      const float pv = planes.f[(long long)j * planes.pitch + p];
#pragma unroll
      for (int t = 0; t < kMultiTile; ++t) {
        if (t < tile) spectral_pair_add(&acc[t], kMetric, pv, t1[t * refs.n + j], t2[t * refs.n + j]);
      }
    }
#pragma unroll
    for (int t = 0; t < kMultiTile; ++t) {
      if (t >= tile) continue;
      const int r = r0 + t;
      const float s = valid ? spectral_finalise(kMetric, &st, &acc[t], refs.n, refs.constant[r]) : SPECTRASIFT_NAN_F;
      if (out.mode == kOutAll) {
        out.score[(long long)r * out.stride + p] = s;
      } else if (out.mode == kOutTopK) {
        topk_insert_strided(out, p, s, r, higher);
      } else if (spectral_better(s, r, best_s, best_i, higher)) {
        best_s = s;
        best_i = r;
      }
    }
  }
  if (!live) return;
  if (out.mode == kOutBest || out.mode == kOutThreshold) {
    if (out.mode == kOutThreshold && !spectral_passes(best_s, out.threshold, higher)) {
      best_s = SPECTRASIFT_NAN_F;
      best_i = -1;
    }
    if (best_s != best_s) best_i = -1;
    out.score[p] = best_s;
    out.index[p] = best_i;
  }
}

// ---- many references: GEMM candidates, exact rescoring -------------------------------------------

/// (key, index) ordering of the GEMM stage: higher key first, then lower index; a NaN key (NaN data) after
/// every number; index -1 = empty, last. A strict total order, so that a warp-wide butterfly gives every
/// lane the same winner (the loops that depend on it stay uniform).
__device__ __forceinline__ bool key_before(float ka, int ia, float kb, int ib) {
  if (ia < 0) return false;
  if (ib < 0) return true;
  const bool na = ka != ka, nb = kb != kb;
  if (na != nb) return nb;
  if (na || ka == kb) return ia < ib;
  return ka > kb;
}

constexpr int kLaneList = 8;  ///< best keys kept per lane while scanning (the warp merges them)

/// Inserts (key, idx) into a lane's sorted list (registers: compile-time indices only).
__device__ __forceinline__ void lane_insert(float (&ks)[kLaneList], int (&ki)[kLaneList], float key, int idx) {
  if (!key_before(key, idx, ks[kLaneList - 1], ki[kLaneList - 1])) return;
  ks[kLaneList - 1] = key;
  ki[kLaneList - 1] = idx;
#pragma unroll
  for (int i = kLaneList - 1; i > 0; --i) {
    if (key_before(ks[i], ki[i], ks[i - 1], ki[i - 1])) {
      const float tk = ks[i]; ks[i] = ks[i - 1]; ks[i - 1] = tk;
      const int ti = ki[i]; ki[i] = ki[i - 1]; ki[i - 1] = ti;
    }
  }
}

/// Rows of the exact rescoring: the pixel's values (pixel-major X rows for ed/sam/scc) and the reference
/// rows padded to a multiple of 4 floats, so that both are read 16 bytes at a time.
struct RescoreRows {
  const float* x = nullptr;   ///< X rows (kpad floats per pixel); nullptr for sid (planes are used)
  int kpad = 0;
  const float* v1 = nullptr;  ///< count rows of npad floats
  const float* v2 = nullptr;  ///< sid: count rows of npad floats
  int npad = 0;
  /// Candidates whose GEMM key is below the best key by more than margin_a * |x| + margin_b cannot be the
  /// best (the GEMM's rounding error bound, see spectral.cu) and are not rescored; margin_a < 0: rescore all.
  float margin_a = -1.0f;
  float margin_b = 0.0f;
};

/* spectral_select<kMetric>: the epilogue of the many-reference path. C holds the GEMM keys' dot part for
 * each pixel of a sub-chunk (column-major R x nsub, C[r + q * ldc]); key_r = C + w[r] orders the
 * references like the metric, higher = better (see spectral.cu). Launch: grid ceil(nsub / 8), block
 * 256 = 8 warps, one warp per pixel, no shared memory, no atomics.
 *   scan:    lane l reads references 4l..4l+3, +128, ... (16-byte loads) and keeps its kLaneList best;
 *   merge:   up to kCandidates rounds of a warp-wide best head: candidate i goes to lane i; for
 *            best/threshold the rounds stop at a key below the best by more than the GEMM's error bound;
 *   rescore: each lane rescores its candidate EXACTLY with the single-pass formulas (bands in order,
 *            as the CPU backend), reading 16 bytes of pixel and reference at a time;
 *   reduce:  best / top-k / threshold on the exact scores with spectral_better (ties: lower index). */
template <int kMetric>
__global__ void __launch_bounds__(kBlock) spectral_select(const float* __restrict__ c, int ldc,
                                                          const float* __restrict__ w, PixelPlanes planes, int npix,
                                                          int q0, int nsub, RefSet refs, RescoreRows rows,
                                                          OutView out) {
  const int lane = threadIdx.x & 31;
  const int q = blockIdx.x * (kBlock / 32) + (threadIdx.x >> 5);
  if (q >= nsub) return;  // whole warps leave together
  const int p = q0 + q;   // pixel of the chunk
  const int higher = spectral_higher_is_better(kMetric);
  const bool valid = planes.valid[p] != 0;

  float ks[kLaneList];
  int ki[kLaneList];
#pragma unroll
  for (int i = 0; i < kLaneList; ++i) {
    ks[i] = 0.0f;
    ki[i] = -1;
  }
  if (valid) {
    const float* col = c + (long long)q * ldc;
    const int R = refs.count;
    // Two 16-byte loads in flight per lane before they are used.
    for (int r0 = 4 * lane; r0 < R; r0 += 256) {
      const float4 a = *reinterpret_cast<const float4*>(col + r0);
      const int r1 = r0 + 128;
      float4 b = make_float4(0.f, 0.f, 0.f, 0.f);
      if (r1 < R) b = *reinterpret_cast<const float4*>(col + r1);
      const float av[4] = {a.x, a.y, a.z, a.w};
      const float bv[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
      for (int e = 0; e < 4; ++e)
        if (r0 + e < R) lane_insert(ks, ki, av[e] + __ldg(w + r0 + e), r0 + e);
#pragma unroll
      for (int e = 0; e < 4; ++e)
        if (r1 + e < R) lane_insert(ks, ki, bv[e] + __ldg(w + r1 + e), r1 + e);
    }
  }
  // Merge: kCandidates rounds of a warp-wide "best head"; the owner pops its head. For best/threshold the
  // merge stops at the first key below the best key by more than the GEMM's error margin: no later
  // candidate can win.
  SpectralPixelStats st;
  load_stats(planes, p, &st);
  const bool prune = rows.margin_a >= 0.0f && out.mode != kOutTopK;
  const float margin = prune ? rows.margin_a * (float)sqrt(st.sum_p2) + rows.margin_b : 0.0f;
  float best_key = 0.0f;
  int my_cand = -1;
#pragma unroll 1
  for (int round = 0; round < kCandidates; ++round) {
    float bk = ks[0];
    int bi = ki[0];
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
      const float ok = __shfl_xor_sync(0xffffffffu, bk, off);
      const int oi = __shfl_xor_sync(0xffffffffu, bi, off);
      if (key_before(ok, oi, bk, bi)) { bk = ok; bi = oi; }
    }
    if (bi < 0) break;  // uniform: every lane is empty
    if (round == 0) best_key = bk;
    else if (prune && bk < best_key - margin) break;  // uniform: bk is the warp's
    if (lane == round) my_cand = bi;
    if (ki[0] == bi) {
#pragma unroll
      for (int i = 0; i < kLaneList - 1; ++i) { ks[i] = ks[i + 1]; ki[i] = ki[i + 1]; }
      ks[kLaneList - 1] = 0.0f;
      ki[kLaneList - 1] = -1;
    }
  }
  // Exact rescoring of one candidate per lane (for best/threshold, only the candidates within the GEMM's
  // error margin of the best key: the others cannot win).
  float score = SPECTRASIFT_NAN_F;
  if (my_cand >= 0) {
    SpectralPairAcc acc;
    spectral_pair_init(&acc);
    const int n = refs.n;
    if (rows.x) {
      const float* xp = rows.x + (long long)p * rows.kpad;
      const float* vp = rows.v1 + (long long)my_cand * rows.npad;
      const int n4 = n & ~3;
#pragma unroll 2
      for (int j = 0; j < n4; j += 4) {
        const float4 xv = *reinterpret_cast<const float4*>(xp + j);
        const float4 rv = __ldg(reinterpret_cast<const float4*>(vp + j));
        spectral_pair_add(&acc, kMetric, xv.x, rv.x, 0.0f);
        spectral_pair_add(&acc, kMetric, xv.y, rv.y, 0.0f);
        spectral_pair_add(&acc, kMetric, xv.z, rv.z, 0.0f);
        spectral_pair_add(&acc, kMetric, xv.w, rv.w, 0.0f);
      }
      for (int j = n4; j < n; ++j) spectral_pair_add(&acc, kMetric, xp[j], __ldg(vp + j), 0.0f);
    } else {
      const float* v1 = rows.v1 + (long long)my_cand * rows.npad;
      const float* v2 = rows.v2 + (long long)my_cand * rows.npad;
#pragma unroll 4
      for (int j = 0; j < n; ++j)
        spectral_pair_add(&acc, kMetric, planes.f[(long long)j * planes.pitch + p], __ldg(v1 + j), __ldg(v2 + j));
    }
    score = spectral_finalise(kMetric, &st, &acc, n, refs.constant[my_cand]);
  }
  int idx = (score == score) ? my_cand : -1;
  // Reduction on the exact scores: k rounds of a warp-wide spectral_better; the winner drops out.
  const int rounds = out.mode == kOutTopK ? out.k : 1;
  for (int t = 0; t < rounds; ++t) {
    float bs = score;
    int bi = idx;
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
      const float os = __shfl_xor_sync(0xffffffffu, bs, off);
      const int oi = __shfl_xor_sync(0xffffffffu, bi, off);
      if (oi >= 0 && (bi < 0 || spectral_better(os, oi, bs, bi, higher))) { bs = os; bi = oi; }
    }
    if (bi >= 0 && idx == bi) { score = SPECTRASIFT_NAN_F; idx = -1; }
    if (lane == 0) {
      if (bi < 0) bs = SPECTRASIFT_NAN_F;
      if (out.mode == kOutThreshold && !spectral_passes(bs, out.threshold, higher)) {
        bs = SPECTRASIFT_NAN_F;
        bi = -1;
      }
      out.score[(long long)t * out.stride + p] = bs;
      out.index[(long long)t * out.stride + p] = bi;
    }
  }
}

}  // namespace spectrasift::cuda::kernels

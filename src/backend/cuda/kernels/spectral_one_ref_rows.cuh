// Spectral matching against one reference on small-integer BSQ/BIL/BIP cubes, several pixels per thread with
// vector loads (kernel family spectral_one_ref_rows; the same bits as spectral_one_ref).
#pragma once

#include "backend/cuda/kernels/spectral_common.cuh"

namespace spectrasift::cuda::kernels {

constexpr int kOneRefRowsBlock = 64;         ///< threads per block of spectral_one_ref_rows
constexpr int kOneRefRowsPixels = 4;         ///< pixels per thread (V) of spectral_one_ref_rows
constexpr int kOneRefRowsMaxBands = 32767;   ///< used bands it takes: sum p of u16 samples stays in an int

/// How spectral_one_ref_rows maps threads to pixels and loads their samples.
enum OneRefRowsForm : int {
  kRowsFlat = 0,  ///< BSQ, or BIL with samples % 4 == 0: thread t takes pixels 4t .. 4t+3, one 4-wide load per band
  kRowsLine = 1,  ///< BIL otherwise: ceil(samples / 4) threads per line, 4 / W loads of W samples per band
  kRowsBip = 2,   ///< BIP, every band used in order: a warp's 128 pixels through shared-memory stages (cp.async)
};

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
 *     (70 -> 61-64 us on the H200; 64B changes nothing and 256B is slower, 82 us: docs/performance/spectral.md, 'One reference, BIP staging').
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

}  // namespace spectrasift::cuda::kernels

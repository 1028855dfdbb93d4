// Best of many references on tensor cores (FP16 operands, FP32 accumulation) with the candidate search
// fused into the GEMM's epilogue, then an exact rescoring of the few candidates (issue 4, "best of 3000").
//
//   spectral_best_fp16    pixels x references GEMM keys on mma.sync, per-pixel best keys kept in
//                         registers (no score block is ever written), candidates within the error bound
//   spectral_rescore      exact single-pass scores of the candidates, reduction to best / threshold
//
// Why FP16 and not TF32: both keep 11 significant bits, so the rounding error bound (and the margin of
// spectral_plan.cu) is the same, but FP16 operands are half the bytes and mma.sync runs them at twice the
// rate. The range is handled by powers of two: the pixels are scaled by s_x (from the chunk's largest
// |value|, computed by spectral_convert) and the centred references by s_a, so that the largest of each
// lies in [2^14, 2^15); keys are compared in accumulator units, acc + w_r s_x s_a (an exact rescaling).
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>

#include "backend/cuda/kernels/spectral_select.cuh"

namespace spectrasift::cuda::kernels {

constexpr int kBestTileM = 128;     ///< pixels per block (resident in shared memory for the whole reference loop)
constexpr int kBestTileN = 128;     ///< references per streamed tile
constexpr int kBestHolders = 16;    ///< threads holding keys of one pixel (4 warps along N x 4 lanes of a quad)
constexpr int kBestCandidates = 8;  ///< candidates rescored per pixel (the best keys within the margin; 16 cost
                                    ///< +0.6 ms on the H200 benchmark and left the agreement with FP32 unchanged)
constexpr int kBestRowPad = 8;      ///< halves of padding per shared-memory row (ldmatrix without bank conflicts)
constexpr int kBestThreads = 512;   ///< 16 warps: a 4 x 4 grid of 32 pixels x 32 references

/// Operands of spectral_best_fp16 prepared by the host (spectral_plan.cu) and by spectral_convert.
struct BestFp16Args {
  const __half* refs = nullptr;  ///< rpad rows of kh halves: centred references * s_a, zero rows after count
  const float* w = nullptr;      ///< rpad key offsets, -inf after count
  int count = 0;                 ///< references
  int rpad = 0;                  ///< count rounded up to kBestTileN
  int kh = 0;                    ///< GEMM inner dimension (used bands) rounded up to 16
  int ref_exp = 0;               ///< s_a = 2^ref_exp
  int key_bits = 0;              ///< spectral_best_wgmma: low key bits replaced by the key's position
  unsigned* absmax = nullptr;    ///< bits of the chunk's largest finite |value| (spectral_convert)
  float margin_a = 0, margin_b = 0;  ///< the GEMM error bound (see spectral_plan.cu): margin_a |x| + margin_b
  float margin_s = 0;                ///< + margin_s / s_x: subnormal FP16 pixel values
  int* cand = nullptr;       ///< kBestCandidates per chunk pixel
  int* ncand = nullptr;      ///< candidates per pixel (0: no reference can be ranked, NaN result)
  /// Pixels of the chunk with more keys within the margin than kBestCandidates (diagnostics: absmax + 1,
  /// reset with it; only the best kBestCandidates keys were rescored).
  unsigned* overflows = nullptr;
};

/// Dynamic shared memory of spectral_best_fp16 for kh halves per row.
inline std::size_t best_fp16_smem(int kh) {
  const std::size_t tiles = std::size_t(kBestTileM + 2 * kBestTileN) * std::size_t(kh + kBestRowPad) * 2;
  const std::size_t merge = std::size_t(kBestTileM) * ((2 * kBestHolders + 1) * 8);
  return tiles > merge ? tiles : merge;
}

/// 2^e as a float, e clamped to the normal range.
__device__ __forceinline__ float pow2f(int e) { return __int_as_float((max(-126, min(127, e)) + 127) << 23); }

/// s_x = 2^x_exp with the chunk's largest |value| * s_x in [2^14, 2^15) (1 for an all-zero chunk).
__device__ __forceinline__ int pixel_exp(const unsigned* absmax) {
  const float m = __uint_as_float(*absmax);
  if (!(m > 0.0f)) return 0;
  int e = 0;
  frexpf(m, &e);  // m = f 2^e, f in [0.5, 1)
  return max(-100, min(100, 15 - e));
}

/// Whether chunk pixel p can be ranked at all, and its candidates' margin (times the accumulator scale in the kernels):
/// no-data pixels, sam without a positive finite norm and scc without a positive finite variance score NaN
/// against every reference and get no candidates.
template <int kMetric>
__device__ __forceinline__ bool fused_pixel_live(const PixelPlanes& planes, int p, int n, const BestFp16Args& args,
                                                 float sx, float* margin) {
  SpectralPixelStats st;
  load_stats(planes, p, &st);
  *margin = args.margin_a * (float)sqrt(st.sum_p2) + args.margin_b + args.margin_s / sx;
  if (planes.valid[p] == 0) return false;
  if (kMetric == SPECTRAL_METRIC_SAM && !(st.sum_p2 > 0.0 && spectral_is_finite(st.sum_p2))) return false;
  if (kMetric == SPECTRAL_METRIC_SCC) {
    const double var_n = st.sum_p2 - st.sum_p * st.sum_p / (double)n;
    if (!(var_n > 0.0) || !spectral_is_finite(var_n)) return false;
  }
  return true;
}

__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}
/// D = A (16x16, row) * B (16x8, col) + D, FP16 operands, FP32 accumulators.
__device__ __forceinline__ void mma_16816(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/// A thread's two best keys of one pixel (b1 >= b2), in accumulator units (see spectral_best_fp16).
struct KeyTop {
  float b1, b2;
  int i1, i2;
};
__device__ __forceinline__ void keytop_init(KeyTop& t) {
  t.b1 = t.b2 = -INFINITY;
  t.i1 = t.i2 = -1;
}
/// Strict '>': among equal keys the first seen (the lower reference index) stays ahead. Branch-free (two
/// compares, three min/max, three selects): the epilogue runs for every key, and the compiler predicated
/// the branchy form into more instructions than this (Nsight Compute: ALU-bound, issue-limited).
__device__ __forceinline__ void keytop_add(KeyTop& t, float v, int i) {
  const bool gt1 = v > t.b1, gt2 = v > t.b2;
  t.i2 = gt1 ? t.i1 : (gt2 ? i : t.i2);
  t.b2 = fmaxf(t.b2, fminf(v, t.b1));
  t.i1 = gt1 ? i : t.i1;
  t.b1 = fmaxf(t.b1, v);
}

/* spectral_best_fp16<kMetric> (ed, sam, scc): GEMM keys of every pixel of a chunk against every reference,
 * the best kept per pixel, candidates for the exact rescoring written out.
 * Launch: grid ceil(npix / 128), block 512 (16 warps), dynamic shared memory best_fp16_smem(kh):
 *   (128 + 2 * 128) rows * (kh + 8) halves * 2 bytes (174 KiB for 224 bands), at least the merge area
 *   (41.5 KiB): one block per SM.
 * The block converts its 128 pixels from the float planes into FP16 rows (scaled by s_x) that stay in
 * shared memory; the references stream through in tiles of 128 (cp.async, double-buffered). The 16 warps
 * form a 4 x 4 grid of 32 pixels x 32 references; each warp runs 2 x 4 mma.m16n8k16 per 16 bands
 * (ldmatrix fragments; 16 warps rather than 8 with twice the tile: with 2 warps per scheduler the kernel
 * was latency-bound, Nsight Compute: 0.45 eligible warps per cycle). After each tile every thread folds
 * its 4 pixels x 8 references of keys, in
 * accumulator units acc + w_r 2^(x_exp + ref_exp), into a KeyTop per pixel (its two best). At the end the 16 KeyTops of a pixel
 * meet in shared memory; one thread per pixel takes the best key and keeps up to kBestCandidates of the
 * entries within the margin (margin_a |x| + margin_b + margin_s / s_x), best first, as candidates; it counts
 * the pixel in `overflows` when more keys were within the margin. */
template <int kMetric>
__global__ void __launch_bounds__(kBestThreads, 1) spectral_best_fp16(PixelPlanes planes, int npix, int n, BestFp16Args args) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const int pitch = args.kh + kBestRowPad;  // halves per shared row
  __half* xs = reinterpret_cast<__half*>(smem_raw);
  __half* rs0 = xs + kBestTileM * pitch;
  __half* rs1 = rs0 + kBestTileN * pitch;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = warp >> 2, wn = warp & 3;  // 4 x 4 warps: 32 pixels x 32 references each
  const int p0 = blockIdx.x * kBestTileM;
  const int x_exp = pixel_exp(args.absmax);
  const float sx = pow2f(x_exp);
  // Keys are compared in accumulator units, acc + w_r * 2^(x_exp + ref_exp) (a positive power of two
  // scales the key exactly, the order is unchanged): one add per key for ed, none for sam/scc (w = 0).
  const float to_acc = pow2f(x_exp + args.ref_exp);
  const int ntiles = args.rpad / kBestTileN;
  const int chunks_per_row = args.kh / 8;  // 16-byte pieces of a reference row

  // 16-byte piece c = r * chunks_per_row + k8 of a tile; each thread walks c = tid, tid + 512, ... with
  // (r, k8) stepped incrementally (no division in the loop).
  const int step_r = kBestThreads / chunks_per_row, step_k = kBestThreads % chunks_per_row;
  auto load_refs = [&](int tile, __half* dst) {
    const __half* src = args.refs + (long long)tile * kBestTileN * args.kh;
    int r = tid / chunks_per_row, k8 = tid - r * chunks_per_row;
    while (r < kBestTileN) {
      cp_async16(dst + r * pitch + k8 * 8, src + (long long)r * args.kh + k8 * 8);
      r += step_r;
      k8 += step_k;
      if (k8 >= chunks_per_row) {
        k8 -= chunks_per_row;
        ++r;
      }
    }
    cp_async_commit();
  };
  load_refs(0, rs0);
  // The pixel tile: planes (band-major floats) -> scaled FP16 rows, two bands per 32-bit store.
#pragma unroll 8
  for (int e = tid; e < kBestTileM * (args.kh / 2); e += blockDim.x) {  // unrolled: 16 loads in flight
    const int q = e % kBestTileM, j = 2 * (e / kBestTileM);
    const int p = p0 + q;
    float v0 = 0.0f, v1 = 0.0f;
    if (p < npix) {
      if (j < n) v0 = planes.f[(long long)j * planes.pitch + p] * sx;
      if (j + 1 < n) v1 = planes.f[(long long)(j + 1) * planes.pitch + p] * sx;
    }
    *reinterpret_cast<__half2*>(xs + q * pitch + j) = __floats2half2_rn(v0, v1);
  }

  KeyTop top[4];  // pixels wm*32 + mi*16 + (lane/4) + 8h, h = index & 1, mi = index >> 1
#pragma unroll
  for (int i = 0; i < 4; ++i) keytop_init(top[i]);
  const int g = lane >> 2, t4 = lane & 3;
  // ldmatrix row addresses: A (pixels) rows lane%16 at k + 8 (lane/16); B (references) rows
  // (lane & 7) + 8 (lane >> 4) at k + 8 ((lane >> 3) & 1).
  const int a_row = lane & 15, a_k = (lane >> 4) * 8;
  const int b_row = (lane & 7) + ((lane >> 4) << 3), b_k = ((lane >> 3) & 1) * 8;

  for (int tile = 0; tile < ntiles; ++tile) {
    __half* cur = (tile & 1) ? rs1 : rs0;
    cp_async_wait_all();
    __syncthreads();  // tile `tile` (and the pixel rows) visible; nobody still reads the other buffer
    if (tile + 1 < ntiles) load_refs(tile + 1, (tile & 1) ? rs0 : rs1);
    float acc[2][4][4];
#pragma unroll
    for (int mi = 0; mi < 2; ++mi)
#pragma unroll
      for (int ni = 0; ni < 4; ++ni)
#pragma unroll
        for (int c = 0; c < 4; ++c) acc[mi][ni][c] = 0.0f;
    const __half* xa = xs + (wm * 32 + a_row) * pitch + a_k;
    const __half* rb = cur + (wn * 32 + b_row) * pitch + b_k;
#pragma unroll 2
    for (int k = 0; k < args.kh; k += 16) {
      unsigned a[2][4], b[2][4];
#pragma unroll
      for (int mi = 0; mi < 2; ++mi) ldmatrix_x4(a[mi], xa + mi * 16 * pitch + k);
#pragma unroll
      for (int nj = 0; nj < 2; ++nj) ldmatrix_x4(b[nj], rb + nj * 16 * pitch + k);
#pragma unroll
      for (int mi = 0; mi < 2; ++mi)
#pragma unroll
        for (int ni = 0; ni < 4; ++ni) mma_16816(acc[mi][ni], a[mi], b[ni >> 1][(ni & 1) * 2], b[ni >> 1][(ni & 1) * 2 + 1]);
    }
    // Epilogue of the tile: keys into the per-pixel KeyTops (references in increasing order per thread).
    const int r_base = tile * kBestTileN + wn * 32 + 2 * t4;
#pragma unroll
    for (int ni = 0; ni < 4; ++ni) {
      const int r = r_base + ni * 8;
      float2 w2 = __ldg(reinterpret_cast<const float2*>(args.w + r));  // -inf for padding references
      if (kMetric == SPECTRAL_METRIC_ED) {
        w2.x *= to_acc;
        w2.y *= to_acc;
      } else {  // sam/scc: w = 0 (the padding's -inf stays)
        w2.x = w2.x < 0.0f ? -INFINITY : 0.0f;
        w2.y = w2.y < 0.0f ? -INFINITY : 0.0f;
      }
#pragma unroll
      for (int mi = 0; mi < 2; ++mi) {
        keytop_add(top[mi * 2 + 0], acc[mi][ni][0] + w2.x, r);
        keytop_add(top[mi * 2 + 0], acc[mi][ni][1] + w2.y, r + 1);
        keytop_add(top[mi * 2 + 1], acc[mi][ni][2] + w2.x, r);
        keytop_add(top[mi * 2 + 1], acc[mi][ni][3] + w2.y, r + 1);
      }
    }
  }
  __syncthreads();  // shared memory becomes the merge area (the tiles are no longer read)
  constexpr int kE = 2 * kBestHolders + 1;  // entries per pixel row, +1 against bank conflicts
  float* mv = reinterpret_cast<float*>(smem_raw);
  int* mi_ = reinterpret_cast<int*>(mv + kBestTileM * kE);
  const int holder = wn * 4 + t4;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int q = wm * 32 + (i >> 1) * 16 + g + 8 * (i & 1);
    mv[q * kE + 2 * holder] = top[i].b1;
    mi_[q * kE + 2 * holder] = top[i].i1;
    mv[q * kE + 2 * holder + 1] = top[i].b2;
    mi_[q * kE + 2 * holder + 1] = top[i].i2;
  }
  __syncthreads();
  if (tid >= kBestTileM) return;
  const int q = tid, p = p0 + q;
  if (p >= npix) return;
  float margin = 0.0f;
  const bool live = fused_pixel_live<kMetric>(planes, p, n, args, sx, &margin);
  int count = 0;
  if (live) {
    float best = -INFINITY;
    for (int e = 0; e < 2 * kBestHolders; ++e)
      if (mi_[q * kE + e] >= 0) best = fmaxf(best, mv[q * kE + e]);
    // No key at all (NaN data) or keys that cannot be ranked (inf): the exact scores are NaN, no candidates.
    if (best > -INFINITY && best < INFINITY) {
      const float thr = best - margin * to_acc;  // in accumulator units
      // The candidates: the keys within the margin of the best, best first (ties: lower index), at most
      // kBestCandidates of them. More keys within the margin is counted, not an error:
      // the error bound is a worst case, and the exact best is among the few best keys in practice
      // (the benchmark measures the agreement with the exact kernel).
      int within = 0;
      for (int e = 0; e < 2 * kBestHolders; ++e) within += (mi_[q * kE + e] >= 0 && mv[q * kE + e] >= thr);
      for (; count < kBestCandidates && count < within; ++count) {
        int pick = -1;
        for (int e = 0; e < 2 * kBestHolders; ++e) {
          const int r = mi_[q * kE + e];
          if (r < 0 || !(mv[q * kE + e] >= thr)) continue;
          if (pick < 0 || mv[q * kE + e] > mv[q * kE + pick] ||
              (mv[q * kE + e] == mv[q * kE + pick] && r < mi_[q * kE + pick]))
            pick = e;
        }
        args.cand[(long long)p * kBestCandidates + count] = mi_[q * kE + pick];
        mi_[q * kE + pick] = -1;  // taken (this thread's own row)
      }
      if (within > kBestCandidates) atomicAdd(args.overflows, 1u);
    }
  }
  args.ncand[p] = count;
}

/* spectral_rescore<kMetric>: exact scores of each pixel's candidates and the reduction. Launch: grid
 * ceil(npix / 32), block 256: kBestCandidates = 8 lanes per pixel (32 pixels per block, 4 per warp). Lane c
 * of a pixel rescores candidate c. Scores use the single-pass formulas with the bands in order, reading the
 * float planes and the reference rows padded to 4 floats (rows.v1, float4 loads), so they are the exact kernel's (spectral_multi) bits; the lanes reduce with spectral_better (ties to
 * the lower index) through shuffles. */
template <int kMetric>
__global__ void __launch_bounds__(kBlock) spectral_rescore(PixelPlanes planes, int npix, RefSet refs, RescoreRows rows,
                                                           const int* __restrict__ cand, const int* __restrict__ ncand,
                                                           OutView out) {
  const int c = threadIdx.x % kBestCandidates;
  const int p = blockIdx.x * (kBlock / kBestCandidates) + threadIdx.x / kBestCandidates;
  const int higher = spectral_higher_is_better(kMetric);
  float best_s = SPECTRASIFT_NAN_F;
  int best_i = -1;
  const bool live = p < npix;
  if (live) {
    SpectralPixelStats st;
    load_stats(planes, p, &st);
    const int nc = ncand[p];
    auto score_of = [&](int r) {
      SpectralPairAcc acc;
      spectral_pair_init(&acc);
      const float* v1 = rows.v1 + (long long)r * rows.npad;  // 16-byte aligned rows: float4 loads
      const float* f = planes.f + p;
      const int n4 = refs.n & ~3;
#pragma unroll 2
      for (int j = 0; j < n4; j += 4) {
        const float4 rv = __ldg(reinterpret_cast<const float4*>(v1 + j));
        const long long o = (long long)j * planes.pitch;
        spectral_pair_add(&acc, kMetric, f[o], rv.x, 0.0f);
        spectral_pair_add(&acc, kMetric, f[o + planes.pitch], rv.y, 0.0f);
        spectral_pair_add(&acc, kMetric, f[o + 2 * planes.pitch], rv.z, 0.0f);
        spectral_pair_add(&acc, kMetric, f[o + 3 * planes.pitch], rv.w, 0.0f);
      }
      for (int j = n4; j < refs.n; ++j) spectral_pair_add(&acc, kMetric, f[(long long)j * planes.pitch], __ldg(v1 + j), 0.0f);
      return spectral_finalise(kMetric, &st, &acc, refs.n, refs.constant[r]);
    };
    if (c < nc) {
      best_i = cand[(long long)p * kBestCandidates + c];
      best_s = score_of(best_i);
    }
    if (best_s != best_s) best_i = -1;
  }
#pragma unroll
  for (int off = kBestCandidates / 2; off > 0; off >>= 1) {
    const float os = __shfl_xor_sync(0xffffffffu, best_s, off, kBestCandidates);
    const int oi = __shfl_xor_sync(0xffffffffu, best_i, off, kBestCandidates);
    if (oi >= 0 && (best_i < 0 || spectral_better(os, oi, best_s, best_i, higher))) {
      best_s = os;
      best_i = oi;
    }
  }
  if (!live || c != 0) return;
  if (out.mode == kOutThreshold && !spectral_passes(best_s, out.threshold, higher)) best_i = -1;
  if (best_i < 0) best_s = SPECTRASIFT_NAN_F;
  out.score[p] = best_s;
  out.index[p] = best_i;
}

}  // namespace spectrasift::cuda::kernels

// Best of many references on Hopper's warpgroup tensor-core instructions (wgmma.mma_async, sm_90a): the same
// job and the same outputs as spectral_best_fp16 (candidates for spectral_rescore), laid out so that the
// epilogue of one reference tile runs while the tensor cores work on the next.
//
// Why a second kernel: spectral_best_fp16 (mma.sync) issues ~9 instructions per mma, and its per-key epilogue
// competes with the mma and ldmatrix instructions for the same issue slots while per-tile barriers keep every
// warp in the same phase (Nsight Compute: 9.3 instructions per mma, IPC 1.44; docs/performance/spectral.md, 'wgmma'). wgmma is asynchronous: one instruction multiplies a 64 x 16 pixel slice by a
// 64 x 16 reference slice straight from shared memory, the warpgroup goes on with the previous tile's
// epilogue, and waits only when it needs the next accumulators. Compiled only for sm_90a (the "a" targets
// carry wgmma); spectral_plan.cu falls back to spectral_best_fp16 elsewhere.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cfloat>
#include <cstddef>

#include "backend/cuda/kernels/spectral_best_fp16.cuh"

namespace spectrasift::cuda::kernels {

constexpr int kWgPixels = 256;   ///< pixels per block (4 warpgroups x 64 rows, resident for the whole reference loop)
constexpr int kWgTileN = 64;     ///< references per streamed tile (one m64n64k16 per warpgroup and 16 bands)
constexpr int kWgStages = 3;     ///< reference tiles in flight (the one being loaded, the one in the MMA, the one whose MMA may still run)
constexpr int kWgThreads = 512;  ///< 4 warpgroups
constexpr int kWgSplit = 4;      ///< top-2 pairs per pixel and thread (column parity x column half): 16 holders per pixel
constexpr int kWgHolders = 4 * kWgSplit;

/// Dynamic shared memory of spectral_best_wgmma for kh halves per row (no padding: the operands are in the
/// wgmma "core matrix" layout, whose 8-row x 16-byte blocks are contiguous and conflict-free).
__host__ __device__ inline std::size_t best_wgmma_tiles_bytes(int kh) {
  const std::size_t tiles = std::size_t(kWgPixels + kWgStages * kWgTileN) * std::size_t(kh) * 2;
  const std::size_t merge = std::size_t(kWgPixels) * (2 * kWgHolders + 1) * 8;
  return tiles > merge ? tiles : merge;
}
inline std::size_t best_wgmma_smem(int kh) { return best_wgmma_tiles_bytes(kh) + kWgStages * 8; }  // + mbarriers

/// Low mantissa bits of a key that carry its position in the kernel's key sequence (see spectral_best_wgmma):
/// each top-2 pair sees 4 keys per reference tile.
inline int best_wgmma_key_bits(int rpad) {
  int bits = 1;
  while ((1 << bits) < (rpad / kWgTileN) * 4) ++bits;
  return bits;
}

/// Index (in halves) of element (row, k) of a rows x kh operand in the no-swizzle K-major core-matrix layout
/// used here: 8 x 8 blocks of 128 contiguous bytes (8 rows of 16 bytes), K-fastest between blocks. Hence the
/// descriptors' strides: 128 bytes between blocks along K (leading byte offset), kh * 16 bytes between
/// 8-row groups (stride byte offset). The host lays each reference tile out the same way.
__host__ __device__ constexpr long long wg_core_index(int row, int k, int kh) {
  return ((long long)(row >> 3) * (kh >> 3) + (k >> 3)) * 64 + (row & 7) * 8 + (k & 7);
}

/// wgmma shared-memory matrix descriptor: start address, leading and stride byte offsets (all >> 4), no
/// swizzle (layout type 0 in bits 62-63, base offset 0).
__device__ __forceinline__ unsigned long long wg_desc(const void* p, unsigned lbo, unsigned sbo) {
  return (unsigned long long)((smem_addr(p) & 0x3FFFFu) >> 4) | ((unsigned long long)((lbo >> 4) & 0x3FFFu) << 16) |
         ((unsigned long long)((sbo >> 4) & 0x3FFFu) << 32);
}

__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wg_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
/// Makes this thread's generic-proxy shared-memory writes (st.shared, cp.async) visible to wgmma's async proxy.
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
/// mbarrier + bulk-copy (TMA, 1D) helpers: one thread arms a stage's barrier with the bytes it expects and
/// starts the copy; every thread waits on the barrier's phase parity.
__device__ __forceinline__ void mbar_init(void* bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_init_fence() { asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory"); }
__device__ __forceinline__ void mbar_expect_tx(void* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void bulk_copy_g2s(void* dst, const void* src, unsigned bytes, void* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                   smem_addr(dst)),
               "l"(src), "r"(bytes), "r"(smem_addr(bar))
               : "memory");
}
__device__ __forceinline__ void mbar_wait(void* bar, unsigned parity) {
  asm volatile(
      "{\n.reg .pred done;\nWAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT;\n}\n" ::"r"(smem_addr(bar)),
      "r"(parity)
      : "memory");
}
/// Pins accumulator registers at this point (no read or copy of them is moved across an async MMA boundary).
__device__ __forceinline__ void wg_pin(float (&d)[32]) {
#pragma unroll
  for (int i = 0; i < 32; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
/// D (64 x 64, FP32, per warpgroup) = A (64 x 16, FP16, shared) * B (16 x 64, FP16, shared, K-major) (+ D).
__device__ __forceinline__ void wg_mma_64x64x16(float (&d)[32], unsigned long long da, unsigned long long db, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, "
      "%23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),
        "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
        "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(da), "l"(db), "r"(accumulate));
}
#endif

/// Orderable 64-bit form of a (key, reference) entry for the candidate selection: larger = better, equal keys
/// ranked by the lower reference index; 0 = no entry.
__device__ __forceinline__ unsigned long long wg_entry(float key, int ref) {
  const unsigned b = __float_as_uint(key);
  const unsigned ord = (b & 0x80000000u) ? ~b : (b | 0x80000000u);
  return ((unsigned long long)ord << 32) | (unsigned)(0x7FFFFFFF - ref);
}

/* spectral_best_wgmma<kMetric> (ed, sam, scc): same contract as spectral_best_fp16 (keys in accumulator units,
 * candidates = the best kBestCandidates keys within the margin, `overflows` counts the pixels with more).
 * Launch: grid ceil(npix / 256), block 512 (4 warpgroups), dynamic shared memory best_wgmma_smem(kh)
 *   ((256 + 3 * 64) rows * kh halves + 3 mbarriers: 196 KiB for 224 bands); one block per SM.
 * The block converts its 256 pixels from the float planes into scaled FP16 rows (core-matrix layout) that
 * stay in shared memory; the reference tiles (64 rows, stored by the host in the same layout, so one flat
 * bulk copy each) stream through 3 stages, each with an mbarrier that thread 0 arms. Warpgroup w owns
 * pixels 64w..64w+63: per tile it issues kh/16 wgmma.m64n64k16 into one of two accumulator sets, then waits
 * only for the PREVIOUS tile's group and folds those keys while the tensor cores run. One __syncthreads
 * per tile: every warpgroup has finished tile t-2, whose stage receives tile t+1.
 * Accumulator layout of m64nN (per warp: 16 rows): register 4j + {0,1} = row g, columns 8j + 2 t4 + {0,1};
 * 4j + {2,3} = row g + 8 (g = lane / 4, t4 = lane % 4). Each thread keeps kWgSplit top-2 pairs per row
 * (column parity x half), so a pixel has 16 holders of 2 keys, as in spectral_best_fp16.
 * Cheap top-2: a key's low `key_bits` mantissa bits are replaced by its position in the holder's sequence
 * (4 per tile), so that a top-2 update is three min/max with no index to carry (the positions decode to
 * reference indices at the end). This moves a key by < 2^(key_bits - 23) of its magnitude; spectral_plan.cu adds
 * that to the margin. The selection: 2 threads per pixel, 16 entries each in registers, kBestCandidates rounds of "take
 * the larger of the two threads' best". */
template <int kMetric>
__global__ void __launch_bounds__(kWgThreads, 1)
    spectral_best_wgmma(PixelPlanes planes, int npix, int n, BestFp16Args args) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(128) unsigned char smem_raw[];
  const int kh = args.kh, kc_n = kh >> 3;  // 16-byte pieces per row
  __half* xs = reinterpret_cast<__half*>(smem_raw);
  __half* rs = xs + kWgPixels * kh;
  const int tile_halves = kWgTileN * kh;
  unsigned long long* bars = reinterpret_cast<unsigned long long*>(smem_raw + best_wgmma_tiles_bytes(kh));
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wg = warp >> 2, wq = warp & 3;
  const int g = lane >> 2, t4 = lane & 3;
  const int p0 = blockIdx.x * kWgPixels;
  const int x_exp = pixel_exp(args.absmax);
  const float sx = pow2f(x_exp);
  const float to_acc = pow2f(x_exp + args.ref_exp);  // see spectral_best_fp16
  const int ntiles = args.rpad / kWgTileN;

  auto load_tile = [&](int t) {  // thread 0: a flat copy, the host stored the tile in its shared-memory layout
    const int st = t % kWgStages;
    mbar_expect_tx(bars + st, unsigned(tile_halves * 2));
    bulk_copy_g2s(rs + st * tile_halves, args.refs + (long long)t * tile_halves, unsigned(tile_halves * 2), bars + st);
  };
  if (tid == 0) {
    for (int st = 0; st < kWgStages; ++st) mbar_init(bars + st, 1);
    mbar_init_fence();
    load_tile(0);
  }
  // The pixel tile: 8 bands of one pixel per 16-byte store; consecutive threads take consecutive pixels
  // (coalesced plane loads; 8 threads fill one 128-byte core-matrix block).
#pragma unroll 2
  for (int e = tid; e < kWgPixels * kc_n; e += kWgThreads) {
    const int m = e & (kWgPixels - 1), kc = e / kWgPixels;
    const int p = p0 + m;
    float v[8];
#pragma unroll
    for (int b = 0; b < 8; ++b) {
      const int j = kc * 8 + b;
      v[b] = (p < npix && j < n) ? planes.f[(long long)j * planes.pitch + p] * sx : 0.0f;
    }
    uint4 packed;
    __half2 h0 = __floats2half2_rn(v[0], v[1]), h1 = __floats2half2_rn(v[2], v[3]);
    __half2 h2 = __floats2half2_rn(v[4], v[5]), h3 = __floats2half2_rn(v[6], v[7]);
    packed.x = *reinterpret_cast<unsigned*>(&h0);
    packed.y = *reinterpret_cast<unsigned*>(&h1);
    packed.z = *reinterpret_cast<unsigned*>(&h2);
    packed.w = *reinterpret_cast<unsigned*>(&h3);
    *reinterpret_cast<uint4*>(xs + wg_core_index(m, kc * 8, kh)) = packed;
  }
  fence_proxy_async();  // the pixel tile (generic stores) is read by wgmma (async proxy)
  __syncthreads();      // ... by every warpgroup; and the mbarriers are initialised before anyone waits

  const unsigned sbo = unsigned(kh) * 16u;
  const unsigned long long a_desc = wg_desc(xs + wg * 64 * kh, 128u, sbo);
  const unsigned long long b_desc = wg_desc(rs, 128u, sbo);
  const unsigned long long stage_step = (unsigned long long)(tile_halves * 2) >> 4;
  const unsigned keep = ~((1u << args.key_bits) - 1u);

  float b1[2][kWgSplit], b2[2][kWgSplit];  // [row g / g + 8][parity + 2 * (column half)]: two best packed keys
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int s = 0; s < kWgSplit; ++s) b1[i][s] = b2[i][s] = -INFINITY;

  auto issue = [&](float (&acc)[32], int t) {
    const unsigned long long bd = b_desc + (unsigned long long)(t % kWgStages) * stage_step;
    wg_fence();
    wg_pin(acc);
#pragma unroll 2
    for (int kk = 0; kk < kh / 16; ++kk)  // 16 bands = 2 core matrices = 256 bytes = 16 descriptor units
      wg_mma_64x64x16(acc, a_desc + 16ull * kk, bd + 16ull * kk, kk > 0);
    wg_commit();
    wg_pin(acc);
  };
  auto fold = [&](float& hi, float& lo, float v, unsigned code) {
    const float pv = __uint_as_float((__float_as_uint(v) & keep) | code);
    lo = fmaxf(lo, fminf(hi, pv));
    hi = fmaxf(hi, pv);
  };
  auto epilogue = [&](float (&acc)[32], int t) {
    const int r0 = t * kWgTileN + 2 * t4;
    const bool tail = (t + 1) * kWgTileN > args.count;  // padding references in this tile (uniform)
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int r = r0 + 8 * j;
      const unsigned code = unsigned(t * 4 + (j & 3));
      float v00 = acc[4 * j + 0], v01 = acc[4 * j + 1], v10 = acc[4 * j + 2], v11 = acc[4 * j + 3];
      if (kMetric == SPECTRAL_METRIC_ED) {  // sam/scc: w = 0
        const float2 w2 = __ldg(reinterpret_cast<const float2*>(args.w + r));
        v00 += w2.x * to_acc;
        v10 += w2.x * to_acc;
        v01 += w2.y * to_acc;
        v11 += w2.y * to_acc;
      }
      if (tail) {  // padding rows never rank: a finite floor, so that packing cannot make a NaN
        if (r >= args.count) v00 = v10 = -FLT_MAX;
        if (r + 1 >= args.count) v01 = v11 = -FLT_MAX;
      }
      const int s = (j >> 2) * 2;
      fold(b1[0][s], b2[0][s], v00, code);
      fold(b1[0][s + 1], b2[0][s + 1], v01, code);
      fold(b1[1][s], b2[1][s], v10, code);
      fold(b1[1][s + 1], b2[1][s + 1], v11, code);
    }
  };
  float acc0[32], acc1[32];
#pragma unroll
  for (int i = 0; i < 32; ++i) acc0[i] = acc1[i] = 0.0f;
  // Step t: wait for tile t, start loading t + 1, issue t's MMAs into `cur`, wait for t - 1's, fold them.
  auto step = [&](float (&cur)[32], float (&prev)[32], int t) {
    if (t < ntiles) {
      mbar_wait(bars + t % kWgStages, unsigned(t / kWgStages) & 1u);
      __syncthreads();  // everybody is past tile t - 2's MMAs: its stage may be refilled
      if (tid == 0 && t + 1 < ntiles) load_tile(t + 1);
      issue(cur, t);
      wg_wait<1>();
    } else {
      wg_wait<0>();
    }
    wg_pin(prev);
    if (t > 0) epilogue(prev, t - 1);
  };
  for (int t = 0; t <= ntiles; t += 2) {
    step(acc0, acc1, t);
    if (t + 1 <= ntiles) step(acc1, acc0, t + 1);
  }
  __syncthreads();  // every MMA is complete (wait_group 0 above): shared memory becomes the merge area

  // Decode: position code -> tile t = code / 4, column j = 4 (s / 2) + code % 4, reference t*64 + 8j + 2 t4 + s%2.
  constexpr int kE = 2 * kWgHolders + 1;  // entries per pixel row, +1 against bank conflicts
  float* mv = reinterpret_cast<float*>(smem_raw);
  int* mr = reinterpret_cast<int*>(mv + kWgPixels * kE);
  const unsigned low = (1u << args.key_bits) - 1u;
  auto decode = [&](float v, int s) {
    if (!(v > -0.5f * FLT_MAX)) return -1;  // never set (-inf) or padding (-FLT_MAX, low bits replaced)
    const unsigned code = __float_as_uint(v) & low;
    return int(code >> 2) * kWgTileN + 8 * (4 * (s >> 1) + int(code & 3u)) + 2 * t4 + (s & 1);
  };
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int s = 0; s < kWgSplit; ++s) {
      const int q = wg * 64 + wq * 16 + g + 8 * i, e = 2 * (t4 * kWgSplit + s);
      const int r1 = decode(b1[i][s], s);
      // b2 == b1 (same bits) only when no second key was seen after a NaN-free first: one entry.
      const int r2 = __float_as_uint(b2[i][s]) == __float_as_uint(b1[i][s]) ? -1 : decode(b2[i][s], s);
      mv[q * kE + e] = b1[i][s];
      mr[q * kE + e] = r1;
      mv[q * kE + e + 1] = b2[i][s];
      mr[q * kE + e + 1] = r2;
    }
  __syncthreads();

  // Selection: threads 2q and 2q + 1 hold pixel q's entries [16 h, 16 h + 16).
  const int q = tid >> 1, h = tid & 1, p = p0 + q;
  float margin = 0.0f;
  bool live = p < npix && fused_pixel_live<kMetric>(planes, p, n, args, sx, &margin);
  const float* row_v = mv + q * kE + 16 * h;
  const int* row_r = mr + q * kE + 16 * h;
  float best = -INFINITY;
#pragma unroll
  for (int e = 0; e < 16; ++e)
    if (row_r[e] >= 0) best = fmaxf(best, row_v[e]);
  best = fmaxf(best, __shfl_xor_sync(0xffffffffu, best, 1));
  // No key at all (NaN data) or keys that cannot be ranked (inf): the exact scores are NaN, no candidates.
  live = live && best > -INFINITY && best < INFINITY;
  const float thr = best - margin * to_acc;  // in accumulator units
  unsigned long long ent[16];
  int within = 0;
#pragma unroll
  for (int e = 0; e < 16; ++e) {
    const bool in = live && row_r[e] >= 0 && row_v[e] >= thr;
    ent[e] = in ? wg_entry(row_v[e], row_r[e]) : 0ull;
    within += in;
  }
  within += __shfl_xor_sync(0xffffffffu, within, 1);
  int count = 0;
  // Every lane runs all rounds (the shuffles need the whole warp); a round without entries changes nothing.
#pragma unroll 1
  for (int c = 0; c < kBestCandidates; ++c) {
    unsigned long long m = 0;
#pragma unroll
    for (int e = 0; e < 16; ++e) m = ent[e] > m ? ent[e] : m;
    const unsigned long long o = __shfl_xor_sync(0xffffffffu, m, 1);
    const unsigned long long top_e = o > m ? o : m;
    if (top_e != 0) {
#pragma unroll
      for (int e = 0; e < 16; ++e) ent[e] = ent[e] == top_e ? 0ull : ent[e];
      if (h == 0) args.cand[(long long)p * kBestCandidates + count] = 0x7FFFFFFF - int(unsigned(top_e & 0xFFFFFFFFu));
      ++count;
    }
  }
  if (h == 0 && p < npix) {
    args.ncand[p] = count;
    if (within > kBestCandidates) atomicAdd(args.overflows, 1u);
  }
#else
  (void)planes;
  (void)npix;
  (void)n;
  (void)args;
  __trap();  // launched only where spectral_plan.cu saw an sm_90a build and a compute capability 9.0 device
#endif
}

}  // namespace spectrasift::cuda::kernels

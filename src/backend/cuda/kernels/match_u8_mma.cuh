// match_u8_mma.cuh — the nearest two train descriptors of every query for descriptors of integers 0..255
// (SIFT's as exported) held as bytes: integer dot products on the tensor cores (mma.sync m16n8k32, u8 x u8
// -> s32, sm_80 and later), each query's best two in registers, no N x M matrix (backend/cuda/match.cu;
// docs/performance/matching.md, 'GPU matching: the u8 path').
//
// Exactness: |q|^2, |t|^2 and q.t are sums of products of integers 0..255, at most 128 * 255^2 < 2^24, so
// they are exact in int32 (any order) and exact in float as the CPU backend sums them: the squared distance
// |q|^2 + |t|^2 - 2 q.t is the same integer here and there, its float the CPU's bits, and sqrtf (correctly
// rounded without fast-math) the CPU's std::sqrt. The ranking uses v = |t|^2 - 2 q.t (|q|^2 is common to a
// query's candidates); the merge adds |q|^2 back. Ties: every lane visits its train descriptors in increasing
// index with a strict <, and partial best twos are merged lexicographically on (v, index): the two smallest
// (distance, index) pairs, the CPU's rule, whatever the split.
//
// The k order inside a dot product does not matter (integers), so the 128 bytes of a descriptor are assigned
// to the MMA's k positions in the order that makes every lane's fragments contiguous: lane (group g, thread
// t of the group) holds, for all four k-steps of 32, bytes t*32 .. t*32+31 of its rows (A: query rows g and
// g+8 of an m16 tile; B: train row g of an n8 tile). Byte t*32 + 8*ks + 4*h + j is the j-th byte of the
// register that the PTX layout gives k = 16*h + 4*t + j of k-step ks, for A and B alike, so the products pair
// the same bytes of the query and the train descriptor.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "backend/cuda/kernels/match_l2_top2.cuh"

namespace spectrasift::cuda::kernels {

constexpr int kU8Dim = 128;                                 // bytes per descriptor (SIFT's 128 values)
constexpr int kU8Warps = 4;                                 // warps per block
constexpr int kU8Threads = 32 * kU8Warps;
constexpr int kU8WarpQueries = 32;                          // two m16 tiles per warp, A fragments in registers
constexpr int kU8BlockQueries = kU8Warps * kU8WarpQueries;  // 128
constexpr int kU8TileTrains = 64;                           // train descriptors per shared tile (8 n8 tiles)
constexpr int kU8RowStride = kU8Dim + 16;                   // padded: the 16-byte fragment loads hit 32 banks
constexpr int kU8Empty = 0x7fffffff;                        // v of an empty slot (every real v is > -2^24, < 2^24)

// A partial best two: (v1, i1) before (v2, i2) lexicographically; empty slots (kU8Empty, -1).
struct MatchU8Best {
  int v1, i1, v2, i2;
};

// Keeps the two lexicographically smallest (v, index) pairs; an empty candidate (i < 0) changes nothing.
__device__ inline void match_u8_merge(MatchU8Best& b, int v, int i) {
  if (i < 0) return;
  if (v < b.v1 || (v == b.v1 && i < b.i1)) {
    b.v2 = b.v1;
    b.i2 = b.i1;
    b.v1 = v;
    b.i1 = i;
  } else if (v < b.v2 || (v == b.v2 && i < b.i2)) {
    b.v2 = v;
    b.i2 = i;
  }
}

// A candidate in increasing index order for this lane: strict <, so the first of equal values stays.
__device__ inline void match_u8_push(MatchU8Best& b, int v, int i) {
  if (v < b.v2) {
    if (v < b.v1) {
      b.v2 = b.v1;
      b.i2 = b.i1;
      b.v1 = v;
      b.i1 = i;
    } else {
      b.v2 = v;
      b.i2 = i;
    }
  }
}

// c += A (16 x 32, row) * B (32 x 8, col), u8 x u8 -> s32 on the tensor cores.
__device__ inline void match_u8_mma(int (&c)[4], std::uint32_t a0, std::uint32_t a1, std::uint32_t a2,
                                    std::uint32_t a3, std::uint32_t b0, std::uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.u8.u8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#else
  __trap();  // the host launches this kernel only on compute capability 8.0 and later
#endif
}

// match_u8_pack: grid ceil(n / 8), block 256 (8 warps, one descriptor per warp). Float descriptors on the
// device to bytes (lane l packs values 4l .. 4l+3, lowest byte first) and squared norms; *inexact = 1 when a
// value is not an integer 0..255 (the host zeroes it before).
__global__ void __launch_bounds__(256) match_u8_pack(const float* values, int n, std::uint32_t* bytes, int* norms,
                                                     int* inexact) {
  const int row = blockIdx.x * 8 + int(threadIdx.x >> 5), lane = int(threadIdx.x & 31);
  if (row >= n) return;  // a whole warp leaves together
  const float4 v = reinterpret_cast<const float4*>(values + std::size_t(row) * kU8Dim)[lane];
  const float x[4] = {v.x, v.y, v.z, v.w};
  std::uint32_t word = 0;
  int norm = 0;
  bool bad = false;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const float c = fminf(fmaxf(x[j], 0.0f), 255.0f);  // NaN -> 0, then differs from x
    const unsigned u = unsigned(c);
    bad |= float(u) != x[j];
    word |= u << (8 * j);
    norm += int(u * u);
  }
  bytes[std::size_t(row) * (kU8Dim / 4) + lane] = word;
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) norm += __shfl_xor_sync(0xffffffffu, norm, off);
  if (lane == 0) norms[row] = norm;
  if (__any_sync(0xffffffffu, bad) && lane == 0) atomicOr(inexact, 1);
}

// match_u8_top2: grid (ceil(nq / 128), splits), block 128 (4 warps); static shared memory 2 x (64 rows of
// 144 bytes + 64 norms) = 18.9 KB. Block (x, s) takes queries 128 x .. 128 x + 127 (warp w: 32 of them, its
// A fragments loaded once into registers) against train descriptors [s * per_split, min(nt, (s+1) *
// per_split)) (per_split a multiple of 64), streamed through shared memory in tiles of 64, double-buffered
// (the next tile is read into registers while this one is multiplied). Per tile and warp: 8 n8 tiles x 2 m16
// tiles x 4 k-steps = 64 MMAs, then every lane pushes its 4 x 2 x 8 candidates. At the end the 4 lanes of a
// group merge (shuffles) and partial[s * nq + q] = that query's best two over the split.
__global__ void __launch_bounds__(kU8Threads) match_u8_top2(const std::uint8_t* query, int nq,
                                                            const std::uint8_t* train, const int* tnorm, int nt,
                                                            int per_split, MatchU8Best* partial) {
  __shared__ __align__(16) std::uint8_t tile[2][kU8TileTrains * kU8RowStride];
  __shared__ int tile_norm[2][kU8TileTrains];
  const int tid = int(threadIdx.x), warp = tid >> 5, lane = tid & 31, g = lane >> 2, t4 = lane & 3;
  const int q_warp = int(blockIdx.x) * kU8BlockQueries + warp * kU8WarpQueries;
  const int t_begin = int(blockIdx.y) * per_split, t_end = min(nt, t_begin + per_split);

  // a[m][h][w]: m16 tile m, row g + 8 h, word w = 2 ks + half of this lane's 32 bytes (zeros past nq).
  std::uint32_t a[2][2][8];
#pragma unroll
  for (int m = 0; m < 2; ++m)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = q_warp + 16 * m + 8 * h + g;
      uint4 lo = make_uint4(0, 0, 0, 0), hi = lo;
      if (row < nq) {
        const uint4* p = reinterpret_cast<const uint4*>(query + std::size_t(row) * kU8Dim + 32 * t4);
        lo = p[0];
        hi = p[1];
      }
      a[m][h][0] = lo.x, a[m][h][1] = lo.y, a[m][h][2] = lo.z, a[m][h][3] = lo.w;
      a[m][h][4] = hi.x, a[m][h][5] = hi.y, a[m][h][6] = hi.z, a[m][h][7] = hi.w;
    }
  MatchU8Best best[2][2];
#pragma unroll
  for (int m = 0; m < 2; ++m)
#pragma unroll
    for (int h = 0; h < 2; ++h) best[m][h] = MatchU8Best{kU8Empty, -1, kU8Empty, -1};

  // The tile loader: 64 rows x 8 chunks of 16 bytes, 4 chunks per thread (rows past t_end read as zeros and
  // are never pushed).
  constexpr int kChunks = kU8TileTrains * (kU8Dim / 16) / kU8Threads;
  uint4 staged[kChunks];
  int staged_norm = 0;
  auto fetch = [&](int t0) {
#pragma unroll
    for (int j = 0; j < kChunks; ++j) {
      const int c = tid + kU8Threads * j, r = c >> 3, part = c & 7;
      staged[j] = t0 + r < t_end
                      ? reinterpret_cast<const uint4*>(train + std::size_t(t0 + r) * kU8Dim)[part]
                      : make_uint4(0, 0, 0, 0);
    }
    if (tid < kU8TileTrains) staged_norm = t0 + tid < t_end ? tnorm[t0 + tid] : 0;
  };
  auto store = [&](int buf) {
#pragma unroll
    for (int j = 0; j < kChunks; ++j) {
      const int c = tid + kU8Threads * j, r = c >> 3, part = c & 7;
      *reinterpret_cast<uint4*>(&tile[buf][r * kU8RowStride + 16 * part]) = staged[j];
    }
    if (tid < kU8TileTrains) tile_norm[buf][tid] = staged_norm;
  };

  if (t_begin < t_end) {
    fetch(t_begin);
    store(0);
  }
  __syncthreads();
  int buf = 0;
  for (int t0 = t_begin; t0 < t_end; t0 += kU8TileTrains) {
    const bool more = t0 + kU8TileTrains < t_end;
    if (more) fetch(t0 + kU8TileTrains);  // in flight while this tile is multiplied
#pragma unroll 2
    for (int n8 = 0; n8 < kU8TileTrains / 8; ++n8) {
      const uint4* p = reinterpret_cast<const uint4*>(&tile[buf][(8 * n8 + g) * kU8RowStride + 32 * t4]);
      const uint4 b_lo = p[0], b_hi = p[1];
      const std::uint32_t b[8] = {b_lo.x, b_lo.y, b_lo.z, b_lo.w, b_hi.x, b_hi.y, b_hi.z, b_hi.w};
      const int col = 8 * n8 + 2 * t4;  // this lane's two columns of the n8 tile: col, col + 1
      const int tn0 = tile_norm[buf][col], tn1 = tile_norm[buf][col + 1];
      const int i0 = t0 + col, i1 = i0 + 1;
#pragma unroll
      for (int m = 0; m < 2; ++m) {
        int c[4] = {0, 0, 0, 0};
#pragma unroll
        for (int ks = 0; ks < 4; ++ks)
          match_u8_mma(c, a[m][0][2 * ks], a[m][1][2 * ks], a[m][0][2 * ks + 1], a[m][1][2 * ks + 1], b[2 * ks],
                       b[2 * ks + 1]);
        // c[0], c[1]: row g, columns col, col + 1; c[2], c[3]: row g + 8.
        if (i0 < t_end) {
          match_u8_push(best[m][0], tn0 - 2 * c[0], i0);
          match_u8_push(best[m][1], tn0 - 2 * c[2], i0);
        }
        if (i1 < t_end) {
          match_u8_push(best[m][0], tn1 - 2 * c[1], i1);
          match_u8_push(best[m][1], tn1 - 2 * c[3], i1);
        }
      }
    }
    if (more) store(buf ^ 1);  // that buffer was last read before the previous barrier
    __syncthreads();
    buf ^= 1;
  }

  // The 4 lanes of a group hold the same rows: merge them, then lane 0 of the group writes.
#pragma unroll
  for (int m = 0; m < 2; ++m)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      MatchU8Best& b = best[m][h];
#pragma unroll
      for (int off = 1; off < 4; off <<= 1) {
        const int v1 = __shfl_xor_sync(0xffffffffu, b.v1, off), i1 = __shfl_xor_sync(0xffffffffu, b.i1, off);
        const int v2 = __shfl_xor_sync(0xffffffffu, b.v2, off), i2 = __shfl_xor_sync(0xffffffffu, b.i2, off);
        match_u8_merge(b, v1, i1);
        match_u8_merge(b, v2, i2);
      }
      const int row = q_warp + 16 * m + 8 * h + g;
      if (t4 == 0 && row < nq) partial[std::size_t(blockIdx.y) * std::size_t(nq) + std::size_t(row)] = b;
    }
}

// match_u8_finish: grid ceil(nq / 256), block 256; one thread per query. Merges the `splits` partial best
// twos of query q and writes its record: indices, and distances sqrtf(float(|q|^2 + v)) (+inf, -1 for an
// empty slot), as the CPU backend does.
__global__ void __launch_bounds__(256) match_u8_finish(const MatchU8Best* partial, int nq, int splits,
                                                       const int* qnorm, MatchTop2* out) {
  const int q = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (q >= nq) return;
  MatchU8Best b{kU8Empty, -1, kU8Empty, -1};
  for (int s = 0; s < splits; ++s) {
    const MatchU8Best p = partial[std::size_t(s) * std::size_t(nq) + std::size_t(q)];
    match_u8_merge(b, p.v1, p.i1);
    match_u8_merge(b, p.v2, p.i2);
  }
  const float inf = __int_as_float(0x7f800000);
  const int qn = qnorm[q];
  MatchTop2 r;
  r.best1 = b.i1;
  r.best2 = b.i2;
  r.distance1 = b.i1 >= 0 ? sqrtf(float(qn + b.v1)) : inf;
  r.distance2 = b.i2 >= 0 ? sqrtf(float(qn + b.v2)) : inf;
  out[q] = r;
}

}  // namespace spectrasift::cuda::kernels

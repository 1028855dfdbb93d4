// Restores the stored 16-bit samples of a packed chunk (format: src/numeric/sample_pack.h) into the chunk
// buffer that the matching kernels read, byte for byte what a raw upload would have put there.
#pragma once

#include "numeric/sample_pack.h"

namespace spectrasift::cuda::kernels {

/// Launch: one block of 256 threads (8 warps) per group; grid = groups. Every warp loads the group's 64
/// widths (lane l: blocks 2l and 2l+1) and finds the blocks' plane offsets by a warp scan; warp v then decodes
/// blocks 8v..8v+7 in two steps of 4 blocks, 8 lanes per block: lane q of a block loads byte q of each plane
/// (independent loads: one memory latency per step), turns them into the bytes of values 8q..8q+7 with two
/// 8x8 bit transposes and writes those 8 values with one 16-byte store where aligned. (With one warp per group
/// and 16 steps, the chain of latencies made a 16 MiB chunk take ~35 us on the H200.)
__global__ void __launch_bounds__(256) unpack_samples_kernel(const unsigned char* __restrict__ packed, int groups,
                                                             bool swap, unsigned char* __restrict__ dst) {
  using detail::kPackBlockValues;
  using detail::kPackGroupBlocks;
  using detail::kPackPlaneBytes;
  const int group = int(blockIdx.x);
  const int warp = int(threadIdx.x >> 5);
  const int lane = int(threadIdx.x & 31);
  const detail::PackGroup g = reinterpret_cast<const detail::PackGroup*>(packed)[group];
  const unsigned short* bases =
      reinterpret_cast<const unsigned short*>(packed + detail::pack_base_offset(std::size_t(groups))) +
      std::size_t(group) * kPackGroupBlocks;
  const unsigned char* widths = packed + detail::pack_width_offset(std::size_t(groups)) + std::size_t(group) * kPackGroupBlocks;
  const int w0 = widths[2 * lane], w1 = widths[2 * lane + 1];
  int incl = w0 + w1;
  for (int d = 1; d < 32; d <<= 1) {
    const int t = __shfl_up_sync(0xffffffffu, incl, d);
    if (lane >= d) incl += t;
  }
  const int o0 = incl - w0 - w1, o1 = o0 + w0;  // planes before blocks 2l and 2l+1
  const int nblocks = int((g.values + kPackBlockValues - 1) / kPackBlockValues);
  const int sub = lane >> 3, q = lane & 7;
  const unsigned char* payload = packed + g.payload_byte + q;
  unsigned short* out = reinterpret_cast<unsigned short*>(dst + g.dst_byte);
  const bool aligned16 = (g.dst_byte & 15) == 0;
  for (int s = 2 * warp; s < 2 * warp + 2 && 4 * s < nblocks; ++s) {
    const int k = 4 * s + sub;  // this lane's block; its width and offset are held by lane k/2
    const int wa = __shfl_sync(0xffffffffu, w0, k >> 1), wb = __shfl_sync(0xffffffffu, w1, k >> 1);
    const int oa = __shfl_sync(0xffffffffu, o0, k >> 1), ob = __shfl_sync(0xffffffffu, o1, k >> 1);
    if (k >= nblocks) continue;
    const int w = (k & 1) ? wb : wa;
    const unsigned char* planes = payload + std::size_t((k & 1) ? ob : oa) * kPackPlaneBytes;
    unsigned long long lo = 0, hi = 0;  // byte j: byte q of plane j (of plane 8 + j)
#pragma unroll
    for (int j = 0; j < 8; ++j)
      if (j < w) lo |= (unsigned long long)planes[j * kPackPlaneBytes] << (8 * j);
#pragma unroll
    for (int j = 8; j < 16; ++j)
      if (j < w) hi |= (unsigned long long)planes[j * kPackPlaneBytes] << (8 * (j - 8));
    lo = detail::transpose_bits8x8(lo);  // byte i: bits 0-7 of value 8q + i
    hi = detail::transpose_bits8x8(hi);  // byte i: bits 8-15
    const unsigned base = bases[k];
    unsigned v[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      unsigned x = (base + unsigned((lo >> (8 * i)) & 0xffu) + (unsigned((hi >> (8 * i)) & 0xffu) << 8)) & 0xffffu;
      if (swap) x = ((x & 0xffu) << 8) | (x >> 8);
      v[i] = x;
    }
    const unsigned first = unsigned(k * kPackBlockValues + 8 * q);
    if (first >= g.values) continue;
    if (aligned16 && first + 8 <= g.values) {
      *reinterpret_cast<uint4*>(out + first) =
          make_uint4(v[0] | (v[1] << 16), v[2] | (v[3] << 16), v[4] | (v[5] << 16), v[6] | (v[7] << 16));
    } else {
      for (unsigned t = 0; t < 8 && first + t < g.values; ++t) out[first + t] = (unsigned short)v[t];
    }
  }
}

}  // namespace spectrasift::cuda::kernels

// The packed-upload format of 16-bit samples: lossless packing for host -> device uploads (issue 4,
// docs/performance/spectral.md, 'Packed uploads'). The packers are the CUDA backend's host code
// (backend/cuda/host/sample_packer.hpp), the GPU decoder is backend/cuda/kernels/unpack.cuh; this header is
// the format they share and a reference decoder. C++ and CUDA only (not OpenCL C).
//
// The uploads of a streamed spectral match run at the PCIe rate, and neighbouring samples of a real cube
// (adjacent pixels of a band, or adjacent bands of a pixel) differ by far less than their full 16-bit
// range. So the host's staging pass, which reads every byte anyway, writes each block of samples as its
// smallest value and the bits that the differences need; a GPU kernel restores the exact stored bytes
// before the matching kernels run, which therefore see the same input as with a raw upload.
//
// Format ("frame of reference + bit planes"). A chunk is made of runs: contiguous ranges of stored samples
// with a place in the unpacked chunk (one run for BIL/BIP, one per band plane for BSQ). A run is cut into
// groups of kPackGroupValues values and each group into blocks of kPackBlockValues; a run's last group and
// last block may be partial (a partial block is padded with its first value). For a block, with v the numeric
// value of each sample (its stored bytes swapped first when `swap`):
//   base  = min v (for int16 the signed minimum, for uint16 the unsigned one)
//   width = bits of max(v - base), 0..16
//   planes: width planes of 8 bytes; plane j holds bit j of (v_i - base) mod 2^16 of the block's value i at
//           bit i % 8 of byte i / 8.
// A packed chunk, every offset from its first byte:
//   PackGroup groups[G]                 see below
//   uint16    base[G * kPackGroupBlocks]  numeric block bases (unused slots of partial groups: 0)
//   uint8     width[G * kPackGroupBlocks] (unused slots: 0)
//   zero padding to a multiple of 64 bytes
//   payload: for each group in order, for each of its blocks in order, its planes.
// Decoding a value: stored = v when !swap, else v with its two bytes swapped, v = base + sum_j bit_j 2^j mod 2^16.
// The packed bytes depend only on the samples and the runs (not on threads or items), so equal input
#ifndef SPECTRASIFT_NUMERIC_SAMPLE_PACK_H
#define SPECTRASIFT_NUMERIC_SAMPLE_PACK_H

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace spectrasift::detail {

inline constexpr int kPackBlockValues = 64;
inline constexpr int kPackGroupBlocks = 64;
inline constexpr int kPackGroupValues = kPackBlockValues * kPackGroupBlocks;  // 4096 values = 8 KiB stored
inline constexpr int kPackPlaneBytes = kPackBlockValues / 8;
inline constexpr std::size_t kPackAlign = 64;

/// Offsets of the header arrays of a packed chunk of `groups` groups.
constexpr std::size_t pack_base_offset(std::size_t groups) { return groups * 16; }
constexpr std::size_t pack_width_offset(std::size_t groups) { return groups * (16 + 2 * kPackGroupBlocks); }
constexpr std::size_t pack_header_bytes(std::size_t groups) {
  return (groups * (16 + 3 * kPackGroupBlocks) + kPackAlign - 1) / kPackAlign * kPackAlign;
}

/// The 8 x 8 bit transpose of a 64-bit word: bit i of byte j becomes bit j of byte i. With byte j holding
/// byte q of plane j of a block, byte i of the result holds bits 0-7 of the block's value 8q + i (the GPU
/// unpacker's step; a delta swap of 7, 14 and 28 bits).
constexpr std::uint64_t transpose_bits8x8(std::uint64_t x) {
  std::uint64_t t = (x ^ (x >> 7)) & 0x00AA00AA00AA00AAull;
  x ^= t ^ (t << 7);
  t = (x ^ (x >> 14)) & 0x0000CCCC0000CCCCull;
  x ^= t ^ (t << 14);
  t = (x ^ (x >> 28)) & 0x00000000F0F0F0F0ull;
  x ^= t ^ (t << 28);
  return x;
}

/// One group of a packed chunk (16 bytes).
struct PackGroup {
  std::uint64_t dst_byte;      ///< where the group's first sample goes in the unpacked chunk
  std::uint32_t payload_byte;  ///< where its first block's planes start in the packed chunk
  std::uint32_t values;        ///< samples in the group, 1..kPackGroupValues
};
static_assert(sizeof(PackGroup) == 16);

/// The reference decoder (host): writes the samples of every group of `packed`, as stored, into `dst`.
inline void unpack_samples(const std::uint8_t* packed, int groups, bool swap, std::uint8_t* dst) {
  const std::uint8_t* bases = packed + pack_base_offset(std::size_t(groups));
  const std::uint8_t* widths = packed + pack_width_offset(std::size_t(groups));
  for (int g = 0; g < groups; ++g) {
    PackGroup h;
    std::memcpy(&h, packed + std::size_t(g) * sizeof h, sizeof h);
    std::size_t off = h.payload_byte;
    for (std::size_t v0 = 0, k = 0; v0 < h.values; v0 += kPackBlockValues, ++k) {
      const std::size_t slot = std::size_t(g) * kPackGroupBlocks + k;
      const int w = widths[slot];
      std::uint16_t base;
      std::memcpy(&base, bases + 2 * slot, 2);
      for (std::size_t i = 0; i < std::min<std::size_t>(kPackBlockValues, h.values - v0); ++i) {
        std::uint16_t d = 0;
        for (int j = 0; j < w; ++j)
          d = std::uint16_t(d | (((packed[off + std::size_t(kPackPlaneBytes) * j + i / 8] >> (i % 8)) & 1u) << j));
        std::uint16_t v = std::uint16_t(base + d);
        if (swap) v = std::uint16_t((v >> 8) | (v << 8));
        std::memcpy(dst + h.dst_byte + 2 * (v0 + i), &v, 2);
      }
      off += std::size_t(w) * kPackPlaneBytes;
    }
  }
}

}  // namespace spectrasift::detail

#endif /* SPECTRASIFT_NUMERIC_SAMPLE_PACK_H */

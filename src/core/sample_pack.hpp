// Lossless packing of 16-bit samples for host -> device uploads (issue 4, bench/NOTES.md step 51).
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
// gives equal packed bytes.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

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

/// A contiguous range of stored 16-bit samples and its place in the unpacked chunk.
struct PackRun {
  const void* src = nullptr;
  std::size_t dst_byte = 0;  ///< even
  std::size_t values = 0;
};

/// Instruction sets of the packer, each writing the same bytes: scalar code; AVX-512BW (a bit-test per
/// plane); AVX-512 VBMI + GFNI (every plane of a block at once: byte permutes and GF(2) affine transposes
/// of 8x8 bit matrices).
enum class PackIsa { kScalar, kAvx512bw, kAvx512Gfni };

/// Packs the runs of one chunk at a time. Work is cut into items of whole groups so that several threads
/// pack one chunk: an item first sizes its blocks, then waits until the item before it has published where
/// its payload ends, publishes its own end and writes its planes. Items must therefore be started in
/// increasing order, each by a thread that runs it to the end (as HostCopyPool::parallel_for does).
class SamplePacker {
 public:
  /// is_signed: int16 samples (else uint16). swap: their bytes are stored in the other order than the host's.
  /// max_isa: the widest instruction set to use (the widest this processor has by default).
  SamplePacker(bool is_signed, bool swap, PackIsa max_isa = PackIsa::kAvx512Gfni);

  /// Lays out a chunk made of `runs` (their values must stay readable until every item is packed).
  /// item_values: samples per work item at most (rounded down to whole groups, at least one).
  void layout(const std::vector<PackRun>& runs, std::size_t item_values);
  int items() const noexcept { return int(items_.size()); }
  int groups() const noexcept { return groups_; }
  /// Bytes before the payload (groups, bases, widths, padding).
  std::size_t header_bytes() const noexcept { return header_bytes_; }
  /// Packs item i into `out` (the packed chunk, at least max_packed_bytes large); returns the byte range
  /// [first, last) of `out` that it wrote besides its header entries.
  std::pair<std::size_t, std::size_t> pack(int i, std::uint8_t* out);
  /// Bytes of the packed chunk; valid once every item is packed.
  std::size_t packed_bytes() const noexcept;

  /// Largest packed chunk for `values` samples in `runs` runs (every block 16 bits wide).
  static std::size_t max_packed_bytes(std::size_t values, std::size_t runs);
  /// The widest instruction set of the packer that this processor runs. The scalar packer is some thirty
  /// times slower than the vector ones (0.1 against 3-7 GB/s per core): too slow for the streamed path.
  static PackIsa best_isa();
  PackIsa isa() const noexcept { return isa_; }

 private:
  struct Item {
    const std::uint8_t* src;  ///< may be odd: a header offset can be
    std::size_t dst_byte;
    std::size_t values;
    int group0;  ///< its first group
    int ngroups;
  };
  bool signed_, swap_;
  PackIsa isa_;
  std::vector<Item> items_;
  int groups_ = 0;
  std::size_t header_bytes_ = 0;
  std::unique_ptr<std::atomic<std::uint64_t>[]> ends_;  ///< payload end of each item (kUnset until published)
  std::size_t ends_size_ = 0;
};

/// The reference decoder (host): writes the samples of every group of `packed`, as stored, into `dst`.
void unpack_samples(const std::uint8_t* packed, int groups, bool swap, std::uint8_t* dst);

}  // namespace spectrasift::detail

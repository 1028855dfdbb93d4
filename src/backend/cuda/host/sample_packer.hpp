// The packers of the packed-upload format (numeric/sample_pack.h): host code of the CUDA backend, run by the
// staging pass of a streamed spectral match. Scalar, AVX-512BW and AVX-512 VBMI+GFNI forms write the same bytes.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "numeric/sample_pack.h"

namespace spectrasift::detail {

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

}  // namespace spectrasift::detail

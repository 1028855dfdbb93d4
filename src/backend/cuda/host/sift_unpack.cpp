// Host side of CUDA SIFT's packed read-back (sift_unpack.hpp).
#include "backend/cuda/host/sift_unpack.hpp"

#include <algorithm>
#include <cstring>

#include "backend/cuda/host_copy.hpp"
#include "backend/descriptor_digest.hpp"
#include "backend/host_pages.hpp"
#include "spectrasift/error.hpp"

namespace spectrasift::cuda {

namespace {

// Runs fn(piece) for every piece, on the pool when there is more than one.
template <class Fn> void for_pieces(std::size_t pieces, HostCopyPool* pool, const Fn& fn) {
  if (pool && pieces > 1) {
    pool->parallel_for(int(pieces), [&](int p) { fn(std::size_t(p)); });
  } else {
    for (std::size_t p = 0; p < pieces; ++p) fn(p);
  }
}

}  // namespace

void size_sift_features(std::size_t n, DescriptorType type, Features& out, HostCopyPool* pool) {
  const auto run = [pool](std::size_t pieces, const auto& fn) { for_pieces(pieces, pool, fn); };
  out.descriptor_type = type;
  if (type == DescriptorType::kU8) {
    out.descriptors.clear();
    detail::resize_for_writes(out.descriptor_bytes, n * std::size_t(Features::kDescriptorSize), run);
  } else {
    out.descriptor_bytes.clear();
    detail::resize_for_writes(out.descriptors, n * std::size_t(Features::kDescriptorSize), run);
  }
  detail::resize_for_writes(out.keypoints, n, run);
}

std::uint64_t unpack_sift_features(const unsigned char* packed, std::size_t n, bool u8_rows, Features& out,
                                   HostCopyPool* pool) {
  constexpr std::size_t kRow = Features::kDescriptorSize;
  static_assert(kRow == detail::kDigestRow);
  const std::size_t values = n * kRow;
  const bool u8_out = out.descriptor_type == DescriptorType::kU8;
  if (u8_out && !u8_rows)
    throw Error(ErrorCode::kInternal, "sift: u8 descriptors asked of a float read-back (RootSIFT)", "cuda");
  out.keypoints.resize(n);
  if (u8_out) {
    out.descriptors.clear();
    out.descriptor_bytes.resize(values);
  } else {
    out.descriptor_bytes.clear();
    out.descriptors.resize(values);
  }
  const unsigned char* rows = packed + sift_packed_descriptor_offset(n);
  Keypoint* keypoints = out.keypoints.data();
  float* dst = out.descriptors.data();
  std::uint8_t* dst8 = out.descriptor_bytes.data();
  const std::size_t pieces = (n + kSiftUnpackRowsPerPiece - 1) / kSiftUnpackRowsPerPiece;
  std::vector<std::uint64_t> sums(pieces, 0);
  for_pieces(pieces, pool, [&](std::size_t piece) {
    const std::size_t lo = piece * kSiftUnpackRowsPerPiece, hi = std::min(n, lo + kSiftUnpackRowsPerPiece);
    for (std::size_t i = lo; i < hi; ++i) {
      SiftKeypoint s;
      std::memcpy(&s, packed + i * sizeof(SiftKeypoint), sizeof s);
      keypoints[i] = Keypoint{s.x, s.y, s.size, s.angle, s.response, s.octave, s.layer, s.layer_offset};
    }
    std::uint64_t sum = 0;
    if (u8_out) {  // the bytes as they came: copied, summed from the copy (in L1)
      std::memcpy(dst8 + lo * kRow, rows + lo * kRow, (hi - lo) * kRow);
      sum = detail::descriptor_digest_sum(dst8 + lo * kRow, lo * kRow, (hi - lo) * kRow);
      sums[piece] = sum;
      return;
    }
    // Each row through a buffer in L1: converted (or copied), summed into the digest, stored once.
    float row[kRow];
    for (std::size_t i = lo; i < hi; ++i) {
      if (u8_rows) {
        const unsigned char* b = rows + i * kRow;
        for (std::size_t k = 0; k < kRow; ++k) row[k] = float(b[k]);
      } else {
        std::memcpy(row, rows + i * kRow * sizeof(float), sizeof row);
      }
      sum += detail::descriptor_digest_sum(row, i * kRow, kRow);
      std::memcpy(dst + i * kRow, row, sizeof row);
    }
    sums[piece] = sum;
  });
  std::uint64_t total = 0;
  for (std::uint64_t s : sums) total += s;  // a sum: the same whatever the order
  return detail::descriptor_digest_finish(total, values);
}

}  // namespace spectrasift::cuda

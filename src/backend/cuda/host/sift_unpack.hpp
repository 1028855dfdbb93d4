// The layout of the kept SIFT features as CUDA SIFT reads them back (one copy; kernels/sift_pack.cuh writes
// it) and their conversion into Features on the host, with the digest of the descriptors (DeviceFeatures).
// Plain C++ (the layout functions also compile as CUDA device code), so that a host test checks the
// conversion without a GPU.
//
// Layout for n features: n SiftKeypoint records (48 bytes each), then n rows of 128 descriptor values, one
// byte each when the descriptors are integers 0..255 (default options) or 4-byte floats (RootSIFT). 48 n is
// a multiple of 16, so the rows start 16-byte aligned.
#pragma once

#include <cstddef>
#include <cstdint>

#include "numeric/dialect.h"
#include "numeric/sift_keypoint.h"
#include "spectrasift/types.hpp"

namespace spectrasift::cuda {

class HostCopyPool;

/// Byte offset of the descriptor rows in the packed features of n keypoints.
SPECTRASIFT_FN unsigned long long sift_packed_descriptor_offset(unsigned long long n) {
  return n * (unsigned long long)sizeof(SiftKeypoint);
}

/// Bytes of the packed features of n keypoints, descriptors as bytes (u8_rows) or floats.
SPECTRASIFT_FN unsigned long long sift_packed_bytes(unsigned long long n, bool u8_rows) {
  return sift_packed_descriptor_offset(n) + n * 128ull * (u8_rows ? 1ull : 4ull);
}

/// Whether the descriptors of these options travel as bytes without loss: the default descriptors are
/// integers 0..255 (numeric/sift_descriptor.h's finalize rounds and saturates); RootSIFT's are not.
inline bool sift_descriptors_fit_bytes(bool root_sift) noexcept {
  return !root_sift;
}

/// Features per piece of the parallel sizing and conversion (128 KiB of float descriptors).
constexpr std::size_t kSiftUnpackRowsPerPiece = 256;

/// Sets out.descriptor_type to `type` and sizes out.keypoints and the descriptor array of that type (contents
/// replaced; the other array emptied) for n features, the descriptor and keypoint pages populated first in
/// pieces on `pool` when they are large (host_pages.hpp), so that the vectors' own zero-fill on the calling
/// thread finds them mapped. Called while the read-back runs.
void size_sift_features(std::size_t n, DescriptorType type, Features& out, HostCopyPool* pool);

/// Fills out.keypoints and the descriptor array of out.descriptor_type (replacing them; already sized by
/// size_sift_features or not) from packed features of n keypoints, in pieces of kSiftUnpackRowsPerPiece
/// features on `pool` (its threads and the caller; null: the caller alone), and returns
/// detail::descriptor_digest of the descriptors in that type, summed piece by piece from the rows while they
/// are converted or copied (the values and the digest are the same whatever the split). kU8 output needs
/// u8_rows (Error kInternal otherwise).
std::uint64_t unpack_sift_features(const unsigned char* packed, std::size_t n, bool u8_rows, Features& out,
                                   HostCopyPool* pool);

}  // namespace spectrasift::cuda

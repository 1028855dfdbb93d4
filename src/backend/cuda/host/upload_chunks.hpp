// How CUDA SIFT stages an image from pageable memory (sift_upload.cu): the bytes in consecutive chunks, each
// copied into the pinned staging buffer by the host copy pool and then uploaded while the pool copies the
// next one. Plain C++ so that a host test checks the split.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace spectrasift::cuda {

struct ByteRange {
  std::size_t offset = 0;
  std::size_t bytes = 0;
};

/// Images below this many bytes are uploaded by one plain copy (the driver stages them; the pool's
/// hand-off would cost more than it saves).
constexpr std::size_t kStagedUploadMin = std::size_t(256) << 10;

/// Chunks of `bytes`: about 8 (the first upload waits for one chunk's host copy, the last host copy for
/// nothing), each 256 KiB .. 4 MiB and a multiple of 64 KiB but the last; consecutive, covering every byte.
inline void split_upload(std::size_t bytes, std::vector<ByteRange>& out) {
  out.clear();
  constexpr std::size_t kGrain = std::size_t(64) << 10;
  std::size_t chunk = (bytes / 8 + kGrain - 1) / kGrain * kGrain;
  chunk = std::clamp(chunk, std::size_t(256) << 10, std::size_t(4) << 20);
  for (std::size_t off = 0; off < bytes; off += chunk) out.push_back({off, std::min(chunk, bytes - off)});
}

}  // namespace spectrasift::cuda

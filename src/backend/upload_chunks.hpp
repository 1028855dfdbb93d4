// How the device backends stage an image from pageable memory (CUDA sift_upload.cu, OpenCL sift_upload.cpp):
// the bytes in consecutive chunks, each copied into a pinned staging buffer on the host pool and then
// uploaded while the pool copies the next one. Plain C++ so that host tests check the split.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace spectrasift::detail {

struct ByteRange {
  std::size_t offset = 0;
  std::size_t bytes = 0;
};

/// Images below this many bytes are uploaded by one plain copy (the driver stages them; the pool's
/// hand-off would cost more than it saves).
constexpr std::size_t kStagedUploadMin = std::size_t(256) << 10;

/// Consecutive chunks of `chunk` bytes (at least 1) covering [0, bytes), the last one partial where chunk does
/// not divide bytes.
inline void split_upload(std::size_t bytes, std::size_t chunk, std::vector<ByteRange>& out) {
  out.clear();
  chunk = std::max<std::size_t>(chunk, 1);
  for (std::size_t off = 0; off < bytes; off += chunk) out.push_back({off, std::min(chunk, bytes - off)});
}

/// Chunks of `bytes`: about 8 (the first upload waits for one chunk's host copy, the last host copy for
/// nothing), each 256 KiB .. 4 MiB and a multiple of 64 KiB but the last; consecutive, covering every byte.
inline void split_upload(std::size_t bytes, std::vector<ByteRange>& out) {
  constexpr std::size_t kGrain = std::size_t(64) << 10;
  const std::size_t chunk = (bytes / 8 + kGrain - 1) / kGrain * kGrain;
  split_upload(bytes, std::clamp(chunk, std::size_t(256) << 10, std::size_t(4) << 20), out);
}

}  // namespace spectrasift::detail

// Host side of CUDA SIFT's packed read-back (sift_unpack.hpp).
#include "backend/cuda/host/sift_unpack.hpp"

#include <algorithm>
#include <cstring>

#include "backend/cuda/host_copy.hpp"

namespace spectrasift::cuda {

void unpack_sift_features(const unsigned char* packed, std::size_t n, bool u8_rows, Features& out, HostCopyPool* pool) {
  const std::size_t values = n * std::size_t(Features::kDescriptorSize);
  out.keypoints.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    SiftKeypoint s;
    std::memcpy(&s, packed + i * sizeof(SiftKeypoint), sizeof s);
    out.keypoints[i] = Keypoint{s.x, s.y, s.size, s.angle, s.response, s.octave, s.layer, s.layer_offset};
  }
  const unsigned char* rows = packed + sift_packed_descriptor_offset(n);
  if (!u8_rows) {
    const auto* f = reinterpret_cast<const float*>(rows);
    out.descriptors.assign(f, f + values);
    return;
  }
  // resize() writes the zeros (and takes the page faults of a fresh vector) once, on one thread (a caller may
  // have done it already, overlapping a copy); the conversion then runs on every thread of the pool.
  out.descriptors.resize(values);
  float* dst = out.descriptors.data();
  const std::size_t pieces = (n + kSiftUnpackRowsPerPiece - 1) / kSiftUnpackRowsPerPiece;
  auto convert = [&](int piece) {
    const std::size_t lo = std::size_t(piece) * kSiftUnpackRowsPerPiece * Features::kDescriptorSize;
    const std::size_t hi = std::min(values, lo + kSiftUnpackRowsPerPiece * Features::kDescriptorSize);
    for (std::size_t k = lo; k < hi; ++k) dst[k] = float(rows[k]);
  };
  if (pool && pieces > 1) {
    pool->parallel_for(int(pieces), convert);
  } else {
    for (std::size_t p = 0; p < pieces; ++p) convert(int(p));
  }
}

}  // namespace spectrasift::cuda

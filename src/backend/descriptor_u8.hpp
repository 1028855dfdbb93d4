// descriptor_u8.hpp — descriptors whose every value is an integer 0..255 (SIFT's as exported, OpenCV's
// convention) as bytes, for the GPU backends' integer matching path (docs/performance/matching.md, 'GPU
// matching: the u8 path'). Their squared distances |q|^2 + |t|^2 - 2 q.t are exact in int32 (at most
// 128 * 255^2 < 2^24), so integer dot products give the CPU backend's float values bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>

namespace spectrasift::detail {

/// Rows [begin, end) of `values` (rows of `dim` floats): each value as a byte into `bytes` (the same
/// row-major layout, row r at bytes + r * dim) and each row's squared norm into norms[r] (an exact integer).
/// Returns false when a value of these rows is not an integer in 0..255 (NaN, infinities, -1, 0.5, 256, ...);
/// the bytes and norms of those rows are then unspecified. -0.0 counts as 0 (its products are the same).
bool pack_descriptors_u8(const float* values, std::size_t begin, std::size_t end, int dim, std::uint8_t* bytes,
                         std::int32_t* norms) noexcept;

/// The same for rows that are bytes already (kU8 features): rows [begin, end) of `source` copied into `bytes`
/// and their squared norms into norms[r]. Every value is a byte, so there is no verdict.
void copy_descriptors_u8(const std::uint8_t* source, std::size_t begin, std::size_t end, int dim, std::uint8_t* bytes,
                         std::int32_t* norms) noexcept;

}  // namespace spectrasift::detail

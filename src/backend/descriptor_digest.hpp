// The content digest of a host descriptor array (backend.hpp DeviceFeatures: a device copy is used only
// while the host values still hash to the digest taken when the copy was made).
//
// A sum over pairs of values (the NH construction: (a + key_a) * (b + key_b), 32-bit bit patterns, 64-bit
// products, summed mod 2^64), then an avalanche with the length. Keys depend on the position (a key per
// column of a 128-value row plus a key per row), so the digest is order-sensitive; since a sum does not
// depend on the order of its terms, pieces of rows can be summed on several threads and added in any order
// (the result is the same bits). One value changed is always seen when the other value of its pair is a
// non-negative float (every descriptor value is): keys are in [1, 2^31), so that value plus its key is
// below 2^32 and not 0, and the product's change is not 0 mod 2^64. The pair loop vectorises (about 8
// bytes a cycle with SSE2), where the former word-by-word FNV chain ran one multiply latency per value
// (~0.6 ms for 2,400 features, ~30 ms for 120,000).
#pragma once

#include <cstddef>
#include <cstdint>

namespace spectrasift::detail {

/// Values per row of the digest's keys (Features::kDescriptorSize).
constexpr std::size_t kDigestRow = 128;

/// The digest's sum over values[0, n), which are the values at positions first .. first + n - 1 of the
/// whole array; `first` is a multiple of kDigestRow. Sums of consecutive pieces add up (mod 2^64) to the
/// sum of the whole.
std::uint64_t descriptor_digest_sum(const float* values, std::size_t first, std::size_t n) noexcept;

/// The same sum over byte descriptors (Features::descriptor_bytes): each byte's value in place of a float's
/// bit pattern, so a changed byte always changes the sum, as above. Byte and float arrays are told apart by
/// DeviceFeatures, not by the digest.
std::uint64_t descriptor_digest_sum(const std::uint8_t* values, std::size_t first, std::size_t n) noexcept;

/// The digest of an array of n values from its sum.
std::uint64_t descriptor_digest_finish(std::uint64_t sum, std::size_t n) noexcept;

/// A 64-bit digest of `n` floats' bit patterns (order-sensitive; not cryptographic):
/// descriptor_digest_finish(descriptor_digest_sum(values, 0, n), n).
std::uint64_t descriptor_digest(const float* values, std::size_t n) noexcept;
/// The same for n bytes.
std::uint64_t descriptor_digest(const std::uint8_t* values, std::size_t n) noexcept;

}  // namespace spectrasift::detail

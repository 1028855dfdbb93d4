// The descriptor content digest (descriptor_digest.hpp).
#include "backend/descriptor_digest.hpp"

#include <array>
#include <cstring>

namespace spectrasift::detail {

namespace {

constexpr std::uint64_t mix64(std::uint64_t z) noexcept {  // splitmix64's finaliser
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Column keys in [1, 2^30] and row keys in [0, 2^30): their sum is in [1, 2^31).
constexpr std::array<std::uint32_t, kDigestRow> make_column_keys() {
  std::array<std::uint32_t, kDigestRow> k{};
  for (std::size_t c = 0; c < kDigestRow; ++c) k[c] = std::uint32_t(mix64(0x5851f42d4c957f2dull + c) >> 34) + 1;
  return k;
}
constexpr std::array<std::uint32_t, kDigestRow> kColumnKeys = make_column_keys();

inline std::uint32_t row_key(std::size_t row) noexcept {
  return std::uint32_t((std::uint64_t(row) * 0x9e3779b97f4a7c15ull) >> 34);
}

// A value's 32 bits: a float's bit pattern, a byte's value.
inline std::uint32_t bits_of(const float* v) noexcept {
  std::uint32_t a;
  std::memcpy(&a, v, sizeof a);
  return a;
}
inline std::uint32_t bits_of(const std::uint8_t* v) noexcept { return *v; }

// Sum over the first m <= kDigestRow values of one row (m even but for the array's last value).
template <class T> inline std::uint64_t row_sum(const T* values, std::size_t m, std::uint32_t rk) noexcept {
  std::uint64_t s = 0;
  const std::size_t pairs = m / 2;
  for (std::size_t p = 0; p < pairs; ++p) {
    std::uint32_t a = bits_of(values + 2 * p), b = bits_of(values + 2 * p + 1);
    a += kColumnKeys[2 * p] + rk;
    b += kColumnKeys[2 * p + 1] + rk;
    s += std::uint64_t(a) * b;
  }
  if (m % 2) s += std::uint64_t(bits_of(values + m - 1) + (kColumnKeys[m - 1] + rk)) * 0x9fb21c651e98df25ull;
  return s;
}

template <class T> std::uint64_t digest_sum(const T* values, std::size_t first, std::size_t n) noexcept {
  const std::size_t row0 = first / kDigestRow;
  std::uint64_t s = 0;
  std::size_t r = 0;
  for (; (r + 1) * kDigestRow <= n; ++r) s += row_sum(values + r * kDigestRow, kDigestRow, row_key(row0 + r));
  if (r * kDigestRow < n) s += row_sum(values + r * kDigestRow, n - r * kDigestRow, row_key(row0 + r));
  return s;
}

}  // namespace

std::uint64_t descriptor_digest_sum(const float* values, std::size_t first, std::size_t n) noexcept {
  return digest_sum(values, first, n);
}

std::uint64_t descriptor_digest_sum(const std::uint8_t* values, std::size_t first, std::size_t n) noexcept {
  return digest_sum(values, first, n);
}

std::uint64_t descriptor_digest_finish(std::uint64_t sum, std::size_t n) noexcept {
  return mix64(sum ^ mix64(0xcbf29ce484222325ull + std::uint64_t(n)));
}

std::uint64_t descriptor_digest(const float* values, std::size_t n) noexcept {
  return descriptor_digest_finish(descriptor_digest_sum(values, 0, n), n);
}

std::uint64_t descriptor_digest(const std::uint8_t* values, std::size_t n) noexcept {
  return descriptor_digest_finish(descriptor_digest_sum(values, 0, n), n);
}

}  // namespace spectrasift::detail

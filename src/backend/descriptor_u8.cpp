// pack_descriptors_u8: see descriptor_u8.hpp. Explicit SIMD (docs/performance/matching.md, 'GPU matching: the
// u8 path'): GCC does not vectorise the portable loop without fast-math (the float clamps become branches), and
// the scalar loop was most of a 16384 x 16384 GPU call's time. Every form computes the same bytes and norms and
// the same verdict; which one runs (AVX2, SSE2, scalar) never changes a result.
#include "backend/descriptor_u8.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <cstring>

#include "core/cpu_features.hpp"

namespace spectrasift::detail {

namespace {

// The verdict, written once for every form: a value is a byte when it lies in [0, 255] (NaN does not) and its
// truncation converts back to it (-0.0 does: it is 0). The vector forms test the same thing as
// "the truncated int32 has no bit above the low 8" (negative, NaN and out-of-range conversions give high bits)
// and "float(truncated) == value" (an ordered compare: NaN fails).
// Norms are summed in uint32_t (wrapping, defined): for invalid values the vector forms' truncations can
// be anything and an int32 sum could overflow; valid rows stay below 2^24, so the int32 they end as is exact.
bool pack_scalar(const float* v, std::size_t n, std::uint8_t* out, std::uint32_t& norm) noexcept {
  bool ok = true;
  for (std::size_t k = 0; k < n; ++k) {
    const float x = v[k];
    if (!(x >= 0.0f && x <= 255.0f)) {  // the conversion below is defined only in range
      ok = false;
      continue;
    }
    const int u = int(x);
    ok &= float(u) == x;
    out[k] = std::uint8_t(u);
    norm += std::uint32_t(u * u);
  }
  return ok;
}

#if defined(__x86_64__)

namespace base {

std::uint32_t horizontal_sum(__m128i s) noexcept {
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
  return std::uint32_t(_mm_cvtsi128_si32(s));
}

// SSE2 (the x86-64 baseline): n values of one row, 16 per step, then the scalar tail; the norm is added to.
// The int32s are narrowed with signed then unsigned saturation (exact for 0..255), and the squares are summed
// by pmaddwd on the 16-bit form (2 * 255^2 fits in int32; integer sums are exact in any order).
bool pack_span(const float* v, std::size_t n, std::uint8_t* out, std::uint32_t& norm) noexcept {
  const std::size_t body = n / 16 * 16;
  __m128i high = _mm_setzero_si128();                  // OR of every truncated value
  __m128 same = _mm_castsi128_ps(_mm_set1_epi32(-1));  // AND of float(truncated) == value
  __m128i sum = _mm_setzero_si128();
  for (std::size_t k = 0; k < body; k += 16) {
    const __m128 a = _mm_loadu_ps(v + k), b = _mm_loadu_ps(v + k + 4);
    const __m128 c = _mm_loadu_ps(v + k + 8), e = _mm_loadu_ps(v + k + 12);
    const __m128i ia = _mm_cvttps_epi32(a), ib = _mm_cvttps_epi32(b);
    const __m128i ic = _mm_cvttps_epi32(c), ie = _mm_cvttps_epi32(e);
    same = _mm_and_ps(same, _mm_and_ps(_mm_cmpeq_ps(_mm_cvtepi32_ps(ia), a), _mm_cmpeq_ps(_mm_cvtepi32_ps(ib), b)));
    same = _mm_and_ps(same, _mm_and_ps(_mm_cmpeq_ps(_mm_cvtepi32_ps(ic), c), _mm_cmpeq_ps(_mm_cvtepi32_ps(ie), e)));
    high = _mm_or_si128(high, _mm_or_si128(_mm_or_si128(ia, ib), _mm_or_si128(ic, ie)));
    const __m128i w0 = _mm_packs_epi32(ia, ib), w1 = _mm_packs_epi32(ic, ie);
    sum = _mm_add_epi32(sum, _mm_add_epi32(_mm_madd_epi16(w0, w0), _mm_madd_epi16(w1, w1)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + k), _mm_packus_epi16(w0, w1));
  }
  norm += horizontal_sum(sum);
  const bool ok = pack_scalar(v + body, n - body, out + body, norm);
  const __m128i above = _mm_and_si128(high, _mm_set1_epi32(~0xff));
  return ok && _mm_movemask_epi8(_mm_cmpeq_epi32(above, _mm_setzero_si128())) == 0xffff &&
         _mm_movemask_ps(same) == 0xf;
}

}  // namespace base

#ifdef SPECTRASIFT_ISA_REGIONS
SPECTRASIFT_ISA_BEGIN("avx2")
namespace avx2 {
// AVX2: 32 values per step, the same tests; the rest of a row (dim not a multiple of 32) takes the SSE2 span.
// The two packs work within 128-bit lanes, so the 4-byte groups come out as a0 b0 c0 e0 | a1 b1 c1 e1 and one
// cross-lane permute puts them in order.
bool pack_rows(const float* values, std::size_t begin, std::size_t end, std::size_t d, std::uint8_t* bytes,
                    std::int32_t* norms) noexcept {
  const std::size_t body = d / 32 * 32;
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  __m256i high = _mm256_setzero_si256();
  __m256 same = _mm256_castsi256_ps(_mm256_set1_epi32(-1));
  bool ok = true;
  for (std::size_t r = begin; r < end; ++r) {
    const float* v = values + r * d;
    std::uint8_t* out = bytes + r * d;
    __m256i sum = _mm256_setzero_si256();
    for (std::size_t k = 0; k < body; k += 32) {
      const __m256 a = _mm256_loadu_ps(v + k), b = _mm256_loadu_ps(v + k + 8);
      const __m256 c = _mm256_loadu_ps(v + k + 16), e = _mm256_loadu_ps(v + k + 24);
      const __m256i ia = _mm256_cvttps_epi32(a), ib = _mm256_cvttps_epi32(b);
      const __m256i ic = _mm256_cvttps_epi32(c), ie = _mm256_cvttps_epi32(e);
      same = _mm256_and_ps(same, _mm256_and_ps(_mm256_cmp_ps(_mm256_cvtepi32_ps(ia), a, _CMP_EQ_OQ),
                                               _mm256_cmp_ps(_mm256_cvtepi32_ps(ib), b, _CMP_EQ_OQ)));
      same = _mm256_and_ps(same, _mm256_and_ps(_mm256_cmp_ps(_mm256_cvtepi32_ps(ic), c, _CMP_EQ_OQ),
                                               _mm256_cmp_ps(_mm256_cvtepi32_ps(ie), e, _CMP_EQ_OQ)));
      high = _mm256_or_si256(high, _mm256_or_si256(_mm256_or_si256(ia, ib), _mm256_or_si256(ic, ie)));
      const __m256i w0 = _mm256_packs_epi32(ia, ib), w1 = _mm256_packs_epi32(ic, ie);
      sum = _mm256_add_epi32(sum, _mm256_add_epi32(_mm256_madd_epi16(w0, w0), _mm256_madd_epi16(w1, w1)));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + k),
                          _mm256_permutevar8x32_epi32(_mm256_packus_epi16(w0, w1), order));
    }
    std::uint32_t norm =
        base::horizontal_sum(_mm_add_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1)));
    if (body < d) ok &= base::pack_span(v + body, d - body, out + body, norm);
    norms[r] = std::int32_t(norm);
  }
  return ok && _mm256_testz_si256(high, _mm256_set1_epi32(~0xff)) && _mm256_movemask_ps(same) == 0xff;
}
}  // namespace avx2
SPECTRASIFT_ISA_END
#endif

#else  // no x86-64: the scalar form

namespace base {
bool pack_span(const float* v, std::size_t n, std::uint8_t* out, std::uint32_t& norm) noexcept {
  return pack_scalar(v, n, out, norm);
}
}  // namespace base

#endif  // __x86_64__

namespace base {
// Rows [begin, end), one span each (the baseline build; AVX2 has its own loop).
bool pack_rows(const float* values, std::size_t begin, std::size_t end, std::size_t d, std::uint8_t* bytes,
               std::int32_t* norms) noexcept {
  bool ok = true;
  for (std::size_t r = begin; r < end; ++r) {
    std::uint32_t norm = 0;
    ok &= pack_span(values + r * d, d, bytes + r * d, norm);
    norms[r] = std::int32_t(norm);
  }
  return ok;
}
}  // namespace base

using PackRows = bool (*)(const float*, std::size_t, std::size_t, std::size_t, std::uint8_t*, std::int32_t*) noexcept;

}  // namespace

bool pack_descriptors_u8(const float* values, std::size_t begin, std::size_t end, int dim, std::uint8_t* bytes,
                         std::int32_t* norms) noexcept {
#ifdef SPECTRASIFT_ISA_REGIONS
  const PackRows avx2_fn = &avx2::pack_rows;
#else
  const PackRows avx2_fn = nullptr;
#endif
  return pick_isa<PackRows>(nullptr, avx2_fn, &base::pack_rows)(values, begin, end, std::size_t(dim), bytes, norms);
}

void copy_descriptors_u8(const std::uint8_t* source, std::size_t begin, std::size_t end, int dim, std::uint8_t* bytes,
                         std::int32_t* norms) noexcept {
  const std::size_t d = std::size_t(dim);
  std::memcpy(bytes + begin * d, source + begin * d, (end - begin) * d);
  for (std::size_t r = begin; r < end; ++r) {
    const std::uint8_t* row = source + r * d;
    std::int32_t norm = 0;  // at most 128 * 255^2 < 2^24 at dim 128; exact in any order
    for (std::size_t k = 0; k < d; ++k) norm += std::int32_t(row[k]) * std::int32_t(row[k]);
    norms[r] = norm;
  }
}

}  // namespace spectrasift::detail

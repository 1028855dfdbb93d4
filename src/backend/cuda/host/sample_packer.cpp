// SamplePacker: see numeric/sample_pack.h for the format.
#include "backend/cuda/host/sample_packer.hpp"

#include "core/cpu_features.hpp"

#if defined(__x86_64__)
// GCC 12's AVX-512 intrinsics read undefined vectors on purpose (_mm512_undefined_*), which -Wuninitialized
// reports at their lines in the header once inlined into a target("avx512bw") function: silenced for the header.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#pragma GCC diagnostic pop
#endif

#include <algorithm>
#include <bit>
#include <cstring>
#include <thread>

namespace spectrasift::detail {
namespace {

constexpr std::uint64_t kUnset = ~std::uint64_t(0);
constexpr std::size_t kBlockBytes = 2 * kPackBlockValues;

std::uint16_t bswap16(std::uint16_t v) { return std::uint16_t((v >> 8) | (v << 8)); }

/// Biased values u = v ^ bias of one block (bias 0x8000 for int16: unsigned order = signed order, and
/// u - umin = v - vmin mod 2^16). `p` holds kPackBlockValues stored samples (a partial block was padded).
void load_block(const std::uint8_t* p, bool swap, std::uint16_t bias, std::uint16_t* u) {
  for (int i = 0; i < kPackBlockValues; ++i) {
    std::uint16_t v;
    std::memcpy(&v, p + 2 * i, 2);
    u[i] = std::uint16_t((swap ? bswap16(v) : v) ^ bias);
  }
}

void range_scalar(const std::uint8_t* p, bool swap, std::uint16_t bias, std::uint16_t& umin, std::uint16_t& umax) {
  std::uint16_t u[kPackBlockValues];
  load_block(p, swap, bias, u);
  umin = *std::min_element(u, u + kPackBlockValues);
  umax = *std::max_element(u, u + kPackBlockValues);
}

void planes_scalar(const std::uint8_t* p, bool swap, std::uint16_t bias, std::uint16_t umin, int width,
                   std::uint8_t* out) {
  std::uint16_t u[kPackBlockValues];
  load_block(p, swap, bias, u);
  for (int j = 0; j < width; ++j) {
    std::uint64_t plane = 0;
    for (int i = 0; i < kPackBlockValues; ++i)
      plane |= std::uint64_t((std::uint16_t(u[i] - umin) >> j) & 1u) << i;
    std::memcpy(out + std::size_t(kPackPlaneBytes) * j, &plane, 8);  // little-endian: value i at byte i/8, bit i%8
  }
}

// The vector packers, one ISA region per PackIsa level (the pattern of core/cpu_features.hpp); best_isa()
// says which of them this CPU runs.
#if defined(SPECTRASIFT_ISA_REGIONS)
#define SPECTRASIFT_PACK_AVX512 1
SPECTRASIFT_ISA_BEGIN("avx512f,avx512bw")
namespace avx512bw {

// Two 512-bit vectors hold a block (2 x 32 values): the numeric values (stored bytes swapped when `swap`).
inline void load_values(const std::uint8_t* p, bool swap, __m512i& a, __m512i& b) {
  a = _mm512_loadu_si512(p);
  b = _mm512_loadu_si512(p + 64);
  if (swap) {
    a = _mm512_or_si512(_mm512_slli_epi16(a, 8), _mm512_srli_epi16(a, 8));
    b = _mm512_or_si512(_mm512_slli_epi16(b, 8), _mm512_srli_epi16(b, 8));
  }
}

// The biased values u = v ^ bias of a block.
inline void load_block(const std::uint8_t* p, bool swap, std::uint16_t bias, __m512i& a, __m512i& b) {
  load_values(p, swap, a, b);
  const __m512i k = _mm512_set1_epi16(short(bias));
  a = _mm512_xor_si512(a, k);
  b = _mm512_xor_si512(b, k);
}

void range(const std::uint8_t* p, bool swap, std::uint16_t bias, std::uint16_t& umin, std::uint16_t& umax) {
  __m512i a, b;
  load_block(p, swap, bias, a, b);
  __m512i mn = _mm512_min_epu16(a, b), mx = _mm512_max_epu16(a, b);
  // Fold the four 128-bit lanes onto lane 0 (swap the halves, then neighbouring lanes). Not with
  // _mm512_extracti64x4_epi64: GCC 12's header reads an undefined vector there (-Wuninitialized).
  mn = _mm512_min_epu16(mn, _mm512_shuffle_i64x2(mn, mn, 0x4E));
  mx = _mm512_max_epu16(mx, _mm512_shuffle_i64x2(mx, mx, 0x4E));
  mn = _mm512_min_epu16(mn, _mm512_shuffle_i64x2(mn, mn, 0xB1));
  mx = _mm512_max_epu16(mx, _mm512_shuffle_i64x2(mx, mx, 0xB1));
  const __m128i mn1 = _mm512_castsi512_si128(mn), mx1 = _mm512_castsi512_si128(mx);
  // PHMINPOSUW: the minimum of 8 words in one instruction; the maximum is the complement of the
  // complements' minimum.
  umin = std::uint16_t(_mm_extract_epi16(_mm_minpos_epu16(mn1), 0));
  umax = std::uint16_t(~_mm_extract_epi16(_mm_minpos_epu16(_mm_xor_si128(mx1, _mm_set1_epi32(-1))), 0));
}

void planes(const std::uint8_t* p, bool swap, std::uint16_t bias, std::uint16_t umin, int width,
            std::uint8_t* out) {
  __m512i a, b;
  load_block(p, swap, bias, a, b);
  const __m512i m = _mm512_set1_epi16(short(umin));
  a = _mm512_sub_epi16(a, m);
  b = _mm512_sub_epi16(b, m);
  for (int j = 0; j < width; ++j) {
    const __m512i bit = _mm512_set1_epi16(short(1u << j));
    const std::uint64_t plane = std::uint64_t(_mm512_test_epi16_mask(a, bit)) |
                                (std::uint64_t(_mm512_test_epi16_mask(b, bit)) << 32);
    std::memcpy(out + std::size_t(kPackPlaneBytes) * j, &plane, 8);
  }
}

}  // namespace avx512bw
SPECTRASIFT_ISA_END

/// Byte indices of the permutes of gfni::planes.
struct GfniTables {
  std::uint8_t lo[64], hi[64], planes[64];
  GfniTables() {
    for (int p = 0; p < 64; ++p) {
      // lo/hi: qword q, byte r <- the low/high byte of value 8q + 7 - r (of a: bytes 0..63, of b: 64..127).
      const int v = 8 * (p / 8) + 7 - p % 8;
      lo[p] = std::uint8_t(2 * v);
      hi[p] = std::uint8_t(2 * v + 1);
      // planes: byte 8i + q <- byte 8q + i (the transposes leave plane i's byte q at qword q, byte i).
      planes[p] = std::uint8_t(8 * (p % 8) + p / 8);
    }
  }
};
const GfniTables kGfni;

SPECTRASIFT_ISA_BEGIN("avx512f,avx512bw,avx512vl,avx512cd,avx512vbmi,gfni")
namespace gfni {

inline void planes(const std::uint8_t* p, bool swap, std::uint16_t base, int width, std::uint8_t* out) {
  // v - base mod 2^16 equals the biased difference u - umin: no bias needed here.
  __m512i a, b;
  avx512bw::load_values(p, swap, a, b);
  const __m512i m = _mm512_set1_epi16(short(base));
  a = _mm512_sub_epi16(a, m);
  b = _mm512_sub_epi16(b, m);
  // Low and high bytes of the 64 deltas, 8 values per qword in reverse order.
  const __m512i lo = _mm512_permutex2var_epi8(a, _mm512_loadu_si512(kGfni.lo), b);
  const __m512i hi = _mm512_permutex2var_epi8(a, _mm512_loadu_si512(kGfni.hi), b);
  // GF2P8AFFINEQB with x = byte i -> 1 << i: result byte i, bit k = bit i of the matrix qword's byte 7 - k,
  // i.e. bit i of value 8q + k: each qword becomes the 8x8 transpose of its bits.
  const __m512i unit = _mm512_set1_epi64(0x8040201008040201ll);
  const __m512i order = _mm512_loadu_si512(kGfni.planes);
  const __m512i p_lo = _mm512_permutexvar_epi8(order, _mm512_gf2p8affine_epi64_epi8(unit, lo, 0));  // planes 0-7
  const __m512i p_hi = _mm512_permutexvar_epi8(order, _mm512_gf2p8affine_epi64_epi8(unit, hi, 0));  // planes 8-15
  // Masked stores, without a branch on the width (which varies from block to block and mispredicted): a
  // store with an empty mask writes nothing and cannot fault.
  _mm512_mask_storeu_epi64(out, __mmask8((1u << std::min(width, 8)) - 1), p_lo);
  _mm512_mask_storeu_epi64(out + 64, __mmask8((1u << std::max(width - 8, 0)) - 1), p_hi);
}

/// Reduces 8 vectors of 32 words, x[t] holding partial results of block t, to the 8 blocks' results (word t):
/// 128-bit lanes are paired across blocks (two shuffles and one op halve the lanes per block, twice), then
/// each lane is folded on itself. 31 operations for 8 blocks, against 10 per block one at a time.
template <bool kMax>
inline __m512i op16(__m512i a, __m512i b) {
  if constexpr (kMax) return _mm512_max_epu16(a, b);
  else return _mm512_min_epu16(a, b);
}

template <bool kMax>
inline __m128i fold8(const __m512i* x) {
  constexpr auto op = op16<kMax>;
  __m512i z[4], y[2];
  for (int i = 0; i < 4; ++i)  // lanes 0-1: block 2i, lanes 2-3: block 2i+1
    z[i] = op(_mm512_shuffle_i64x2(x[2 * i], x[2 * i + 1], 0x44), _mm512_shuffle_i64x2(x[2 * i], x[2 * i + 1], 0xEE));
  for (int i = 0; i < 2; ++i)  // lane t: block 4i+t
    y[i] = op(_mm512_shuffle_i64x2(z[2 * i], z[2 * i + 1], 0x88), _mm512_shuffle_i64x2(z[2 * i], z[2 * i + 1], 0xDD));
  for (int i = 0; i < 2; ++i) {  // word 0 of lane t: block 4i+t
    y[i] = op(y[i], _mm512_bsrli_epi128(y[i], 8));
    y[i] = op(y[i], _mm512_bsrli_epi128(y[i], 4));
    y[i] = op(y[i], _mm512_bsrli_epi128(y[i], 2));
  }
  const __m512i gather = _mm512_set_epi16(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 56,
                                          48, 40, 32, 24, 16, 8, 0);
  return _mm512_castsi512_si128(_mm512_permutex2var_epi16(y[0], gather, y[1]));
}

/// Bases and widths of `nblocks` whole blocks at p, 8 at a time; returns their planes.
std::uint64_t ranges(const std::uint8_t* p, std::size_t nblocks, bool swap, std::uint16_t bias, std::uint8_t* bases,
                     std::uint8_t* widths) {
  std::uint64_t planes = 0;
  std::size_t k = 0;
  for (; k + 8 <= nblocks; k += 8) {
    const std::uint8_t* q = p + k * kBlockBytes;
    // The source is a file mapping of 4 KiB pages, where the hardware prefetchers stop: fetch 4 KiB ahead.
    for (int l = 0; l < 16; ++l) _mm_prefetch(reinterpret_cast<const char*>(q + 4096 + 64 * l), _MM_HINT_T0);
    __m512i mn[8], mx[8];
    for (int t = 0; t < 8; ++t) {
      __m512i a, b;
      avx512bw::load_block(q + kBlockBytes * t, swap, bias, a, b);
      mn[t] = _mm512_min_epu16(a, b);
      mx[t] = _mm512_max_epu16(a, b);
    }
    const __m128i lo = fold8<false>(mn), hi = fold8<true>(mx);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(bases + 2 * k), _mm_xor_si128(lo, _mm_set1_epi16(short(bias))));
    const __m256i range = _mm256_cvtepu16_epi32(_mm_sub_epi16(hi, lo));
    const __m128i w = _mm256_cvtepi32_epi8(_mm256_sub_epi32(_mm256_set1_epi32(32), _mm256_lzcnt_epi32(range)));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(widths + k), w);
    planes += std::uint64_t(_mm_cvtsi128_si64(_mm_sad_epu8(_mm_move_epi64(w), _mm_setzero_si128())));
  }
  for (; k < nblocks; ++k) {
    std::uint16_t lo, hi;
    avx512bw::range(p + k * kBlockBytes, swap, bias, lo, hi);
    const std::uint16_t base = std::uint16_t(lo ^ bias);
    std::memcpy(bases + 2 * k, &base, 2);
    widths[k] = std::uint8_t(std::bit_width(std::uint16_t(hi - lo)));
    planes += widths[k];
  }
  return planes;
}

/// The planes of `nblocks` whole blocks at p (bases and widths from ranges) to out; returns the bytes.
std::size_t planes_run(const std::uint8_t* p, std::size_t nblocks, bool swap, const std::uint8_t* bases,
                       const std::uint8_t* widths, std::uint8_t* out) {
  std::size_t off = 0;
  for (std::size_t k = 0; k < nblocks; ++k) {  // width 0 writes nothing
    const int w = widths[k];
    std::uint16_t base;
    std::memcpy(&base, bases + 2 * k, 2);
    planes(p + k * kBlockBytes, swap, base, w, out + off);
    off += std::size_t(w) * kPackPlaneBytes;
  }
  return off;
}

}  // namespace gfni
SPECTRASIFT_ISA_END
#endif

}  // namespace

SamplePacker::SamplePacker(bool is_signed, bool swap, PackIsa max_isa)
    : signed_(is_signed), swap_(swap), isa_(std::min(max_isa, best_isa())) {}

PackIsa SamplePacker::best_isa() {
#if defined(SPECTRASIFT_PACK_AVX512)
  // Below the AVX-512 level (this CPU or the test/bench cap of set_cpu_isa_cap): the scalar packer.
  if (cpu_isa() < CpuIsa::kAvx512) return PackIsa::kScalar;
  const CpuFeatures& f = cpu_features();
  if (!f.avx512f || !f.avx512bw) return PackIsa::kScalar;
  if (f.avx512vl && f.avx512cd && f.avx512vbmi && f.gfni) return PackIsa::kAvx512Gfni;
  return PackIsa::kAvx512bw;
#else
  return PackIsa::kScalar;
#endif
}

std::size_t SamplePacker::max_packed_bytes(std::size_t values, std::size_t runs) {
  const std::size_t groups = values / kPackGroupValues + runs;
  return pack_header_bytes(groups) + groups * kPackGroupBlocks * 16 * kPackPlaneBytes;
}

void SamplePacker::layout(const std::vector<PackRun>& runs, std::size_t item_values) {
  items_.clear();
  const std::size_t per_item = std::max<std::size_t>(1, item_values / kPackGroupValues);
  int group = 0;
  for (const PackRun& r : runs) {
    const std::size_t ngroups = (r.values + kPackGroupValues - 1) / kPackGroupValues;
    for (std::size_t g = 0; g < ngroups; g += per_item) {
      const std::size_t n = std::min(per_item, ngroups - g);
      const std::size_t first = g * kPackGroupValues;
      items_.push_back({static_cast<const std::uint8_t*>(r.src) + 2 * first, r.dst_byte + 2 * first,
                        std::min(n * kPackGroupValues, r.values - first), group, int(n)});
      group += int(n);
    }
  }
  groups_ = group;
  header_bytes_ = pack_header_bytes(std::size_t(groups_));
  if (ends_size_ < items_.size()) {
    ends_ = std::make_unique<std::atomic<std::uint64_t>[]>(items_.size());
    ends_size_ = items_.size();
  }
  for (std::size_t i = 0; i < items_.size(); ++i) ends_[i].store(kUnset, std::memory_order_relaxed);
}

std::pair<std::size_t, std::size_t> SamplePacker::pack(int i, std::uint8_t* out) {
  const Item& it = items_[std::size_t(i)];
  const std::uint16_t bias = signed_ ? 0x8000 : 0;
  auto range = [&](const std::uint8_t* p, std::uint16_t& lo, std::uint16_t& hi) {
#if defined(SPECTRASIFT_PACK_AVX512)
    if (isa_ != PackIsa::kScalar) return avx512bw::range(p, swap_, bias, lo, hi);
#endif
    range_scalar(p, swap_, bias, lo, hi);
  };
  auto planes = [&](const std::uint8_t* p, std::uint16_t base, int w, std::uint8_t* dst) {
#if defined(SPECTRASIFT_PACK_AVX512)
    if (isa_ == PackIsa::kAvx512Gfni) return gfni::planes(p, swap_, base, w, dst);
    if (isa_ == PackIsa::kAvx512bw) return avx512bw::planes(p, swap_, bias, std::uint16_t(base ^ bias), w, dst);
#endif
    planes_scalar(p, swap_, bias, std::uint16_t(base ^ bias), w, dst);
  };
  // A partial block, padded with its first sample so that the padding widens nothing.
  std::uint8_t padded[kBlockBytes];
  auto block_src = [&](std::size_t v0, std::size_t count) -> const std::uint8_t* {
    const std::uint8_t* p = it.src + 2 * v0;
    if (count == std::size_t(kPackBlockValues)) return p;
    std::memcpy(padded, p, 2 * count);
    for (std::size_t k = count; k < std::size_t(kPackBlockValues); ++k) std::memcpy(padded + 2 * k, p, 2);
    return padded;
  };
  std::uint8_t* bases = out + pack_base_offset(std::size_t(groups_));
  std::uint8_t* widths = out + pack_width_offset(std::size_t(groups_));
  // Group g of the item: its first value (from the item's), its values, its first block slot.
  struct Span {
    std::size_t v0, values, slot0;
  };
  auto span = [&](int g) {
    const std::size_t v0 = std::size_t(g) * kPackGroupValues;
    return Span{v0, std::min<std::size_t>(kPackGroupValues, it.values - v0), std::size_t(it.group0 + g) * kPackGroupBlocks};
  };

  // 1. Bases and widths of every block slot of the item's groups; the payload they need.
  std::uint64_t payload = 0;
  for (int g = 0; g < it.ngroups; ++g) {
    const auto [gv0, gv, slot0] = span(g);
    std::size_t k0 = 0;  // blocks done
#if defined(SPECTRASIFT_PACK_AVX512)
    if (isa_ == PackIsa::kAvx512Gfni) {
      k0 = gv / kPackBlockValues;
      payload += kPackPlaneBytes * gfni::ranges(it.src + 2 * gv0, k0, swap_, bias, bases + 2 * slot0, widths + slot0);
    }
#endif
    for (std::size_t k = k0; k < std::size_t(kPackGroupBlocks); ++k) {
      std::uint16_t base = 0;
      std::uint8_t width = 0;
      const std::size_t v0 = gv0 + k * kPackBlockValues;
      if (v0 < gv0 + gv) {
        std::uint16_t lo, hi;
        range(block_src(v0, std::min<std::size_t>(kPackBlockValues, gv0 + gv - v0)), lo, hi);
        base = std::uint16_t(lo ^ bias);
        width = std::uint8_t(std::bit_width(std::uint16_t(hi - lo)));
        payload += std::uint64_t(width) * kPackPlaneBytes;
      }
      std::memcpy(bases + 2 * (slot0 + k), &base, 2);
      widths[slot0 + k] = width;
    }
  }
  if (i == 0) {
    const std::size_t end = pack_width_offset(std::size_t(groups_)) + std::size_t(groups_) * kPackGroupBlocks;
    std::memset(out + end, 0, header_bytes_ - end);
  }

  // 2. Where the payload starts: where item i-1's ends (published as soon as that item has sized its
  // blocks, so the wait is short: items are started in order).
  std::uint64_t start = 0;
  if (i > 0) {
    int spins = 0;
    while ((start = ends_[std::size_t(i - 1)].load(std::memory_order_acquire)) == kUnset) {
#if defined(__x86_64__)
      _mm_pause();
#endif
      if (++spins > 4096) std::this_thread::yield();  // the thread sizing item i-1 was descheduled
    }
  }
  ends_[std::size_t(i)].store(start + payload, std::memory_order_release);

  // 3. Group headers and planes.
  std::size_t off = header_bytes_ + std::size_t(start);
  const std::size_t first = off;
  for (int g = 0; g < it.ngroups; ++g) {
    const auto [gv0, gv, slot0] = span(g);
    const PackGroup h{it.dst_byte + 2 * gv0, std::uint32_t(off), std::uint32_t(gv)};
    std::memcpy(out + std::size_t(it.group0 + g) * sizeof(PackGroup), &h, sizeof h);
    std::size_t k0 = 0;
#if defined(SPECTRASIFT_PACK_AVX512)
    if (isa_ == PackIsa::kAvx512Gfni) {
      k0 = gv / kPackBlockValues;
      off += gfni::planes_run(it.src + 2 * gv0, k0, swap_, bases + 2 * slot0, widths + slot0, out + off);
    }
#endif
    for (std::size_t k = k0; k * kPackBlockValues < gv; ++k) {
      const int w = widths[slot0 + k];
      if (w == 0) continue;
      std::uint16_t base;
      std::memcpy(&base, bases + 2 * (slot0 + k), 2);
      const std::size_t v0 = gv0 + k * kPackBlockValues;
      planes(block_src(v0, std::min<std::size_t>(kPackBlockValues, gv0 + gv - v0)), base, w, out + off);
      off += std::size_t(w) * kPackPlaneBytes;
    }
  }
  return {first, off};
}

std::size_t SamplePacker::packed_bytes() const noexcept {
  if (items_.empty()) return header_bytes_;
  return header_bytes_ + std::size_t(ends_[items_.size() - 1].load(std::memory_order_acquire));
}

}  // namespace spectrasift::detail

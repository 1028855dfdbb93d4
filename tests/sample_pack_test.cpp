// The lossless packing of 16-bit samples for uploads (format src/numeric/sample_pack.h, packers
// src/backend/cuda/host/sample_packer.*, host code built with the CUDA backend): every sample comes back
// with its stored bytes, the widths are the smallest that hold each block, the scalar and both vector
// packers write the same bytes, threads and work items do not change them, and a real scene packs small.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <random>
#include <thread>
#include <vector>

#ifdef SPECTRASIFT_HAVE_CUDA
#include "backend/cuda/host/sample_packer.hpp"
#include "core/cpu_features.hpp"
#endif

namespace {

#ifdef SPECTRASIFT_HAVE_CUDA

using spectrasift::detail::kPackBlockValues;
using spectrasift::detail::kPackGroupBlocks;
using spectrasift::detail::kPackGroupValues;
using spectrasift::detail::pack_base_offset;
using spectrasift::detail::pack_width_offset;
using spectrasift::detail::PackIsa;
using spectrasift::detail::PackRun;
using spectrasift::detail::SamplePacker;
using spectrasift::detail::unpack_samples;

std::vector<std::uint8_t> pack_all(SamplePacker& p, const std::vector<PackRun>& runs, std::size_t item_values,
                                   std::size_t values, int threads = 1) {
  p.layout(runs, item_values);
  std::vector<std::uint8_t> out(SamplePacker::max_packed_bytes(values, runs.size()), 0xAB);
  if (threads <= 1) {
    for (int i = 0; i < p.items(); ++i) p.pack(i, out.data());
  } else {
    std::atomic<int> next{0};
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&] {
        for (int i; (i = next.fetch_add(1)) < p.items();) p.pack(i, out.data());
      });
    for (auto& t : pool) t.join();
  }
  out.resize(p.packed_bytes());
  return out;
}

/// Width of every block slot of a packed chunk.
std::vector<int> widths_of(const std::vector<std::uint8_t>& packed, int groups) {
  const std::uint8_t* w = packed.data() + pack_width_offset(std::size_t(groups));
  return std::vector<int>(w, w + std::size_t(groups) * kPackGroupBlocks);
}

/// Samples of several ranges (narrow, wide, full 16-bit, constant) in blocks of random length.
std::vector<std::uint16_t> mixed_samples(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<std::uint16_t> v(n);
  for (std::size_t i = 0; i < n;) {
    const std::size_t len = std::min<std::size_t>(n - i, 1 + rng() % 300);
    const int kind = int(rng() % 4);
    const std::uint16_t centre = std::uint16_t(rng());
    for (std::size_t k = 0; k < len; ++k, ++i) {
      switch (kind) {
        case 0: v[i] = std::uint16_t(centre + rng() % 37); break;
        case 1: v[i] = std::uint16_t(centre + rng() % 5000); break;
        case 2: v[i] = std::uint16_t(rng()); break;
        default: v[i] = centre;
      }
    }
  }
  return v;
}

TEST(SamplePack, EverySampleComesBackAsStored) {
  // Runs of every awkward length (partial blocks and groups, a single value), at even destination offsets
  // with gaps between them, read from an odd address (a header offset can make samples unaligned).
  const std::vector<std::size_t> lengths = {1, 63, 64, 65, 4095, 4096, 4097, 3 * 4096 + 130, 20000};
  std::size_t total = 0;
  for (auto n : lengths) total += n;
  const auto samples = mixed_samples(total, 3);
  std::vector<std::uint8_t> storage(2 * total + 1);
  std::memcpy(storage.data() + 1, samples.data(), 2 * total);
  for (bool is_signed : {false, true})
    for (bool swap : {false, true})
      for (PackIsa isa : {PackIsa::kScalar, PackIsa::kAvx512bw, PackIsa::kAvx512Gfni}) {
        std::vector<PackRun> runs;
        std::size_t at = 0, dst = 6;
        for (auto n : lengths) {
          runs.push_back({storage.data() + 1 + 2 * at, dst, n});
          at += n;
          dst += 2 * n + 10;
        }
        SamplePacker p(is_signed, swap, isa);
        const auto packed = pack_all(p, runs, 2 * kPackGroupValues, total);
        std::vector<std::uint8_t> out(dst, 0x5A);
        unpack_samples(packed.data(), p.groups(), swap, out.data());
        std::size_t next = 0;
        for (const PackRun& r : runs) {
          for (std::size_t b = next; b < r.dst_byte; ++b) ASSERT_EQ(out[b], 0x5A) << "byte " << b << " outside a run written";
          ASSERT_EQ(std::memcmp(out.data() + r.dst_byte, r.src, 2 * r.values), 0)
              << "run of " << r.values << " signed " << is_signed << " swap " << swap << " isa " << int(p.isa());
          next = r.dst_byte + 2 * r.values;
        }
      }
}

TEST(SamplePack, WidthIsTheSmallestThatHoldsTheBlock) {
  std::vector<std::int16_t> v(4 * kPackBlockValues);
  for (int i = 0; i < kPackBlockValues; ++i) {
    v[i] = 1234;                                                       // constant: width 0, no planes
    v[kPackBlockValues + i] = std::int16_t(i % 2 ? 1 : -1);            // {-1, 1}: range 2, 2 bits signed
    v[2 * kPackBlockValues + i] = std::int16_t(i == 5 ? -32768 : 32767);  // the full range: 16 bits
    v[3 * kPackBlockValues + i] = std::int16_t(100 + i);               // range 63: 6 bits
  }
  SamplePacker sp(true, false);
  const auto packed = pack_all(sp, {{v.data(), 0, v.size()}}, kPackGroupValues, v.size());
  const auto w = widths_of(packed, sp.groups());
  EXPECT_EQ(w[0], 0);
  EXPECT_EQ(w[1], 2);
  EXPECT_EQ(w[2], 16);
  EXPECT_EQ(w[3], 6);
  for (int k = 4; k < kPackGroupBlocks; ++k) EXPECT_EQ(w[std::size_t(k)], 0) << "unused slot " << k;
  EXPECT_EQ(packed.size(), sp.header_bytes() + std::size_t(2 + 16 + 6) * 8);
  std::int16_t base1;
  std::memcpy(&base1, packed.data() + pack_base_offset(1) + 2, 2);
  EXPECT_EQ(base1, -1);
  // Read as uint16, {0xFFFF, 1} spans the whole range.
  SamplePacker up(false, false);
  const auto packed_u = pack_all(up, {{v.data(), 0, v.size()}}, kPackGroupValues, v.size());
  EXPECT_EQ(widths_of(packed_u, up.groups())[1], 16);
  // Byte-swapped storage is measured on the values, not on the stored words.
  std::vector<std::uint16_t> s(kPackBlockValues);
  for (int i = 0; i < kPackBlockValues; ++i) s[std::size_t(i)] = std::uint16_t((1000 + i) << 8 | (1000 + i) >> 8);
  SamplePacker sw(false, true);
  EXPECT_EQ(widths_of(pack_all(sw, {{s.data(), 0, s.size()}}, kPackGroupValues, s.size()), 1)[0], 6);
}

TEST(SamplePack, BytesDoNotDependOnItemsThreadsOrInstructionSet) {
  const auto samples = mixed_samples(300000, 11);
  const std::vector<PackRun> runs = {{samples.data(), 0, 150001}, {samples.data() + 150001, 400000, 149999}};
  SamplePacker ref_packer(true, false, PackIsa::kScalar);
  const auto ref = pack_all(ref_packer, runs, kPackGroupValues, samples.size());
  for (std::size_t item : {std::size_t(kPackGroupValues), std::size_t(5 * kPackGroupValues), std::size_t(1) << 30})
    for (int threads : {1, 4})
      for (PackIsa isa : {PackIsa::kScalar, PackIsa::kAvx512bw, PackIsa::kAvx512Gfni}) {
        SamplePacker p(true, false, isa);
        EXPECT_EQ(pack_all(p, runs, item, samples.size(), threads), ref)
            << "item " << item << " threads " << threads << " isa " << int(p.isa());
      }
  if (SamplePacker::best_isa() != PackIsa::kAvx512Gfni)
    GTEST_SKIP() << "this processor lacks AVX-512BW or VBMI+GFNI: not every packer was compared";
}

// The packer's level follows cpu_features() and the library's ISA cap: below CpuIsa::kAvx512 it is scalar.
TEST(SamplePack, BestIsaFollowsTheCpuIsaCap) {
  const spectrasift::CpuFeatures& f = spectrasift::cpu_features();
  const PackIsa expected = !(f.avx512f && f.avx512bw) ? PackIsa::kScalar
                           : (f.avx512vl && f.avx512cd && f.avx512vbmi && f.gfni) ? PackIsa::kAvx512Gfni
                                                                                  : PackIsa::kAvx512bw;
  EXPECT_EQ(SamplePacker::best_isa(), expected);
  spectrasift::set_cpu_isa_cap(spectrasift::CpuIsa::kAvx2);
  EXPECT_EQ(SamplePacker::best_isa(), PackIsa::kScalar);
  EXPECT_EQ(SamplePacker(false, false).isa(), PackIsa::kScalar);
  spectrasift::set_cpu_isa_cap(spectrasift::CpuIsa::kAvx512);
  EXPECT_EQ(SamplePacker::best_isa(), expected);
}

TEST(SamplePack, RealSceneComesBackAndPacksSmall) {
  // HYDICE urban (uint16 BIP, 80 x 100 x 162): adjacent bands of a pixel are close.
  const std::string path = std::string(SPECTRASIFT_TEST_DATA) + "/hydice_data.img";
  std::ifstream f(path, std::ios::binary);
  ASSERT_TRUE(f) << path;
  std::vector<std::uint16_t> cube(std::size_t(80) * 100 * 162);
  f.read(reinterpret_cast<char*>(cube.data()), std::streamsize(2 * cube.size()));
  ASSERT_TRUE(f);
  SamplePacker p(false, false);
  const auto packed = pack_all(p, {{cube.data(), 0, cube.size()}}, 16 * kPackGroupValues, cube.size(), 3);
  std::vector<std::uint16_t> back(cube.size());
  unpack_samples(packed.data(), p.groups(), false, reinterpret_cast<std::uint8_t*>(back.data()));
  EXPECT_EQ(back, cube);
  const double ratio = double(packed.size()) / double(2 * cube.size());
  EXPECT_LT(ratio, 0.55) << "packed " << packed.size() << " bytes";  // 0.49 by a NumPy estimate of the format
  EXPECT_GT(ratio, 0.3);
  EXPECT_LE(packed.size(), SamplePacker::max_packed_bytes(cube.size(), 1));
}

TEST(SamplePack, BitTransposeMovesEveryBit) {
  std::mt19937_64 rng(17);
  for (int it = 0; it < 2000; ++it) {
    const std::uint64_t x = it < 64 ? std::uint64_t(1) << it : rng();
    std::uint64_t want = 0;
    for (int j = 0; j < 8; ++j)
      for (int i = 0; i < 8; ++i)
        if ((x >> (8 * j + i)) & 1u) want |= std::uint64_t(1) << (8 * i + j);
    ASSERT_EQ(spectrasift::detail::transpose_bits8x8(x), want) << std::hex << x;
  }
}

TEST(SamplePack, WorstCaseBoundHolds) {
  std::mt19937 rng(5);
  for (std::size_t n : {std::size_t(1), std::size_t(4097), std::size_t(100000)}) {
    std::vector<std::uint16_t> v(n);
    for (auto& x : v) x = std::uint16_t(rng());
    v[0] = 0;
    if (n > 1) v[1] = 0xFFFF;
    SamplePacker p(false, false);
    const auto packed = pack_all(p, {{v.data(), 0, n}}, kPackGroupValues, n);
    EXPECT_LE(packed.size(), SamplePacker::max_packed_bytes(n, 1));
    EXPECT_GE(packed.size(), 2 * n) << "random samples cannot pack";
  }
}

#endif  // SPECTRASIFT_HAVE_CUDA

}  // namespace

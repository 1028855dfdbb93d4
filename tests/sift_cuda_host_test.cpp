// The host side of CUDA SIFT's transfers (no GPU needed): the packed read-back (backend/cuda/host/
// sift_unpack.hpp: the layout that kernels/sift_pack.cuh writes, built here by hand, comes back as the same
// Keypoints and descriptors, with byte rows and with float rows, on one thread and on a pool), the chunks
// of a staged upload (host/upload_chunks.hpp), and the bitonic sort's launch plan (host/bitonic_plan.hpp),
// run here with the kernels' position arithmetic and checked against the plain network and std::sort.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "spectrasift/error.hpp"
#include "spectrasift/types.hpp"

#ifdef SPECTRASIFT_HAVE_CUDA
#include "backend/cuda/host/bitonic_plan.hpp"
#include "backend/descriptor_digest.hpp"
#include "backend/cuda/host/sift_unpack.hpp"
#include "backend/cuda/host/upload_chunks.hpp"
#include "backend/cuda/host_copy.hpp"
#endif

namespace {

#ifdef SPECTRASIFT_HAVE_CUDA
namespace ss = spectrasift;
namespace sc = spectrasift::cuda;

SiftKeypoint record(std::size_t i) {
  SiftKeypoint s{};
  s.x = 0.5f + float(i);
  s.y = 1.25f * float(i);
  s.size = 3.0f + float(i % 7);
  s.angle = float((i * 37) % 360);
  s.response = 0.01f * float(i % 13);
  s.layer_offset = -0.25f;
  s.sigma_octave = 9.0f;  // not a public field: must not leak anywhere
  s.octave = int(i % 4) - 1;
  s.layer = 1 + int(i % 3);
  s.r = 100;
  s.c = 200;
  s.octave_index = int(i % 4);
  return s;
}

float value(std::size_t i, int k) {
  return float((i * 131 + std::size_t(k) * 7) % 256);
}

// The layout of sift_pack_features for n features, rows as bytes or floats.
std::vector<unsigned char> pack(std::size_t n, bool u8_rows) {
  std::vector<unsigned char> b(std::size_t(sc::sift_packed_bytes(n, u8_rows)));
  for (std::size_t i = 0; i < n; ++i) {
    const SiftKeypoint s = record(i);
    std::memcpy(b.data() + i * sizeof s, &s, sizeof s);
  }
  unsigned char* rows = b.data() + sc::sift_packed_descriptor_offset(n);
  for (std::size_t i = 0; i < n; ++i)
    for (int k = 0; k < 128; ++k) {
      const float v = value(i, k);
      if (u8_rows)
        rows[i * 128 + std::size_t(k)] = static_cast<unsigned char>(v);
      else
        std::memcpy(rows + (i * 128 + std::size_t(k)) * 4, &v, 4);
    }
  return b;
}

void expect_features(const ss::Features& f, std::size_t n) {
  ASSERT_EQ(f.keypoints.size(), n);
  const bool u8 = f.descriptor_type == ss::DescriptorType::kU8;
  ASSERT_EQ(f.descriptor_values(), n * 128);
  ASSERT_EQ((u8 ? f.descriptors : std::vector<float>()).size(), 0u);
  ASSERT_EQ((u8 ? std::vector<std::uint8_t>() : f.descriptor_bytes).size(), 0u);
  for (std::size_t i = 0; i < n; ++i) {
    const SiftKeypoint s = record(i);
    const ss::Keypoint& k = f.keypoints[i];
    EXPECT_EQ(k.x, s.x);
    EXPECT_EQ(k.y, s.y);
    EXPECT_EQ(k.size, s.size);
    EXPECT_EQ(k.angle, s.angle);
    EXPECT_EQ(k.response, s.response);
    EXPECT_EQ(k.octave, s.octave);
    EXPECT_EQ(k.layer, s.layer);
    EXPECT_EQ(k.layer_offset, s.layer_offset);
    for (int c = 0; c < 128; ++c)
      ASSERT_EQ(u8 ? float(f.descriptor_bytes[i * 128 + std::size_t(c)]) : f.descriptors[i * 128 + std::size_t(c)],
                value(i, c))
          << i << " " << c;
  }
}

TEST(SiftCudaUnpack, LayoutIsAlignedAndSized) {
  for (unsigned long long n : {0ull, 1ull, 3ull, 1000ull}) {
    EXPECT_EQ(sc::sift_packed_descriptor_offset(n) % 16, 0u);
    EXPECT_EQ(sc::sift_packed_bytes(n, true), n * (48 + 128));
    EXPECT_EQ(sc::sift_packed_bytes(n, false), n * (48 + 512));
  }
  EXPECT_TRUE(sc::sift_descriptors_fit_bytes(false));
  EXPECT_FALSE(sc::sift_descriptors_fit_bytes(true));  // RootSIFT values are not integers
}

TEST(SiftCudaUnpack, BytesAndFloatsComeBackExactly) {
  sc::HostCopyPool pool(3);
  // Sizes around the piece size of the parallel conversion, and a Features with old content to replace.
  for (std::size_t n : {std::size_t(1), std::size_t(5), sc::kSiftUnpackRowsPerPiece, sc::kSiftUnpackRowsPerPiece + 1,
                        3 * sc::kSiftUnpackRowsPerPiece + 17,
                        std::size_t(8200) /* 4 MiB of floats: the populated path */}) {
    for (int form = 0; form < 3; ++form) {  // byte rows to floats, float rows to floats, byte rows to bytes
      const bool u8_rows = form != 1;
      const ss::DescriptorType type = form == 2 ? ss::DescriptorType::kU8 : ss::DescriptorType::kF32;
      for (sc::HostCopyPool* p : {static_cast<sc::HostCopyPool*>(nullptr), &pool}) {
        for (bool sized : {false, true}) {  // with and without size_sift_features before
          ss::Features f;
          f.keypoints.resize(7);
          f.descriptors.assign(7 * 128 + 3, -1.0f);
          f.descriptor_bytes.assign(5, 9);
          const std::vector<unsigned char> b = pack(n, u8_rows);
          if (sized) {
            sc::size_sift_features(n, type, f, p);
          } else {
            f.descriptor_type = type;
          }
          const std::uint64_t digest = sc::unpack_sift_features(b.data(), n, u8_rows, f, p);
          SCOPED_TRACE(testing::Message() << "n " << n << " form " << form << " pool " << (p != nullptr)
                                          << " sized " << sized);
          expect_features(f, n);
          // The digest summed piece by piece is the one of the whole array (what mirrors() recomputes).
          if (type == ss::DescriptorType::kU8)
            EXPECT_EQ(digest, ss::detail::descriptor_digest(f.descriptor_bytes.data(), f.descriptor_bytes.size()));
          else
            EXPECT_EQ(digest, ss::detail::descriptor_digest(f.descriptors.data(), f.descriptors.size()));
        }
      }
    }
  }
}

// u8 output from float rows (RootSIFT's read-back) is refused, not truncated.
TEST(SiftCudaUnpack, BytesFromFloatRowsAreRefused) {
  const std::vector<unsigned char> b = pack(3, false);
  ss::Features f;
  f.descriptor_type = ss::DescriptorType::kU8;
  EXPECT_THROW(sc::unpack_sift_features(b.data(), 3, false, f, nullptr), ss::Error);
}

// The byte rows are OpenCV's CV_8U export of the float rows: Features::descriptors_u8 gives them back.
TEST(SiftCudaUnpack, BytesAreTheU8Export) {
  const std::size_t n = 9;
  const std::vector<unsigned char> b = pack(n, true);
  ss::Features f;
  sc::unpack_sift_features(b.data(), n, true, f, nullptr);
  const std::vector<std::uint8_t> u8 = f.descriptors_u8();
  ASSERT_EQ(u8.size(), n * 128);
  EXPECT_EQ(0, std::memcmp(u8.data(), b.data() + sc::sift_packed_descriptor_offset(n), u8.size()));
}

// Chunks are consecutive, cover every byte once, stay within 256 KiB .. 4 MiB (but the last) on 64 KiB
// boundaries, and number about 8 for mid-size images.
TEST(SiftCudaUploadChunks, CoverTheImageInOrder) {
  std::vector<sc::ByteRange> c;
  for (std::size_t bytes : {sc::kStagedUploadMin, std::size_t(512000), std::size_t(1920) * 1080 * 3,
                            std::size_t(3840) * 2160 * 3, std::size_t(3840) * 2160 * 4 * 4 + 7}) {
    sc::split_upload(bytes, c);
    ASSERT_FALSE(c.empty());
    std::size_t next = 0;
    for (std::size_t i = 0; i < c.size(); ++i) {
      EXPECT_EQ(c[i].offset, next) << bytes << " chunk " << i;
      EXPECT_GT(c[i].bytes, 0u);
      EXPECT_LE(c[i].bytes, std::size_t(4) << 20);
      if (i + 1 < c.size()) {
        EXPECT_GE(c[i].bytes, std::size_t(256) << 10);
        EXPECT_EQ(c[i].bytes % (std::size_t(64) << 10), 0u);
      }
      next += c[i].bytes;
    }
    EXPECT_EQ(next, bytes);
    if (bytes >= std::size_t(16) << 20 && bytes <= std::size_t(32) << 20) {
      EXPECT_LE(c.size(), 9u) << bytes;
    }
  }
}

// The select stage's sort on the host: keys with many ties (so that a different network would show), -1
// past the live count; the comparisons as sift_index_before: -1 after every record.
struct SortRun {
  const std::vector<int>* keys;
  unsigned p = 0;
  bool before(int a, int b) const {
    if (a < 0) return false;
    if (b < 0) return true;
    return (*keys)[std::size_t(a)] < (*keys)[std::size_t(b)];
  }
  void cmpx(std::vector<int>& o, unsigned i, unsigned l, unsigned k) const {  // sift_compare_exchange
    const bool ascending = (i & k) == 0;
    const bool swap = ascending ? before(o[l], o[i]) : before(o[i], o[l]);
    if (swap) std::swap(o[i], o[l]);
  }
};

unsigned pow2_at_least(unsigned n) {
  unsigned p = 1;
  while (p < n) p <<= 1;
  return p;
}

// The launches of bitonic_plan as the kernels of sift_sort.cuh run them.
void run_plan(std::vector<int>& o, const SortRun& s, std::size_t block) {
  std::vector<sc::BitonicLaunch> plan;
  sc::bitonic_plan(o.size(), block, plan);
  const unsigned p = s.p, l = unsigned(block / 2);
  for (const sc::BitonicLaunch& x : plan) {
    if (x.kind == sc::BitonicLaunch::kLocalAll || x.kind == sc::BitonicLaunch::kLocalMerge) {
      for (unsigned base = 0; base < o.size(); base += 2 * l) {
        if (base >= p || x.k > p) continue;
        const unsigned k_first = x.k ? x.k : 2, k_last = x.k ? x.k : 2 * l;
        for (unsigned k = k_first; k <= k_last && k <= p; k <<= 1)
          for (unsigned j = std::min(k / 2, l); j > 0; j >>= 1)
            for (unsigned lid = 0; lid < l; ++lid) {
              const unsigned i = sc::bitonic_pair_lower(lid, j);
              if (base + i < p) s.cmpx(o, base + i, base + i + j, k);
            }
      }
    } else if (x.kind == sc::BitonicLaunch::kStep) {
      ASSERT_GE(x.j, block);
      if (x.k > p) continue;
      for (unsigned t = 0; t < p / 2; ++t) {
        const unsigned i = sc::bitonic_pair_lower(t, x.j);
        s.cmpx(o, i, i + x.j, x.k);
      }
    } else {
      ASSERT_GE(x.j / 2, block);
      if (x.k > p) continue;
      const unsigned h = x.j / 2;
      for (unsigned t = 0; t < p / 4; ++t) {
        const unsigned b = sc::bitonic_quad_base(t, x.j);
        s.cmpx(o, b, b + x.j, x.k);
        s.cmpx(o, b + h, b + x.j + h, x.k);
        s.cmpx(o, b, b + h, x.k);
        s.cmpx(o, b + x.j, b + x.j + h, x.k);
      }
    }
  }
}

// The plain network over [0, p): every step, every pair, in order.
void run_network(std::vector<int>& o, const SortRun& s) {
  for (unsigned k = 2; k <= s.p; k <<= 1)
    for (unsigned j = k / 2; j > 0; j >>= 1)
      for (unsigned i = 0; i < s.p; ++i)
        if ((i & j) == 0) s.cmpx(o, i, i + j, k);
}

TEST(SiftCudaSort, PlanRunsTheNetworkAndSorts) {
  std::mt19937 rng(7);
  for (unsigned n : {1u, 2u, 3u, 511u, 2048u, 2049u, 5000u, 70000u}) {
    for (std::size_t block : {std::size_t(512), std::size_t(2048)}) {
      std::vector<int> keys(n);
      for (int& k : keys) k = int(rng() % std::max(2u, n / 4));                              // many ties
      const std::size_t positions = std::max<std::size_t>(pow2_at_least(n + n / 3), block);  // P_max >= P
      std::vector<int> order(positions, 12345);                                              // beyond P: never touched
      for (unsigned i = 0; i < pow2_at_least(n); ++i) order[i] = i < n ? int(i) : -1;
      SortRun s{&keys, pow2_at_least(n)};
      std::vector<int> plain = order;
      run_plan(order, s, block);
      run_network(plain, s);
      SCOPED_TRACE(testing::Message() << "n " << n << " block " << block);
      ASSERT_EQ(order, plain);  // the same network, so the same order even among ties
      for (unsigned i = 0; i + 1 < n; ++i) ASSERT_LE(keys[std::size_t(order[i])], keys[std::size_t(order[i + 1])]);
      std::vector<int> seen(order.begin(), order.begin() + n);
      std::sort(seen.begin(), seen.end());
      for (unsigned i = 0; i < n; ++i) ASSERT_EQ(seen[i], int(i));
      for (unsigned i = n; i < s.p; ++i) EXPECT_EQ(order[i], -1);
      for (std::size_t i = s.p; i < positions; ++i) EXPECT_EQ(order[i], 12345);
    }
  }
}

TEST(SiftCudaSort, FewerLaunches) {
  std::vector<sc::BitonicLaunch> plan;
  sc::bitonic_plan(std::size_t(1) << 16, 2048, plan);
  EXPECT_EQ(plan.size(), 15u);  // 1 + 5 merges + 9 global (was 36 with blocks of 512 and one step a launch)
  sc::bitonic_plan(2048, 2048, plan);
  EXPECT_EQ(plan.size(), 1u);
}
#else
TEST(SiftCudaUnpack, Skipped) {
  GTEST_SKIP() << "built without CUDA";
}
#endif

}  // namespace

// CUDA descriptor matching (issue 19, item 2) against the CPU backend: the same nearest two, index for index
// and distance bit for bit, for SIFT's integer-valued descriptors and for arbitrary floats (the same float
// sums in the same order), with ties, tiny and empty sets, from host descriptors and from the device copies
// that CUDA SIFT leaves in Features::device. Skips with a message when the machine has no CUDA device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "match_filter_test_util.hpp"
#include "sift_device_test_util.hpp"
#include "spectrasift/context.hpp"
#include "spectrasift/match.hpp"
#include "spectrasift/sift.hpp"

namespace ss = spectrasift;

namespace {

constexpr int kDim = ss::Features::kDescriptorSize;

#define REQUIRE_CUDA() \
  if (!ss::test::have_device(ss::Backend::kCuda)) GTEST_SKIP() << "no CUDA device on this machine"

ss::Context make_context(ss::Backend b) {
  ss::ContextOptions o;
  o.backend = b;
  o.threads = 2;
  return ss::Context(o);
}

/// n random descriptors; integer-valued 0..255 (as SIFT's) when `integer`, else uniform in [0, 1).
ss::Features random_features(int n, std::uint64_t seed, bool integer) {
  std::mt19937_64 g(seed);
  ss::Features f;
  f.keypoints.resize(std::size_t(n));
  f.descriptors.resize(std::size_t(n) * kDim);
  for (auto& v : f.descriptors) v = integer ? float(g() % 256) : float(double(g() >> 11) * 0x1.0p-53);
  return f;
}

void expect_same(const std::vector<ss::Top2>& cpu, const std::vector<ss::Top2>& gpu, const std::string& what) {
  ASSERT_EQ(cpu.size(), gpu.size()) << what;
  std::size_t differ = 0;
  for (std::size_t i = 0; i < cpu.size(); ++i) {
    const bool same = cpu[i].best1 == gpu[i].best1 && cpu[i].best2 == gpu[i].best2 &&
                      std::memcmp(&cpu[i].distance1, &gpu[i].distance1, sizeof(float)) == 0 &&
                      std::memcmp(&cpu[i].distance2, &gpu[i].distance2, sizeof(float)) == 0;
    if (!same && differ++ < 5)
      ADD_FAILURE() << what << ": query " << i << " cpu (" << cpu[i].best1 << ", " << cpu[i].best2 << ", "
                    << cpu[i].distance1 << ", " << cpu[i].distance2 << ") cuda (" << gpu[i].best1 << ", "
                    << gpu[i].best2 << ", " << gpu[i].distance1 << ", " << gpu[i].distance2 << ")";
  }
  EXPECT_EQ(differ, 0u) << what;
}

TEST(MatchCuda, RandomDescriptorsGiveTheCpuBits) {
  REQUIRE_CUDA();
  ss::Context cpu = make_context(ss::Backend::kCpu), gpu = make_context(ss::Backend::kCuda);
  for (bool integer : {true, false}) {
    // Sizes that are not multiples of the kernel's tiles (32 queries, 64 train descriptors).
    const ss::Features q = random_features(1001, 1, integer), t = random_features(777, 2, integer);
    const std::string what = integer ? "integer descriptors" : "float descriptors";
    expect_same(ss::nearest_two(cpu, q, t), ss::nearest_two(gpu, q, t), what);
    expect_same(ss::nearest_two(cpu, t, q), ss::nearest_two(gpu, t, q), what + " (swapped)");
  }
}

TEST(MatchCuda, TiesPickTheLowerIndex) {
  REQUIRE_CUDA();
  ss::Context cpu = make_context(ss::Backend::kCpu), gpu = make_context(ss::Backend::kCuda);
  ss::Features t = random_features(300, 3, true);
  // Rows 5, 70 and 200 are equal (in three different train tiles); row 9 differs from them by one unit.
  for (int r : {70, 200}) std::memcpy(&t.descriptors[std::size_t(r) * kDim], &t.descriptors[5 * kDim], kDim * sizeof(float));
  std::memcpy(&t.descriptors[9 * kDim], &t.descriptors[5 * kDim], kDim * sizeof(float));
  t.descriptors[9 * kDim + 3] += 1.0f;
  ss::Features q;
  q.keypoints.resize(2);
  q.descriptors.assign(t.descriptors.begin() + 5 * kDim, t.descriptors.begin() + 6 * kDim);
  q.descriptors.insert(q.descriptors.end(), t.descriptors.begin() + 9 * kDim, t.descriptors.begin() + 10 * kDim);
  const std::vector<ss::Top2> c = ss::nearest_two(cpu, q, t), g = ss::nearest_two(gpu, q, t);
  EXPECT_EQ(c[0].best1, 5);
  EXPECT_EQ(c[0].best2, 70);
  expect_same(c, g, "ties");
}

TEST(MatchCuda, TinyAndEmptySets) {
  REQUIRE_CUDA();
  ss::Context cpu = make_context(ss::Backend::kCpu), gpu = make_context(ss::Backend::kCuda);
  const ss::Features q = random_features(40, 4, true), one = random_features(1, 5, true), none;
  expect_same(ss::nearest_two(cpu, q, one), ss::nearest_two(gpu, q, one), "one train descriptor");
  expect_same(ss::nearest_two(cpu, q, none), ss::nearest_two(gpu, q, none), "no train descriptor");
  EXPECT_TRUE(ss::nearest_two(gpu, none, q).empty());
  const std::vector<ss::Top2> g = ss::nearest_two(gpu, q, one);
  EXPECT_EQ(g[0].best2, -1);
}

// Features of CUDA SIFT carry their device copy; matching them on CUDA (from the copies) gives the CPU's
// result on the same host values, and so does an edited copy (matched from its host values).
TEST(MatchCuda, SiftFeaturesFromTheirDeviceCopies) {
  REQUIRE_CUDA();
  ss::Context cpu = make_context(ss::Backend::kCpu), gpu = make_context(ss::Backend::kCuda);
  for (bool root : {false, true}) {
    ss::SiftOptions o;
    o.root_sift = root;
    const ss::Features a = ss::detect_and_compute(gpu, ss::test::load_test_image("graf1_gray.png"), o);
    const ss::Features b = ss::detect_and_compute(gpu, ss::test::load_test_image("camera.png"), o);
    ASSERT_NE(a.device, nullptr);
    ASSERT_NE(b.device, nullptr);
    const std::string what = root ? "RootSIFT" : "SIFT";
    expect_same(ss::nearest_two(cpu, a, b), ss::nearest_two(gpu, a, b), what);
    ss::Features edited = b;
    for (std::size_t i = 0; i < edited.descriptors.size(); i += 97) edited.descriptors[i] *= 0.5f;
    expect_same(ss::nearest_two(cpu, a, edited), ss::nearest_two(gpu, a, edited), what + " edited");
    ss::MatchOptions mo;
    mo.mutual = true;
    const std::vector<ss::Match> mc = ss::match_features(cpu, a, b, mo), mg = ss::match_features(gpu, a, b, mo);
    ASSERT_EQ(mc.size(), mg.size()) << what;
    for (std::size_t i = 0; i < mc.size(); ++i)
      EXPECT_TRUE(mc[i].query == mg[i].query && mc[i].train == mg[i].train) << what << " match " << i;
  }
}

// The u8 tensor-core path (integer descriptors 0..255): tiny sets, sizes around its tiles (128 queries per
// block, 32 per warp, 16 per MMA; 64 train descriptors per tile, 8 per MMA), few queries against many train
// descriptors (the train set split over up to 8 blocks per SM, then merged), and planted ties across splits.
TEST(MatchCuda, U8PathSizesTiesAndSplits) {
  REQUIRE_CUDA();
  ss::Context cpu = make_context(ss::Backend::kCpu), gpu = make_context(ss::Backend::kCuda);
  const int sizes[][2] = {{1, 1}, {1, 2}, {2, 1}, {5, 3}, {15, 7}, {17, 9}, {127, 63}, {128, 64}, {129, 65},
                          {30, 3000}, {200, 4099}, {3000, 5000}};
  std::uint64_t seed = 100;
  for (const auto& sz : sizes) {
    ss::Features q = random_features(sz[0], seed++, true), t = random_features(sz[1], seed++, true);
    // Ties: the last train rows copy the first ones, and queries equal to train rows (distance 0, tied).
    const int planted = std::min(sz[0], sz[1] / 2);
    for (int i = 0; i < planted && i < 200; ++i) {
      std::memcpy(&t.descriptors[std::size_t(sz[1] - 1 - i) * kDim], &t.descriptors[std::size_t(i) * kDim], kDim * sizeof(float));
      std::memcpy(&q.descriptors[std::size_t(i) * kDim], &t.descriptors[std::size_t(i) * kDim], kDim * sizeof(float));
    }
    const std::string what = "u8 " + std::to_string(sz[0]) + " x " + std::to_string(sz[1]);
    const std::vector<ss::Top2> g = ss::nearest_two(gpu, q, t);
    expect_same(ss::nearest_two(cpu, q, t), g, what);
    if (planted > 0 && sz[1] >= 2) {
      EXPECT_EQ(g[0].best1, 0) << what;
      EXPECT_EQ(g[0].distance1, 0.0f) << what;
    }
  }
  // Every train descriptor equal: all distances tie, indices 0 and 1 win over every split.
  ss::Features same = random_features(5000, 7, true);
  for (std::size_t i = 1; i < same.size(); ++i)
    std::memcpy(&same.descriptors[i * kDim], &same.descriptors[0], kDim * sizeof(float));
  const ss::Features q = random_features(40, 8, true);
  const std::vector<ss::Top2> g = ss::nearest_two(gpu, q, same);
  expect_same(ss::nearest_two(cpu, q, same), g, "u8, all train descriptors equal");
  for (const ss::Top2& r : g) {
    EXPECT_EQ(r.best1, 0);
    EXPECT_EQ(r.best2, 1);
  }
  // The extremes of the range: all 0 and all 255 (the largest distances, 128 * 255^2).
  ss::Features ext = random_features(3, 9, true);
  std::fill(ext.descriptors.begin(), ext.descriptors.begin() + kDim, 0.0f);
  std::fill(ext.descriptors.begin() + kDim, ext.descriptors.begin() + 2 * kDim, 255.0f);
  expect_same(ss::nearest_two(cpu, ext, ext), ss::nearest_two(gpu, ext, ext), "u8, 0 and 255");
}

// One value that is not an integer 0..255, on either side, sends the call to the float kernel (same bits).
TEST(MatchCuda, U8PathFallsBackOnOtherValues) {
  REQUIRE_CUDA();
  ss::Context cpu = make_context(ss::Backend::kCpu), gpu = make_context(ss::Backend::kCuda);
  const ss::Features q = random_features(70, 31, true), t = random_features(90, 32, true);
  for (float odd : {256.0f, -1.0f, 0.5f, 1e-30f, -0.0f}) {
    for (bool in_query : {true, false}) {
      ss::Features a = q, b = t;
      (in_query ? a : b).descriptors[17 * kDim + 5] = odd;
      const std::string what = "value " + std::to_string(odd) + (in_query ? " in a query" : " in a train descriptor");
      expect_same(ss::nearest_two(cpu, a, b), ss::nearest_two(gpu, a, b), what);
    }
  }
}

// A non-byte in a later chunk of the host packing (u8_late_fallback_sets): earlier chunks are uploaded from the
// staging buffer before the verdict. The call falls back to the float kernel (the CPU's bits), and the next u8 call
// on the same context repacks the staging buffer only after those uploads (the wait on the staging event; the CPU's
// bits again).
TEST(MatchCuda, U8PathFallsBackAfterChunksWereUploaded) {
  REQUIRE_CUDA();
  ss::Context cpu = make_context(ss::Backend::kCpu), gpu = make_context(ss::Backend::kCuda);
  const ss::test::U8LateFallbackSets s = ss::test::u8_late_fallback_sets();
  const ss::Features &q = s.query, &good = s.good, &bad = s.bad;
  const std::vector<ss::Top2> fell_back = ss::nearest_two(gpu, q, bad), then_u8 = ss::nearest_two(gpu, q, good);
  expect_same(ss::nearest_two(cpu, q, bad), fell_back, "u8 fallback after uploaded chunks");
  EXPECT_EQ(fell_back[0].best1, ss::test::U8LateFallbackSets::kBadRow);
  expect_same(ss::nearest_two(cpu, q, good), then_u8, "u8 call after a fallback");
}

// A device copy (CUDA SIFT's, packed on the device) against host descriptors (uploaded as floats and packed
// there too), both ways, integer and not.
TEST(MatchCuda, U8PathMixedDeviceAndHost) {
  REQUIRE_CUDA();
  ss::Context cpu = make_context(ss::Backend::kCpu), gpu = make_context(ss::Backend::kCuda);
  ss::SiftOptions o;
  const ss::Features a = ss::detect_and_compute(gpu, ss::test::load_test_image("graf1_gray.png"), o);
  ASSERT_NE(a.device, nullptr);
  for (bool integer : {true, false}) {
    const ss::Features h = random_features(500, 51, integer);
    const std::string what = integer ? "integer host side" : "float host side";
    expect_same(ss::nearest_two(cpu, a, h), ss::nearest_two(gpu, a, h), what);
    expect_same(ss::nearest_two(cpu, h, a), ss::nearest_two(gpu, h, a), what + " (swapped)");
  }
}

}  // namespace

// CUDA descriptor matching (issue 19, item 2) against the CPU backend: the same nearest two, index for index
// and distance bit for bit, for SIFT's integer-valued descriptors and for arbitrary floats (the same float
// sums in the same order), with ties, tiny and empty sets, from host descriptors and from the device copies
// that CUDA SIFT leaves in Features::device. Skips with a message when the machine has no CUDA device.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

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

}  // namespace

// The ratio test, the distance limit and the mutual check on the CUDA device (BackendImpl::match_filtered: both
// directions from one upload, kernels/match_filter.cuh's tests and compaction, only the kept matches read back)
// against the CPU backend and against the host filter over the same device's nearest twos: the same matches, in
// the same order, with the same distance bits (tests/match_filter_test_util.hpp). Ratio 0.8 and 1.0, mutual on
// and off, planted ties, one descriptor, empty sets, the u8 and float paths, many compaction blocks, and CUDA
// SIFT's device copies. Skips with a message when the machine has no CUDA device.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "match_filter_test_util.hpp"
#include "sift_device_test_util.hpp"
#include "spectrasift/sift.hpp"

namespace ss = spectrasift;

namespace {

#define REQUIRE_CUDA() \
  if (!ss::test::have_device(ss::Backend::kCuda)) GTEST_SKIP() << "no CUDA device on this machine"

ss::Context& gpu() {
  static ss::Context c = [] {
    ss::ContextOptions o;
    o.backend = ss::Backend::kCuda;
    o.threads = 2;
    return ss::Context(o);
  }();
  return c;
}

TEST(MatchFilterCuda, RatioDistanceAndMutualWithTies) {
  REQUIRE_CUDA();
  for (bool integer : {true, false}) ss::test::expect_filter_cases_agree(gpu(), integer, "cuda");  // u8 / float path
  // Many blocks: 20000 queries (79 blocks of 256) against 3000 train descriptors.
  ss::MatchOptions o;
  o.mutual = true;
  ss::test::expect_device_filter_agrees(gpu(), ss::test::random_match_features(20000, 53, true),
                                        ss::test::random_match_features(3000, 54, true), o, "20000 x 3000");
}

TEST(MatchFilterCuda, OneDescriptorAndEmptySets) {
  REQUIRE_CUDA();
  ss::test::expect_tiny_and_empty_sets_agree(gpu());
}

TEST(MatchFilterCuda, FeaturesFromCudaSift) {
  REQUIRE_CUDA();
  for (bool root : {false, true}) {  // SIFT: the u8 path packed on the device; RootSIFT: the float kernel
    ss::SiftOptions so;
    so.root_sift = root;
    const ss::Features a = ss::detect_and_compute(gpu(), ss::test::load_test_image("graf1_gray.png"), so);
    const ss::Features b = ss::detect_and_compute(gpu(), ss::test::load_test_image("graf3_gray.png"), so);
    ASSERT_NE(ss::detail::device_copy_for(a, *gpu().impl().backend_impl), nullptr);
    ASSERT_NE(ss::detail::device_copy_for(b, *gpu().impl().backend_impl), nullptr);
    const std::string what = root ? "RootSIFT device copies" : "SIFT device copies";
    for (double ratio : {0.8, 1.0}) {
      for (bool mutual : {false, true}) {
        ss::MatchOptions o;
        o.ratio = ratio;
        o.mutual = mutual;
        EXPECT_GT(ss::test::expect_device_filter_agrees(gpu(), a, b, o, what).size(), 50u);  // hundreds on graf1 -> graf3
      }
    }
    // One side on the device, the other from the host (uploaded as floats and packed there).
    ss::Features host_b = b;
    host_b.device.reset();
    ss::MatchOptions o;
    o.mutual = true;
    ss::test::expect_device_filter_agrees(gpu(), a, host_b, o, what + ", one side from the host");
  }
}

}  // namespace

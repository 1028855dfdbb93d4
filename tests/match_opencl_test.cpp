// OpenCL descriptor matching (issue 18, item 3) against the CPU backend: the same Top2 bits (indices and
// distances) and the same matches on real pairs (box / box_in_scene, graf1 / graf3), with the ratio test
// and the mutual check, from host descriptors and from the device copies the OpenCL SIFT leaves; self-match,
// empty sets, and large random sets with planted ties, integer-valued (SIFT) and not (RootSIFT-like). Skips
// with a message when the machine has no OpenCL device.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/context_impl.hpp"
#include "core/dispatch.hpp"
#include "match_filter_test_util.hpp"
#include "opencl_test_util.hpp"
#include "spectrasift/context.hpp"
#include "spectrasift/error.hpp"
#include "spectrasift/io.hpp"
#include "spectrasift/match.hpp"
#include "spectrasift/sift.hpp"

#ifdef SPECTRASIFT_HAVE_OPENCL
#include "backend/opencl/device_features.hpp"
#include "backend/opencl/state.hpp"
#endif

namespace ss = spectrasift;

namespace {

#ifdef SPECTRASIFT_HAVE_OPENCL

constexpr int kDim = ss::Features::kDescriptorSize;

ss::Context& cpu() {
  static ss::Context c = [] {
    ss::ContextOptions o;
    o.backend = ss::Backend::kCpu;
    o.threads = 2;
    return ss::Context(o);
  }();
  return c;
}

ss::Context& gpu() {
  static ss::Context c(ss::test::opencl_options());
  return c;
}

/// A test image: the demo pair box / box_in_scene from data/, the others from tests/data/.
ss::Image load(const std::string& name) {
  const bool demo = name == "box.png" || name == "box_in_scene.png";
  return ss::read_image(std::string(demo ? SPECTRASIFT_DATA_DIR : SPECTRASIFT_TEST_DATA) + "/" + name);
}

ss::Features cpu_features(const char* name) {
  ss::SiftOptions o;
  return ss::detect_and_compute(cpu(), load(name), o);
}

/// Bitwise equality of two Top2 lists (a NaN-free float compare would hide -0 / +0 and ulp changes).
void expect_same_top2(const std::vector<ss::Top2>& a, const std::vector<ss::Top2>& b, const char* what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  int bad = 0;
  for (std::size_t i = 0; i < a.size() && bad < 5; ++i) {
    const bool same = a[i].best1 == b[i].best1 && a[i].best2 == b[i].best2 &&
                      std::memcmp(&a[i].distance1, &b[i].distance1, sizeof(float)) == 0 &&
                      std::memcmp(&a[i].distance2, &b[i].distance2, sizeof(float)) == 0;
    if (!same) {
      ++bad;
      ADD_FAILURE() << what << ": query " << i << ": opencl (" << a[i].best1 << ", " << a[i].best2 << ", "
                    << a[i].distance1 << ", " << a[i].distance2 << ") cpu (" << b[i].best1 << ", " << b[i].best2
                    << ", " << b[i].distance1 << ", " << b[i].distance2 << ")";
    }
  }
}

void expect_same_matches(const std::vector<ss::Match>& a, const std::vector<ss::Match>& b, const char* what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].query, b[i].query) << what << " " << i;
    EXPECT_EQ(a[i].train, b[i].train) << what << " " << i;
    EXPECT_EQ(a[i].distance, b[i].distance) << what << " " << i;
    EXPECT_EQ(a[i].second_distance, b[i].second_distance) << what << " " << i;
  }
}

/// Both backends on the same host descriptors: nearest_two, and match_features with and without the
/// mutual check.
void expect_backends_agree(const ss::Features& q, const ss::Features& t, const char* what) {
  expect_same_top2(ss::nearest_two(gpu(), q, t), ss::nearest_two(cpu(), q, t), what);
  for (bool mutual : {false, true}) {
    ss::MatchOptions o;
    o.mutual = mutual;
    const auto m = ss::match_features(gpu(), q, t, o);
    expect_same_matches(m, ss::match_features(cpu(), q, t, o), what);
    if (q.size() > 100 && t.size() > 100) {
      EXPECT_GT(m.size(), 20u) << what;  // a real pair has matches
    }
  }
}

/// n random descriptors: integer-valued 0..255 (SIFT's) or RootSIFT-like (match_filter_test_util.hpp).
ss::Features random_features(int n, std::uint64_t seed, bool integer) {
  return ss::test::random_match_features(n, seed, integer);
}

/// `host` with a device copy on the OpenCL test context that holds `on_device`'s values (other values than
/// the host array it claims to mirror: what a kernel reads tells whether it used the copy); no copy on failure.
ss::Features claim_device_copy(const ss::Features& host, const ss::Features& on_device) {
  auto& st = dynamic_cast<ss::opencl::State&>(*gpu().impl().backend_impl);
  cl_int err = CL_SUCCESS;
  cl_mem m = clCreateBuffer(st.context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, on_device.descriptors.size() * sizeof(float),
                            const_cast<float*>(on_device.descriptors.data()), &err);
  ss::Features claimed = host;
  if (err != CL_SUCCESS) return claimed;
  claimed.device = std::make_shared<ss::opencl::DeviceDescriptors>(st, host.size(), host.descriptors.data(),
                                                                  host.descriptors.size(), m);
  clReleaseMemObject(m);
  return claimed;
}

#define REQUIRE_OPENCL() \
  if (ss::test::opencl_device() < 0) GTEST_SKIP() << "no OpenCL device on this machine"

TEST(MatchOpenCL, RunsOnTheDevice) {
  REQUIRE_OPENCL();
  EXPECT_EQ(&ss::detail::backend_for(gpu().impl(), ss::detail::Operation::kMatch), gpu().impl().backend_impl.get());
}

TEST(MatchOpenCL, RealPairsEqualTheCpuBackend) {
  REQUIRE_OPENCL();
  const ss::Features box = cpu_features("box.png"), scene = cpu_features("box_in_scene.png");
  expect_backends_agree(box, scene, "box -> box_in_scene");
  expect_backends_agree(scene, box, "box_in_scene -> box");
  const ss::Features g1 = cpu_features("graf1_gray.png"), g3 = cpu_features("graf3_gray.png");
  expect_backends_agree(g1, g3, "graf1 -> graf3");
}

TEST(MatchOpenCL, DeviceCopiesFromOpenclSift) {
  REQUIRE_OPENCL();
  ss::SiftOptions so;
  const ss::Features q = ss::detect_and_compute(gpu(), load("box.png"), so);
  const ss::Features t = ss::detect_and_compute(gpu(), load("box_in_scene.png"), so);
  auto& backend = *gpu().impl().backend_impl;
  ASSERT_NE(ss::detail::device_copy_for(q, backend), nullptr) << "the OpenCL SIFT left no device copy";
  ASSERT_NE(ss::detail::device_copy_for(t, backend), nullptr);
  EXPECT_EQ(ss::detail::device_copy_for(q, *cpu().impl().backend_impl), nullptr);
  expect_backends_agree(q, t, "device copies");
  // An edited descriptor: the copy no longer mirrors the host values, the host path matches the edit.
  ss::Features edited = t;
  edited.descriptors[5 * kDim + 3] += 7.0f;
  ASSERT_EQ(ss::detail::device_copy_for(edited, backend), nullptr);
  expect_backends_agree(q, edited, "edited train");
  // The copy stays valid when its Context is gone.
  ss::Features survivor;
  {
    ss::Context other(ss::test::opencl_options());
    survivor = ss::detect_and_compute(other, load("box.png"), so);
  }
  ASSERT_NE(survivor.device, nullptr);
  EXPECT_EQ(ss::detail::device_copy_for(survivor, backend), nullptr);  // another backend instance's copy
  expect_backends_agree(survivor, t, "copy of a destroyed context");
}

TEST(MatchOpenCL, DeviceCopyIsWhatTheKernelReads) {
  REQUIRE_OPENCL();
  // A device copy holding OTHER values than the host array it claims to mirror: the device path must match
  // the device values (proof that no upload happened), the host path the host values.
  const ss::Features host = random_features(300, 7, true), on_device = random_features(300, 8, true);
  const ss::Features train = random_features(500, 9, true);
  const ss::Features claimed = claim_device_copy(host, on_device);
  ASSERT_NE(claimed.device, nullptr);
  expect_same_top2(ss::nearest_two(gpu(), claimed, train), ss::nearest_two(cpu(), on_device, train), "device values");
  ss::Features edited = claimed;
  edited.descriptors[0] += 1.0f;
  expect_same_top2(ss::nearest_two(gpu(), edited, train), ss::nearest_two(cpu(), edited, train), "host values");
}

TEST(MatchOpenCL, SelfMatchAndEmptySets) {
  REQUIRE_OPENCL();
  const ss::Features f = cpu_features("box.png");
  const auto self = ss::nearest_two(gpu(), f, f);
  expect_same_top2(self, ss::nearest_two(cpu(), f, f), "self");
  int exact = 0;
  for (std::size_t i = 0; i < self.size(); ++i) exact += self[i].distance1 == 0.0f;
  EXPECT_EQ(exact, int(self.size()));  // every descriptor finds a copy of itself at distance 0
  const ss::Features empty;
  EXPECT_TRUE(ss::nearest_two(gpu(), empty, f).empty());
  expect_same_top2(ss::nearest_two(gpu(), f, empty), ss::nearest_two(cpu(), f, empty), "empty train");
  EXPECT_EQ(ss::nearest_two(gpu(), f, empty).front().best1, -1);
  EXPECT_TRUE(ss::match_features(gpu(), empty, empty).empty());
  const ss::Features one = random_features(1, 3, true);
  expect_same_top2(ss::nearest_two(gpu(), f, one), ss::nearest_two(cpu(), f, one), "one train descriptor");
}

TEST(MatchOpenCL, LargeRandomSetsWithPlantedTies) {
  REQUIRE_OPENCL();
  for (bool integer : {true, false}) {
    // 3000 x 5000 SIFT-like descriptors; the RootSIFT-like set smaller (the same code path, half the time).
    ss::Features q = random_features(integer ? 3000 : 1500, 11, integer), t = random_features(integer ? 5000 : 2500, 12, integer);
    // Planted ties: train rows duplicated at other indices (equal best distances: the lower index wins),
    // queries equal to train rows (distance 0, tied with the duplicate), and a block of identical queries.
    for (int i = 0; i < 200; ++i) {
      std::memcpy(&t.descriptors[(t.size() - 1 - std::size_t(i)) * kDim], &t.descriptors[std::size_t(i * 7) * kDim], kDim * sizeof(float));
      std::memcpy(&q.descriptors[std::size_t(i * 3) * kDim], &t.descriptors[std::size_t(i * 7) * kDim], kDim * sizeof(float));
    }
    for (int i = 1000; i < 1100; ++i)
      std::memcpy(&q.descriptors[std::size_t(i) * kDim], &q.descriptors[std::size_t(999) * kDim], kDim * sizeof(float));
    const char* what = integer ? "integer descriptors" : "RootSIFT-like descriptors";
    const auto dev = ss::nearest_two(gpu(), q, t);
    expect_same_top2(dev, ss::nearest_two(cpu(), q, t), what);
    for (int i = 0; i < 200; ++i) {  // the planted ties themselves
      EXPECT_EQ(dev[std::size_t(i * 3)].best1, i * 7) << what;
      EXPECT_EQ(dev[std::size_t(i * 3)].best2, int(t.size()) - 1 - i) << what;
      EXPECT_EQ(dev[std::size_t(i * 3)].distance2, 0.0f) << what;
    }
    ss::MatchOptions o;
    o.mutual = true;
    expect_same_matches(ss::match_features(gpu(), q, t, o), ss::match_features(cpu(), q, t, o), what);
  }
}

TEST(MatchOpenCL, BothKernelFormsGiveTheCpuBits) {
  REQUIRE_OPENCL();
  // The tiled GPU kernel, the CPU-device row kernel and the u8 kernel (integer descriptors; the others fall
  // back to the tiled one) on any device, on sizes that are not multiples of their tiles (64 queries per row
  // work-item, 64 x 64 tiles), with ties.
  auto& st = dynamic_cast<ss::opencl::State&>(*gpu().impl().backend_impl);
  for (bool integer : {true, false}) {
    ss::Features q = random_features(333, 21, integer), t = random_features(517, 22, integer);
    for (int i = 0; i < 20; ++i) {
      std::memcpy(&t.descriptors[std::size_t(500 - i) * kDim], &t.descriptors[std::size_t(i) * kDim], kDim * sizeof(float));
      std::memcpy(&q.descriptors[std::size_t(i * 5) * kDim], &t.descriptors[std::size_t(i) * kDim], kDim * sizeof(float));
    }
    const auto want = ss::nearest_two(cpu(), q, t);
    for (int variant : {0, 1, 2}) {
      st.match_variant = variant;
      const std::string name = variant == 0 ? "tiled" : variant == 1 ? "rows" : "u8";
      expect_same_top2(ss::nearest_two(gpu(), q, t), want, name.c_str());
      const ss::Features t3 = random_features(3, 23, integer);  // fewer train descriptors than a step of 4
      expect_same_top2(ss::nearest_two(gpu(), q, t3), ss::nearest_two(cpu(), q, t3), (name + ", 3").c_str());
    }
    st.match_variant = -1;
  }
}

/// Both backends' Top2 bits on q x t with the OpenCL kernel variant `variant` (State::match_variant).
void expect_variant_agrees(int variant, const ss::Features& q, const ss::Features& t, const std::string& what) {
  auto& st = dynamic_cast<ss::opencl::State&>(*gpu().impl().backend_impl);
  st.match_variant = variant;
  expect_same_top2(ss::nearest_two(gpu(), q, t), ss::nearest_two(cpu(), q, t), what.c_str());
  st.match_variant = -1;
}

TEST(MatchOpenCL, U8PathSizesTiesAndSplits) {
  REQUIRE_OPENCL();
  // Tiny sets, sizes around the tiles (32 or 64 queries per work-group, 32 or 64 train descriptors per tile),
  // and few queries against many train descriptors (the train set split over several work-groups, merged).
  const int sizes[][2] = {{1, 1}, {1, 2}, {2, 1}, {5, 3}, {31, 33}, {64, 64}, {65, 129}, {30, 3000}, {200, 4099}};
  std::uint64_t seed = 100;
  for (const auto& s : sizes) {
    const ss::Features q = random_features(s[0], seed++, true), t = random_features(s[1], seed++, true);
    expect_variant_agrees(2, q, t, "u8 " + std::to_string(s[0]) + " x " + std::to_string(s[1]));
  }
  // Ties across the splits: every train descriptor equal (all distances tie: indices 0 and 1 win), and
  // duplicates of one row at both ends of a 3000-descriptor set.
  ss::Features same = random_features(3000, 7, true);
  for (std::size_t i = 1; i < same.size(); ++i)
    std::memcpy(&same.descriptors[i * kDim], &same.descriptors[0], kDim * sizeof(float));
  const ss::Features q = random_features(40, 8, true);
  expect_variant_agrees(2, q, same, "u8, all train descriptors equal");
  auto& st = dynamic_cast<ss::opencl::State&>(*gpu().impl().backend_impl);
  st.match_variant = 2;
  const auto all_tied = ss::nearest_two(gpu(), q, same);
  st.match_variant = -1;
  for (const ss::Top2& r : all_tied) {
    EXPECT_EQ(r.best1, 0);
    EXPECT_EQ(r.best2, 1);
    EXPECT_EQ(r.distance1, r.distance2);
  }
  ss::Features ends = random_features(3000, 9, true);
  std::memcpy(&ends.descriptors[2999 * kDim], &ends.descriptors[0], kDim * sizeof(float));
  ss::Features probe = random_features(3, 10, true);
  std::memcpy(&probe.descriptors[kDim], &ends.descriptors[0], kDim * sizeof(float));
  expect_variant_agrees(2, probe, ends, "u8, a duplicate at both ends");
}

TEST(MatchOpenCL, U8PathFallsBackOnOtherValues) {
  REQUIRE_OPENCL();
  // One value that is not an integer 0..255 on either side sends the call to the float kernel (same bits);
  // -0.0 is an integer 0 (same products).
  const ss::Features q = random_features(70, 31, true), t = random_features(90, 32, true);
  for (float odd : {256.0f, -1.0f, 0.5f, 1e-30f, -0.0f, 255.0f}) {
    for (bool in_query : {true, false}) {
      ss::Features a = q, b = t;
      (in_query ? a : b).descriptors[17 * kDim + 5] = odd;
      expect_variant_agrees(2, a, b, "value " + std::to_string(odd) + (in_query ? " in a query" : " in a train descriptor"));
    }
  }
}

TEST(MatchOpenCL, U8PathFallsBackAfterChunksWereWritten) {
  REQUIRE_OPENCL();
  // A non-byte in a later chunk of the host packing (u8_late_fallback_sets): earlier chunks are written from the
  // staging buffer before the verdict. The call falls back to the float kernel (the CPU's bits), and the next u8
  // call on the same context repacks the staging buffer only once those writes are done (the CPU's bits again).
  const ss::test::U8LateFallbackSets s = ss::test::u8_late_fallback_sets();
  const ss::Features &q = s.query, &good = s.good, &bad = s.bad;
  auto& st = dynamic_cast<ss::opencl::State&>(*gpu().impl().backend_impl);
  st.match_variant = 2;
  const auto fell_back = ss::nearest_two(gpu(), q, bad);
  const auto then_u8 = ss::nearest_two(gpu(), q, good);
  st.match_variant = -1;
  expect_same_top2(fell_back, ss::nearest_two(cpu(), q, bad), "u8 fallback after written chunks");
  EXPECT_EQ(fell_back[0].best1, ss::test::U8LateFallbackSets::kBadRow);
  expect_same_top2(then_u8, ss::nearest_two(cpu(), q, good), "u8 call after a fallback");
}

TEST(MatchOpenCL, U8PathFromDeviceCopies) {
  REQUIRE_OPENCL();
  // Device copies are packed on the device: integer values take the u8 kernel, others fall back; the device
  // values are what is matched (the copy below holds other values than its host array).
  auto& st = dynamic_cast<ss::opencl::State&>(*gpu().impl().backend_impl);
  for (bool integer : {true, false}) {
    const ss::Features host = random_features(150, 41, integer), on_device = random_features(150, 42, integer);
    const ss::Features train = random_features(260, 43, integer);
    const ss::Features claimed = claim_device_copy(host, on_device);
    ASSERT_NE(claimed.device, nullptr);
    st.match_variant = 2;
    const auto dev = ss::nearest_two(gpu(), claimed, train);
    const auto back = ss::nearest_two(gpu(), train, claimed);
    st.match_variant = -1;
    expect_same_top2(dev, ss::nearest_two(cpu(), on_device, train), integer ? "u8 device copy" : "float device copy");
    expect_same_top2(back, ss::nearest_two(cpu(), train, on_device), integer ? "u8 device copy as train" : "float device copy as train");
  }
}

TEST(MatchOpenCL, U8PathWithTheKhrDotProduct) {
  REQUIRE_OPENCL();
  // cl_khr_integer_dot_product's form is never chosen by default (it has not run on a GPU): forced here, on a
  // device that reports packed 4 x 8-bit dot products (PoCL 5 does, PoCL 3.1 does not: skipped), with ties.
  auto& st = dynamic_cast<ss::opencl::State&>(*gpu().impl().backend_impl);
  ss::Features q = random_features(333, 51, true);
  const ss::Features t = random_features(517, 52, true);
  std::memcpy(&q.descriptors[7 * kDim], &t.descriptors[400 * kDim], kDim * sizeof(float));
  st.match_variant = 2;
  st.match_dot4 = 1;
  std::vector<ss::Top2> got;
  bool reported = true;
  try {
    got = ss::nearest_two(gpu(), q, t);
  } catch (const ss::Error& e) {
    if (e.code() != ss::ErrorCode::kUnsupported) throw;
    reported = false;
  }
  st.match_variant = -1;
  st.match_dot4 = -1;  // probed again by the next call
  if (!reported) GTEST_SKIP() << "the OpenCL device reports no packed cl_khr_integer_dot_product";
  expect_same_top2(got, ss::nearest_two(cpu(), q, t), "u8, khr dot products");
  EXPECT_EQ(got[7].best1, 400);
}

// u8 features (byte views) through the forced u8 path (pack_host_sides copies the bytes) and the float fallback (a
// float side with a non-byte value: the byte side converted on the way), against the CPU backend.
TEST(MatchOpenCL, ByteViewsOnTheU8PathAndItsFallback) {
  REQUIRE_OPENCL();
  auto& st = dynamic_cast<ss::opencl::State&>(*gpu().impl().backend_impl);
  const ss::Features q = random_features(300, 71, true), t = random_features(5000, 72, true);
  const ss::Features q8 = q.to_u8(), t8 = t.to_u8();
  ss::Features odd = t;
  odd.descriptors[4000 * kDim + 3] = 0.5f;
  for (int variant : {2, -1}) {
    st.match_variant = variant;
    const auto a = ss::nearest_two(gpu(), q8, t8), b = ss::nearest_two(gpu(), q8, t), c = ss::nearest_two(gpu(), q8, odd);
    const auto m = ss::match_features(gpu(), q8, t8, ss::MatchOptions{0.8, true});
    st.match_variant = -1;
    expect_same_top2(a, ss::nearest_two(cpu(), q, t), "u8 x u8");
    expect_same_top2(b, ss::nearest_two(cpu(), q, t), "u8 x f32");
    expect_same_top2(c, ss::nearest_two(cpu(), q, odd), "u8 x inexact f32");
    const auto mc = ss::match_features(cpu(), q, t, ss::MatchOptions{0.8, true});
    ASSERT_EQ(m.size(), mc.size());
    for (std::size_t i = 0; i < m.size(); ++i) EXPECT_EQ(m[i].train, mc[i].train);
  }
}

#else
TEST(MatchOpenCL, Skipped) { GTEST_SKIP() << "built without OpenCL"; }
#endif

}  // namespace

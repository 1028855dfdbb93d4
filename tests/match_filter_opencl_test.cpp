// The ratio test, the distance limit and the mutual check on the OpenCL device (BackendImpl::match_filtered:
// both directions from one upload, kernels/match_filter.cl's tests and compaction, only the kept matches read
// back) against the CPU backend and against the host filter over the same device's nearest twos: the same
// matches, in the same order, with the same distance bits. Ratio 0.8 and 1.0, mutual on and off, planted ties
// (tied best distances, tied queries for the mutual check), one train descriptor, empty sets, every kernel
// variant, several work-groups of the compaction, and the device copies the OpenCL SIFT leaves. Skips with a
// message when the machine has no OpenCL device.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/context_impl.hpp"
#include "core/dispatch.hpp"
#include "opencl_test_util.hpp"
#include "spectrasift/context.hpp"
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

ss::opencl::State& state() { return dynamic_cast<ss::opencl::State&>(*gpu().impl().backend_impl); }

/// n random descriptors: integers 0..255 (SIFT's) or RootSIFT-like (square roots of values summing to 1).
ss::Features random_features(int n, std::uint64_t seed, bool integer) {
  std::mt19937_64 g(seed);
  ss::Features f;
  f.keypoints.resize(std::size_t(n));
  f.descriptors.resize(std::size_t(n) * kDim);
  for (int i = 0; i < n; ++i) {
    float* d = f.descriptors.data() + std::size_t(i) * kDim;
    double sum = 0;
    for (int k = 0; k < kDim; ++k) sum += d[k] = float(g() % 256);
    if (!integer)
      for (int k = 0; k < kDim; ++k) d[k] = float(std::sqrt(double(d[k]) / sum));
  }
  return f;
}

void copy_row(ss::Features& to, std::size_t i, const ss::Features& from, std::size_t j) {
  std::memcpy(&to.descriptors[i * kDim], &from.descriptors[j * kDim], kDim * sizeof(float));
}

/// The same matches, in the same order, with the same distance bits.
void expect_same(const std::vector<ss::Match>& a, const std::vector<ss::Match>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const bool same = a[i].query == b[i].query && a[i].train == b[i].train &&
                      std::memcmp(&a[i].distance, &b[i].distance, sizeof(float)) == 0 &&
                      std::memcmp(&a[i].second_distance, &b[i].second_distance, sizeof(float)) == 0;
    ASSERT_TRUE(same) << what << ": match " << i << ": device (" << a[i].query << ", " << a[i].train << ", "
                      << a[i].distance << ", " << a[i].second_distance << ") reference (" << b[i].query << ", "
                      << b[i].train << ", " << b[i].distance << ", " << b[i].second_distance << ")";
  }
}

ss::detail::FeatureView view(const ss::Features& f) {
  return {f.descriptors.data(), int(f.size()), kDim,
          ss::detail::device_copy_for(f, *gpu().impl().backend_impl)};
}

/// match_features on the device against the CPU backend, and the device entry against the host filter over
/// the same device's nearest twos (BackendImpl's default: proof that the kernels, not a host pass, decided).
/// Returns the device's matches.
std::vector<ss::Match> expect_device_filter_agrees(const ss::Features& q, const ss::Features& t,
                                                   const ss::MatchOptions& o, const std::string& what) {
  const std::vector<ss::Match> dev = ss::match_features(gpu(), q, t, o);
  expect_same(dev, ss::match_features(cpu(), q, t, o), what + " (against the CPU backend)");
  std::vector<ss::Match> host_filter, device_filter;
  ss::opencl::State& st = state();
  st.ss::detail::BackendImpl::match_filtered(gpu().impl(), view(q), view(t), o, host_filter);
  st.match_filtered(gpu().impl(), view(q), view(t), o, device_filter);
  expect_same(device_filter, host_filter, what + " (against the host filter)");
  return dev;
}

#define REQUIRE_OPENCL_DOUBLES()                                                      \
  if (ss::test::opencl_device() < 0) GTEST_SKIP() << "no OpenCL device on this machine"; \
  if (!state().has_fp64()) GTEST_SKIP() << "the OpenCL device has no doubles: the host filters"

TEST(MatchFilterOpenCL, RatioDistanceAndMutualWithTies) {
  REQUIRE_OPENCL_DOUBLES();
  for (bool integer : {true, false}) {
    // 700 queries: three work-groups of the compaction and a partial one.
    ss::Features q = random_features(700, 51, integer), t = random_features(900, 52, integer);
    for (int i = 0; i < 40; ++i) {
      copy_row(t, t.size() - 1 - std::size_t(i), t, std::size_t(i * 11));  // tied best distances: ratio fails
      copy_row(q, std::size_t(i * 13), t, std::size_t(i * 11 + 1));       // exact matches: ratio passes
    }
    for (int i = 600; i < 620; ++i) copy_row(q, std::size_t(i), q, 13);  // tied queries: the lowest wins the mutual check
    const std::vector<int> variants = integer ? std::vector<int>{-1, 0, 1, 2} : std::vector<int>{-1, 0, 1};
    for (int variant : variants) {
      state().match_variant = variant;
      for (double ratio : {0.8, 1.0}) {
        for (bool mutual : {false, true}) {
          for (bool limit : {false, true}) {
            ss::MatchOptions o;
            o.ratio = ratio;
            o.mutual = mutual;
            // A limit between the planted exact matches (0) and the random pairs' distances.
            if (limit) o.max_distance = integer ? 1500.0 : 0.35;
            const std::string what = std::string(integer ? "integer" : "RootSIFT-like") + ", variant " +
                                     std::to_string(variant) + ", ratio " + std::to_string(ratio) +
                                     (mutual ? ", mutual" : "") + (limit ? ", max_distance" : "");
            const auto m = expect_device_filter_agrees(q, t, o, what);
            // The tests decide something: the planted matches pass, not everything does.
            EXPECT_GE(m.size(), 40u) << what;
            EXPECT_LT(m.size(), q.size()) << what;
            if (mutual) {
              for (const ss::Match& x : m) EXPECT_FALSE(x.query > 600 && x.query < 620) << what;  // a tie lost to 13
            }
          }
        }
      }
    }
    state().match_variant = -1;
  }
}

TEST(MatchFilterOpenCL, OneDescriptorAndEmptySets) {
  REQUIRE_OPENCL_DOUBLES();
  const ss::Features many = random_features(300, 61, true), one = random_features(1, 62, true), empty;
  for (bool mutual : {false, true}) {
    for (double ratio : {0.8, 1.0}) {
      ss::MatchOptions o;
      o.ratio = ratio;
      o.mutual = mutual;
      // One train descriptor: the second distance is +inf, so every query passes the ratio test.
      const auto m = expect_device_filter_agrees(many, one, o, "one train descriptor");
      EXPECT_EQ(m.size(), mutual ? 1u : many.size());
      expect_device_filter_agrees(one, many, o, "one query");
      expect_device_filter_agrees(one, one, o, "one by one");
      EXPECT_TRUE(ss::match_features(gpu(), empty, many, o).empty());
      EXPECT_TRUE(ss::match_features(gpu(), many, empty, o).empty());
      EXPECT_TRUE(ss::match_features(gpu(), empty, empty, o).empty());
    }
  }
}

TEST(MatchFilterOpenCL, FeaturesFromOpenclSift) {
  REQUIRE_OPENCL_DOUBLES();
  ss::SiftOptions so;
  const auto load = [](const char* name) { return ss::read_image(std::string(SPECTRASIFT_DATA_DIR) + "/" + name); };
  const ss::Features q = ss::detect_and_compute(gpu(), load("box.png"), so);
  const ss::Features t = ss::detect_and_compute(gpu(), load("box_in_scene.png"), so);
  ASSERT_NE(ss::detail::device_copy_for(q, *gpu().impl().backend_impl), nullptr) << "the OpenCL SIFT left no device copy";
  ASSERT_NE(ss::detail::device_copy_for(t, *gpu().impl().backend_impl), nullptr);
  for (double ratio : {0.8, 1.0}) {
    for (bool mutual : {false, true}) {
      ss::MatchOptions o;
      o.ratio = ratio;
      o.mutual = mutual;
      const auto m = expect_device_filter_agrees(q, t, o, "box -> box_in_scene from the device copies");
      EXPECT_GT(m.size(), 20u);
    }
  }
}

TEST(MatchFilterOpenCL, DeviceCopyIsWhatBothDirectionsRead) {
  REQUIRE_OPENCL_DOUBLES();
  // A device copy holding OTHER values than the host array it claims to mirror: the mutual check's backward
  // pass must read the same device values (no second upload of the host array).
  const ss::Features host = random_features(400, 71, true), on_device = random_features(400, 72, true);
  ss::Features train = random_features(500, 73, true);
  for (int i = 0; i < 100; ++i) copy_row(train, std::size_t(i * 5), on_device, std::size_t(i * 4));  // mutual matches
  ss::opencl::State& st = state();
  cl_int err = CL_SUCCESS;
  cl_mem m = clCreateBuffer(st.context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, on_device.descriptors.size() * sizeof(float),
                            const_cast<float*>(on_device.descriptors.data()), &err);
  ASSERT_EQ(err, CL_SUCCESS);
  ss::Features claimed = host;
  claimed.device = std::make_shared<ss::opencl::DeviceDescriptors>(st, host.size(), host.descriptors.data(),
                                                                  host.descriptors.size(), m);
  clReleaseMemObject(m);
  for (bool mutual : {false, true}) {
    ss::MatchOptions o;
    o.mutual = mutual;
    const auto dev = ss::match_features(gpu(), claimed, train, o);
    expect_same(dev, ss::match_features(cpu(), on_device, train, o), mutual ? "device copy, mutual" : "device copy");
    EXPECT_GE(dev.size(), 100u);
    expect_same(ss::match_features(gpu(), train, claimed, o), ss::match_features(cpu(), train, on_device, o),
                mutual ? "device copy as train, mutual" : "device copy as train");
  }
}

#else
TEST(MatchFilterOpenCL, Skipped) { GTEST_SKIP() << "built without OpenCL"; }
#endif

}  // namespace

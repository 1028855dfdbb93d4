// The ratio test, the distance limit and the mutual check on the OpenCL device (BackendImpl::match_filtered:
// both directions from one upload, kernels/match_filter.cl's tests and compaction, only the kept matches read
// back) against the CPU backend and against the host filter over the same device's nearest twos: the same
// matches, in the same order, with the same distance bits (tests/match_filter_test_util.hpp). Ratio 0.8 and
// 1.0, mutual on and off, planted ties, one descriptor, empty sets, every kernel variant, several compaction
// work-groups, the OpenCL SIFT's device copies, and a device copy that both directions must read. Skips with a
// message when the machine has no OpenCL device (or one without doubles: the host filters there).
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "match_filter_test_util.hpp"
#include "opencl_test_util.hpp"
#include "spectrasift/io.hpp"
#include "spectrasift/sift.hpp"

#ifdef SPECTRASIFT_HAVE_OPENCL
#include "backend/opencl/device_features.hpp"
#include "backend/opencl/state.hpp"
#endif

namespace ss = spectrasift;

namespace {

#ifdef SPECTRASIFT_HAVE_OPENCL

ss::Context& gpu() {
  static ss::Context c(ss::test::opencl_options());
  return c;
}

ss::opencl::State& state() { return dynamic_cast<ss::opencl::State&>(*gpu().impl().backend_impl); }

#define REQUIRE_OPENCL_DOUBLES()                                                         \
  if (ss::test::opencl_device() < 0) GTEST_SKIP() << "no OpenCL device on this machine"; \
  if (!state().has_fp64()) GTEST_SKIP() << "the OpenCL device has no doubles: the host filters"

TEST(MatchFilterOpenCL, RatioDistanceAndMutualWithTies) {
  REQUIRE_OPENCL_DOUBLES();
  // Every kernel variant: by device, tiled float, rows float, u8 (integer descriptors only; others fall back).
  for (int variant : {-1, 0, 1, 2}) {
    state().match_variant = variant;
    for (bool integer : {true, false}) {
      if (variant == 2 && !integer) continue;
      ss::test::expect_filter_cases_agree(gpu(), integer, "variant " + std::to_string(variant));
    }
  }
  state().match_variant = -1;
}

TEST(MatchFilterOpenCL, OneDescriptorAndEmptySets) {
  REQUIRE_OPENCL_DOUBLES();
  ss::test::expect_tiny_and_empty_sets_agree(gpu());
}

TEST(MatchFilterOpenCL, FeaturesFromOpenclSift) {
  REQUIRE_OPENCL_DOUBLES();
  ss::SiftOptions so;
  const auto load = [](const char* name) { return ss::read_image(std::string(SPECTRASIFT_DATA_DIR) + "/" + name); };
  const ss::Features q = ss::detect_and_compute(gpu(), load("box.png"), so);
  const ss::Features t = ss::detect_and_compute(gpu(), load("box_in_scene.png"), so);
  ASSERT_NE(ss::detail::device_copy_for(q, state()), nullptr) << "the OpenCL SIFT left no device copy";
  ASSERT_NE(ss::detail::device_copy_for(t, state()), nullptr);
  for (double ratio : {0.8, 1.0}) {
    for (bool mutual : {false, true}) {
      ss::MatchOptions o;
      o.ratio = ratio;
      o.mutual = mutual;
      EXPECT_GT(ss::test::expect_device_filter_agrees(gpu(), q, t, o, "box -> box_in_scene, device copies").size(), 20u);
    }
  }
}

TEST(MatchFilterOpenCL, DeviceCopyIsWhatBothDirectionsRead) {
  REQUIRE_OPENCL_DOUBLES();
  // A device copy holding OTHER values than the host array it claims to mirror: the mutual check's backward
  // pass must read the same device values (no second upload of the host array).
  const ss::Features host = ss::test::random_match_features(400, 71, true);
  const ss::Features on_device = ss::test::random_match_features(400, 72, true);
  ss::Features train = ss::test::random_match_features(500, 73, true);
  for (int i = 0; i < 100; ++i) ss::test::copy_descriptor(train, std::size_t(i * 5), on_device, std::size_t(i * 4));
  ss::opencl::State& st = state();
  cl_int err = CL_SUCCESS;
  cl_mem m = clCreateBuffer(st.context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, on_device.descriptors.size() * sizeof(float),
                            const_cast<float*>(on_device.descriptors.data()), &err);
  ASSERT_EQ(err, CL_SUCCESS);
  ss::Features claimed = host;
  claimed.device = std::make_shared<ss::opencl::DeviceDescriptors>(st, host.size(), host.descriptors.data(),
                                                                  host.descriptors.size(), m);
  clReleaseMemObject(m);
  ss::Context& cpu = ss::test::cpu_match_context();
  for (bool mutual : {false, true}) {
    ss::MatchOptions o;
    o.mutual = mutual;
    const std::string what = mutual ? "device copy, mutual" : "device copy";
    const std::vector<ss::Match> dev = ss::match_features(gpu(), claimed, train, o);
    ss::test::expect_same_match_bits(dev, ss::match_features(cpu, on_device, train, o), what);
    EXPECT_GE(dev.size(), 100u) << what;  // the planted copies
    ss::test::expect_same_match_bits(ss::match_features(gpu(), train, claimed, o),
                                     ss::match_features(cpu, train, on_device, o), what + ", as train");
  }
}

#else
TEST(MatchFilterOpenCL, Skipped) { GTEST_SKIP() << "built without OpenCL"; }
#endif

}  // namespace

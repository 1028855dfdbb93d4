// Context creation, backend selection and device listing (DESIGN.md "Backends and devices").
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

#include "spectrasift/context.hpp"
#include "spectrasift/error.hpp"

using namespace spectrasift;

namespace {

bool has_backend(Backend b) {
  for (const auto& d : list_devices())
    if (d.backend == b) return true;
  return false;
}

/// Sets an environment variable for the scope of one test.
struct ScopedEnv {
  std::string name;
  ScopedEnv(const char* n, const char* value) : name(n) { ::setenv(n, value, 1); }
  ~ScopedEnv() { ::unsetenv(name.c_str()); }
};

}  // namespace

TEST(Backend, ParsesNamesInAnyCase) {
  EXPECT_EQ(parse_backend("CPU"), Backend::kCpu);
  EXPECT_EQ(parse_backend("cuda"), Backend::kCuda);
  EXPECT_EQ(parse_backend("OpenCL"), Backend::kOpenCL);
  EXPECT_EQ(parse_backend("auto"), Backend::kAuto);
  EXPECT_THROW(parse_backend("vulkan"), Error);
  EXPECT_STREQ(to_string(Backend::kOpenCL), "opencl");
}

TEST(Devices, ListStartsWithTheCpu) {
  const auto devices = list_devices();
  ASSERT_FALSE(devices.empty());
  EXPECT_EQ(devices.front().backend, Backend::kCpu);
  EXPECT_GE(devices.front().compute_units, 1);
  for (const auto& d : devices) {
    EXPECT_FALSE(d.name.empty());
    if (d.backend != Backend::kCpu) {
      EXPECT_GT(d.global_memory, 0u) << d.name;
      EXPECT_GT(d.max_work_group_size, 0) << d.name;
    }
  }
}

TEST(Context, CpuBackendIsAlwaysThere) {
  ContextOptions o;
  o.backend = Backend::kCpu;
  o.threads = 2;
  Context ctx(o);
  EXPECT_EQ(ctx.backend(), Backend::kCpu);
  EXPECT_NE(ctx.describe().find("2 threads"), std::string::npos) << ctx.describe();
  Context moved = std::move(ctx);
  EXPECT_EQ(moved.backend(), Backend::kCpu);
}

TEST(Context, AutoPicksAGpuBackendWhenOnePresentElseCpu) {
  ContextOptions o;
  o.backend = Backend::kAuto;
  Context ctx(o);
  if (has_backend(Backend::kCuda)) {
    EXPECT_EQ(ctx.backend(), Backend::kCuda);
  } else {
    bool ocl_gpu = false;
    for (const auto& d : list_devices()) ocl_gpu = ocl_gpu || (d.backend == Backend::kOpenCL && d.type == "gpu");
    EXPECT_EQ(ctx.backend(), ocl_gpu ? Backend::kOpenCL : Backend::kCpu);
  }
}

TEST(Context, MissingBackendIsAnErrorNotAFallback) {
  ContextOptions o;
  o.backend = Backend::kCuda;
  if (has_backend(Backend::kCuda)) {
    o.device = 1000;
  }
  try {
    Context ctx(o);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBackendUnavailable);
    EXPECT_EQ(e.backend(), "cuda");
  }
}

TEST(Context, OpenClDeviceOutOfRangeIsAnError) {
  ContextOptions o;
  o.backend = Backend::kOpenCL;
  o.device = 999;
  try {
    Context ctx(o);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBackendUnavailable);
  }
}

TEST(Context, OpenClContextOnEveryListedDevice) {
  for (const auto& d : list_devices()) {
    if (d.backend != Backend::kOpenCL) continue;
    ContextOptions o;
    o.backend = Backend::kOpenCL;
    o.device = d.index;
    Context ctx(o);
    EXPECT_EQ(ctx.backend(), Backend::kOpenCL);
    EXPECT_EQ(ctx.device().name, d.name);
  }
  if (!has_backend(Backend::kOpenCL)) GTEST_SKIP() << "no OpenCL device on this machine";
}

TEST(ContextOptions, EnvironmentSelectsBackendAndDevice) {
  ScopedEnv b("SPECTRASIFT_BACKEND", "cpu");
  ScopedEnv d("SPECTRASIFT_DEVICE", "0");
  const auto o = ContextOptions::from_env();
  EXPECT_EQ(o.backend, Backend::kCpu);
  EXPECT_EQ(o.device, 0);
}

TEST(ContextOptions, BadEnvironmentValuesAreErrors) {
  {
    ScopedEnv b("SPECTRASIFT_BACKEND", "gpu-please");
    EXPECT_THROW(ContextOptions::from_env(), Error);
  }
  {
    ScopedEnv d("SPECTRASIFT_DEVICE", "one");
    EXPECT_THROW(ContextOptions::from_env(), Error);
  }
}

TEST(ContextOptions, MaxPixelsFromTheEnvironment) {
  EXPECT_EQ(ContextOptions::from_env().max_pixels, std::uint64_t(1) << 30);  // unset: the default
  {
    ScopedEnv m("SPECTRASIFT_MAX_PIXELS", "12345");
    EXPECT_EQ(ContextOptions::from_env().max_pixels, 12345u);
  }
  {
    ScopedEnv m("SPECTRASIFT_MAX_PIXELS", "0");  // no limit
    EXPECT_EQ(ContextOptions::from_env().max_pixels, 0u);
  }
  {
    ScopedEnv m("SPECTRASIFT_MAX_PIXELS", "");  // empty = unset, like the other variables
    EXPECT_EQ(ContextOptions::from_env().max_pixels, std::uint64_t(1) << 30);
  }
  for (const char* bad : {"garbage", "-1", "12k", " 12", "1e9", "99999999999999999999999"}) {
    ScopedEnv m("SPECTRASIFT_MAX_PIXELS", bad);
    try {
      ContextOptions::from_env();
      ADD_FAILURE() << "accepted SPECTRASIFT_MAX_PIXELS='" << bad << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find(std::string("SPECTRASIFT_MAX_PIXELS='") + bad + "' is not a pixel count"),
                std::string::npos)
          << e.what();
    }
  }
}

TEST(ContextOptions, CheckRejectsNegativeValues) {
  ContextOptions o;
  o.threads = -1;
  EXPECT_THROW(o.check(), Error);
  o.threads = 0;
  o.device = -2;
  EXPECT_THROW(o.check(), Error);
}

#include "spectrasift/match.hpp"
#include "spectrasift/sift.hpp"

// With `auto`, an operation that the picked GPU backend does not implement yet runs on the CPU backend
// and gives the CPU backend's answer; asked for explicitly, the same backend is an error (checked above for
// a missing device, and in sift_test for SIFT on a GPU context). On a machine without a GPU, auto is the CPU.
TEST(Context, AutoRunsEveryOperationWithTheCpuAnswer) {
  ImageF img{96, 96, std::vector<float>(96 * 96, 40.0f)};
  for (int y = 0; y < 96; ++y)
    for (int x = 0; x < 96; ++x) {
      const double dx = x - 40.3, dy = y - 52.7;
      img.at(x, y) += float(150.0 * std::exp(-(dx * dx + dy * dy) / (2 * 4.0 * 4.0)));
    }
  ContextOptions cpu_opts;
  cpu_opts.backend = Backend::kCpu;
  Context cpu(cpu_opts);
  ContextOptions auto_opts;
  auto_opts.backend = Backend::kAuto;
  Context automatic(auto_opts);
  const Features a = detect_and_compute(cpu, img);
  const Features b = detect_and_compute(automatic, img);
  ASSERT_GT(a.size(), 0u);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(a.descriptors, b.descriptors);
  EXPECT_EQ(match_features(cpu, a, a).size(), match_features(automatic, b, b).size());
}

#include "spectrasift/envi.hpp"
#include "spectrasift/spectral.hpp"

// ContextOptions::max_pixels is checked by SIFT and by spectral matching, with the message that says how to
// raise it; 0 lifts the limit.
TEST(Context, MaxPixelsIsCheckedWithAMessageSayingHowToRaiseIt) {
  ContextOptions o;
  o.backend = Backend::kCpu;
  o.max_pixels = 96 * 96 - 1;
  Context small(o);
  const ImageF img{96, 96, std::vector<float>(96 * 96, 40.0f)};
  try {
    detect_and_compute(small, img);
    ADD_FAILURE() << "no Error thrown";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kOutOfMemory);
    EXPECT_NE(std::string(e.what()).find("sift: image of 96 x 96 = 9216 pixels exceeds the limit of 9215 pixels "
                                         "(raise it with --max-pixels N or SPECTRASIFT_MAX_PIXELS"),
              std::string::npos)
        << e.what();
  }
  const EnviCube cube = open_envi(std::string(SPECTRASIFT_TEST_DATA) + "/hydice_data.hdr");  // 80 x 100
  const SpectralLibrary ref = reference_from_pixels(cube, {{3, 4}});
  o.max_pixels = 7999;
  Context small_cube(o);
  try {
    spectral_match(small_cube, cube, ref, SpectralOptions{});
    ADD_FAILURE() << "no Error thrown";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kOutOfMemory);
    EXPECT_NE(std::string(e.what()).find("spectral_match: cube of 80 x 100 = 8000 pixels exceeds the limit of 7999 "
                                         "pixels (raise it with --max-pixels N"),
              std::string::npos)
        << e.what();
  }
  o.max_pixels = 0;
  Context unlimited(o);
  EXPECT_EQ(spectral_match(unlimited, cube, ref, SpectralOptions{}).samples, 80);
  EXPECT_NO_THROW(detect_and_compute(unlimited, img));
}

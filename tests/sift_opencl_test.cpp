// OpenCL SIFT against the CPU backend (issue 18, item 4) on the OpenCL devices present (PoCL in CI): real
// images, the tolerances of tests/tolerances.hpp (sift_backend_vs_cpu), run-to-run identity, every input
// type, upsampling on and off, max_features and a mask, and the errors of bad input. Skips with a message
// when the machine has no OpenCL device.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/context_impl.hpp"
#include "core/sift_backend.hpp"
#include "core/sift_plan.hpp"
#include "opencl_test_util.hpp"
#include "spectrasift/context.hpp"
#include "spectrasift/error.hpp"
#include "spectrasift/io.hpp"
#include "spectrasift/sift.hpp"
#include "sift_device_test_util.hpp"
#include "tolerances.hpp"

#ifdef SPECTRASIFT_HAVE_OPENCL
#include "backend/opencl/sift.hpp"
#include "backend/opencl/state.hpp"
#endif

namespace ss = spectrasift;

namespace {

#ifdef SPECTRASIFT_HAVE_OPENCL

ss::Image load(const char* name) { return ss::test::load_test_image(name); }
using ss::test::cpu_sift;
using ss::test::run_stages;

using ss::test::opencl_device;
using ss::test::opencl_options;

#define REQUIRE_OPENCL()                                                      \
  const int device_index = opencl_device();                                   \
  if (device_index < 0) GTEST_SKIP() << "no OpenCL device on this machine";  \
  (void)device_index

// One OpenCL context and its SIFT stages for the whole test program (the program is built once: PoCL
// compiles slowly on CI's two cores); the run sequence is core/sift.cpp's.
struct Device {
  std::unique_ptr<ss::Context> ctx;
  std::unique_ptr<ss::detail::SiftStages> stages;
};
Device& device() {
  static Device d = [] {
    Device r;
    r.ctx = std::make_unique<ss::Context>(opencl_options());
    r.stages = ss::opencl::make_sift_stages(r.ctx->impl());
    return r;
  }();
  return d;
}

// Through the public API: core's dispatch picks the OpenCL backend's stages (kept in the context).
ss::Features opencl_sift(const ss::Image& im, const ss::SiftOptions& o = {}, const ss::Image* mask = nullptr) {
  return ss::detect_and_compute(*device().ctx, im, o, mask);
}

// The agreement of issue 18 (tests/sift_device_test_util.hpp).
void expect_agreement(const ss::Features& cpu, const ss::Features& dev, const std::string& what) {
  ss::test::expect_sift_agreement(cpu, dev, ss::Backend::kOpenCL, "sift-ocl", what);
}

bool same_bits(const ss::Features& a, const ss::Features& b) { return ss::test::same_sift_bits(a, b); }

ss::Image convert(const ss::Image& g, ss::PixelType type, int channels) {
  return ss::test::convert_sift_input(g, type, channels);
}

TEST(SiftOpenCL, AgreesWithCpuOnRealImages) {
  REQUIRE_OPENCL();
  for (const char* name : {"box.png", "graf1_gray.png", "camera.png"}) {
    const ss::Image im = load(name);
    expect_agreement(cpu_sift(im), opencl_sift(im), name);
  }
}

TEST(SiftOpenCL, AgreesWithoutUpsampling) {
  REQUIRE_OPENCL();
  ss::SiftOptions o;
  o.upsample = false;
  for (const char* name : {"graf1_gray.png", "camera.png"}) {
    const ss::Image im = load(name);
    expect_agreement(cpu_sift(im, o), opencl_sift(im, o), std::string(name) + " no upsample");
  }
}

// The GPU forms of the kernels (tiled blur, a work-group per keypoint for orientations and descriptors)
// on this device too: a CPU device normally runs its own forms, so this is what checks on PoCL the code that
// NVIDIA's OpenCL runs.
TEST(SiftOpenCL, GpuKernelFormsAgree) {
  REQUIRE_OPENCL();
  ss::Context ctx(opencl_options());
  ss::opencl::state(ctx.impl()).is_cpu = false;
  auto stages = ss::opencl::make_sift_stages(ctx.impl());
  for (const char* name : {"box.png", "graf1_gray.png"}) {
    const ss::Image im = load(name);
    const ss::detail::SiftImageView v{im.data.data(), im.type, im.width, im.height, im.channels, false};
    const ss::Features dev = run_stages(*stages, ctx.impl(), v, {}, nullptr);
    expect_agreement(cpu_sift(im), dev, std::string(name) + " (GPU kernel forms)");
    EXPECT_TRUE(same_bits(dev, opencl_sift(im))) << name << ": the two kernel forms differ";
  }
}

// Buffers too small for a run grow and the stages run again, with the same result.
TEST(SiftOpenCL, BuffersGrowAndRunAgain) {
  REQUIRE_OPENCL();
  ss::Context ctx(opencl_options());
  auto stages = ss::opencl::make_sift_stages(ctx.impl());
  auto* st = dynamic_cast<ss::opencl::SiftStagesOpenCL*>(stages.get());
  ASSERT_NE(st, nullptr);
  st->set_keypoints_per_candidate(0.01);
  const ss::Image im = load("box.png");
  const ss::detail::SiftImageView v{im.data.data(), im.type, im.width, im.height, im.channels, false};
  ss::detail::SiftPlan plan = ss::detail::make_sift_plan(im.width, im.height, {});
  plan.candidate_capacity = 16;  // far fewer than the image has
  stages->upload(plan, v);
  stages->pyramid();
  stages->dog();
  EXPECT_GT(stages->extrema(), 16u);
  stages->refine();
  stages->orientations();
  stages->select(nullptr);
  stages->descriptors();
  ss::Features a;
  ss::detail::SiftCounts counts;
  stages->download(a, counts);
  EXPECT_EQ(st->regrowths(), 2);  // the candidates, then the keypoints
  EXPECT_TRUE(same_bits(a, opencl_sift(im)));
  const ss::Features b = run_stages(*stages, ctx.impl(), v, {}, nullptr);  // grown buffers kept
  EXPECT_TRUE(same_bits(b, opencl_sift(im)));
}

TEST(SiftOpenCL, IdenticalRunToRun) {
  REQUIRE_OPENCL();
  const ss::Image graf = load("graf1_gray.png"), box = load("box.png");
  const ss::Features a = opencl_sift(graf);
  const ss::Features b = opencl_sift(box);  // another shape in between: buffers and plan change
  const ss::Features c = opencl_sift(graf);
  ASSERT_FALSE(a.keypoints.empty());
  EXPECT_TRUE(same_bits(a, c));
  EXPECT_FALSE(same_bits(a, b));
}

const ss::test::DeviceSift kOpenCLSift{ss::Backend::kOpenCL, "sift-ocl",
                                        [](const ss::Image& im, const ss::SiftOptions& o, const ss::Image* mask) {
                                          return opencl_sift(im, o, mask);
                                        }};

TEST(SiftOpenCL, EveryInputType) {
  REQUIRE_OPENCL();
  ss::test::check_every_input_type(kOpenCLSift);
}

TEST(SiftOpenCL, MaxFeaturesAndMaskKeepTheCpuSet) {
  REQUIRE_OPENCL();
  ss::test::check_max_features_and_mask(kOpenCLSift);
}

TEST(SiftOpenCL, RootSiftAndGreyLevels) {
  REQUIRE_OPENCL();
  const ss::Image im = load("camera.png");
  ss::SiftOptions root;
  root.root_sift = true;
  expect_agreement(cpu_sift(im, root), opencl_sift(im, root), "camera RootSIFT");
  // The ImageF overload: grey levels used as they are (uploaded as the grey image).
  ss::ImageF g = ss::to_gray_float(load("box.png"));
  for (float& v : g.data) v = v * 0.75f + 10.3f;
  ss::ContextOptions co;
  co.backend = ss::Backend::kCpu;
  co.threads = 2;
  ss::Context cpu(co);
  Device& d = device();
  const ss::detail::SiftImageView v{g.data.data(), ss::PixelType::kF32, g.width, g.height, 1, true};
  expect_agreement(ss::detect_and_compute(cpu, g), run_stages(*d.stages, d.ctx->impl(), v, {}, nullptr),
                   "box grey levels");
}

// Device time per stage and end to end against the CPU backend (reported, never asserted). Run with
// --gtest_also_run_disabled_tests --gtest_filter=*StageTimes*.
TEST(SiftOpenCL, DISABLED_StageTimes) {
  REQUIRE_OPENCL();
  Device& d = device();
  auto* st = dynamic_cast<ss::opencl::SiftStagesOpenCL*>(d.stages.get());
  ASSERT_NE(st, nullptr);
  // Extra images by path in SPECTRASIFT_SIFT_TIMING_IMAGES (colon-separated), e.g. the 1080p photos.
  for (const std::string& path : ss::test::timing_images()) {
    const char* name = path.c_str();
    for (bool upsample : {true, false}) {
      const ss::Image im = ss::read_image(path);
      const ss::detail::SiftImageView v{im.data.data(), im.type, im.width, im.height, im.channels, false};
      ss::SiftOptions o;
      o.upsample = upsample;
      const auto median = ss::test::median_of;
      std::vector<double> cpu_ms, ocl_ms;
      std::vector<std::vector<double>> stage(ss::opencl::SiftStagesOpenCL::kStages);
      ss::ContextOptions co;
      co.backend = ss::Backend::kCpu;
      co.threads = 2;
      ss::Context cpu(co);
      for (int rep = 0; rep < 7; ++rep) {
        auto t0 = std::chrono::steady_clock::now();
        (void)ss::detect_and_compute(cpu, im, o);
        auto t1 = std::chrono::steady_clock::now();
        st->set_profiling(false);
        (void)run_stages(*d.stages, d.ctx->impl(), v, o, nullptr);
        auto t2 = std::chrono::steady_clock::now();
        st->set_profiling(true);
        (void)run_stages(*d.stages, d.ctx->impl(), v, o, nullptr);
        for (int s = 0; s < ss::opencl::SiftStagesOpenCL::kStages; ++s) stage[std::size_t(s)].push_back(st->stage_ms()[std::size_t(s)]);
        cpu_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
        ocl_ms.push_back(std::chrono::duration<double, std::milli>(t2 - t1).count());
      }
      st->set_profiling(false);
      std::printf("[ sift-ocl ] %s upsample %d: cpu (2 threads) %.1f ms, opencl end to end %.1f ms; stages:", name,
                  int(upsample), median(cpu_ms), median(ocl_ms));
      for (int s = 0; s < ss::opencl::SiftStagesOpenCL::kStages; ++s)
        std::printf(" %s %.2f", ss::opencl::SiftStagesOpenCL::stage_name(s), median(stage[std::size_t(s)]));
      std::printf("\n");
    }
  }
}

TEST(SiftOpenCL, ClearErrors) {
  REQUIRE_OPENCL();
  Device& d = device();
  auto& st = ss::opencl::state(d.ctx->impl());
  const ss::Image im = load("box.png");
  const std::size_t saved = st.max_alloc;
  st.max_alloc = 1 << 20;  // a device that allows 1 MiB per buffer
  try {
    opencl_sift(im);
    ADD_FAILURE() << "a 1 MiB allocation limit did not stop a 324 x 223 image";
  } catch (const ss::Error& e) {
    EXPECT_EQ(e.code(), ss::ErrorCode::kOutOfMemory);
    EXPECT_NE(std::string(e.what()).find("CL_DEVICE_MAX_MEM_ALLOC_SIZE"), std::string::npos) << e.what();
  }
  st.max_alloc = saved;
  EXPECT_FALSE(opencl_sift(im).keypoints.empty());  // and the context still works
  // A device with too little local memory for the kernels' tiles and windows: a clear error, no crash (both
  // kernel forms).
  for (bool cpu_forms : {true, false}) {
    ss::Context small(opencl_options());
    auto& sst = ss::opencl::state(small.impl());
    sst.is_cpu = cpu_forms;
    sst.local_mem = 256;
    auto stages = ss::opencl::make_sift_stages(small.impl());
    const ss::detail::SiftImageView v{im.data.data(), im.type, im.width, im.height, im.channels, false};
    try {
      run_stages(*stages, small.impl(), v, {}, nullptr);
      ADD_FAILURE() << "256 bytes of local memory did not stop the run";
    } catch (const ss::Error& e) {
      EXPECT_EQ(e.code(), ss::ErrorCode::kUnsupported);
      EXPECT_NE(std::string(e.what()).find("local memory"), std::string::npos) << e.what();
    }
  }
  // Without doubles on the device: 16-bit and float colour and RootSIFT are refused by name; grey and 8-bit
  // colour run.
  {
    ss::Context ctx(opencl_options());
    auto stages = ss::opencl::make_sift_stages(ctx.impl());
    dynamic_cast<ss::opencl::SiftStagesOpenCL&>(*stages).assume_no_fp64();
    const ss::Image u16 = convert(im, ss::PixelType::kU16, 3), u8 = convert(im, ss::PixelType::kU8, 3);
    ss::SiftOptions root;
    root.root_sift = true;
    auto view = [](const ss::Image& i) {
      return ss::detail::SiftImageView{i.data.data(), i.type, i.width, i.height, i.channels, false};
    };
    for (int what = 0; what < 2; ++what) {
      try {
        run_stages(*stages, ctx.impl(), view(what == 0 ? u16 : im), what == 0 ? ss::SiftOptions{} : root, nullptr);
        ADD_FAILURE() << "no error without doubles, case " << what;
      } catch (const ss::Error& e) {
        EXPECT_EQ(e.code(), ss::ErrorCode::kUnsupported);
        EXPECT_NE(std::string(e.what()).find("cl_khr_fp64"), std::string::npos) << e.what();
      }
    }
    EXPECT_TRUE(same_bits(run_stages(*stages, ctx.impl(), view(u8), {}, nullptr), opencl_sift(u8)));
  }
  // An image too small for one octave finds nothing (and does not fail).
  ss::Image tiny = ss::Image::allocate(4, 4, 1, ss::PixelType::kU8);
  EXPECT_TRUE(opencl_sift(tiny).keypoints.empty());
}

TEST(SiftOpenCL, PublicApiRunsTheDeviceStages) {
  REQUIRE_OPENCL();
  Device& d = device();
  const ss::Image im = load("box.png");
  const ss::detail::SiftImageView v{im.data.data(), im.type, im.width, im.height, im.channels, false};
  EXPECT_TRUE(same_bits(run_stages(*d.stages, d.ctx->impl(), v, {}, nullptr), opencl_sift(im)));
  ss::Image empty;
  try {
    ss::detect_and_compute(*d.ctx, empty);
    ADD_FAILURE() << "no error for an empty image";
  } catch (const ss::Error& e) {
    EXPECT_EQ(e.code(), ss::ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("empty"), std::string::npos) << e.what();
  }
}

#else
TEST(SiftOpenCL, Skipped) { GTEST_SKIP() << "built without OpenCL"; }
#endif

}  // namespace

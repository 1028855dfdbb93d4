// OpenCL SIFT against the CPU backend (issue 18, item 4) on the OpenCL devices present (PoCL in CI): real
// images, the tolerances of tests/tolerances.hpp (sift_backend_vs_cpu), run-to-run identity, every input
// type, upsampling on and off, max_features and a mask, and the errors of bad input. Skips with a message
// when the machine has no OpenCL device.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/context_impl.hpp"
#include "core/sift_backend.hpp"
#include "core/sift_plan.hpp"
#include "opencl_test_util.hpp"
#include "spectrasift/context.hpp"
#include "spectrasift/error.hpp"
#include "spectrasift/io.hpp"
#include "spectrasift/sift.hpp"
#include "sift_backend_conformance.hpp"
#include "sift_batch_check.hpp"
#include "sift_device_test_util.hpp"
#include "tolerances.hpp"

#ifdef SPECTRASIFT_HAVE_OPENCL
#include "backend/backend.hpp"
#include "backend/opencl/device_features.hpp"
#include "backend/opencl/sift.hpp"
#include "backend/opencl/state.hpp"
#include "numeric/sift_select.h"
#endif

namespace ss = spectrasift;

namespace {

#ifdef SPECTRASIFT_HAVE_OPENCL

ss::Image load(const char* name) { return ss::test::load_test_image(name); }
using ss::test::cpu_sift;
using ss::test::run_stages;
using ss::test::sift_view;

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

const ss::test::DeviceSift kOpenCLSift{ss::Backend::kOpenCL, "sift-ocl",
                                        [](const ss::Image& im, const ss::SiftOptions& o, const ss::Image* mask) {
                                          return opencl_sift(im, o, mask);
                                        }};

// The stages between upload() and download() of core/sift.cpp's run sequence (no mask).
void run_after_upload(ss::detail::SiftStages& s) {
  s.pyramid();
  s.dog();
  s.extrema();
  s.refine();
  s.orientations();
  s.select(nullptr);
  s.descriptors();
}

// Restores State::host_staging when a test that switches the host paths (direct / staged) ends.
struct RestoreHostStaging {
  ss::opencl::State& st;
  bool staging = st.host_staging;
  ~RestoreHostStaging() { st.host_staging = staging; }
};

// The agreement of issue 18 (tests/sift_device_test_util.hpp).
ss::test::SiftAgreement expect_agreement(const ss::Features& cpu, const ss::Features& dev, const std::string& what) {
  return ss::test::expect_sift_agreement(cpu, dev, ss::Backend::kOpenCL, "sift-ocl", what);
}

bool same_bits(const ss::Features& a, const ss::Features& b) { return ss::test::same_sift_bits(a, b); }

ss::Image convert(const ss::Image& g, ss::PixelType type, int channels) {
  return ss::test::convert_sift_input(g, type, channels);
}

TEST(SiftOpenCL, AgreesWithCpuOnRealImages) {
  REQUIRE_OPENCL();
  ss::test::check_agrees_on_images(kOpenCLSift, {"box.png", "graf1_gray.png", "camera.png"});
}

TEST(SiftOpenCL, AgreesWithoutUpsampling) {
  REQUIRE_OPENCL();
  ss::SiftOptions o;
  o.upsample = false;
  ss::test::check_agrees_on_images(kOpenCLSift, {"graf1_gray.png", "camera.png"}, o, " no upsample");
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
  // RootSIFT (written by one work-item of the GPU form) and the first octave without upsampling.
  const ss::Image im = load("graf1_gray.png");
  const ss::detail::SiftImageView v{im.data.data(), im.type, im.width, im.height, im.channels, false};
  ss::SiftOptions root, flat;
  root.root_sift = true;
  flat.upsample = false;
  for (const ss::SiftOptions& o : {root, flat})
    EXPECT_TRUE(same_bits(run_stages(*stages, ctx.impl(), v, o, nullptr), opencl_sift(im, o)))
        << "graf1, root_sift " << o.root_sift << ", upsample " << o.upsample << ": the two kernel forms differ";
}

// The GPU descriptor forms (State::descriptor_variant: 0 the walkers, sift_descriptor; 1 the staged form's box
// walk, sift_descriptor_staged, four keypoints a work-group of 128; 2 the same kernel, one keypoint a work-group
// of 32; 3 and 4 the row walk, sift_descriptor_staged_rows, in work-groups of 32 and 128) give the same features
// bit for bit, equal to the
// CPU-device form's (sift_descriptor_serial on PoCL) and in agreement with the CPU backend: box and graf1
// upsampled, graf1 at sigma 3.2 (larger windows, more bands), camera without upsampling and with RootSIFT, and
// kleiber 1080p upsampled (2.4k keypoints) from the shared photos when they are found. Forced on the GPU path
// (is_cpu = false) on any device, so that PoCL checks the kernel NVIDIA's OpenCL runs. A device whose local
// memory cannot hold the staged bands of four keypoints runs the walkers, with the same bits.
TEST(SiftOpenCL, GpuDescriptorFormsAgree) {
  REQUIRE_OPENCL();
  ss::Context ctx(opencl_options());
  auto& st = ss::opencl::state(ctx.impl());
  st.is_cpu = false;
  auto stages = ss::opencl::make_sift_stages(ctx.impl());
  auto& ocl = dynamic_cast<ss::opencl::SiftStagesOpenCL&>(*stages);
  for (const auto& [path, o, what] : ss::test::descriptor_form_cases("sift-ocl")) {
    const ss::Image im = ss::read_image(path);
    st.descriptor_variant = 0;
    const ss::Features walkers = run_stages(*stages, ctx.impl(), sift_view(im), o, nullptr);
    EXPECT_EQ(ocl.last_descriptors_staged_local(), 0u) << what;
    const ss::Features reference = opencl_sift(im, o);
    EXPECT_TRUE(same_bits(walkers, reference)) << what << ": the walkers differ from the default form's";
    // Against the CPU backend: the agreement of issue 18; the staged rows must be as close to the CPU's as the
    // walkers' (on PoCL every paired descriptor is the CPU's, worst difference 0; a keypoint or two of graf1
    // and kleiber differ in a coordinate's last bit in both forms alike).
    const ss::Features cpu = cpu_sift(im, o);
    const ss::test::SiftAgreement aw = expect_agreement(cpu, walkers, what + " (walkers)");
    // box walk in work-groups of 128 (four keypoints) and of 32 (one), row walk in 32 and 128
    for (int variant : {1, 2, 3, 4}) {
      const bool rows_walk = variant >= 3;
      const std::size_t local = variant == 1 || variant == 4 ? 128 : 32;
      const std::string form =
          what + (rows_walk ? " (staged rows, " : " (staged, ") + std::to_string(local) + ")";
      st.descriptor_variant = variant;
      // The descriptor rows filled with NaN bits first: a row the staged kernel failed to write must not keep
      // the last form's values (every form shares the stages object's buffers).
      const ss::opencl::Buffer& rows = st.buffers.at("sift.desc");
      const cl_uint nan_bits = 0xffffffffu;
      ASSERT_EQ(clEnqueueFillBuffer(st.queue, rows.mem, &nan_bits, sizeof nan_bits, 0, rows.bytes / 4 * 4, 0, nullptr,
                                    nullptr),
                CL_SUCCESS);
      const ss::Features staged = run_stages(*stages, ctx.impl(), sift_view(im), o, nullptr);
      EXPECT_EQ(ocl.last_descriptors_staged_local(), local) << form;
      EXPECT_EQ(ocl.last_descriptors_row_walk(), rows_walk) << form;
      ASSERT_FALSE(staged.keypoints.empty()) << form;
      EXPECT_TRUE(same_bits(walkers, staged)) << form << ": the staged descriptors differ from the walkers'";
      const ss::test::SiftAgreement as = expect_agreement(cpu, staged, form);
      EXPECT_EQ(as.identical, aw.identical) << form;
      EXPECT_EQ(as.worst_descriptor, aw.worst_descriptor) << form;
    }
  }
  st.descriptor_variant = -1;
  // 8 KiB of local memory: enough for the walkers, not for the staged bands of four keypoints (~15 KiB of
  // arguments at sigma 1.6 with their accumulators and output rows; PoCL 5 reports no static local memory for the
  // kernels), in either walk.
  const ss::Image box = load("box.png");
  for (int variant : {1, 4}) {
    ss::Context small(opencl_options());
    auto& sst = ss::opencl::state(small.impl());
    sst.is_cpu = false;
    sst.descriptor_variant = variant;
    sst.local_mem = 8 * 1024;
    auto small_stages = ss::opencl::make_sift_stages(small.impl());
    const ss::Features fallback = run_stages(*small_stages, small.impl(), sift_view(box), {}, nullptr);
    EXPECT_EQ(dynamic_cast<ss::opencl::SiftStagesOpenCL&>(*small_stages).last_descriptors_staged_local(), 0u)
        << "variant " << variant;
    EXPECT_TRUE(same_bits(fallback, opencl_sift(box))) << "box, variant " << variant << ": the walkers' fallback differs";
  }
}

// The blur forms write the same pyramid bit for bit: every Gaussian level and DoG plane of the row kernels
// (the CPU-device form, the CPU backend's operations) against sift_blur_tiles (per radius, registers),
// sift_blur_small_tiles (the same in 32 x 16 tiles, at every level here) and sift_blur (runtime radius), on any
// device, with the trailing small octaves in per-level launches and in
// one launch of sift_blur_small_octaves (with the device's local memory and with NVIDIA OpenCL's 48 KiB, which
// starts the one launch at a smaller octave). sigma 3.2 gives radii above 16 (sift_blur beside the tiles, and
// radii larger than the small octaves' sides: reflected more than once); camera.png without upsampling has
// octaves that are not multiples of the 64 x 32 tile.
TEST(SiftOpenCL, BlurFormsWriteTheSamePyramid) {
  REQUIRE_OPENCL();
  ss::Context ctx(opencl_options());
  auto& st = ss::opencl::state(ctx.impl());
  auto stages = ss::opencl::make_sift_stages(ctx.impl());
  auto& ocl = dynamic_cast<ss::opencl::SiftStagesOpenCL&>(*stages);
  auto read = [&](const char* name, std::size_t floats) {
    const ss::opencl::Buffer& b = st.buffers.at(name);
    std::vector<float> v(b.bytes / sizeof(float));
    EXPECT_EQ(clEnqueueReadBuffer(st.queue, b.mem, CL_TRUE, 0, v.size() * sizeof(float), v.data(), 0, nullptr, nullptr),
              CL_SUCCESS);
    v.resize(floats);
    return v;
  };
  const std::size_t local_mem = st.local_mem;
  ss::SiftOptions wide, flat;
  wide.sigma = 3.2;
  flat.upsample = false;
  const std::pair<const char*, ss::SiftOptions> cases[] = {{"box.png", {}}, {"box.png", wide}, {"camera.png", flat}};
  // {blur_variant, small_octaves, small_tiles, local memory (0: the device's)}; the first is the reference (row
  // kernels).
  struct Form { int blur; int small; int tiles; std::size_t local; const char* what; };
  const Form forms[] = {{1, 0, 0, 0, "row kernels"},
                        {0, 0, 0, 0, "sift_blur_tiles"},
                        {0, 0, 1, 0, "sift_blur_small_tiles"},
                        {2, 0, 0, 0, "sift_blur"},
                        {0, 1, 0, 0, "sift_blur_tiles + sift_blur_small_octaves"},
                        {0, 1, 1, 0, "sift_blur_small_tiles + sift_blur_small_octaves"},
                        {0, 0, 2, 0, "sift_blur_tiles, sift_blur_small_tiles for the small planes"},
                        {2, 1, 0, 0, "sift_blur + sift_blur_small_octaves"},
                        {0, 1, 0, 48 * 1024, "sift_blur_tiles + sift_blur_small_octaves in 48 KiB"}};
  for (const auto& [name, o] : cases) {
    const ss::Image im = load(name);
    const ss::detail::SiftImageView v{im.data.data(), im.type, im.width, im.height, im.channels, false};
    const ss::detail::SiftPlan& plan = ss::detail::sift_plan(ctx.impl(), v.width, v.height, o);
    const std::string label = std::string(name) + " sigma " + std::to_string(o.sigma) + (o.upsample ? "" : " no upsample");
    std::vector<float> gauss0, dog0;
    int small_from[2] = {plan.octaves, plan.octaves};  // the small-octave forms' first octave: device, 48 KiB
    for (const Form& f : forms) {
      st.blur_variant = f.blur;
      st.small_octaves = f.small;
      st.small_tiles = f.tiles;
      st.local_mem = f.local ? f.local : local_mem;
      // After the reference, the planes are filled with NaN bits first: a plane a form failed to write must not
      // keep the values of the form before it (every form shares the stages object's buffers).
      if (!gauss0.empty()) {
        for (const char* buffer : {"sift.gauss", "sift.dog"}) {
          const ss::opencl::Buffer& b = st.buffers.at(buffer);
          const cl_uint nan_bits = 0xffffffffu;
          ASSERT_EQ(clEnqueueFillBuffer(st.queue, b.mem, &nan_bits, sizeof nan_bits, 0, b.bytes / 4 * 4, 0, nullptr, nullptr),
                    CL_SUCCESS);
        }
        ASSERT_EQ(clFinish(st.queue), CL_SUCCESS);
      }
      run_stages(*stages, ctx.impl(), v, o, nullptr);
      st.local_mem = local_mem;
      const std::vector<float> gauss = read("sift.gauss", plan.gauss_floats), dog = read("sift.dog", plan.dog_floats);
      if (f.small) {
        small_from[f.local ? 1 : 0] = ocl.small_octaves_from();
      } else {
        EXPECT_EQ(ocl.small_octaves_from(), plan.octaves) << label << ", " << f.what;
      }
      if (gauss0.empty()) {
        gauss0 = gauss;
        dog0 = dog;
        continue;
      }
      // Plane by plane: the first that differs names the octave and level.
      std::size_t g = 0, d = 0;
      for (int oct = 0; oct < plan.octaves; ++oct) {
        const auto& sh = plan.octave_shape[std::size_t(oct)];
        const std::size_t plane = std::size_t(sh.width) * std::size_t(sh.height);
        for (int i = 0; i < plan.levels; ++i, g += plane)
          ASSERT_EQ(std::memcmp(gauss.data() + g, gauss0.data() + g, plane * sizeof(float)), 0)
              << label << ", " << f.what << ": octave " << oct << " (" << sh.width << " x " << sh.height
              << ") level " << i << " differs from the row kernels'";
        for (int i = 0; i < plan.dog_levels; ++i, d += plane)
          ASSERT_EQ(std::memcmp(dog.data() + d, dog0.data() + d, plane * sizeof(float)), 0)
              << label << ", " << f.what << ": octave " << oct << " (" << sh.width << " x " << sh.height
              << ") DoG plane " << i << " differs from the row kernels'";
      }
    }
    // The one launch took several octaves on the device, and fewer (from a later octave) in 48 KiB.
    EXPECT_GE(small_from[0], 1) << label;
    EXPECT_LE(small_from[0], plan.octaves - 3) << label << ": too few small octaves to test the one launch";
    if (local_mem > 48 * 1024) {  // NVIDIA OpenCL's own local memory is 48 KiB: the same octaves there
      EXPECT_GT(small_from[1], small_from[0]) << label << ": 48 KiB of local memory should hold fewer octaves";
    } else {
      EXPECT_EQ(small_from[1], small_from[0]) << label;
    }
    EXPECT_LT(small_from[1], plan.octaves) << label;
  }
  st.blur_variant = -1;
  st.small_octaves = -1;
  st.small_tiles = -1;
}

// The GPU extrema search finds the same candidates with every octave in its own launch and with the octaves
// in one launch (sift_extrema loops over them; by default the small trailing octaves only): the records,
// sorted, and the features, bit for bit.
TEST(SiftOpenCL, ExtremaOctavesInOneLaunchFindTheSameCandidates) {
  REQUIRE_OPENCL();
  ss::Context ctx(opencl_options());
  auto& st = ss::opencl::state(ctx.impl());
  st.is_cpu = false;
  auto stages = ss::opencl::make_sift_stages(ctx.impl());
  ss::SiftOptions flat;
  flat.upsample = false;
  const std::pair<const char*, ss::SiftOptions> cases[] = {{"box.png", {}}, {"camera.png", flat}};
  for (const auto& [name, o] : cases) {
    const ss::Image im = load(name);
    const ss::detail::SiftImageView v{im.data.data(), im.type, im.width, im.height, im.channels, false};
    std::vector<std::array<int, 4>> cand[2];
    ss::Features feats[2];
    for (int merged : {0, 1}) {
      st.extrema_split_groups = merged ? ~std::size_t(0) : 1;  // all octaves in one launch : each on its own
      feats[merged] = run_stages(*stages, ctx.impl(), v, o, nullptr);
      cl_uint count = 0;
      ASSERT_EQ(clEnqueueReadBuffer(st.queue, st.buffers.at("sift.counters").mem, CL_TRUE, 0, sizeof count, &count, 0,
                                    nullptr, nullptr),
                CL_SUCCESS);
      cand[merged].resize(count);
      ASSERT_LE(std::size_t(count) * sizeof(cl_int4), st.buffers.at("sift.cand").bytes);
      if (count) {
        ASSERT_EQ(clEnqueueReadBuffer(st.queue, st.buffers.at("sift.cand").mem, CL_TRUE, 0, count * sizeof(cl_int4),
                                      cand[merged].data(), 0, nullptr, nullptr),
                  CL_SUCCESS);
      }
      std::sort(cand[merged].begin(), cand[merged].end());
    }
    st.extrema_split_groups = 0;
    ASSERT_FALSE(cand[0].empty()) << name;
    EXPECT_GT(cand[0].back()[0], 1) << name << ": candidates in one octave only";
    EXPECT_TRUE(cand[0] == cand[1]) << name << ": the candidates differ (" << cand[0].size() << " / " << cand[1].size() << ")";
    EXPECT_TRUE(same_bits(feats[0], feats[1])) << name << ": the features differ";
  }
}

// The select stage's three paths keep the same features bit for bit: the rank select (kernels/sift_select_rank.cl:
// every record compared with every other, a slice of 32 work-items per record; the GPUs' default, forced on PoCL
// with State::select_small = select_rank = 1), sift_select_small (the whole stage in one work-group, the order as
// 32-bit words of a key prefix and a record index in local memory; select_rank = 0) and the multi-launch sorts
// and compactions, with and without the cap and a mask, and agree with the CPU backend. The forms, each against
// the multi-launch path (GPU host path):
//  - the rank select: the GPU host path's default (select_small and select_rank -1), queued alone (the capacity is
//    within its 16,384 records, or the candidates within twice them: every case here); with the multi-launch
//    kernels queued behind it (State::select_small_defer = 0); the CPU-device host path (forced; the oriented
//    count read back: never queued);
//  - the one work-group: the GPU host path, queued alone (the capacity within its 8,192 positions, or the
//    candidates within twice them: every case here), and with the multi-launch kernels behind it when the
//    capacity (2 x the candidates) exceeds its positions (defer 0), returning at once on its counter slot; the
//    CPU-device host path (select_rank -1: the one work-group on CPU devices);
//  - the one work-group in 16 KiB of local memory (2,048 positions: box fits, graf1 does not), the multi-launch
//    kernels queued behind (defer 0: the device's slot 0 lets them run) and not queued (defer 1: download() sees
//    the slot 0 and select_again() runs the multi-launch path).
// Then counts around the limits, graf1 at contrast 0.01 tiled: 2 x 1 (more records than the one work-group's
// 8,192 positions, within the rank select's 16,384; with and without a cap of 3,000, the tiles repeating responses:
// ties at the cut) and 2 x 2 (more than 16,384); the rank select queued alone on a guess (defer 1: right on the
// first, wrong on the second, where select_again() runs the multi-launch path), with the multi-launch kernels
// behind it (defer 0), and the default.
// "sift.order_a" exists after a run only when the multi-launch path was queued (erased before each run).
// graf1 at a low contrast threshold has 4,483 features.
TEST(SiftOpenCL, SelectPathsGiveTheSameFeatures) {
  REQUIRE_OPENCL();
  struct Form {
    std::unique_ptr<ss::Context> ctx;
    ss::opencl::State* st = nullptr;
    std::unique_ptr<ss::detail::SiftStages> stages;
    std::size_t local = 0;  // local memory (0: the device's)
    ss::opencl::SiftStagesOpenCL& ocl() { return dynamic_cast<ss::opencl::SiftStagesOpenCL&>(*stages); }
    ss::Features run(const ss::Image& im, const ss::SiftOptions& o, const ss::Image* m,
                     ss::detail::SiftCounts* counts = nullptr) {
      const std::size_t saved = st->local_mem;
      if (local) st->local_mem = local;
      st->buffers.erase("sift.order_a");
      ss::Features r = run_stages(*stages, ctx->impl(), sift_view(im), o, m, counts);
      st->local_mem = saved;
      return r;
    }
    bool queued() const { return st->buffers.count("sift.order_a") != 0; }
  };
  auto make = [](bool gpu, int select_small, int select_rank, int defer, std::size_t local) {
    Form f;
    f.ctx = std::make_unique<ss::Context>(opencl_options());
    f.st = &ss::opencl::state(f.ctx->impl());
    f.st->is_cpu = !gpu;  // the host path's choice (a GPU's guess, or a CPU device's count read back)
    f.st->select_small = select_small;
    f.st->select_rank = select_rank;
    f.st->select_small_defer = defer;
    f.local = local;
    f.stages = ss::opencl::make_sift_stages(f.ctx->impl());
    return f;
  };
  const std::size_t narrow_local = 16 * 1024;
  Form multi = make(true, 0, -1, -1, 0), rank = make(true, -1, -1, -1, 0), rank_behind = make(true, 1, 1, 0, 0),
       rank_cpu = make(false, 1, 1, -1, 0), small = make(true, 1, 0, -1, 0), behind = make(true, 1, 0, 0, 0),
       cpu_form = make(false, 1, -1, -1, 0), narrow_behind = make(true, 1, 0, 0, narrow_local),
       narrow_again = make(true, 1, 0, 1, narrow_local), buckets = make(true, 0, -1, -1, 0);
  multi.st->select_buckets = 0;    // the sorts: the reference
  buckets.st->select_buckets = 1;  // the bucketed rank select alone (no small-count path), the sorts with a cap
  ASSERT_EQ(rank.ocl().select_rank_records(), std::size_t(SIFT_RANK_MAX_RECORDS));
  EXPECT_EQ(cpu_form.ocl().select_rank_records(), 0u) << "CPU devices: the one work-group by default";
  EXPECT_EQ(multi.ocl().select_rank_records(), 0u) << "select_small 0: no small-count path";
  bool behind_queued = false, behind_alone = false, narrow_fell_back = false, narrow_small = false;
  bool rank_behind_queued = false, rank_behind_alone = false;
  for (const auto& [name, base] : ss::test::select_path_cases()) {
    const ss::Image im = load(name);
    const ss::Image mask = ss::test::tile_mask(im.width, im.height);
    for (int cap : {0, 300}) {
      for (const ss::Image* m : {static_cast<const ss::Image*>(nullptr), static_cast<const ss::Image*>(&mask)}) {
        ss::SiftOptions o = base;
        o.max_features = cap;
        const std::string what = std::string(name) + " contrast " + std::to_string(o.contrast_threshold) +
                                 " max_features " + std::to_string(cap) + (m ? " mask" : "");
        const ss::Features ref = multi.run(im, o, m);
        EXPECT_FALSE(multi.ocl().last_select_was_small()) << what;
        EXPECT_TRUE(multi.queued()) << what;
        ASSERT_FALSE(ref.keypoints.empty()) << what;
        if (o.contrast_threshold < 0.02 && cap == 0 && !m) {
          EXPECT_GT(ref.keypoints.size(), 4096u) << what;
        }
        if (cap > 0) {
          EXPECT_LE(ref.keypoints.size(), std::size_t(cap) + 30) << what;
        }
        const ss::Features bk = buckets.run(im, o, m);
        EXPECT_EQ(buckets.queued(), cap > 0) << what << ": the sorts ran without a cap, or not with one";
        EXPECT_TRUE(same_bits(bk, ref)) << what << ": the bucketed rank select differs from the sorts";
        // The rank select: the default, queued alone; the multi-launch kernels behind it; the CPU host path.
        const ss::Features r = rank.run(im, o, m);
        EXPECT_TRUE(rank.ocl().last_select_was_rank()) << what;
        EXPECT_FALSE(rank.queued()) << what << ": the default queued the multi-launch kernels behind the rank select";
        EXPECT_TRUE(same_bits(r, ref)) << what << ": the rank select (GPU host path) differs from multi-launch";
        const ss::Features rb = rank_behind.run(im, o, m);
        EXPECT_TRUE(rank_behind.ocl().last_select_was_rank()) << what;
        (rank_behind.queued() ? rank_behind_queued : rank_behind_alone) = true;
        EXPECT_TRUE(same_bits(rb, ref)) << what << ": the rank select, the multi-launch kernels behind it, differs";
        const ss::Features rc = rank_cpu.run(im, o, m);
        EXPECT_TRUE(rank_cpu.ocl().last_select_was_rank()) << what;
        EXPECT_FALSE(rank_cpu.queued()) << what << ": the count was known, nothing to queue";
        EXPECT_TRUE(same_bits(rc, ref)) << what << ": the rank select (CPU host path) differs from multi-launch";
        expect_agreement(cpu_sift(im, o, m), r, what);  // every form below has r's bits
        // 8,192 where the work-group size and local memory allow (PoCL); NVIDIA OpenCL gave 4,096 on the H200.
        const std::size_t positions = small.ocl().select_small_positions();
        ASSERT_GE(positions, 4096u);
        if (positions < 8192u && o.contrast_threshold < 0.02) continue;  // the dense case exceeds 4,096 records
        const ss::Features a = small.run(im, o, m);
        EXPECT_TRUE(small.ocl().last_select_was_small()) << what;
        EXPECT_FALSE(small.ocl().last_select_was_rank()) << what;
        // The default's guess (candidates within 2 x the positions) holds for every case at 8,192 positions; at
        // NVIDIA's 4,096, graf1's candidates exceed 8,192 and the multi-launch kernels are rightly queued behind.
        if (positions >= 8192u) {
          EXPECT_FALSE(small.queued()) << what << ": the default queued the multi-launch kernels";
        }
        EXPECT_TRUE(same_bits(a, ref)) << what << ": one work-group (GPU host path) differs from the multi-launch path";
        const ss::Features b = behind.run(im, o, m);
        EXPECT_TRUE(behind.ocl().last_select_was_small()) << what;
        (behind.queued() ? behind_queued : behind_alone) = true;
        EXPECT_TRUE(same_bits(b, ref)) << what << ": one work-group, the multi-launch kernels behind it, differs";
        const ss::Features c = cpu_form.run(im, o, m);
        EXPECT_TRUE(cpu_form.ocl().last_select_was_small()) << what;
        EXPECT_FALSE(cpu_form.ocl().last_select_was_rank()) << what;
        EXPECT_FALSE(cpu_form.queued()) << what << ": the count was known, nothing to queue";
        EXPECT_TRUE(same_bits(c, ref)) << what << ": one work-group (CPU host path) differs from the multi-launch path";
        // 2,048 positions in 16 KiB: the one work-group takes box, not graf1.
        for (Form* f : {&narrow_behind, &narrow_again}) {
          const ss::Features d = f->run(im, o, m);
          const bool ran = f->ocl().last_select_was_small();
          (ran ? narrow_small : narrow_fell_back) = true;
          if (f->st->select_small_defer == 1) {  // queued only for the rerun
            EXPECT_EQ(f->queued(), !ran) << what << ": 16 KiB, defer 1";
          } else if (!ran) {
            EXPECT_TRUE(f->queued()) << what << ": 16 KiB, defer 0: fell back with nothing queued";
          }
          EXPECT_TRUE(same_bits(d, ref)) << what << ": 16 KiB, defer " << f->st->select_small_defer
                                         << ": differs from the multi-launch path";
        }
      }
    }
  }
  EXPECT_TRUE(behind_queued) << "no case queued the multi-launch kernels behind the one work-group";
  EXPECT_TRUE(behind_alone) << "no case had a capacity within the one work-group's positions";
  EXPECT_TRUE(rank_behind_queued) << "no case queued the multi-launch kernels behind the rank select";
  EXPECT_TRUE(rank_behind_alone) << "no case had a capacity within the rank select's records";
  EXPECT_TRUE(narrow_fell_back) << "no case exceeded the 2,048 positions of 16 KiB";
  EXPECT_TRUE(narrow_small) << "no case fit the 2,048 positions of 16 KiB";
  narrow_again.st->local_mem = narrow_local;
  EXPECT_EQ(narrow_again.ocl().select_small_positions(), 2048u);
  narrow_again.st->local_mem = 1024;
  EXPECT_EQ(narrow_again.ocl().select_small_positions(), 0u) << "1 KiB of local memory holds no useful order";
  // The rank select's buffers are reused: a steady run creates none (the multi-launch kernels are not queued, so
  // erasing "sift.order_a" before each run costs nothing here).
  {
    const ss::Image im = load("graf1_gray.png");
    (void)rank.run(im, {}, nullptr);
    const std::size_t before = rank.st->buffer_allocations;
    (void)rank.run(im, {}, nullptr);
    EXPECT_TRUE(rank.ocl().last_select_was_rank());
    EXPECT_EQ(rank.st->buffer_allocations, before) << "the rank select created buffers on a steady run";
  }

  // Counts around the limits: graf1 at contrast 0.01 tiled 2 x 1 (with and without the cap) and 2 x 2.
  Form rank_again = make(true, 1, 1, 1, 0), rank_buckets = make(true, 1, 1, 1, 0);
  rank_again.st->select_buckets = 0;
  rank_buckets.st->select_buckets = 1;  // the rank select on a guess, the bucketed select after a miss
  const ss::SiftOptions dense = ss::test::select_path_cases().back().second;  // graf1's contrast 0.01
  const ss::Image graf1 = load("graf1_gray.png");
  struct Tiled {
    int nx, ny, cap;
  };
  for (const auto& [nx, ny, cap] : {Tiled{2, 1, 0}, Tiled{2, 1, 3000}, Tiled{2, 2, 0}}) {
    const ss::Image im = ss::test::tiled_image(graf1, nx, ny);
    const bool fits = nx * ny == 2;  // the rank select takes it
    ss::SiftOptions o = dense;
    o.max_features = cap;
    const std::string what = "graf1 contrast 0.01 tiled " + std::to_string(nx) + " x " + std::to_string(ny) +
                             " max_features " + std::to_string(cap);
    ss::detail::SiftCounts counts;
    const ss::Features ref = multi.run(im, o, nullptr, &counts);
    std::printf("[ sift-ocl ] %s: %zu candidates, %zu oriented, %zu kept\n", what.c_str(), counts.candidates,
                counts.oriented, counts.kept);
    if (fits) {
      EXPECT_GT(counts.oriented, 8192u) << what << ": within the one work-group's positions";
      EXPECT_LE(counts.oriented, std::size_t(SIFT_RANK_MAX_RECORDS)) << what;
    } else {
      EXPECT_GT(counts.oriented, std::size_t(SIFT_RANK_MAX_RECORDS)) << what;
    }
    if (cap > 0) {
      EXPECT_LE(ref.keypoints.size(), std::size_t(cap) + 30) << what;
    }
    for (Form* f : {&rank, &rank_behind, &rank_again}) {
      const std::string form = what + ", defer " + std::to_string(f->st->select_small_defer);
      const ss::Features r = f->run(im, o, nullptr);
      EXPECT_EQ(f->ocl().last_select_was_rank(), fits) << form;
      EXPECT_EQ(f->ocl().last_select_was_small(), fits) << form;
      if (f->st->select_small_defer == 1) {  // queued only for the rerun
        EXPECT_EQ(f->queued(), !fits) << form;
      } else if (!fits) {
        EXPECT_TRUE(f->queued()) << form << ": fell back with nothing queued";
      }
      EXPECT_TRUE(same_bits(r, ref)) << form << ": the rank select differs from the multi-launch path";
    }
    for (Form* f : {&buckets, &rank_buckets}) {  // above the rank select without a cap: no sort queued
      const std::string form = what + ", buckets, small-count path " + std::to_string(f->st->select_small);
      const ss::Features b = f->run(im, o, nullptr);
      if (!fits || f == &buckets) {
        EXPECT_EQ(f->queued(), cap > 0) << form;
      }
      EXPECT_TRUE(same_bits(b, ref)) << form << ": the bucketed rank select differs from the multi-launch path";
    }
    if (fits && cap == 0) {  // the one work-group's positions do not hold it: the multi-launch path, the same bits
      const ss::Features a = small.run(im, o, nullptr);
      EXPECT_FALSE(small.ocl().last_select_was_small()) << what;
      EXPECT_TRUE(same_bits(a, ref)) << what << ": one work-group (fell back) differs";
    }
  }
}

// Buffers too small for a run grow and the stages run again, with the same result.
TEST(SiftOpenCL, BuffersGrowAndRunAgain) {
  REQUIRE_OPENCL();
  ss::Context ctx(opencl_options());
  auto stages = ss::opencl::make_sift_stages(ctx.impl());
  ss::test::check_buffers_grow_and_run_again(kOpenCLSift, dynamic_cast<ss::opencl::SiftStagesOpenCL&>(*stages),
                                             ctx.impl());
}

TEST(SiftOpenCL, IdenticalRunToRun) {
  REQUIRE_OPENCL();
  ss::test::check_identical_run_to_run(kOpenCLSift, 0);
}

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
  ss::test::check_root_sift_and_grey_levels(kOpenCLSift, [](const ss::ImageF& g) {
    Device& d = device();
    const ss::detail::SiftImageView v{g.data.data(), ss::PixelType::kF32, g.width, g.height, 1, true};
    return run_stages(*d.stages, d.ctx->impl(), v, {}, nullptr);
  });
}

// u8 descriptors: the float run's values as bytes (converted while they are read back), with their device
// copies; matched like the float features here and on the CPU backend.
TEST(SiftOpenCL, U8DescriptorsAreTheFloatValuesAndMatchAlike) {
  REQUIRE_OPENCL();
  ss::test::check_u8_descriptors(*device().ctx);
}

// Device time per stage and end to end against the CPU backend (on GPUs one line per descriptor form), then the
// host time of each stage call (report_host_times: where host time outside the device stages goes); reported,
// never asserted. Run with
// --gtest_also_run_disabled_tests --gtest_filter=*StageTimes*; SPECTRASIFT_SIFT_TIMING_IMAGES adds images
// by path (colon-separated), e.g. the 1080p photos.
TEST(SiftOpenCL, DISABLED_StageTimes) {
  REQUIRE_OPENCL();
  Device& d = device();
  auto& stages = dynamic_cast<ss::opencl::SiftStagesOpenCL&>(*d.stages);
  // GPUs: the defaults, the pyramid's A/B (State::small_tiles 0: sift_blur_tiles at every level) and
  // the descriptors' (State::descriptor_variant 4: the row walk in work-groups of 128; the walkers and the box
  // walks, measured slower in the sixth session, are the variants 0-2), their runs interleaved; CPU devices have
  // one form.
  auto& st = ss::opencl::state(d.ctx->impl());
  std::vector<ss::test::StageTimesForm> forms;
  if (!st.is_cpu)
    forms = {{"defaults (staged-rows-32, small-plane tiles)", [&st] { st.descriptor_variant = -1; st.small_tiles = -1; }},
             {"pyramid: sift_blur_tiles at every level", [&st] { st.descriptor_variant = -1; st.small_tiles = 0; }},
             {"staged-rows", [&st] { st.descriptor_variant = 4; st.small_tiles = -1; }}};
  ss::test::report_stage_times(kOpenCLSift, stages, d.ctx->impl(), 7, forms);
  st.descriptor_variant = -1;
  st.small_tiles = -1;
  ss::test::report_host_times(kOpenCLSift, stages, d.ctx->impl(), 7);
}

// The select stage's device time (profiling events) and the run's wall time, medians of 11 after a warm-up,
// the forms' runs interleaved: the multi-launch path (State::select_small = 0), the rank select queued alone
// (select_small 1, select_rank 1, select_small_defer 1: on GPUs the default for these counts) and with the
// multi-launch kernels queued behind it (defer 0: they return at once), sift_select_small queued alone
// (select_rank 0, defer 1) and with the multi-launch kernels behind it (defer 0), for the timing images (graf1,
// box and SPECTRASIFT_SIFT_TIMING_IMAGES'), with the counts that decide the path. Reported, never asserted.
// Run with --gtest_also_run_disabled_tests --gtest_filter=*SelectTimes*.
TEST(SiftOpenCL, DISABLED_SelectTimes) {
  REQUIRE_OPENCL();
  ss::Context ctx(opencl_options());
  auto& st = ss::opencl::state(ctx.impl());
  auto stages = ss::opencl::make_sift_stages(ctx.impl());
  auto& ocl = dynamic_cast<ss::opencl::SiftStagesOpenCL&>(*stages);
  ocl.set_profiling(true);
  using Stages = ss::detail::SiftDeviceStages;
  struct Form { int small, rank, defer, buckets; const char* what; };
  const Form forms[] = {{0, -1, -1, 0, "multi-launch"},
                        {1, 1, 1, -1, "rank alone"},
                        {1, 1, 0, 0, "rank + queued"},
                        {1, 0, 1, -1, "one work-group alone"},
                        {1, 0, 0, 0, "one work-group + queued"},
                        {0, -1, -1, 1, "buckets"},
                        {1, 1, 0, 1, "rank + buckets queued"}};
  constexpr int kForms = int(std::size(forms));
  for (const std::string& path : ss::test::timing_images()) {
    const ss::Image im = ss::read_image(path);
    for (bool upsample : {true, false}) {
      ss::SiftOptions o;
      o.upsample = upsample;
      std::vector<double> ms[kForms], wall[kForms];
      ss::detail::SiftCounts counts;
      bool rank_ran = false, small_ran = false;
      for (int rep = 0; rep < 12; ++rep) {
        for (int f = 0; f < kForms; ++f) {
          st.select_small = forms[f].small;
          st.select_rank = forms[f].rank;
          st.select_small_defer = forms[f].defer;
          st.select_buckets = forms[f].buckets;
          const auto t0 = std::chrono::steady_clock::now();
          (void)run_stages(ocl, ctx.impl(), sift_view(im), o, nullptr, &counts);
          const auto t1 = std::chrono::steady_clock::now();
          if (f == 1) rank_ran = ocl.last_select_was_rank();
          if (f == 3) small_ran = ocl.last_select_was_small();
          if (rep == 0) continue;
          ms[f].push_back(ocl.stage_ms()[std::size_t(Stages::kSelect)]);
          wall[f].push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
        }
      }
      std::printf("[ sift-ocl ] select %s upsample %d: candidates %zu, oriented %zu, kept %zu; rank select %s; one "
                  "work-group %zu positions, %s; select ms (run wall ms):",
                  path.c_str(), int(upsample), counts.candidates, counts.oriented, counts.kept,
                  rank_ran ? "ran" : "fell back", ocl.select_small_positions(), small_ran ? "ran" : "fell back");
      for (int f = 0; f < kForms; ++f)
        std::printf(" %s %.3f (%.2f)", forms[f].what, ss::test::median_of(ms[f]), ss::test::median_of(wall[f]));
      std::printf("\n");
    }
  }
  st.select_small = -1;
  st.select_buckets = -1;
  st.select_rank = -1;
  st.select_small_defer = -1;
}

// The transfers alone, host wall time, direct against staged (State::host_staging; sift_upload.cpp and
// sift_download.cpp), median of 15: upload() to a finished queue for colour u8 images of 1080p and 4K (random
// bytes), and download() (read-back 2 and the host work after it, the device work before it finished) for
// the timing images (graf1, box and SPECTRASIFT_SIFT_TIMING_IMAGES'). Reported, never asserted: it
// decides whether host_staging pays on a device. Run with --gtest_also_run_disabled_tests
// --gtest_filter=*TransferTimes*.
TEST(SiftOpenCL, DISABLED_TransferTimes) {
  REQUIRE_OPENCL();
  Device& d = device();
  ss::opencl::State& st = ss::opencl::state(d.ctx->impl());
  const bool staging = st.host_staging;
  const auto median_ms = [](std::vector<double>& ms) {
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
  };
  using Clock = std::chrono::steady_clock;
  const auto since = [](Clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  };
  for (const auto& [w, h] : {std::pair{1920, 1080}, std::pair{3840, 2160}}) {
    ss::Image im = ss::Image::allocate(w, h, 3, ss::PixelType::kU8);
    std::uint32_t x = 12345;
    for (std::uint8_t& b : im.data) b = std::uint8_t((x = x * 1664525u + 1013904223u) >> 24);
    ss::SiftOptions o;
    o.upsample = false;
    const ss::detail::SiftPlan& plan = ss::detail::sift_plan(d.ctx->impl(), w, h, o);
    for (bool staged : {false, true}) {
      st.host_staging = staged;
      std::vector<double> ms;
      for (int rep = 0; rep < 16; ++rep) {
        const auto t0 = Clock::now();
        d.stages->upload(plan, sift_view(im));
        ASSERT_EQ(clFinish(st.queue), CL_SUCCESS);
        if (rep > 0) ms.push_back(since(t0));
      }
      std::printf("[ sift-ocl ] upload+grey %dx%d u8 colour, %s: %.3f ms\n", w, h, staged ? "staged" : "direct",
                  median_ms(ms));
    }
  }
  for (const std::string& path : ss::test::timing_images()) {
    const ss::Image im = ss::read_image(path);
    const ss::detail::SiftPlan& plan = ss::detail::sift_plan(d.ctx->impl(), im.width, im.height, {});
    for (bool staged : {false, true}) {
      st.host_staging = staged;
      std::vector<double> ms;
      std::size_t kept = 0;
      for (int rep = 0; rep < 16; ++rep) {
        d.stages->upload(plan, sift_view(im));
        run_after_upload(*d.stages);
        ASSERT_EQ(clFinish(st.queue), CL_SUCCESS);
        ss::Features f;
        ss::detail::SiftCounts counts;
        const auto t0 = Clock::now();
        d.stages->download(f, counts);
        if (rep > 0) ms.push_back(since(t0));
        kept = f.keypoints.size();
      }
      std::printf("[ sift-ocl ] download %s (%zu features), %s: %.3f ms\n", path.c_str(), kept,
                  staged ? "staged" : "direct", median_ms(ms));
    }
  }
  st.host_staging = staging;
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

// The read-back's device copy of the descriptors carries the digest of the host values (summed in pieces on
// the host pool): matching on this backend uses it; an edited copy of the Features is not matched from it.
TEST(SiftOpenCL, DeviceCopyMirrorsTheReadBack) {
  REQUIRE_OPENCL();
  const ss::Features f = opencl_sift(load("graf1_gray.png"));  // more than one digest piece (256 rows)
  ASSERT_GT(f.keypoints.size(), 256u);
  ASSERT_NE(f.device, nullptr);
  EXPECT_EQ(f.device->count(), f.keypoints.size());
  EXPECT_TRUE(f.device->mirrors(f));
  ss::Features edited = f;
  edited.descriptors[edited.descriptors.size() - 1] += 1.0f;
  EXPECT_FALSE(edited.device->mirrors(edited));
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

// The upload paths (sift_upload.cpp): the pinned staging in chunks gives the direct write's bits for every
// chunking edge (one chunk, a chunk larger than the image, a partial last chunk, chunks that end inside a
// pixel, split_upload's default chunks) and input (u8 grey and colour, u16 colour, f32 grey, grey levels),
// the images in growing sizes so that the pinned buffer grows; and the caller's memory is not read after
// upload() returns (it is overwritten before the other stages run).
TEST(SiftOpenCL, UploadPathsGiveTheSameFeatures) {
  REQUIRE_OPENCL();
  Device& d = device();
  auto& stages = dynamic_cast<ss::opencl::SiftStagesOpenCL&>(*d.stages);
  ss::opencl::State& st = ss::opencl::state(d.ctx->impl());
  struct Restore {
    ss::opencl::SiftStagesOpenCL& stages;
    ss::opencl::State& st;
    bool staging;
    ~Restore() {
      stages.force_staged_upload(0);
      st.host_staging = staging;
    }
  } restore{stages, st, st.host_staging};
  const ss::Image box = load("box.png");
  const ss::Image grey_f32 = convert(box, ss::PixelType::kF32, 1);
  struct Input {
    const char* what;
    ss::Image image;
    bool grey_levels;
  };
  std::vector<Input> inputs;
  inputs.push_back({"u8 grey", box, false});
  inputs.push_back({"u8 colour", convert(box, ss::PixelType::kU8, 3), false});
  inputs.push_back({"f32 grey", grey_f32, false});
  inputs.push_back({"u16 colour", convert(box, ss::PixelType::kU16, 3), false});
  inputs.push_back({"grey levels", grey_f32, true});
  for (Input& in : inputs) {
    ss::Image& im = in.image;
    if (in.grey_levels)  // grey levels 0..255, as core/sift.cpp hands them to the stages
      for (float& v : std::span(im.as<float>(), im.pixel_count())) v *= 255.0f;
    ss::detail::SiftImageView v = sift_view(im);
    v.grey_levels = in.grey_levels;
    const std::size_t bytes = im.data.size();
    st.host_staging = false;
    stages.force_staged_upload(0);
    const ss::Features direct = run_stages(*d.stages, d.ctx->impl(), v, {}, nullptr);
    ASSERT_FALSE(direct.keypoints.empty()) << in.what;
    st.host_staging = true;  // split_upload's chunks where the image is large enough, else a direct write
    EXPECT_TRUE(same_bits(direct, run_stages(*d.stages, d.ctx->impl(), v, {}, nullptr))) << in.what << " default";
    for (std::size_t chunk : {bytes, bytes + 1, bytes / 3 + 7, std::size_t(64) << 10, std::size_t(4099)}) {
      stages.force_staged_upload(chunk);
      EXPECT_TRUE(same_bits(direct, run_stages(*d.stages, d.ctx->impl(), v, {}, nullptr)))
          << in.what << " (" << bytes << " bytes) in chunks of " << chunk;
    }
    // The caller's bytes overwritten once upload() has returned: the features are still the image's.
    stages.force_staged_upload(bytes / 3 + 7);
    ss::Image scratch = im;
    ss::detail::SiftImageView sv = sift_view(scratch);
    sv.grey_levels = in.grey_levels;
    const ss::detail::SiftPlan& plan = ss::detail::sift_plan(d.ctx->impl(), sv.width, sv.height, {});
    d.stages->upload(plan, sv);
    std::fill(scratch.data.begin(), scratch.data.end(), std::uint8_t(0x5a));
    run_after_upload(*d.stages);
    ss::Features after;
    ss::detail::SiftCounts counts;
    d.stages->download(after, counts);
    EXPECT_TRUE(same_bits(direct, after)) << in.what << ": the caller's memory was read after upload()";
  }
}

// The read-back paths (sift_download.cpp): through the pinned buffer in chunks of rows (GPUs) and straight
// into the output (CPU devices) give the same features, float or u8, a digest that mirrors the host values, and a
// device copy equal to them; for several digest pieces and read chunks with a partial last one (graf1), fewer rows
// than one piece (box), and no features (a blank image), in an order that grows the pinned buffer.
TEST(SiftOpenCL, ReadBackPathsGiveTheSameFeatures) {
  REQUIRE_OPENCL();
  Device& d = device();
  ss::opencl::State& st = ss::opencl::state(d.ctx->impl());
  const RestoreHostStaging restore{st};
  ss::Image blank = ss::Image::allocate(320, 240, 1, ss::PixelType::kU8);
  std::fill(blank.data.begin(), blank.data.end(), std::uint8_t(90));
  const ss::Image images[] = {blank, load("box.png"), load("graf1_gray.png")};
  for (const ss::Image& im : images) {
    st.host_staging = false;
    const ss::Features direct = run_stages(*d.stages, d.ctx->impl(), sift_view(im), {}, nullptr);
    st.host_staging = true;
    const ss::Features staged = run_stages(*d.stages, d.ctx->impl(), sift_view(im), {}, nullptr);
    const std::string what = std::to_string(im.width) + " x " + std::to_string(im.height);
    EXPECT_TRUE(same_bits(direct, staged)) << what;
    if (&im == &images[0]) {
      EXPECT_TRUE(staged.keypoints.empty()) << what;
      EXPECT_EQ(staged.device, nullptr) << what;
      continue;
    }
    ASSERT_FALSE(staged.keypoints.empty()) << what;
    ASSERT_NE(staged.device, nullptr) << what;
    EXPECT_TRUE(staged.device->mirrors(staged)) << what;
    EXPECT_TRUE(direct.device->mirrors(staged)) << what;
    const auto& copy = dynamic_cast<const ss::opencl::DeviceDescriptors&>(*staged.device);
    std::vector<float> on_device(staged.descriptors.size());
    ASSERT_EQ(clEnqueueReadBuffer(st.queue, copy.mem(), CL_TRUE, 0, on_device.size() * sizeof(float),
                                  on_device.data(), 0, nullptr, nullptr),
              CL_SUCCESS);
    EXPECT_EQ(0, std::memcmp(on_device.data(), staged.descriptors.data(), on_device.size() * sizeof(float))) << what;
    // u8 descriptors: converted while they are copied out (direct: from the float rows read into a scratch
    // vector; staged: from the pinned chunks), the float run's values as bytes either way, a device copy keyed by
    // the byte digest (the float features' copy does not mirror them).
    ss::SiftOptions bytes;
    bytes.descriptor_type = ss::DescriptorType::kU8;
    st.host_staging = false;
    const ss::Features direct8 = run_stages(*d.stages, d.ctx->impl(), sift_view(im), bytes, nullptr);
    st.host_staging = true;
    const ss::Features staged8 = run_stages(*d.stages, d.ctx->impl(), sift_view(im), bytes, nullptr);
    const std::vector<std::uint8_t> want = staged.descriptors_u8();
    EXPECT_EQ(direct8.descriptor_type, ss::DescriptorType::kU8) << what;
    EXPECT_TRUE(direct8.descriptors.empty() && staged8.descriptors.empty()) << what;
    EXPECT_TRUE(direct8.descriptor_bytes == want) << what << ": direct u8 read-back";
    EXPECT_TRUE(staged8.descriptor_bytes == want) << what << ": staged u8 read-back";
    ASSERT_NE(staged8.device, nullptr) << what;
    EXPECT_TRUE(staged8.device->mirrors(staged8) && direct8.device->mirrors(staged8)) << what;
    EXPECT_FALSE(staged.device->mirrors(staged8)) << what << ": a float copy taken for the bytes";
  }
  ASSERT_GT(run_stages(*d.stages, d.ctx->impl(), sift_view(images[2]), {}, nullptr).keypoints.size(), 4u * 256u)
      << "graf1 no longer spans several read chunks";
}

// Two stages objects on one context share the State's named buffers, the plan tables among them: after
// the other object ran a different plan, this one's plan tables are written again (sift.cpp prepare()).
TEST(SiftOpenCL, StagesObjectsSharingAContextKeepTheirPlans) {
  REQUIRE_OPENCL();
  Device& d = device();
  auto other = ss::opencl::make_sift_stages(d.ctx->impl());
  const ss::Image box = load("box.png"), graf = load("graf1_gray.png");
  const ss::Features first = run_stages(*d.stages, d.ctx->impl(), sift_view(box), {}, nullptr);
  const ss::Features graf_features = run_stages(*other, d.ctx->impl(), sift_view(graf), {}, nullptr);
  EXPECT_TRUE(same_bits(first, run_stages(*d.stages, d.ctx->impl(), sift_view(box), {}, nullptr)));
  EXPECT_TRUE(same_bits(graf_features, run_stages(*other, d.ctx->impl(), sift_view(graf), {}, nullptr)));
}

// The hot path creates nothing once an image size ran (DESIGN.md: nothing is allocated per call): further
// runs of that size build or load no program, create no kernel, create or grow no named or pinned buffer,
// and do not write the plan tables again (prepare()), on the direct host path (CPU devices) and the staged
// one (GPUs: pinned upload in chunks and pinned read-back), upsampled and not, with the same bits each
// run. (Per call by design: the device copy of the descriptors, which belongs to the returned Features.)
TEST(SiftOpenCL, SteadyRunsCreateNothing) {
  REQUIRE_OPENCL();
  Device& d = device();
  ss::opencl::State& st = ss::opencl::state(d.ctx->impl());
  const RestoreHostStaging restore{st};
  // Colour u8 (the grey kernel runs), 1.5 MB: over kStagedUploadMin, so the staged path chunks it.
  const ss::Image im = convert(load("graf1_gray.png"), ss::PixelType::kU8, 3);
  ASSERT_GE(im.data.size(), ss::detail::kStagedUploadMin);
  struct Created {
    std::size_t builds, loads, programs, kernels, buffers;
    std::uint64_t tables;
  };
  const auto created = [&st] {
    return Created{st.program_builds, st.program_binary_loads, st.programs.size(), st.kernels.size(),
                   st.buffer_allocations, st.sift_tables_generation};
  };
  for (const bool staged : {false, true}) {
    st.host_staging = staged;
    for (const bool upsample : {true, false}) {
      ss::SiftOptions o;
      o.upsample = upsample;
      const std::string what = std::string(staged ? "staged" : "direct") + (upsample ? ", upsampled" : "");
      const ss::Features first = run_stages(*d.stages, d.ctx->impl(), sift_view(im), o, nullptr);
      ASSERT_FALSE(first.keypoints.empty()) << what;
      const Created before = created();
      for (int rep = 0; rep < 2; ++rep)
        EXPECT_TRUE(same_bits(first, run_stages(*d.stages, d.ctx->impl(), sift_view(im), o, nullptr))) << what;
      const Created after = created();
      EXPECT_EQ(after.builds, before.builds) << what << ": programs built";
      EXPECT_EQ(after.loads, before.loads) << what << ": programs loaded from the disk cache";
      EXPECT_EQ(after.programs, before.programs) << what << ": programs";
      EXPECT_EQ(after.kernels, before.kernels) << what << ": kernels";
      EXPECT_EQ(after.buffers, before.buffers) << what << ": buffers created";
      EXPECT_EQ(after.tables, before.tables) << what << ": plan tables written again";
    }
  }
}

// The batch call: a loop over the images reusing the plan and buffers (OpenCL prefetches nothing), each with
// the single call's bits.
TEST(SiftOpenCL, BatchGivesTheSingleCallsBits) {
  REQUIRE_OPENCL();
  Device& d = device();
  ss::test::check_batch(*d.ctx);
  ss::test::check_batch_errors(*d.ctx);
}

#else
TEST(SiftOpenCL, Skipped) { GTEST_SKIP() << "built without OpenCL"; }
#endif

}  // namespace

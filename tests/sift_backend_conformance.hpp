// The conformance checks that every device SIFT backend passes (sift_opencl_test.cpp, sift_cuda_test.cpp),
// written once: agreement with the CPU backend on real images, run-to-run identity, RootSIFT and grey
// levels, the growth of the buffers (through core/sift_device_stages.hpp, the base of every device's
// stages), and the DISABLED_StageTimes report. A backend's test keeps what is its own (errors of its
// limits, its kernel forms, its device copies).
#pragma once

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "core/sift_device_stages.hpp"
#include "sift_device_test_util.hpp"
#include "spectrasift/error.hpp"
#include "spectrasift/match.hpp"

namespace spectrasift::test {

/// Each named test image agrees with the CPU backend under options o (what = name + suffix).
inline void check_agrees_on_images(const DeviceSift& d, std::initializer_list<const char*> names,
                                   const SiftOptions& o = {}, const std::string& suffix = "") {
  for (const char* name : names) {
    const Image im = load_test_image(name);
    d.expect_agreement(cpu_sift(im, o), d.run(im, o, nullptr), std::string(name) + suffix);
  }
}

/// The same image gives the same bits after another shape (buffers and plan change) and `repetitions`
/// more times; another image gives other bits.
inline void check_identical_run_to_run(const DeviceSift& d, int repetitions) {
  const Image graf = load_test_image("graf1_gray.png"), box = load_test_image("box.png");
  const Features a = d.run(graf, {}, nullptr);
  const Features b = d.run(box, {}, nullptr);  // another shape in between: buffers and plan change
  const Features c = d.run(graf, {}, nullptr);
  ASSERT_FALSE(a.keypoints.empty());
  EXPECT_TRUE(same_sift_bits(a, c));
  EXPECT_FALSE(same_sift_bits(a, b));
  for (int rep = 0; rep < repetitions; ++rep)
    EXPECT_TRUE(same_sift_bits(a, d.run(graf, {}, nullptr))) << "repetition " << rep;
}

/// RootSIFT agrees with the CPU; so do grey levels given as they are (the ImageF overload: uploaded as the
/// grey image), run by run_grey on the device.
inline void check_root_sift_and_grey_levels(const DeviceSift& d, const std::function<Features(const ImageF&)>& run_grey) {
  const Image im = load_test_image("camera.png");
  SiftOptions root;
  root.root_sift = true;
  d.expect_agreement(cpu_sift(im, root), d.run(im, root, nullptr), "camera RootSIFT");
  ImageF g = to_gray_float(load_test_image("box.png"));
  for (float& v : g.data) v = v * 0.75f + 10.3f;
  ContextOptions co;
  co.backend = Backend::kCpu;
  co.threads = 2;
  Context cpu(co);
  d.expect_agreement(detect_and_compute(cpu, g), run_grey(g), "box grey levels");
}

/// u8 descriptors (SiftOptions::descriptor_type kU8) on ctx's backend: the float run's keypoints and its values
/// as bytes, bit for bit, with a device copy when the float run has one; matching them on ctx (from the device
/// copies, from host bytes once the copies are dropped, and against float features) gives the float features'
/// matches, and so does the CPU backend. RootSIFT with u8 is refused.
inline void check_u8_descriptors(Context& ctx) {
  const Image i1 = load_test_image("graf1_gray.png"), i3 = load_test_image("graf3_gray.png");
  SiftOptions bytes;
  bytes.descriptor_type = DescriptorType::kU8;
  const Features f1 = detect_and_compute(ctx, i1), f3 = detect_and_compute(ctx, i3);
  const Features b1 = detect_and_compute(ctx, i1, bytes), b3 = detect_and_compute(ctx, i3, bytes);
  ASSERT_GT(f1.size(), 100u);
  for (const auto& [f, b] : {std::pair{&f1, &b1}, std::pair{&f3, &b3}}) {
    EXPECT_EQ(b->descriptor_type, DescriptorType::kU8);
    EXPECT_TRUE(b->descriptors.empty());
    ASSERT_EQ(b->descriptor_bytes.size(), f->descriptors.size());
    EXPECT_TRUE(b->descriptor_bytes == f->descriptors_u8());
    Features as_floats = *b;  // the keypoints, with the bytes' values as floats
    as_floats.descriptor_type = DescriptorType::kF32;
    as_floats.descriptors = b->descriptors_f32();
    as_floats.descriptor_bytes.clear();
    EXPECT_TRUE(same_sift_bits(*f, as_floats));
    EXPECT_EQ(b->device != nullptr, f->device != nullptr);
  }
  const std::vector<Match> want = match_features(ctx, f1, f3);
  ASSERT_GT(want.size(), 20u);
  const auto same = [&want](const std::vector<Match>& got, const char* what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    for (std::size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].query, want[i].query) << what << " " << i;
      EXPECT_EQ(got[i].train, want[i].train) << what << " " << i;
      EXPECT_EQ(got[i].distance, want[i].distance) << what << " " << i;
      EXPECT_EQ(got[i].second_distance, want[i].second_distance) << what << " " << i;
    }
  };
  same(match_features(ctx, b1, b3), "u8 x u8 (device copies)");
  same(match_features(ctx, b1, f3), "u8 x f32");
  Features h1 = b1, h3 = b3;
  h1.device.reset();
  h3.device.reset();
  same(match_features(ctx, h1, h3), "u8 x u8 from the host");
  same(match_features(ctx, h1, f3), "host u8 x f32 device copy");
  ContextOptions co;
  co.backend = Backend::kCpu;
  co.threads = 2;
  Context cpu(co);
  same(match_features(cpu, b1, b3), "u8 x u8 on the CPU backend");
  // An edited byte: the device copy no longer mirrors the bytes, so the host values are matched.
  h1 = b1;  // with its device copy, where the backend made one
  const std::size_t q = std::size_t(want[0].query);
  for (int c = 0; c < Features::kDescriptorSize; ++c) h1.descriptor_bytes[q * 128 + std::size_t(c)] = 0;
  Features e1 = f1;
  for (int c = 0; c < Features::kDescriptorSize; ++c) e1.descriptors[q * 128 + std::size_t(c)] = 0;
  const std::vector<Match> edited = match_features(ctx, h1, b3), edited_f = match_features(cpu, e1, f3);
  ASSERT_EQ(edited.size(), edited_f.size());
  for (std::size_t i = 0; i < edited.size(); ++i) {
    EXPECT_EQ(edited[i].query, edited_f[i].query);
    EXPECT_EQ(edited[i].train, edited_f[i].train);
    EXPECT_EQ(edited[i].distance, edited_f[i].distance);
  }
  SiftOptions root = bytes;
  root.root_sift = true;
  EXPECT_THROW(detect_and_compute(ctx, i1, root), Error);
}

/// Buffers too small for a run (16 candidates, 0.01 keypoint records per candidate) grow and the stages run
/// again, with d's result; the grown buffers are kept for the next run.
inline void check_buffers_grow_and_run_again(const DeviceSift& d, detail::SiftDeviceStages& stages,
                                             detail::ContextImpl& ctx) {
  stages.set_keypoints_per_candidate(0.01);
  const Image im = load_test_image("box.png");
  const detail::SiftImageView v = sift_view(im);
  detail::SiftPlan plan = detail::make_sift_plan(im.width, im.height, {});
  plan.candidate_capacity = 16;  // far fewer than the image has
  stages.upload(plan, v);
  stages.pyramid();
  stages.dog();
  EXPECT_GT(stages.extrema(), 16u);
  stages.refine();
  stages.orientations();
  stages.select(nullptr);
  stages.descriptors();
  Features a;
  detail::SiftCounts counts;
  stages.download(a, counts);
  EXPECT_EQ(stages.regrowths(), 2);  // the candidates, then the keypoints
  EXPECT_EQ(counts.kept, a.keypoints.size());
  EXPECT_TRUE(same_sift_bits(a, d.run(im, {}, nullptr)));
  const Features b = run_stages(stages, ctx, v, {}, nullptr);  // grown buffers kept
  EXPECT_TRUE(same_sift_bits(b, d.run(im, {}, nullptr)));
}

/// A variant of a backend's stages that DISABLED_StageTimes times beside the others (e.g. a kernel form):
/// `select` switches the stages to it.
struct StageTimesForm {
  std::string name;
  std::function<void()> select;
};

/// Device time per stage and end to end against the CPU backend (2 threads), printed, never asserted:
/// medians over `repetitions` runs of the timing images (the first device run, a warm-up, is dropped; the
/// CPU runs 3 times). With `forms`, one line per form (its name after the tag), the forms' runs interleaved.
inline void report_stage_times(const DeviceSift& d, detail::SiftDeviceStages& stages, detail::ContextImpl& ctx,
                               int repetitions, const std::vector<StageTimesForm>& forms = {}) {
  using Stages = detail::SiftDeviceStages;
  const std::vector<StageTimesForm> runs = forms.empty() ? std::vector<StageTimesForm>{{"", [] {}}} : forms;
  ContextOptions co;
  co.backend = Backend::kCpu;
  co.threads = 2;
  Context cpu(co);
  for (const std::string& path : timing_images()) {
    const Image im = read_image(path);
    for (bool upsample : {true, false}) {
      SiftOptions o;
      o.upsample = upsample;
      std::vector<double> cpu_ms;
      std::vector<std::vector<double>> dev_ms(runs.size());
      std::vector<std::vector<std::vector<double>>> stage(runs.size(), std::vector<std::vector<double>>(Stages::kStages));
      for (int rep = 0; rep < repetitions; ++rep) {
        const auto t0 = std::chrono::steady_clock::now();
        if (rep < 3) (void)detect_and_compute(cpu, im, o);
        if (rep < 3) cpu_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
        for (std::size_t f = 0; f < runs.size(); ++f) {
          runs[f].select();
          const auto t1 = std::chrono::steady_clock::now();
          stages.set_profiling(false);
          (void)run_stages(stages, ctx, sift_view(im), o, nullptr);
          const auto t2 = std::chrono::steady_clock::now();
          stages.set_profiling(true);
          (void)run_stages(stages, ctx, sift_view(im), o, nullptr);
          for (int s = 0; s < Stages::kStages; ++s) stage[f][std::size_t(s)].push_back(stages.stage_ms()[std::size_t(s)]);
          if (rep > 0) dev_ms[f].push_back(std::chrono::duration<double, std::milli>(t2 - t1).count());
        }
      }
      stages.set_profiling(false);
      for (std::size_t f = 0; f < runs.size(); ++f) {
        std::printf("[ %s ]%s%s %s upsample %d: cpu (2 threads) %.1f ms, device end to end %.3f ms; stages:", d.tag,
                    runs[f].name.empty() ? "" : " descriptors ", runs[f].name.c_str(), path.c_str(), int(upsample),
                    median_of(cpu_ms), median_of(dev_ms[f]));
        for (int s = 0; s < Stages::kStages; ++s)
          std::printf(" %s %.3f", Stages::stage_name(s), median_of(stage[f][std::size_t(s)]));
        std::printf("\n");
      }
    }
  }
}

/// The run sequence of run_stages with the host wall time of each call in ms: host[s] for stage s (the stage
/// table's order; upload's includes the host copies, and the calls that wait for the device, extrema (the
/// candidate count) and download (the counters and features), include the device work queued before
/// them), host[kStages] for the release of the returned Features (the device copy of the descriptors).
inline void run_stages_timed(detail::SiftDeviceStages& st, detail::ContextImpl& im, const detail::SiftImageView& v,
                             const SiftOptions& o, std::array<double, detail::SiftDeviceStages::kStages + 1>& host) {
  using Clock = std::chrono::steady_clock;
  auto t = Clock::now();
  const auto lap = [&](int slot) {
    const auto now = Clock::now();
    host[std::size_t(slot)] = std::chrono::duration<double, std::milli>(now - t).count();
    t = now;
  };
  (void)run_stages(st, im, v, o, nullptr, nullptr, lap);  // the returned Features are released here
  lap(detail::SiftDeviceStages::kStages);
}

/// Where the host time of a run goes, printed beside report_stage_times' device times, never asserted: per
/// timing image, upsampled and not, the median over `repetitions` unprofiled runs (after one warm-up) of the
/// host wall time of each stage call and of the Features' release (run_stages_timed), and of their sum (end
/// to end). A call that only queues work shows the host's own cost; a large value there, or in upload (the
/// host copies), points at the host rather than the device.
inline void report_host_times(const DeviceSift& d, detail::SiftDeviceStages& stages, detail::ContextImpl& ctx,
                              int repetitions) {
  using Stages = detail::SiftDeviceStages;
  stages.set_profiling(false);
  for (const std::string& path : timing_images()) {
    const Image im = read_image(path);
    for (bool upsample : {true, false}) {
      SiftOptions o;
      o.upsample = upsample;
      std::vector<std::vector<double>> host(Stages::kStages + 1);
      std::vector<double> total;
      for (int rep = 0; rep <= repetitions; ++rep) {  // rep 0: the warm-up
        std::array<double, Stages::kStages + 1> ms{};
        run_stages_timed(stages, ctx, sift_view(im), o, ms);
        if (rep == 0) continue;
        double sum = 0;
        for (std::size_t s = 0; s < ms.size(); ++s) {
          host[s].push_back(ms[s]);
          sum += ms[s];
        }
        total.push_back(sum);
      }
      std::printf("[ %s ] %s upsample %d: host end to end %.3f ms; per call:", d.tag, path.c_str(), int(upsample),
                  median_of(total));
      for (int s = 0; s < Stages::kStages; ++s)
        std::printf(" %s %.3f", Stages::stage_name(s), median_of(host[std::size_t(s)]));
      std::printf(" release %.3f\n", median_of(host[std::size_t(Stages::kStages)]));
    }
  }
}

}  // namespace spectrasift::test

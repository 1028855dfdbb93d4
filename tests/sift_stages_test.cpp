// SIFT stages (core/sift_backend.hpp) and the numeric rules they share with the devices: the plan, the
// determinism rule for the orientation and descriptor sums (a reference written as a device computes them,
// per-sample arrays then one ordered scan per bin, gives the CPU's bits), intermediate lists identical for
// any thread count, the grey formulas, the extremum test, the select rules, and the numeric headers compiled
// as OpenCL C (address-space variants) on the OpenCL devices present.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/sift.hpp"
#include "core/context_impl.hpp"
#include "core/cpu_features.hpp"
#include "core/sift_backend.hpp"
#include "core/sift_plan.hpp"
#include "numeric/sift_descriptor.h"
#include "numeric/sift_extrema.h"
#include "numeric/sift_gray.h"
#include "numeric/sift_orientation.h"
#include "numeric/sift_select.h"
#include "spectrasift/context.hpp"
#include "spectrasift/io.hpp"
#include "spectrasift/sift.hpp"

#ifdef SPECTRASIFT_HAVE_OPENCL
#include "backend/opencl/state.hpp"
#endif

namespace ss = spectrasift;
using ss::detail::SiftPlan;

namespace {

ss::Context cpu_context(int threads) {
  ss::ContextOptions o;
  o.backend = ss::Backend::kCpu;
  o.threads = threads;
  return ss::Context(o);
}

ss::ImageF graf1() { return ss::to_gray_float(ss::read_image(std::string(SPECTRASIFT_TEST_DATA) + "/graf1_gray.png")); }

// Runs the CPU stages on a grey image up to and including `last` (1 = extrema, 2 = orientations, 3 = select,
// 4 = descriptors); the stages object is returned for inspection.
std::unique_ptr<ss::cpu::SiftStagesCpu> run_cpu(ss::Context& ctx, const ss::ImageF& g, const SiftPlan& plan, int last) {
  auto st = std::make_unique<ss::cpu::SiftStagesCpu>(ctx.impl());
  st->upload(plan, {g.data.data(), ss::PixelType::kF32, g.width, g.height, 1, true});
  st->pyramid();
  st->dog();
  st->extrema();
  st->refine();
  if (last >= 2) st->orientations();
  if (last >= 3) st->select(nullptr);
  if (last >= 4) st->descriptors();
  return st;
}

bool same_bits(const void* a, const void* b, std::size_t n) { return n == 0 || std::memcmp(a, b, n) == 0; }

// ---- the determinism rule, written as a device applies it ----

struct Sample {
  int bin;       // orientation bin, or accumulator index of the sample's integer descriptor bins
  float value;   // the orientation contribution
  SiftDescriptorShares shares;
};

// Raw orientation histogram of a refined record: every sample's (bin, contribution) first, as parallel
// work-items would write them to local memory, then each bin scanned in sample order. `reverse` scans in
// the opposite order (what an arbitrary reduction order may do) to show that the order matters.
void orientation_raw_device_style(const ss::cpu::SiftPlane& img, const SiftKeypoint& kp, float* raw, bool reverse) {
  const int radius = sift_round(SIFT_ORI_RADIUS * kp.sigma_octave);
  const float scale = sift_orientation_window_scale(SIFT_ORI_SIG_FCTR * kp.sigma_octave);
  std::vector<Sample> samples;
  for (int i = -radius; i <= radius; ++i) {
    const int y = kp.r + i;
    if (y <= 0 || y >= img.h - 1) continue;
    for (int j = -radius; j <= radius; ++j) {
      const int x = kp.c + j;
      if (x <= 0 || x >= img.w - 1) continue;
      const float dx = img.row(y)[x + 1] - img.row(y)[x - 1];
      const float dy = img.row(y - 1)[x] - img.row(y + 1)[x];
      const float w = sift_window_weight(i, scale) * sift_window_weight(j, scale);
      samples.push_back({sift_orientation_bin(sift_atan2_deg(dy, dx)), w * std::sqrt(dx * dx + dy * dy), {}});
    }
  }
  if (reverse) std::reverse(samples.begin(), samples.end());
  for (int b = 0; b < SIFT_ORI_HIST_BINS; ++b) {  // one work-item per bin
    float sum = 0.0f;
    for (const Sample& s : samples)
      if (s.bin == b) sum += s.value;
    raw[b] = sum;
  }
}

// Descriptor of a keypoint record: OpenCV's plain loop over the window's samples, each sample's
// (index, shares) first, then every accumulator entry summed over the samples in order, then finalised.
void descriptor_device_style(const ss::cpu::SiftPlane& img, const SiftKeypoint& kp, float* out) {
  const int d = SIFT_DESCR_WIDTH, nb = SIFT_DESCR_HIST_BINS;
  const float scale = kp.octave >= 0 ? 1.0f / float(1 << kp.octave) : float(1 << -kp.octave);
  const float ptx = kp.x * scale, pty = kp.y * scale, size = kp.size * scale;
  float ori = 360.0f - kp.angle;
  if (std::abs(ori - 360.0f) < SIFT_FLT_EPSILON) ori = 0.0f;
  const int cx = sift_round(ptx), cy = sift_round(pty);
  float cos_t = std::cos(ori * float(M_PI / 180.0)), sin_t = std::sin(ori * float(M_PI / 180.0));
  const float bins_per_deg = float(nb) / 360.0f;
  const float exp_scale = -1.0f / (float(d * d) * 0.5f);
  const float hist_width = SIFT_DESCR_SCL_FCTR * size * 0.5f;
  int radius = sift_round(hist_width * 1.4142135623730951f * float(d + 1) * 0.5f);
  radius = std::min(radius, int(std::sqrt(double(img.w) * img.w + double(img.h) * img.h)));
  cos_t /= hist_width;
  sin_t /= hist_width;
  const float inv_hw2 = 1.0f / (hist_width * hist_width);
  auto ex = [&](int k) { return std::exp(float(k * k) * inv_hw2 * exp_scale); };
  std::vector<Sample> samples;
  for (int i = -radius; i <= radius; ++i) {
    const int y = cy + i;
    if (y <= 0 || y >= img.h - 1) continue;
    const float fi = float(i);
    for (int j = -radius; j <= radius; ++j) {
      const int x = cx + j;
      if (x <= 0 || x >= img.w - 1) continue;
      const float fj = float(j);
      const float rbin = (fj * sin_t + fi * cos_t) + 2.0f - 0.5f;
      const float cbin = (fj * cos_t - fi * sin_t) + 2.0f - 0.5f;
      if (!(rbin > -1 && rbin < d && cbin > -1 && cbin < d)) continue;
      const float dx = img.row(y)[x + 1] - img.row(y)[x - 1];
      const float dy = img.row(y - 1)[x] - img.row(y + 1)[x];
      float rf, cf, of;
      const int r0 = sift_descriptor_split(rbin, &rf);
      const int c0 = sift_descriptor_split(cbin, &cf);
      int o0 = sift_descriptor_split((sift_atan2_deg(dy, dx) - ori) * bins_per_deg, &of);
      o0 = o0 < 0 ? o0 + nb : (o0 >= nb ? o0 - nb : o0);
      const float mag = std::sqrt(dx * dx + dy * dy) * (ex(i) * ex(j));
      samples.push_back({sift_descriptor_index(r0, c0, o0), 0.0f, sift_descriptor_shares(mag, rf, cf, of)});
    }
  }
  // One work-item per accumulator entry adds the shares it receives in sample order (gathered per entry
  // first, in sample order, which is the same sequence as scanning every sample for the entry).
  std::vector<std::vector<float>> received(SIFT_DESCR_HIST_LEN);
  for (const Sample& s : samples)
    for (int k = 0; k < 8; ++k) received[std::size_t(s.bin + sift_descriptor_share_offset(k))].push_back(s.shares.v[k]);
  float hist[SIFT_DESCR_HIST_LEN];
  for (int e = 0; e < SIFT_DESCR_HIST_LEN; ++e) {
    float sum = 0.0f;
    for (float v : received[std::size_t(e)]) sum += v;
    hist[e] = sum;
  }
  sift_descriptor_finalize_local(hist, out);
}

}  // namespace

TEST(SiftPlan, DerivedFromShapeAndOptions) {
  ss::SiftOptions o;
  const SiftPlan p = ss::detail::make_sift_plan(800, 640, o);
  EXPECT_EQ(p.first_octave, -1);
  EXPECT_EQ(p.octaves, int(std::lround(std::log2(1280.0) - 2.0)) + 1);  // 8
  ASSERT_EQ(int(p.octave_shape.size()), p.octaves);
  EXPECT_EQ(p.octave_shape[0].width, 1600);
  EXPECT_EQ(p.octave_shape[1].width, 800);
  EXPECT_EQ(p.octave_shape[2].height, 320);
  EXPECT_EQ(p.levels, 6);
  EXPECT_EQ(p.dog_levels, 5);
  EXPECT_EQ(p.prefilter_threshold, 1.0f);  // floor(0.5 * 0.04 / 3 * 255) = floor(1.7)
  EXPECT_FLOAT_EQ(p.base_sigma_diff, std::sqrt(1.6f * 1.6f - 1.0f));
  ASSERT_EQ(p.tap_offset.size(), 6u);
  for (int i = 0; i < 6; ++i) {
    // OpenCV's size rule and a kernel that sums to 1 (half kernel: k0 + 2 sum k_i).
    EXPECT_EQ(p.tap_radius[std::size_t(i)], (int(std::lround(p.level_sigma[std::size_t(i)] * 8 + 1)) | 1) / 2);
    double sum = p.kernel(i)[0];
    for (int t = 1; t <= p.tap_radius[std::size_t(i)]; ++t) sum += 2.0 * p.kernel(i)[t];
    EXPECT_NEAR(sum, 1.0, 1e-6) << "kernel " << i;
  }
  // Incremental sigmas compose to sigma * 2^(i/S).
  double total2 = 1.6 * 1.6;
  for (int i = 1; i < 6; ++i) total2 += p.level_sigma[std::size_t(i)] * p.level_sigma[std::size_t(i)];
  EXPECT_NEAR(std::sqrt(total2), 1.6 * std::pow(2.0, 5.0 / 3.0), 1e-9);
  EXPECT_EQ(p.candidate_bound, std::size_t(1590) * 1270 * 3 + std::size_t(790) * 630 * 3 + std::size_t(390) * 310 * 3 +
                                   std::size_t(190) * 150 * 3 + std::size_t(90) * 70 * 3 + std::size_t(40) * 30 * 3 +
                                   std::size_t(15) * 10 * 3 + std::size_t(2) * 0 * 3);
  EXPECT_EQ(p.gauss_floats / 6, p.dog_floats / 5);
  EXPECT_EQ(SiftPlan::keypoint_capacity(10), 180u);

  o.upsample = false;
  const SiftPlan q = ss::detail::make_sift_plan(800, 640, o);
  EXPECT_EQ(q.first_octave, 0);
  EXPECT_EQ(q.output_scale, 1.0f);
  EXPECT_EQ(q.octave_shape[0].width, 800);
  EXPECT_EQ(ss::detail::make_sift_plan(1, 1, {}).octaves, 0);  // round(log2(2) - 2) + 1
}

TEST(SiftPlan, ReusedFromTheContextUntilShapeOrOptionsChange) {
  ss::Context ctx = cpu_context(1);
  ss::SiftOptions o;
  const SiftPlan* a = &ss::detail::sift_plan(ctx.impl(), 100, 80, o);
  EXPECT_EQ(&ss::detail::sift_plan(ctx.impl(), 100, 80, o), a);
  const SiftPlan& b = ss::detail::sift_plan(ctx.impl(), 100, 81, o);
  EXPECT_EQ(b.input_height, 81);
  o.max_features = 5;
  EXPECT_EQ(ss::detail::sift_plan(ctx.impl(), 100, 81, o).max_features, 5);
}

// The determinism rule (DESIGN.md): each orientation bin and each descriptor entry is the float sum of its
// samples' contributions in sample order. A device-style reference (per-sample arrays, then one ordered
// scan per bin) reproduces the CPU stages bit for bit on a real image.
TEST(SiftDeterminismRule, DeviceStyleOrderedSumsGiveTheCpuBits) {
  ss::Context ctx = cpu_context(2);
  const ss::ImageF g = graf1();
  const SiftPlan plan = ss::detail::make_sift_plan(g.width, g.height, {});
  auto st = run_cpu(ctx, g, plan, 4);
  ASSERT_GT(st->refined().size(), 1000u);

  // Orientations: the peaks of the device-style histograms, record by record, in the stage's order.
  std::vector<SiftKeypoint> expected;
  int order_sensitive = 0;
  for (const SiftKeypoint& r : st->refined()) {
    float raw[SIFT_ORI_HIST_BINS], rev[SIFT_ORI_HIST_BINS], hist[SIFT_ORI_HIST_BINS];
    orientation_raw_device_style(st->gauss(r.octave_index, r.layer), r, raw, false);
    orientation_raw_device_style(st->gauss(r.octave_index, r.layer), r, rev, true);
    order_sensitive += !same_bits(raw, rev, sizeof raw);
    const float thr = sift_orientation_smooth_local(raw, hist) * SIFT_ORI_PEAK_RATIO;
    for (int j = 0; j < SIFT_ORI_HIST_BINS; ++j) {
      if (!sift_orientation_is_peak_local(hist, j, thr)) continue;
      SiftKeypoint k = r;
      k.angle = sift_orientation_peak_angle_local(hist, j);
      expected.push_back(k);
    }
  }
  // Float sums do depend on the order (so the rule is needed): reversed, most histograms differ.
  EXPECT_GT(order_sensitive, int(st->refined().size()) / 2);

  auto oriented = run_cpu(ctx, g, plan, 2);
  ASSERT_EQ(oriented->keypoints().size(), expected.size());
  EXPECT_TRUE(same_bits(oriented->keypoints().data(), expected.data(), expected.size() * sizeof(SiftKeypoint)));

  // Descriptors of the selected keypoints.
  const auto& kps = st->keypoints();
  ASSERT_EQ(st->descriptor_values().size(), kps.size() * 128);
  std::size_t differ = 0;
  for (std::size_t i = 0; i < kps.size(); ++i) {
    float want[128];
    descriptor_device_style(st->gauss(kps[i].octave_index, kps[i].layer), kps[i], want);
    differ += !same_bits(want, st->descriptor_values().data() + i * 128, sizeof want);
  }
  EXPECT_EQ(differ, 0u) << "of " << kps.size() << " descriptors";
}

// Every intermediate list (refined records, oriented records, selected records, descriptors) is the same,
// in the same order, for any thread count.
TEST(SiftStages, IntermediateListsDoNotDependOnTheThreadCount) {
  const ss::ImageF g = graf1();
  const SiftPlan plan = ss::detail::make_sift_plan(g.width, g.height, {});
  ss::Context c1 = cpu_context(1);
  auto a = run_cpu(c1, g, plan, 2);
  const std::vector<SiftKeypoint> refined = a->refined(), oriented = a->keypoints();
  a->select(nullptr);
  a->descriptors();
  for (int threads : {2, 3}) {
    ss::Context ct = cpu_context(threads);
    auto b = run_cpu(ct, g, plan, 2);
    ASSERT_EQ(b->refined().size(), refined.size());
    EXPECT_TRUE(same_bits(b->refined().data(), refined.data(), refined.size() * sizeof(SiftKeypoint)));
    ASSERT_EQ(b->keypoints().size(), oriented.size());
    EXPECT_TRUE(same_bits(b->keypoints().data(), oriented.data(), oriented.size() * sizeof(SiftKeypoint)));
    b->select(nullptr);
    b->descriptors();
    ASSERT_EQ(b->keypoints().size(), a->keypoints().size());
    EXPECT_TRUE(same_bits(b->keypoints().data(), a->keypoints().data(), a->keypoints().size() * sizeof(SiftKeypoint)));
    EXPECT_TRUE(same_bits(b->descriptor_values().data(), a->descriptor_values().data(),
                          a->descriptor_values().size() * sizeof(float)));
  }
}

// The AVX2 and the baseline builds of the hot loops (sift_kernels.inc, picked per image) give the same bits:
// every Gaussian level, the refined, oriented and selected records and the descriptors.
TEST(SiftStages, AvxAndBaselineKernelsGiveTheSameBits) {
  if (ss::cpu_isa() < ss::CpuIsa::kAvx2) GTEST_SKIP() << "this CPU has no AVX2";
  struct CapGuard {
    ~CapGuard() { ss::set_cpu_isa_cap(ss::CpuIsa::kAvx512); }
  } guard;
  const ss::ImageF g = graf1();
  const SiftPlan plan = ss::detail::make_sift_plan(g.width, g.height, {});
  ss::Context ctx = cpu_context(2);
  std::unique_ptr<ss::cpu::SiftStagesCpu> run[2];
  std::vector<SiftKeypoint> refined[2], oriented[2];
  const ss::CpuIsa caps[2] = {ss::CpuIsa::kBaseline, ss::CpuIsa::kAvx2};
  for (int k = 0; k < 2; ++k) {
    ss::set_cpu_isa_cap(caps[k]);
    run[k] = run_cpu(ctx, g, plan, 2);
    EXPECT_EQ(run[k]->kernel_isa(), caps[k]);
    refined[k] = run[k]->refined();
    oriented[k] = run[k]->keypoints();
    run[k]->select(nullptr);
    run[k]->descriptors();
  }
  const auto& a = *run[0];
  const auto& b = *run[1];
  for (int o = 0; o < plan.octaves; ++o) {
    for (int l = 1; l <= plan.layers; ++l) {
      const ss::cpu::SiftPlane& pa = a.gauss(o, l);
      const ss::cpu::SiftPlane& pb = b.gauss(o, l);
      ASSERT_EQ(pa.w, pb.w);
      ASSERT_EQ(pa.h, pb.h);
      EXPECT_TRUE(same_bits(pa.row(0), pb.row(0), std::size_t(pa.w) * std::size_t(pa.h) * sizeof(float)))
          << "octave " << o << " level " << l;
    }
  }
  ASSERT_GT(refined[0].size(), 100u);
  ASSERT_EQ(refined[0].size(), refined[1].size());
  EXPECT_TRUE(same_bits(refined[0].data(), refined[1].data(), refined[0].size() * sizeof(SiftKeypoint)));
  ASSERT_EQ(oriented[0].size(), oriented[1].size());
  EXPECT_TRUE(same_bits(oriented[0].data(), oriented[1].data(), oriented[0].size() * sizeof(SiftKeypoint)));
  ASSERT_EQ(a.keypoints().size(), b.keypoints().size());
  EXPECT_TRUE(same_bits(a.keypoints().data(), b.keypoints().data(), a.keypoints().size() * sizeof(SiftKeypoint)));
  ASSERT_EQ(a.descriptor_values().size(), b.descriptor_values().size());
  EXPECT_TRUE(same_bits(a.descriptor_values().data(), b.descriptor_values().data(),
                        a.descriptor_values().size() * sizeof(float)));
}

// The stage sequence through the public call: counts are consistent and the features are those of the stages.
TEST(SiftStages, CountsAndDownload) {
  ss::Context ctx = cpu_context(2);
  const ss::ImageF g = graf1();
  const SiftPlan plan = ss::detail::make_sift_plan(g.width, g.height, {});
  auto st = run_cpu(ctx, g, plan, 4);
  const std::vector<SiftKeypoint> kept = st->keypoints();
  ss::Features f;
  ss::detail::SiftCounts n;
  st->download(f, n);
  EXPECT_GE(n.candidates, n.refined);
  EXPECT_GE(n.oriented, n.refined);  // at least one peak per refined point
  EXPECT_GE(n.oriented, n.kept);
  EXPECT_EQ(n.kept, f.keypoints.size());
  ASSERT_EQ(kept.size(), f.keypoints.size());
  for (std::size_t i = 0; i < kept.size(); ++i) {
    EXPECT_EQ(f.keypoints[i].x, kept[i].x);
    EXPECT_EQ(f.keypoints[i].angle, kept[i].angle);
    EXPECT_EQ(f.keypoints[i].octave, kept[i].octave);
  }
  const ss::Features pub = ss::detect_and_compute(ctx, g);
  ASSERT_EQ(pub.keypoints.size(), f.keypoints.size());
  EXPECT_TRUE(same_bits(pub.keypoints.data(), f.keypoints.data(), f.keypoints.size() * sizeof(ss::Keypoint)));
  EXPECT_TRUE(same_bits(pub.descriptors.data(), f.descriptors.data(), f.descriptors.size() * sizeof(float)));
}

// The float forms of the 16-bit and float grey conversions equal the double ones on every 16-bit value.
TEST(SiftGray, FloatFormsEqualTheDoubleFormula) {
  for (unsigned v = 0; v < 65536; ++v) {
    ASSERT_EQ(sift_gray_u16(v), float(v / 257.0)) << v;
    const float f = float(v) / 65535.0f;
    ASSERT_EQ(sift_gray_f32(f), float(double(f) * 255.0)) << v;
  }
  EXPECT_EQ(sift_gray_u8_rgb(255, 255, 255), 255.0f);
  EXPECT_EQ(sift_gray_u8_rgb(0, 0, 0), 0.0f);
  EXPECT_EQ(sift_gray_u8_rgb(10, 200, 30), float((9798u * 10 + 19235u * 200 + 3735u * 30 + 16384u) >> 15));
}

// The per-element extremum test equals the definition (|v| > thr and >= / <= all 26 neighbours) on random
// planes with many ties.
TEST(SiftExtrema, PerElementTestMatchesTheDefinition) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> d(-3, 3);
  const int w = 9;
  std::vector<float> planes(std::size_t(3 * w * w));
  int found = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    for (auto& v : planes) v = float(d(rng));
    const float* cur = planes.data() + w * w + 4 * w + 4;
    const float v = cur[0];
    bool want = std::abs(v) > 1.0f;
    for (int k = -1; k <= 1; ++k)
      for (int dy = -1; dy <= 1; ++dy)
        for (int dx = -1; dx <= 1; ++dx) {
          const float t = cur[k * w * w + dy * w + dx];
          want = want && (v > 0 ? v >= t : v <= t);
        }
    const int got = sift_is_extremum_local(cur - w * w, cur, cur + w * w, w, 1.0f);
    ASSERT_EQ(got, int(want)) << "trial " << trial;
    found += got;
  }
  EXPECT_GT(found, 10);
}

TEST(SiftSelect, RulesOnRecords) {
  SiftKeypoint a{};
  a.x = 10;
  a.y = 5;
  a.size = 3;
  a.angle = 20;
  a.response = 0.5f;
  SiftKeypoint b = a;
  b.response = 0.7f;
  // Duplicates: the larger response comes first and the other one is its duplicate.
  EXPECT_TRUE(sift_duplicate_before(b, a));
  EXPECT_FALSE(sift_duplicate_before(a, b));
  EXPECT_TRUE(sift_is_duplicate(b, a));
  b.angle = 21;
  EXPECT_FALSE(sift_is_duplicate(a, b));
  // The order is total: records that differ only in layer_offset or position are ordered.
  SiftKeypoint c = a;
  c.c = 3;
  EXPECT_NE(sift_duplicate_before(a, c), sift_duplicate_before(c, a));
  // Cap: ties at the cut are kept.
  EXPECT_TRUE(sift_response_kept(0.5f, 0.5f));
  EXPECT_FALSE(sift_response_kept(0.49f, 0.5f));
  // Mask: int(v + 0.5), truncating towards zero, clamped.
  EXPECT_EQ(sift_mask_coord(2.49f, 10), 2);
  EXPECT_EQ(sift_mask_coord(2.5f, 10), 3);
  EXPECT_EQ(sift_mask_coord(-0.9f, 10), 0);  // int(-0.4) = 0
  EXPECT_EQ(sift_mask_coord(9.7f, 10), 9);
  // Canonical order: octave first, then layer, y, x.
  SiftKeypoint e = a;
  e.octave = -1;
  e.y = 100;
  EXPECT_TRUE(sift_canonical_before(e, a));
  e.octave = 0;
  e.layer = a.layer + 1;
  e.y = 0;
  EXPECT_TRUE(sift_canonical_before(a, e));
}

// The rank select (numeric/sift_select.h, "The rank select"; backend/cuda/kernels/sift_select_rank.cuh), run
// here as its kernels run it: the duplicate and response keys first; a dropped duplicate's response key becomes
// SIFT_RANK_NONE; a kept record gets its canonical key, the others SIFT_RANK_NONE; each kept record is written
// to its position, counted over every record's keys with the same fast paths. y_scale and canonical_key as the
// CUDA host computes them.
static std::vector<SiftKeypoint> rank_select(const std::vector<SiftKeypoint>& kp, int max_features, const ss::Image* mask,
                                             int input_w, int input_h, int layers, int octaves) {
  const int n = int(kp.size());
  const float y_scale = float(1 << 23) / float(std::max(input_w, input_h) + 1);
  const int canonical_key = layers <= 15 && octaves <= 31 ? 1 : 0;
  std::vector<unsigned> dkey(n), rkey(n), ckey(n);
  for (int i = 0; i < n; ++i) {
    dkey[i] = sift_select_ordered_bits(kp[i].x);
    rkey[i] = ~sift_select_ordered_bits(kp[i].response);
    EXPECT_LT(rkey[i], SIFT_RANK_NONE);
  }
  std::vector<unsigned> rkey_after = rkey;  // the unique pass writes while others read the keys it started from
  unsigned unique_count = 0;
  for (int i = 0; i < n; ++i) {
    int drop = 0;
    for (int j = 0; j < n; ++j)
      if (dkey[j] == dkey[i] && sift_rank_drops(kp[j], j, kp[i], i)) drop = 1;
    if (drop) rkey_after[i] = SIFT_RANK_NONE;
    unique_count += unsigned(!drop);
  }
  rkey = rkey_after;
  const int mask_type = !mask ? -1 : mask->type == ss::PixelType::kU8 ? 0 : mask->type == ss::PixelType::kU16 ? 1 : 2;
  const bool cap = max_features > 0 && unique_count > unsigned(max_features);
  std::size_t kept_count = 0;
  for (int i = 0; i < n; ++i) {
    unsigned larger = 0;
    if (cap) {
      for (int j = 0; j < n; ++j) larger += rkey[j] < rkey[i] ? 1u : 0u;
    }
    const bool keep = rkey[i] != SIFT_RANK_NONE && (!cap || larger < unsigned(max_features)) &&
                      sift_select_mask_ok(kp[i], mask ? mask->data.data() : nullptr, mask_type, mask ? mask->width : 0,
                                        mask ? mask->height : 0);
    ckey[i] = keep ? sift_rank_canonical_key(kp[i], y_scale, canonical_key) : SIFT_RANK_NONE;
    if (keep) {
      EXPECT_LT(ckey[i], SIFT_RANK_NONE);
    }
    kept_count += std::size_t(keep);
  }
  std::vector<SiftKeypoint> out(kept_count);
  std::vector<int> written(kept_count, 0);
  for (int i = 0; i < n; ++i) {
    if (ckey[i] == SIFT_RANK_NONE) continue;
    std::size_t position = 0;
    for (int j = 0; j < n; ++j) {
      position += ckey[j] < ckey[i] ? 1u : 0u;
      if (ckey[j] == ckey[i] && sift_rank_before(kp[j], j, kp[i], i, SIFT_ORDER_CANONICAL)) ++position;
    }
    EXPECT_LT(position, kept_count);
    if (position >= kept_count) continue;
    ++written[position];
    out[position] = kp[i];
  }
  for (std::size_t p = 0; p < kept_count; ++p) EXPECT_EQ(written[p], 1) << "position " << p;
  return out;
}

// The bucketed rank select (numeric/sift_select.h), as backend/cuda/kernels/sift_select_buckets.cuh runs it
// (no cap): duplicate buckets counted, scanned and filled, rule 1 inside each record's bucket, the kept records'
// canonical buckets counted, scanned and filled, and each position = its bucket's offset + its count inside the
// bucket. The lists are filled in a shuffled order (the device's atomics give any order).
static std::vector<SiftKeypoint> bucket_select(const std::vector<SiftKeypoint>& kp, const ss::Image* mask, int input_w,
                                               int input_h, int layers, int octaves, std::mt19937& rng,
                                               std::size_t* largest_bucket = nullptr) {
  const unsigned n = unsigned(kp.size()), B = SIFT_SELECT_BUCKETS;
  const float y_scale = float(1 << 23) / float(std::max(input_w, input_h) + 1);
  const int band_bits = sift_canonical_band_bits(layers, octaves);
  EXPECT_GE(band_bits, 0);
  std::vector<unsigned> order(n);
  for (unsigned i = 0; i < n; ++i) order[i] = i;
  // Counts, an exclusive scan, then the lists filled through cursors in the order `order`.
  const auto fill = [&](const std::vector<unsigned>& bucket, std::vector<unsigned>& offset, std::vector<unsigned>& list) {
    std::vector<unsigned> count(B, 0);
    for (unsigned i = 0; i < n; ++i)
      if (bucket[i] != SIFT_RANK_NONE) ++count[bucket[i]];
    offset.assign(B + 1, 0);
    for (unsigned b = 0; b < B; ++b) offset[b + 1] = offset[b] + count[b];
    std::vector<unsigned> cursor(offset.begin(), offset.end() - 1);
    list.assign(n, SIFT_RANK_NONE);
    std::shuffle(order.begin(), order.end(), rng);
    for (unsigned i : order)
      if (bucket[i] != SIFT_RANK_NONE) list[cursor[bucket[i]]++] = i;
    if (largest_bucket)
      *largest_bucket = std::max<std::size_t>(*largest_bucket, *std::max_element(count.begin(), count.end()));
  };
  std::vector<unsigned> dkey(n), b1(n), off1, list1;
  for (unsigned i = 0; i < n; ++i) {
    dkey[i] = sift_select_ordered_bits(kp[i].x);
    b1[i] = sift_duplicate_bucket(dkey[i]);
  }
  fill(b1, off1, list1);
  const int mask_type = !mask ? -1 : mask->type == ss::PixelType::kU8 ? 0 : mask->type == ss::PixelType::kU16 ? 1 : 2;
  std::vector<unsigned> ckey(n, SIFT_RANK_NONE), b2(n, SIFT_RANK_NONE), off2, list2;
  for (unsigned i = 0; i < n; ++i) {
    int drop = 0;
    for (unsigned p = off1[b1[i]]; p < off1[b1[i] + 1]; ++p) {
      const unsigned j = list1[p];
      if (dkey[j] == dkey[i] && sift_rank_drops(kp[j], int(j), kp[i], int(i))) drop = 1;
    }
    const bool keep = !drop && sift_select_mask_ok(kp[i], mask ? mask->data.data() : nullptr, mask_type,
                                                   mask ? mask->width : 0, mask ? mask->height : 0);
    if (!keep) continue;
    ckey[i] = sift_rank_canonical_key(kp[i], y_scale, 1);
    b2[i] = sift_canonical_bucket(kp[i], ckey[i], layers, octaves, band_bits);
    EXPECT_LT(b2[i], B);
  }
  fill(b2, off2, list2);
  const std::size_t kept = off2[B];
  std::vector<SiftKeypoint> out(kept);
  std::vector<int> written(kept, 0);
  for (unsigned i = 0; i < n; ++i) {
    if (b2[i] == SIFT_RANK_NONE) continue;
    std::size_t position = off2[b2[i]];
    for (unsigned p = off2[b2[i]]; p < off2[b2[i] + 1]; ++p) {
      const unsigned j = list2[p];
      position += ckey[j] < ckey[i] ? 1u : 0u;
      if (ckey[j] == ckey[i] && sift_rank_before(kp[j], int(j), kp[i], int(i), SIFT_ORDER_CANONICAL)) ++position;
    }
    EXPECT_LT(position, kept);
    if (position >= kept) continue;
    ++written[position];
    out[position] = kp[i];
  }
  for (std::size_t p = 0; p < kept; ++p) EXPECT_EQ(written[p], 1) << "position " << p;
  return out;
}

// The rank select keeps the sorting select's records in its order, bit for bit (ss::cpu::select_records, the CPU
// backend's stage), on the oriented records of graf1 and box as they come and with planted duplicates (copies
// with a smaller and a larger response, exact copies, copies at another angle, in shuffled order), responses
// rounded so that the cap cuts through ties, a cap, and masks of each pixel type.
TEST(SiftSelect, RankSelectKeepsTheSortedSelection) {
  ss::Context ctx = cpu_context(2);
  std::mt19937 rng(23);
  int cases = 0, with_drops = 0;
  for (const char* name : {"graf1_gray.png", "box.png"}) {
    const ss::ImageF g = ss::to_gray_float(ss::read_image(std::string(SPECTRASIFT_TEST_DATA) + "/" + name));
    ss::SiftOptions o;
    const SiftPlan plan = ss::detail::make_sift_plan(g.width, g.height, o);
    const std::vector<SiftKeypoint> oriented = run_cpu(ctx, g, plan, 2)->keypoints();
    ASSERT_GT(oriented.size(), 500u) << name;
    std::vector<SiftKeypoint> planted = oriented;
    for (std::size_t i = 0; i < oriented.size(); i += 7) {
      SiftKeypoint weaker = oriented[i], stronger = oriented[i], turned = oriented[i];
      weaker.response *= 0.5f;
      stronger.response *= 2.0f;
      turned.angle = std::fmod(turned.angle + 1.0f, 360.0f);
      planted.push_back(weaker);
      planted.push_back(i % 2 ? stronger : oriented[i]);
      planted.push_back(turned);
    }
    std::shuffle(planted.begin(), planted.end(), rng);
    std::vector<SiftKeypoint> rounded = planted;
    for (SiftKeypoint& k : rounded) k.response = std::round(k.response * 50.0f) / 50.0f;
    ss::Image mask_u8{g.width, g.height, 1, ss::PixelType::kU8, std::vector<std::uint8_t>(std::size_t(g.width) * g.height)};
    for (int y = 0; y < g.height; ++y)
      for (int x = 0; x < g.width; ++x) mask_u8.data[std::size_t(y) * g.width + x] = ((x / 64 + y / 48) % 3) ? 255 : 0;
    ss::Image mask_f32{g.width, g.height, 1, ss::PixelType::kF32, std::vector<std::uint8_t>(mask_u8.data.size() * 4)};
    for (std::size_t p = 0; p < mask_u8.data.size(); ++p) {
      const float v = mask_u8.data[p] ? 1.0f : 0.0f;
      std::memcpy(mask_f32.data.data() + 4 * p, &v, 4);
    }
    struct Input {
      const char* what;
      const std::vector<SiftKeypoint>* records;
    };
    for (const Input& in : {Input{"as oriented", &oriented}, Input{"planted duplicates", &planted},
                            Input{"rounded responses", &rounded}}) {
      for (int cap : {0, 300, 1000}) {
        for (const ss::Image* mask : {static_cast<const ss::Image*>(nullptr), static_cast<const ss::Image*>(&mask_u8), static_cast<const ss::Image*>(&mask_f32)}) {
          std::vector<SiftKeypoint> want = *in.records;
          ss::cpu::select_records(want, cap, mask);
          const std::vector<SiftKeypoint> got = rank_select(*in.records, cap, mask, g.width, g.height, plan.layers, plan.octaves);
          const std::string what = std::string(name) + ", " + in.what + ", cap " + std::to_string(cap) +
                                   (mask ? (mask->type == ss::PixelType::kU8 ? ", u8 mask" : ", f32 mask") : "");
          ASSERT_EQ(got.size(), want.size()) << what;
          EXPECT_TRUE(same_bits(got.data(), want.data(), got.size() * sizeof(SiftKeypoint))) << what;
          ++cases;
          if (want.size() + 100 < in.records->size() && cap == 0 && !mask) ++with_drops;
        }
      }
    }
  }
  EXPECT_EQ(cases, 54);
  EXPECT_GE(with_drops, 4);  // the planted duplicates were dropped (cap 0, no mask), on both images
}

// The bucketed rank select (the CUDA path above SIFT_RANK_MAX_RECORDS records without a cap) keeps the sorting
// select's records in its order, bit for bit: graf1's and box's oriented records as they come, with planted
// duplicates (shuffled) and with every record moved onto a few rows (large canonical buckets, where the counts
// inside a bucket decide), without and with masks; the bucket lists filled in shuffled orders.
TEST(SiftSelect, BucketSelectKeepsTheSortedSelection) {
  ss::Context ctx = cpu_context(2);
  std::mt19937 rng(29);
  int cases = 0;
  std::size_t largest = 0;
  for (const char* name : {"graf1_gray.png", "box.png"}) {
    const ss::ImageF g = ss::to_gray_float(ss::read_image(std::string(SPECTRASIFT_TEST_DATA) + "/" + name));
    ss::SiftOptions o;
    const SiftPlan plan = ss::detail::make_sift_plan(g.width, g.height, o);
    const std::vector<SiftKeypoint> oriented = run_cpu(ctx, g, plan, 2)->keypoints();
    ASSERT_GT(oriented.size(), 500u) << name;
    std::vector<SiftKeypoint> planted = oriented;
    for (std::size_t i = 0; i < oriented.size(); i += 5) {
      SiftKeypoint weaker = oriented[i], turned = oriented[i];
      weaker.response *= 0.5f;
      turned.angle = std::fmod(turned.angle + 1.0f, 360.0f);
      planted.push_back(weaker);
      planted.push_back(oriented[i]);
      planted.push_back(turned);
    }
    std::shuffle(planted.begin(), planted.end(), rng);
    std::vector<SiftKeypoint> rows = planted;  // y on four rows: a few large canonical buckets
    for (SiftKeypoint& k : rows) k.y = float(int(k.y) % 4) * 0.25f + 10.0f;
    ss::Image mask{g.width, g.height, 1, ss::PixelType::kU8, std::vector<std::uint8_t>(std::size_t(g.width) * g.height)};
    for (int y = 0; y < g.height; ++y)
      for (int x = 0; x < g.width; ++x) mask.data[std::size_t(y) * g.width + x] = ((x / 64 + y / 48) % 3) ? 255 : 0;
    for (const std::vector<SiftKeypoint>* records : {&oriented, static_cast<const std::vector<SiftKeypoint>*>(&planted), static_cast<const std::vector<SiftKeypoint>*>(&rows)}) {
      for (const ss::Image* m : {static_cast<const ss::Image*>(nullptr), static_cast<const ss::Image*>(&mask)}) {
        std::vector<SiftKeypoint> want = *records;
        ss::cpu::select_records(want, 0, m);
        const std::vector<SiftKeypoint> got =
            bucket_select(*records, m, g.width, g.height, plan.layers, plan.octaves, rng, &largest);
        const std::string what = std::string(name) + ", " + std::to_string(records->size()) + " records" + (m ? ", mask" : "");
        ASSERT_EQ(got.size(), want.size()) << what;
        EXPECT_TRUE(same_bits(got.data(), want.data(), got.size() * sizeof(SiftKeypoint))) << what;
        ++cases;
      }
    }
  }
  EXPECT_EQ(cases, 12);
  EXPECT_GT(largest, 200u);  // the four-row records crowd their buckets
  // The band bits: 9 octaves of 3 layers leave 2^10 bands a slot; a plan too large for one band a slot has none.
  EXPECT_EQ(sift_canonical_band_bits(3, 9), 10);
  EXPECT_EQ(sift_canonical_band_bits(3, 0), 13);
  EXPECT_EQ(sift_canonical_band_bits(10, 8000), -1);
}

// The bucketed rank select on random records of 60 random plans (1-6 layers, 1-12 octaves, with and without the
// doubled octave): many duplicates and exact copies, few x values, crowded rows, -0 and +0 coordinates; the CPU
// backend's select_records, bit for bit.
TEST(SiftSelect, BucketSelectKeepsTheSortedSelectionOnRandomPlans) {
  std::mt19937 rng(7);
  int cases = 0;
  for (int trial = 0; trial < 60; ++trial) {
    const int layers = 1 + int(rng() % 6), octaves = 1 + int(rng() % 12);
    const bool up = rng() % 2;
    const int w = 50 + int(rng() % 4000), h = 50 + int(rng() % 4000);
    const int n = 1 + int(rng() % 3000);
    std::vector<SiftKeypoint> kp(static_cast<std::size_t>(n));
    std::uniform_real_distribution<float> U(0.0f, 1.0f);
    const int xs = 1 + int(rng() % 50);
    for (auto& k : kp) {
      k = SiftKeypoint{};
      k.x = (rng() % 3 == 0) ? float(rng() % xs) * 0.5f : U(rng) * float(w - 1);
      if (rng() % 17 == 0) k.x = -0.0f;
      k.y = (rng() % 3 == 0) ? float(rng() % 4) : U(rng) * float(h - 1);
      k.size = float(rng() % 3) + 1.0f;
      k.angle = float(rng() % 4) * 90.0f;
      k.response = float(rng() % 5);
      k.layer_offset = float(int(rng() % 3) - 1) * 0.25f;
      k.octave = (up ? -1 : 0) + int(rng() % unsigned(octaves));
      k.layer = 1 + int(rng() % unsigned(layers));
      k.r = int(rng() % 3);
      k.c = int(rng() % 3);
    }
    // exact copies too
    for (int i = 0; i < n / 10; ++i) kp.push_back(kp[rng() % kp.size()]);
    std::shuffle(kp.begin(), kp.end(), rng);
    std::vector<SiftKeypoint> want = kp;
    ss::cpu::select_records(want, 0, nullptr);
    const std::vector<SiftKeypoint> got = bucket_select(kp, nullptr, w, h, layers, octaves, rng);
    ASSERT_EQ(got.size(), want.size()) << trial;
    EXPECT_TRUE(same_bits(got.data(), want.data(), got.size() * sizeof(SiftKeypoint))) << trial;
    ++cases;
  }
  EXPECT_EQ(cases, 60);
}

// The staged CUDA descriptor kernel's two owner walks (backend/cuda/kernels/sift_descriptor_staged.cuh, numeric/
// sift_descriptor.h 'The row walk'), run here as the kernel runs them, band by band and owner by owner, on records
// computed from a random plane for many frames (angles at and next to the axes and random ones, window sizes of
// the default and of sigma 3.2, centres inside and next to the plane's edges, several band sizes): the row
// records are the box records re-encoded (same fractions, gradient and weights, bit for bit), the row walk
// finds exactly the shares the box walk adds, in the same order, and its two-records-a-step updates
// (sift_descriptor_owner_add2) leave every accumulator entry with the box walk's bits, while visiting far fewer
// records. The warp's lockstep count (per band, the most records any owner
// visits) is reported for both walks.
TEST(SiftDescriptorRowWalk, AddsTheBoxWalksSharesInOrder) {
  const int w = 160, h = 120;
  std::mt19937 rng(19);
  std::uniform_real_distribution<float> pix(0.0f, 1.0f);
  std::vector<float> plane(std::size_t(w) * h);
  for (float& v : plane) v = pix(rng);
  std::vector<float> angles = {0.0f, 90.0f, 180.0f, 270.0f, 45.0f, 135.0f, 225.0f, 315.0f, 1e-4f, 0.01f,
                               0.06f, 89.99f, 90.01f, 179.94f, 270.001f, 359.99f, 30.0f, 60.0f};
  std::uniform_real_distribution<float> any_angle(0.0f, 360.0f);
  for (int k = 0; k < 60; ++k) angles.push_back(any_angle(rng));
  const float deg2rad = float(M_PI / 180.0);
  struct Add {
    int i, j, o0;
    std::uint32_t s0, s1;
    bool operator==(const Add&) const = default;
  };
  auto bits = [](float v) {
    std::uint32_t b;
    std::memcpy(&b, &v, 4);
    return b;
  };
  long long box_visits = 0, row_visits = 0, hits = 0, box_lockstep = 0, row_lockstep = 0, frames = 0;
  for (float hw : {5.4f, 8.0f, 10.8f, 21.5f}) {
    const int radius = sift_round(hw * 1.4142135623730951f * float(SIFT_DESCR_WIDTH + 1) * 0.5f);
    const int ex_cap = 2 * radius + 1;
    std::vector<float> ex(static_cast<std::size_t>(ex_cap));
    for (const auto& [cx, cy] : std::vector<std::pair<int, int>>{{80, 60}, {3, 58}, {150, 2}, {w - 2, h - 1}, {40, 90}}) {
      for (float angle : angles) {
        SiftDescriptorFrame f{};
        f.w = w;
        f.h = h;
        f.cx = cx;
        f.cy = cy;
        f.radius = radius;
        f.ori = 360.0f - angle;
        if (std::abs(f.ori - 360.0f) < SIFT_FLT_EPSILON) f.ori = 0.0f;
        f.cos_t = std::cos(f.ori * deg2rad) / hw;
        f.sin_t = std::sin(f.ori * deg2rad) / hw;
        f.weight_scale = 1.0f / (hw * hw);
        for (int k = 0; k < ex_cap; ++k) ex[std::size_t(k)] = sift_descriptor_weight(f, k - radius);
        for (int chunk : {std::max(ex_cap, 128), ex_cap, 4 * ex_cap, ex_cap * ex_cap}) {
          const SiftDescriptorBands b = sift_descriptor_bands(f, chunk);
          ++frames;
          const auto len = static_cast<std::size_t>(chunk);
          std::vector<int> box_code(len), row_code(len);
          std::vector<std::array<float, 4>> box_rec(len), row_rec(len);
          std::vector<std::vector<Add>> box_adds(16), row_adds(16);
          float box_acc[SIFT_DESCR_HIST_BINS + 2][16] = {}, row_acc[SIFT_DESCR_HIST_BINS + 2][16] = {};
          for (int band = 0; band < b.bands; ++band) {
            const int i0 = b.i_first + band * b.rows;
            const int n = std::min(b.rows, b.i_last - i0 + 1) * b.width;
            for (int s = 0; s < n; ++s) {  // phase A, both record forms
              const int i = i0 + s / b.width, j = b.j_first + s % b.width;
              auto& o = box_rec[std::size_t(s)];
              o = {0.0f, 0.0f, 0.0f, 0.0f};
              box_code[std::size_t(s)] = sift_descriptor_stage_sample(f, plane.data(), ex.data(), i, j, &o[0], &o[1],
                                                                      &o[2], &o[3]);
              float dx, dy;
              sift_descriptor_diffs(f, plane.data(), i, j, &dx, &dy);
              auto& r = row_rec[std::size_t(s)];
              r = {0.0f, 0.0f, 0.0f, 0.0f};
              row_code[std::size_t(s)] = sift_descriptor_row_record(f, ex.data(), i, j, dx, dy, &r[0], &r[1], &r[2], &r[3]);
              const int c = box_code[std::size_t(s)];
              ASSERT_EQ(row_code[std::size_t(s)],
                        c < 0 ? SIFT_DESCR_ROW_NONE
                              : sift_descriptor_row_code(c / 8 / 6 - 1, c / 8 % 6 - 1, c % 8)) << i << " " << j;
              ASSERT_TRUE(same_bits(o.data(), r.data(), sizeof o)) << i << " " << j;
            }
            long long box_most = 0, row_most = 0;
            for (int t = 0; t < 16; ++t) {  // phase B, owner t
              const int qr = t / 4 + 1, qc = t % 4 + 1;
              int i_lo, i_hi, j_lo, j_hi;
              sift_descriptor_owner_box(f, b, qr, qc, &i_lo, &i_hi, &j_lo, &j_hi);
              const int key = sift_descriptor_owner_key(qr, qc);
              const SiftDescriptorRowSpan span = sift_descriptor_row_span(f, qr, qc);
              long long box_n = 0, row_n = 0;
              for (int i = std::max(i_lo, i0); i <= std::min(i_hi, i0 + b.rows - 1); ++i) {
                const int s_row = (i - i0) * b.width - b.j_first;
                for (int j = j_lo; j <= j_hi; ++j, ++box_n) {
                  const auto& r = box_rec[std::size_t(s_row + j)];
                  int o0 = 0;
                  float s0 = 0.0f, s1 = 0.0f;
                  if (sift_descriptor_cell_shares(box_code[std::size_t(s_row + j)], qr, qc, r[0], r[1], r[2], r[3], &o0,
                                                  &s0, &s1)) {
                    box_adds[std::size_t(t)].push_back({i, j, o0, bits(s0), bits(s1)});
                    box_acc[o0][t] += s0;  // the box walk's single updates
                    box_acc[o0 + 1][t] += s1;
                  }
                }
                int jl, jh;
                sift_descriptor_row_cols(span, i, j_lo, j_hi, &jl, &jh);
                ASSERT_GE(jl, j_lo);  // never outside the box (the records of the band)
                ASSERT_LE(jh, j_hi);
                for (int j = jl; j <= jh; ++j, ++row_n) {
                  const auto& r = row_rec[std::size_t(s_row + j)];
                  int o0 = 0;
                  float s0 = 0.0f, s1 = 0.0f;
                  if (sift_descriptor_row_shares(key, row_code[std::size_t(s_row + j)], r[0], r[1], r[2], r[3], &o0, &s0,
                                                 &s1))
                    row_adds[std::size_t(t)].push_back({i, j, o0, bits(s0), bits(s1)});
                }
                for (int j = jl; j <= jh; j += 2) {  // the kernel's updates: two records a step
                  // past jh the kernel reads whatever lies there (up to 3 past the band's records): here a code
                  // whose o0 is far outside the accumulator and NaN values, which must be left unread
                  const float nan = std::numeric_limits<float>::quiet_NaN();
                  const std::array<float, 4> junk = {nan, nan, nan, nan};
                  const auto a = std::size_t(s_row + j), bb = std::size_t(s_row + j + 1);
                  int oa = 0, ob = 0;
                  float sa0 = 0.0f, sa1 = 0.0f, sb0 = 0.0f, sb1 = 0.0f;
                  const auto& ra = row_rec[a];
                  const auto& rb = j + 1 <= jh ? row_rec[bb] : junk;
                  const int code_b = j + 1 <= jh ? row_code[bb] : 0x7fff4141;
                  const int hit_a = sift_descriptor_row_shares(key, row_code[a], ra[0], ra[1], ra[2], ra[3], &oa, &sa0, &sa1);
                  const int hit_b =
                      sift_descriptor_row_shares(key, code_b, rb[0], rb[1], rb[2], rb[3], &ob, &sb0, &sb1) && j + 1 <= jh;
                  sift_descriptor_owner_add2(&row_acc[0][t], 16, hit_a, oa, sa0, sa1, hit_b, ob, sb0, sb1);
                }
              }
              box_visits += box_n;
              row_visits += row_n;
              box_most = std::max(box_most, box_n);
              row_most = std::max(row_most, row_n);
            }
            box_lockstep += box_most;
            row_lockstep += row_most;
          }
          ASSERT_TRUE(same_bits(box_acc, row_acc, sizeof box_acc))
              << "accumulators: hw " << hw << ", angle " << angle << ", centre " << cx << "," << cy << ", chunk " << chunk;
          for (int t = 0; t < 16; ++t) {
            hits += (long long)box_adds[std::size_t(t)].size();
            ASSERT_TRUE(box_adds[std::size_t(t)] == row_adds[std::size_t(t)])
                << "owner " << t << ", hw " << hw << ", angle " << angle << ", centre " << cx << "," << cy << ", chunk "
                << chunk << ": " << box_adds[std::size_t(t)].size() << " box adds, " << row_adds[std::size_t(t)].size()
                << " row adds";
          }
        }
      }
    }
  }
  ASSERT_GT(hits, 1000000);
  std::printf("[ row walk ] %lld frames: %lld hits; visits box %lld, rows %lld (%.2fx fewer); warp lockstep box %lld, "
              "rows %lld (%.2fx fewer)\n",
              frames, hits, box_visits, row_visits, double(box_visits) / double(row_visits), box_lockstep, row_lockstep,
              double(box_lockstep) / double(row_lockstep));
  EXPECT_LT(row_visits * 10, box_visits * 7);  // the point of the row walk: at least 30 % fewer records visited
}

#ifdef SPECTRASIFT_HAVE_OPENCL
// Every SIFT numeric header compiles as OpenCL C 1.2 with all its address-space variants (the build fails on
// a __local pointer passed where a private one is expected), on every OpenCL device present.
TEST(SiftNumericOpenCL, HeadersCompileAsOpenCLC) {
  int devices = 0;
  for (const auto& dev : ss::list_devices()) {
    if (dev.backend != ss::Backend::kOpenCL) continue;
    ++devices;
    ss::ContextOptions o;
    o.backend = ss::Backend::kOpenCL;
    o.device = dev.index;
    ss::Context ctx(o);
    auto& st = ss::opencl::state(ctx.impl());
    for (const char* h : {"sift_keypoint.h", "sift_extrema.h", "sift_refine.h", "sift_orientation.h",
                          "sift_descriptor.h", "sift_select.h", "sift_gray.h"})
      EXPECT_NO_THROW(st.program(h)) << h << " on " << dev.name;
  }
  if (devices == 0) GTEST_SKIP() << "no OpenCL device on this machine";
}
#endif

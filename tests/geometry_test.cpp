// Geometry: Philox known answers, minimal/least-squares solvers, RANSAC on planted models with
// outliers, degenerate input, determinism, warping and overlays.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "numeric/philox.h"
#include "spectrasift/error.hpp"
#include "spectrasift/geometry.hpp"

using namespace spectrasift;
using Mat3 = std::array<double, 9>;

namespace {

Context cpu_context(int threads = 2) {
  ContextOptions o;
  o.backend = Backend::kCpu;
  o.threads = threads;
  return Context(o);
}

/// A portable uniform / normal source (std distributions differ between standard libraries).
struct Rng {
  std::mt19937_64 g;
  explicit Rng(std::uint64_t seed) : g(seed) {}
  double uniform() { return double(g() >> 11) * (1.0 / 9007199254740992.0); }
  double uniform(double a, double b) { return a + (b - a) * uniform(); }
  double normal() {
    const double u1 = 1.0 - uniform(), u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
};

double corner_error(const Mat3& a, const Mat3& b, double w, double h) {
  const Point2 corners[4] = {{0, 0}, {w - 1, 0}, {w - 1, h - 1}, {0, h - 1}};
  double e = 0;
  for (const auto& c : corners) {
    const Point2 p = apply_model(a, c), q = apply_model(b, c);
    e += std::hypot(p.x - q.x, p.y - q.y);
  }
  return e / 4;
}

Mat3 true_model(GeometryModel m) {
  switch (m) {
    case GeometryModel::kHomography: return {0.9, -0.18, 40, 0.12, 1.05, -25, 2.0e-4, -1.5e-4, 1};
    case GeometryModel::kAffine: return {0.95, 0.22, 30, -0.15, 1.1, 12, 0, 0, 1};
    case GeometryModel::kSimilarity: {
      const double s = 1.15, t = 0.4;
      return {s * std::cos(t), -s * std::sin(t), 60, s * std::sin(t), s * std::cos(t), -80, 0, 0, 1};
    }
  }
  return {};
}

struct Planted {
  std::vector<Point2> moving, fixed;
  std::vector<bool> inlier;
};

/// n correspondences in a 640x480 frame; a fraction `outliers` of them have a random fixed point
/// (at least 10 px from the true image), the rest the true image plus Gaussian noise of `sigma` px.
Planted plant(const Mat3& m, int n, double outliers, double sigma, std::uint64_t seed) {
  Rng rng(seed);
  Planted p;
  const int n_out = int(std::lround(n * outliers));
  for (int i = 0; i < n; ++i) {
    const Point2 a{rng.uniform(0, 639), rng.uniform(0, 479)};
    const Point2 t = apply_model(m, a);
    Point2 f;
    const bool in = i >= n_out;
    if (in) {
      f = {t.x + sigma * rng.normal(), t.y + sigma * rng.normal()};
    } else {
      do f = {rng.uniform(-50, 700), rng.uniform(-50, 550)};
      while (std::hypot(f.x - t.x, f.y - t.y) < 10);
    }
    p.moving.push_back(a);
    p.fixed.push_back(f);
    p.inlier.push_back(in);
  }
  // Interleave outliers and inliers deterministically (a fixed permutation).
  Rng perm(seed ^ 0x9e37u);
  for (int i = n - 1; i > 0; --i) {
    const int j = int(perm.uniform() * (i + 1)) % (i + 1);
    std::swap(p.moving[std::size_t(i)], p.moving[std::size_t(j)]);
    std::swap(p.fixed[std::size_t(i)], p.fixed[std::size_t(j)]);
    const bool t = p.inlier[std::size_t(i)];
    p.inlier[std::size_t(i)] = p.inlier[std::size_t(j)];
    p.inlier[std::size_t(j)] = t;
  }
  return p;
}

}  // namespace

TEST(Philox, KnownAnswerVectors) {
  // Random123 kat_vectors for philox4x32_10.
  struct Kat {
    std::uint32_t ctr[4], key[2], out[4];
  } kats[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}},
      {{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
       {0xffffffffu, 0xffffffffu},
       {0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}},
      {{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
       {0xa4093822u, 0x299f31d0u},
       {0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}},
  };
  for (const auto& k : kats) {
    ss_philox4x32 c;
    for (int i = 0; i < 4; ++i) c.v[i] = k.ctr[i];
    const ss_philox4x32 r = ss_philox4x32_10(c, k.key[0], k.key[1]);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(r.v[i], k.out[i]) << "word " << i;
  }
}

TEST(Philox, UniformIndexCoversRangeEvenly) {
  std::vector<int> hist(7, 0);
  for (std::uint32_t k = 0; k < 70000; ++k) {
    const std::uint32_t i = ss_uniform_index(ss_ransac_draw(42, k / 4, k % 4), 7);
    ASSERT_LT(i, 7u);
    ++hist[i];
  }
  for (int c : hist) EXPECT_NEAR(c, 10000, 500);  // about 5 standard deviations
}

TEST(Options, CheckRejectsOutOfRange) {
  RansacOptions o;
  EXPECT_NO_THROW(o.check());
  o.threshold_px = 0;
  EXPECT_THROW(o.check(), Error);
  o = {};
  o.confidence = 1.0;
  EXPECT_THROW(o.check(), Error);
  o = {};
  o.max_iterations = 0;
  EXPECT_THROW(o.check(), Error);
  o = {};
  o.min_iterations = 20000;
  EXPECT_THROW(o.check(), Error);
  EXPECT_EQ(parse_geometry_model("Affine"), GeometryModel::kAffine);
  EXPECT_THROW(parse_geometry_model("projective"), Error);
  EXPECT_EQ(RansacOptions{}.required_inliers(), 8);
}

TEST(FitModel, ExactOnNoiseFreePoints) {
  for (auto model : {GeometryModel::kHomography, GeometryModel::kAffine, GeometryModel::kSimilarity}) {
    const Mat3 truth = true_model(model);
    const Planted p = plant(truth, 50, 0.0, 0.0, 7);
    Mat3 h;
    ASSERT_TRUE(fit_model(model, p.moving, p.fixed, h)) << to_string(model);
    EXPECT_LT(corner_error(h, truth, 640, 480), 1e-6) << to_string(model);
    EXPECT_DOUBLE_EQ(h[8], 1.0);
  }
}

TEST(FitModel, RefusesCollinearPoints) {
  std::vector<Point2> m, f;
  for (int i = 0; i < 20; ++i) {
    m.push_back({10.0 + 5 * i, 20.0 + 3 * i});
    f.push_back({30.0 + 4 * i, 10.0 - 2 * i});
  }
  Mat3 h;
  EXPECT_FALSE(fit_model(GeometryModel::kHomography, m, f, h));
  EXPECT_FALSE(fit_model(GeometryModel::kAffine, m, f, h));
}

TEST(InvertModel, InverseTimesModelIsIdentity) {
  const Mat3 h = true_model(GeometryModel::kHomography);
  const Mat3 inv = invert_model(h);
  const Point2 p{123.5, 77.25};
  const Point2 q = apply_model(inv, apply_model(h, p));
  EXPECT_NEAR(q.x, p.x, 1e-9);
  EXPECT_NEAR(q.y, p.y, 1e-9);
  EXPECT_THROW(invert_model(Mat3{1, 2, 3, 2, 4, 6, 0, 0, 0}), Error);
}

// Planted models with 10 %..90 % outliers: every reported inlier within the threshold, recall of the
// true inliers >= 0.8, corner error of the model bounded.
class Planted_ : public ::testing::TestWithParam<std::tuple<GeometryModel, double>> {};

TEST_P(Planted_, FindsModelWithinBounds) {
  const auto [model, outliers] = GetParam();
  const Mat3 truth = true_model(model);
  const int n = 400;
  const double sigma = 0.5;
  const Planted p = plant(truth, n, outliers, sigma, 1234 + std::uint64_t(outliers * 100));
  auto ctx = cpu_context();
  RansacOptions o;
  o.model = model;
  o.threshold_px = 3.0;
  o.max_iterations = 200000;  // 90 % outliers with a 4-point sample needs about 69 000 iterations
  const ModelEstimate r = estimate_model(ctx, p.moving, p.fixed, o);
  ASSERT_TRUE(r.found) << to_string(model) << " outliers " << outliers;
  ASSERT_EQ(r.inlier_mask.size(), std::size_t(n));
  int reported = 0, true_in = 0, hit = 0;
  double sum2 = 0;
  for (int i = 0; i < n; ++i) {
    const Point2 q = apply_model(r.matrix, p.moving[std::size_t(i)]);
    const double e = std::hypot(q.x - p.fixed[std::size_t(i)].x, q.y - p.fixed[std::size_t(i)].y);
    if (r.inlier_mask[std::size_t(i)]) {
      ++reported;
      sum2 += e * e;
      EXPECT_LE(e, o.threshold_px) << "reported inlier " << i << " is outside the threshold";
    } else {
      EXPECT_GT(e, o.threshold_px) << "point " << i << " within the threshold is not reported";
    }
    true_in += p.inlier[std::size_t(i)];
    hit += p.inlier[std::size_t(i)] && r.inlier_mask[std::size_t(i)];
  }
  EXPECT_EQ(reported, r.inliers);
  EXPECT_GE(double(hit) / true_in, 0.8) << "recall";
  EXPECT_NEAR(r.rms_px, std::sqrt(sum2 / reported), 1e-9);
  // Noise of 0.5 px per coordinate: the inlier RMS is about 0.7 px.
  EXPECT_LT(r.rms_px, 1.0);
  const double ce = corner_error(r.matrix, truth, 640, 480);
  EXPECT_LT(ce, outliers >= 0.85 ? 1.5 : 1.0) << "corner error " << ce;
  EXPECT_GT(r.iterations, 0);
  EXPECT_LE(r.iterations, o.max_iterations);
}

INSTANTIATE_TEST_SUITE_P(Outliers, Planted_,
                         ::testing::Combine(::testing::Values(GeometryModel::kHomography, GeometryModel::kAffine,
                                                              GeometryModel::kSimilarity),
                                            ::testing::Values(0.1, 0.3, 0.5, 0.7, 0.9)),
                         [](const auto& test_info) {
                           return std::string(to_string(std::get<0>(test_info.param))) + "_" +
                                  std::to_string(int(std::lround(std::get<1>(test_info.param) * 100))) + "pct";
                         });

TEST(Ransac, AdaptiveIterationCountFollowsInlierRatio) {
  auto ctx = cpu_context();
  const Planted easy = plant(true_model(GeometryModel::kHomography), 400, 0.1, 0.5, 3);
  const Planted hard = plant(true_model(GeometryModel::kHomography), 400, 0.6, 0.5, 3);
  const ModelEstimate a = estimate_model(ctx, easy.moving, easy.fixed);
  const ModelEstimate b = estimate_model(ctx, hard.moving, hard.fixed);
  ASSERT_TRUE(a.found && b.found);
  // w = 0.9: N = log(0.001) / log(1 - 0.9^4) = 7; w = 0.4: N = 267. Allow for the noise in w.
  EXPECT_LT(a.iterations, 30);
  EXPECT_GT(b.iterations, 100);
  EXPECT_LT(b.iterations, 600);
}

TEST(Ransac, SameSeedSameResultAnyThreadCount) {
  // 3000 points: batches of 128 hypotheses are scored on several threads (small ones run serially).
  const Planted p = plant(true_model(GeometryModel::kHomography), 3000, 0.8, 0.7, 11);
  RansacOptions o;
  o.seed = 99;
  o.min_iterations = 1000;
  auto c1 = cpu_context(1);
  auto c2 = cpu_context(2);
  const ModelEstimate a = estimate_model(c1, p.moving, p.fixed, o);
  const ModelEstimate b = estimate_model(c2, p.moving, p.fixed, o);
  const ModelEstimate c = estimate_model(c2, p.moving, p.fixed, o);
  ASSERT_TRUE(a.found);
  for (const ModelEstimate* x : {&b, &c}) {
    EXPECT_EQ(a.matrix, x->matrix);  // bit for bit
    EXPECT_EQ(a.inlier_mask, x->inlier_mask);
    EXPECT_EQ(a.iterations, x->iterations);
    EXPECT_EQ(a.rms_px, x->rms_px);
  }
}

TEST(Ransac, DifferentSeedsFindTheSameModel) {
  const Mat3 truth = true_model(GeometryModel::kHomography);
  const Planted p = plant(truth, 300, 0.6, 0.5, 12);
  auto ctx = cpu_context();
  std::vector<Mat3> raw;
  for (std::uint64_t seed : {1ull, 2ull, 3ull, 0xdeadbeefcafeull}) {
    RansacOptions o;
    o.seed = seed;
    RansacOptions plain = o;  // without local optimisation and refinement: the raw best sample's model
    plain.local_optimization = false;
    plain.refine = false;
    const ModelEstimate q = estimate_model(ctx, p.moving, p.fixed, plain);
    ASSERT_TRUE(q.found) << "seed " << seed;
    EXPECT_LT(corner_error(q.matrix, truth, 640, 480), 3.0) << "seed " << seed;
    raw.push_back(q.matrix);
    const ModelEstimate r = estimate_model(ctx, p.moving, p.fixed, o);
    ASSERT_TRUE(r.found) << "seed " << seed;
    EXPECT_LT(corner_error(r.matrix, truth, 640, 480), 1.0) << "seed " << seed;
  }
  // Different seeds draw different samples: their best minimal-sample models differ.
  for (std::size_t i = 1; i < raw.size(); ++i) EXPECT_NE(raw[i], raw[0]);
}

TEST(Ransac, MsacRankingFindsPlantedModelDeterministically) {
  const Mat3 truth = true_model(GeometryModel::kHomography);
  const Planted p = plant(truth, 400, 0.5, 0.5, 21);
  auto ctx = cpu_context();
  RansacOptions o;
  o.msac = true;
  const ModelEstimate a = estimate_model(ctx, p.moving, p.fixed, o);
  const ModelEstimate b = estimate_model(ctx, p.moving, p.fixed, o);
  ASSERT_TRUE(a.found);
  EXPECT_LT(corner_error(a.matrix, truth, 640, 480), 1.0);
  EXPECT_EQ(a.matrix, b.matrix);
  int hit = 0, true_in = 0;
  for (std::size_t i = 0; i < p.inlier.size(); ++i) {
    true_in += p.inlier[i];
    hit += p.inlier[i] && a.inlier_mask[i];
  }
  EXPECT_GE(double(hit) / true_in, 0.8);
}

TEST(Ransac, CollinearInputGivesNoModel) {
  std::vector<Point2> m, f;
  for (int i = 0; i < 100; ++i) {
    m.push_back({3.0 * i, 2.0 * i + 5});
    f.push_back({2.5 * i + 10, 1.0 * i - 3});
  }
  auto ctx = cpu_context();
  for (auto model : {GeometryModel::kHomography, GeometryModel::kAffine}) {
    RansacOptions o;
    o.model = model;
    const ModelEstimate r = estimate_model(ctx, m, f, o);
    EXPECT_FALSE(r.found) << to_string(model);
    EXPECT_EQ(r.inlier_mask, std::vector<std::uint8_t>(100, 0));
    EXPECT_EQ(r.iterations, o.max_iterations) << "every sample is degenerate";
  }
}

TEST(Ransac, CoincidentOrTooFewPointsGiveNoModel) {
  auto ctx = cpu_context();
  const std::vector<Point2> same(50, Point2{10, 10});
  for (auto model : {GeometryModel::kHomography, GeometryModel::kAffine, GeometryModel::kSimilarity}) {
    RansacOptions o;
    o.model = model;
    EXPECT_FALSE(estimate_model(ctx, same, same, o).found);
    EXPECT_FALSE(estimate_model(ctx, {}, {}, o).found);
    const std::vector<Point2> three{{0, 0}, {10, 0}, {0, 10}};
    if (model == GeometryModel::kHomography) {
      EXPECT_FALSE(estimate_model(ctx, three, three, o).found);
    }
  }
}

TEST(Ransac, UnrelatedPointsGiveNoModel) {
  // Independent random points in both images (images that do not overlap): no model.
  Rng rng(5);
  std::vector<Point2> m, f;
  for (int i = 0; i < 300; ++i) {
    m.push_back({rng.uniform(0, 640), rng.uniform(0, 480)});
    f.push_back({rng.uniform(0, 640), rng.uniform(0, 480)});
  }
  auto ctx = cpu_context();
  for (auto model : {GeometryModel::kHomography, GeometryModel::kAffine, GeometryModel::kSimilarity}) {
    RansacOptions o;
    o.model = model;
    const ModelEstimate r = estimate_model(ctx, m, f, o);
    EXPECT_FALSE(r.found) << to_string(model) << " found " << r.inliers << " inliers";
  }
}

TEST(Ransac, RejectsBadArguments) {
  auto ctx = cpu_context();
  std::vector<Point2> a(10), b(9);
  EXPECT_THROW(estimate_model(ctx, a, b), Error);
  b.resize(10);
  b[3].x = std::nan("");
  EXPECT_THROW(estimate_model(ctx, a, b), Error);
}

// ---- warping --------------------------------------------------------------------------------------

namespace {
template <class T>
Image ramp(int w, int h, int ch, PixelType t, double scale) {
  Image im = Image::allocate(w, h, ch, t);
  T* p = im.as<T>();
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int c = 0; c < ch; ++c) p[(std::size_t(y) * w + x) * ch + c] = T(scale * ((x * 7 + y * 13 + c * 29) % 97));
  return im;
}
}  // namespace

TEST(Warp, IdentityKeepsEveryTypeAndChannel) {
  const Mat3 id{1, 0, 0, 0, 1, 0, 0, 0, 1};
  const Image u8 = ramp<std::uint8_t>(37, 23, 3, PixelType::kU8, 2);
  const Image u16 = ramp<std::uint16_t>(37, 23, 1, PixelType::kU16, 600);
  const Image f32 = ramp<float>(37, 23, 2, PixelType::kF32, 0.01);
  for (const Image* im : {&u8, &u16, &f32}) {
    const Image out = warp_image(*im, id, im->width, im->height);
    EXPECT_EQ(out.type, im->type);
    EXPECT_EQ(out.channels, im->channels);
    EXPECT_EQ(out.data, im->data);
  }
}

TEST(Warp, IntegerTranslationShiftsAndBlacksOut) {
  const Image im = ramp<std::uint8_t>(40, 30, 1, PixelType::kU8, 1);
  const Mat3 t{1, 0, 3, 0, 1, 2, 0, 0, 1};  // moving (x, y) -> fixed (x + 3, y + 2)
  const Image out = warp_image(im, t, 40, 30);
  for (int y = 0; y < 30; ++y)
    for (int x = 0; x < 40; ++x) {
      const std::uint8_t v = out.data[std::size_t(y) * 40 + x];
      if (x >= 3 && y >= 2) {
        ASSERT_EQ(v, im.data[std::size_t(y - 2) * 40 + (x - 3)]) << x << "," << y;
      } else {
        ASSERT_EQ(v, 0) << x << "," << y;
      }
    }
}

TEST(Warp, HalfPixelShiftAveragesNeighbours) {
  Image im = Image::allocate(4, 1, 1, PixelType::kF32);
  float* p = im.as<float>();
  p[0] = 0, p[1] = 1, p[2] = 3, p[3] = 7;
  const Mat3 t{1, 0, -0.5, 0, 1, 0, 0, 0, 1};  // fixed x samples moving x + 0.5
  const Image out = warp_image(im, t, 4, 1);
  const float* o = out.as<float>();
  EXPECT_FLOAT_EQ(o[0], 0.5f);
  EXPECT_FLOAT_EQ(o[1], 2.0f);
  EXPECT_FLOAT_EQ(o[2], 5.0f);
  EXPECT_FLOAT_EQ(o[3], 7.0f);  // x = 3.5 is on the half-pixel border: edge value
  const Image cov = warp_coverage(4, 1, t, 4, 1);
  EXPECT_EQ(cov.data, (std::vector<std::uint8_t>{255, 255, 255, 255}));
  const Image cov2 = warp_coverage(4, 1, Mat3{1, 0, 2, 0, 1, 0, 0, 0, 1}, 4, 1);
  EXPECT_EQ(cov2.data, (std::vector<std::uint8_t>{0, 0, 255, 255}));
}

TEST(Warp, ForwardThenInverseRestoresInterior) {
  // A plane a + b x + c y is reproduced exactly by bilinear interpolation (up to rounding to U16).
  Image im = Image::allocate(64, 48, 1, PixelType::kU16);
  for (int y = 0; y < 48; ++y)
    for (int x = 0; x < 64; ++x) im.as<std::uint16_t>()[y * 64 + x] = std::uint16_t(1000 + 300 * x + 200 * y);
  const Mat3 h{0.98, 0.05, 0.25, -0.04, 1.01, -0.75, 0, 0, 1};
  const Image there = warp_image(im, h, 64, 48);
  const Image back = warp_image(there, invert_model(h), 64, 48);
  for (int y = 6; y < 42; ++y)
    for (int x = 6; x < 58; ++x) {
      const Point2 q = apply_model(h, Point2{double(x), double(y)});
      ASSERT_NEAR(there.as<std::uint16_t>()[int(std::lround(q.y)) * 64 + int(std::lround(q.x))],
                  1000 + 300 * x + 200 * y, 300 * 0.6 + 200 * 0.6 + 1)  // nearest output pixel, < 0.5 px away
          << x << "," << y;
      ASSERT_NEAR(back.as<std::uint16_t>()[y * 64 + x], 1000 + 300 * x + 200 * y, 1.0) << x << "," << y;
    }
}

TEST(Warp, RejectsBadInput) {
  const Mat3 id{1, 0, 0, 0, 1, 0, 0, 0, 1};
  EXPECT_THROW(warp_image(Image{}, id, 10, 10), Error);
  const Image im = Image::allocate(4, 4, 1, PixelType::kU8);
  EXPECT_THROW(warp_image(im, id, 0, 10), Error);
  EXPECT_THROW(warp_image(im, Mat3{0, 0, 0, 0, 0, 0, 0, 0, 0}, 4, 4), Error);
}

TEST(Overlay, CheckerboardAndBlendTakeTheRightSources) {
  Image fixed = Image::allocate(8, 4, 1, PixelType::kU8);
  Image warped = Image::allocate(8, 4, 3, PixelType::kU8);
  std::fill(fixed.data.begin(), fixed.data.end(), std::uint8_t(200));
  for (std::size_t i = 0; i < warped.pixel_count(); ++i) {
    warped.data[i * 3] = 10, warped.data[i * 3 + 1] = 20, warped.data[i * 3 + 2] = 30;
  }
  const Image cb = overlay_checkerboard(fixed, warped, 2);
  ASSERT_EQ(cb.channels, 3);
  EXPECT_EQ(cb.data[0], 200);                    // tile (0, 0): fixed
  EXPECT_EQ(cb.data[(0 * 8 + 2) * 3 + 0], 10);   // tile (1, 0): warped
  EXPECT_EQ(cb.data[(2 * 8 + 2) * 3 + 1], 200);  // tile (1, 1): fixed
  const Image bl = overlay_blend(fixed, warped);
  EXPECT_EQ(bl.data[0], 200);
  EXPECT_EQ(bl.data[2], 200);
  EXPECT_EQ(bl.data[1], (4899 * 10 + 9617 * 20 + 1868 * 30 + 8192) >> 14);
  EXPECT_THROW(overlay_blend(fixed, Image::allocate(7, 4, 1, PixelType::kU8)), Error);
}

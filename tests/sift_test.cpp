// CPU SIFT: option checks, constructed truth (Gaussian blobs, a 90-degree rotation), determinism,
// max_features / mask / RootSIFT semantics, input types, and agreement with OpenCV's cv::SIFT.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "spectrasift/context.hpp"
#include "spectrasift/error.hpp"
#include "spectrasift/io.hpp"
#include "sift_backend_conformance.hpp"
#include "sift_batch_check.hpp"
#include "spectrasift/sift.hpp"

#ifdef SPECTRASIFT_HAVE_OPENCV
#include <opencv2/core.hpp>
#include <opencv2/features2d.hpp>
#include <opencv2/imgcodecs.hpp>
#endif

namespace ss = spectrasift;

namespace {

ss::Context cpu_context(int threads = 2) {
  ss::ContextOptions o;
  o.backend = ss::Backend::kCpu;
  o.threads = threads;
  return ss::Context(o);
}

// A smooth random texture (sum of Gaussian bumps of several scales) in grey levels 0..255, integer valued.
ss::ImageF texture(int w, int h, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> ux(0, w), uy(0, h), us(1.5, 8.0), ua(-90, 90);
  std::vector<double> acc(std::size_t(w) * h, 128.0);
  for (int b = 0; b < 120; ++b) {
    const double cx = ux(rng), cy = uy(rng), s = us(rng), a = ua(rng);
    const int r = int(4 * s) + 1;
    for (int y = std::max(0, int(cy) - r); y < std::min(h, int(cy) + r + 1); ++y)
      for (int x = std::max(0, int(cx) - r); x < std::min(w, int(cx) + r + 1); ++x)
        acc[std::size_t(y) * w + x] += a * std::exp(-((x - cx) * (x - cx) + (y - cy) * (y - cy)) / (2 * s * s));
  }
  ss::ImageF im;
  im.width = w;
  im.height = h;
  im.data.resize(acc.size());
  for (std::size_t i = 0; i < acc.size(); ++i) im.data[i] = float(std::clamp(std::round(acc[i]), 0.0, 255.0));
  return im;
}

bool same_features(const ss::Features& a, const ss::Features& b) {
  if (a.size() != b.size() || a.descriptors.size() != b.descriptors.size()) return false;
  if (!a.keypoints.empty() &&
      std::memcmp(a.keypoints.data(), b.keypoints.data(), a.keypoints.size() * sizeof(ss::Keypoint)) != 0)
    return false;
  return a.descriptors.empty() ||
         std::memcmp(a.descriptors.data(), b.descriptors.data(), a.descriptors.size() * sizeof(float)) == 0;
}

double angle_diff(double a, double b) {
  double d = std::fmod(std::abs(a - b), 360.0);
  return std::min(d, 360.0 - d);
}

ss::ErrorCode code_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ss::Error& e) {
    return e.code();
  }
  return ss::ErrorCode::kInternal;  // "nothing thrown" is reported as kInternal, which no check expects
}

}  // namespace

TEST(SiftOptions, DefaultsAreValidAndMatchOpenCV) {
  ss::SiftOptions o;
  EXPECT_NO_THROW(o.check());
  EXPECT_EQ(o.octave_layers, 3);
  EXPECT_DOUBLE_EQ(o.sigma, 1.6);
  EXPECT_DOUBLE_EQ(o.contrast_threshold, 0.04);
  EXPECT_DOUBLE_EQ(o.edge_threshold, 10.0);
  EXPECT_TRUE(o.upsample);
  EXPECT_EQ(o.max_features, 0);
  EXPECT_FALSE(o.root_sift);
}

TEST(SiftOptions, CheckRejectsInvalidValues) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<ss::SiftOptions> bad(13);
  bad[0].octave_layers = 0;
  bad[1].octave_layers = 11;
  bad[2].sigma = 0;
  bad[3].sigma = -1;
  bad[4].sigma = nan;
  bad[5].contrast_threshold = -0.01;
  bad[6].contrast_threshold = nan;
  bad[7].edge_threshold = 0;
  bad[8].edge_threshold = inf;
  bad[9].max_features = -1;
  bad[10].sigma = inf;
  bad[11].descriptor_type = ss::DescriptorType::kU8;  // RootSIFT values are not bytes
  bad[11].root_sift = true;
  bad[12].descriptor_type = ss::DescriptorType(7);
  for (std::size_t i = 0; i < bad.size(); ++i)
    EXPECT_EQ(code_of([&] { bad[i].check(); }), ss::ErrorCode::kInvalidArgument) << "case " << i;
  // The entry point checks them too, before any work.
  auto ctx = cpu_context();
  const ss::ImageF im = texture(64, 64, 1);
  EXPECT_EQ(code_of([&] { ss::detect_and_compute(ctx, im, bad[0]); }), ss::ErrorCode::kInvalidArgument);
  ss::SiftOptions ok;
  ok.octave_layers = 10;
  ok.contrast_threshold = 0;
  EXPECT_NO_THROW(ok.check());
}

TEST(Sift, EmptyOrMalformedImageThrowsInvalidArgument) {
  auto ctx = cpu_context();
  EXPECT_EQ(code_of([&] { ss::detect_and_compute(ctx, ss::Image{}); }), ss::ErrorCode::kInvalidArgument);
  EXPECT_EQ(code_of([&] { ss::detect_and_compute(ctx, ss::ImageF{}); }), ss::ErrorCode::kInvalidArgument);
  ss::ImageF zero_rows;
  zero_rows.width = 10;
  EXPECT_EQ(code_of([&] { ss::detect_and_compute(ctx, zero_rows); }), ss::ErrorCode::kInvalidArgument);
  ss::ImageF short_buffer;
  short_buffer.width = 10;
  short_buffer.height = 10;
  short_buffer.data.resize(99);
  EXPECT_EQ(code_of([&] { ss::detect_and_compute(ctx, short_buffer); }), ss::ErrorCode::kInvalidArgument);
  // A mask of the wrong size or with several channels.
  const ss::ImageF im = texture(64, 48, 2);
  const ss::Image small_mask = ss::Image::allocate(32, 48, 1, ss::PixelType::kU8);
  EXPECT_EQ(code_of([&] { ss::detect_and_compute(ctx, im, {}, &small_mask); }), ss::ErrorCode::kInvalidArgument);
  const ss::Image rgb_mask = ss::Image::allocate(64, 48, 3, ss::PixelType::kU8);
  EXPECT_EQ(code_of([&] { ss::detect_and_compute(ctx, im, {}, &rgb_mask); }), ss::ErrorCode::kInvalidArgument);
}

TEST(Sift, TinyImagesGiveNoFeaturesWithoutFailing) {
  auto ctx = cpu_context();
  for (int s : {1, 2, 3, 7, 12}) {
    ss::ImageF im;
    im.width = s;
    im.height = s + 1;
    im.data.assign(std::size_t(s) * (s + 1), 100.0f);
    ss::Features f;
    ASSERT_NO_THROW(f = ss::detect_and_compute(ctx, im)) << s;
    EXPECT_EQ(f.size(), 0u) << s;
  }
}

// Constructed truth: isolated Gaussian blobs of std s at known sub-pixel positions on a flat background.
// (Positions whose octave-grid coordinate is a half integer are avoided: there the Newton steps of
// OpenCV, and ours, oscillate and the blob is rejected.) Each must be found within 0.5 px of its centre
// + 0.25 px (OpenCV 4.6's documented offset, notes §10), with size = 2 sigma close to 1.78 s (notes §6: the DoG scale of a Gaussian blob is 0.89 s).
TEST(Sift, GaussianBlobsAreFoundAtTheirPositionAndScale) {
  struct Blob { double x, y, s; };
  const std::vector<Blob> blobs = {{40.3, 50.6, 2.0}, {120.7, 45.2, 3.0}, {210.1, 60.9, 4.0},
                                   {60.6, 170.4, 5.0}, {175.4, 180.9, 7.0}, {300.6, 120.3, 10.0}};
  ss::ImageF im;
  im.width = 400;
  im.height = 280;
  im.data.assign(std::size_t(im.width) * im.height, 40.0f);
  for (int y = 0; y < im.height; ++y)
    for (int x = 0; x < im.width; ++x) {
      double v = 40.0;
      for (const auto& b : blobs)
        v += 160.0 * std::exp(-((x - b.x) * (x - b.x) + (y - b.y) * (y - b.y)) / (2 * b.s * b.s));
      im.at(x, y) = float(v);
    }
  auto ctx = cpu_context();
  const ss::Features f = ss::detect_and_compute(ctx, im);
  ASSERT_GE(f.size(), blobs.size());
  for (const auto& b : blobs) {
    const ss::Keypoint* best = nullptr;
    double best_d = 1e9;
    for (const auto& k : f.keypoints) {
      const double d = std::hypot(k.x - (b.x + 0.25), k.y - (b.y + 0.25));
      if (d < best_d) { best_d = d; best = &k; }
    }
    ASSERT_NE(best, nullptr);
    EXPECT_LT(best_d, 0.5) << "blob at " << b.x << "," << b.y << " s=" << b.s;
    EXPECT_NEAR(best->size / (1.78 * b.s), 1.0, 0.06) << "blob s=" << b.s << " size " << best->size;
    EXPECT_GT(best->response, 0.0f);
  }
}

// Rotating the image by 90 degrees clockwise on screen (y down) rotates every orientation by +90 degrees.
// Without upsampling and with an odd side, the rotation maps the pixels kept by every octave's
// even-pixel downsampling onto each other, so the scale space itself is rotated exactly (up to float
// rounding): every keypoint must reappear at its rotated position with its angle + 90.
TEST(Sift, RotationBy90DegreesRotatesOrientations) {
  const int n = 193;
  const ss::ImageF im = texture(n, n, 7);
  ss::ImageF rot = im;
  for (int y = 0; y < n; ++y)
    for (int x = 0; x < n; ++x) rot.at(x, y) = im.at(y, n - 1 - x);  // old (x, y) -> new (n-1-y, x)
  auto ctx = cpu_context();
  ss::SiftOptions o;
  o.upsample = false;
  const ss::Features a = ss::detect_and_compute(ctx, im, o);
  const ss::Features b = ss::detect_and_compute(ctx, rot, o);
  ASSERT_GT(a.size(), 40u);
  std::size_t matched = 0;
  std::vector<double> angle_err;
  for (const auto& k : a.keypoints) {
    const double ex = n - 1 - k.y, ey = k.x;
    const ss::Keypoint* best = nullptr;
    double best_d = 0.05;
    for (const auto& q : b.keypoints) {
      const double d = std::hypot(q.x - ex, q.y - ey);
      if (d < best_d && std::abs(q.size - k.size) < 1e-3 * k.size && angle_diff(q.angle, k.angle + 90) < 1.0) {
        best_d = d;
        best = &q;
      }
    }
    if (!best) continue;
    ++matched;
    angle_err.push_back(angle_diff(best->angle, k.angle + 90));
  }
  EXPECT_GE(double(matched) / double(a.size()), 0.97) << matched << " of " << a.size();
  // The polynomial atan2 is not exactly equivariant (0.01 degree), which can move a border sample to
  // the next bin, so a few angles move by a fraction of a degree; most are unchanged.
  std::sort(angle_err.begin(), angle_err.end());
  ASSERT_FALSE(angle_err.empty());
  EXPECT_LT(angle_err[angle_err.size() / 2], 0.01);
  // The upsampled default is only close to equivariant (the +0.25 px offset does not rotate), so
  // only the count is compared there.
  const double na = double(ss::detect_and_compute(ctx, im).size());
  const double nb = double(ss::detect_and_compute(ctx, rot).size());
  EXPECT_NEAR(nb / na, 1.0, 0.15);
}

TEST(Sift, DeterministicAcrossRunsAndThreadCounts) {
  const ss::ImageF im = texture(300, 220, 3);
  auto c1 = cpu_context(1);
  auto c2 = cpu_context(2);
  const ss::Features a = ss::detect_and_compute(c2, im);
  const ss::Features b = ss::detect_and_compute(c2, im);
  const ss::Features c = ss::detect_and_compute(c1, im);
  ASSERT_GT(a.size(), 50u);
  EXPECT_TRUE(same_features(a, b));
  EXPECT_TRUE(same_features(a, c));
  // The canonical order: octave, layer, y, x, angle.
  for (std::size_t i = 1; i < a.size(); ++i) {
    const auto& p = a.keypoints[i - 1];
    const auto& q = a.keypoints[i];
    const bool ordered = p.octave < q.octave ||
                         (p.octave == q.octave && (p.layer < q.layer ||
                          (p.layer == q.layer && (p.y < q.y || (p.y == q.y && (p.x < q.x ||
                          (p.x == q.x && p.angle <= q.angle)))))));
    ASSERT_TRUE(ordered) << "at " << i;
  }
}

TEST(Sift, KeypointFieldsAndDescriptorsHaveOpenCVRanges) {
  const ss::ImageF im = texture(256, 256, 11);
  auto ctx = cpu_context();
  const ss::Features f = ss::detect_and_compute(ctx, im);
  ASSERT_GT(f.size(), 20u);
  EXPECT_EQ(f.image_width, 256);
  EXPECT_EQ(f.image_height, 256);
  ASSERT_EQ(f.descriptors.size(), f.size() * 128);
  for (std::size_t i = 0; i < f.size(); ++i) {
    const auto& k = f.keypoints[i];
    EXPECT_GE(k.octave, -1);
    EXPECT_GE(k.layer, 1);
    EXPECT_LE(k.layer, 3);
    EXPECT_LE(std::abs(k.layer_offset), 0.5f);
    EXPECT_GE(k.angle, 0.0f);
    EXPECT_LT(k.angle, 360.0f);
    EXPECT_GE(k.response * 3, 0.04f);
    EXPECT_GE(k.x, 0.0f);
    EXPECT_LT(k.x, 256.0f);
    double n2 = 0;
    for (int t = 0; t < 128; ++t) {
      const float v = f.descriptor(i)[t];
      EXPECT_EQ(v, std::round(v));
      EXPECT_GE(v, 0.0f);
      EXPECT_LE(v, 255.0f);
      n2 += double(v) * v;
    }
    EXPECT_NEAR(std::sqrt(n2), 512.0, 6.0);  // rounding to integers moves the norm slightly off 512
  }
}

TEST(Sift, MaxFeaturesKeepsTheStrongest) {
  const ss::ImageF im = texture(320, 240, 5);
  auto ctx = cpu_context();
  const ss::Features all = ss::detect_and_compute(ctx, im);
  ASSERT_GT(all.size(), 120u);
  ss::SiftOptions o;
  o.max_features = 100;
  const ss::Features best = ss::detect_and_compute(ctx, im, o);
  std::vector<float> r;
  for (const auto& k : all.keypoints) r.push_back(k.response);
  std::sort(r.begin(), r.end(), std::greater<float>());
  const float cut = r[99];
  const auto expected = std::count_if(all.keypoints.begin(), all.keypoints.end(),
                                      [&](const ss::Keypoint& k) { return k.response >= cut; });
  EXPECT_GE(best.size(), 100u);
  EXPECT_EQ(std::ptrdiff_t(best.size()), expected);  // ties at the cut are all kept, as OpenCV
  // The kept ones are exactly the strongest of the full run, with the same descriptors.
  std::size_t j = 0;
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (all.keypoints[i].response < cut) continue;
    ASSERT_LT(j, best.size());
    EXPECT_EQ(std::memcmp(&all.keypoints[i], &best.keypoints[j], sizeof(ss::Keypoint)), 0);
    EXPECT_EQ(std::memcmp(all.descriptor(i), best.descriptor(j), 128 * sizeof(float)), 0);
    ++j;
  }
  EXPECT_EQ(j, best.size());
}

TEST(Sift, MaskDropsKeypoints) {
  const ss::ImageF im = texture(240, 200, 9);
  ss::Image mask = ss::Image::allocate(240, 200, 1, ss::PixelType::kU8);
  for (int y = 0; y < 200; ++y)
    for (int x = 120; x < 240; ++x) mask.data[std::size_t(y) * 240 + x] = 255;  // right half only
  auto ctx = cpu_context();
  const ss::Features all = ss::detect_and_compute(ctx, im);
  const ss::Features masked = ss::detect_and_compute(ctx, im, {}, &mask);
  std::size_t expected = 0;
  for (const auto& k : all.keypoints) expected += int(k.x + 0.5f) >= 120;
  ASSERT_GT(expected, 10u);
  ASSERT_LT(expected, all.size());
  EXPECT_EQ(masked.size(), expected);
  for (const auto& k : masked.keypoints) EXPECT_GE(int(k.x + 0.5f), 120);
  // An all-zero mask drops everything.
  const ss::Image zero = ss::Image::allocate(240, 200, 1, ss::PixelType::kU8);
  EXPECT_EQ(ss::detect_and_compute(ctx, im, {}, &zero).size(), 0u);
}

TEST(Sift, U8U16AndF32InputsGiveIdenticalFeatures) {
  const ss::ImageF g = texture(200, 160, 13);
  ss::Image u8 = ss::Image::allocate(200, 160, 1, ss::PixelType::kU8);
  ss::Image u16 = ss::Image::allocate(200, 160, 1, ss::PixelType::kU16);
  ss::Image f32 = ss::Image::allocate(200, 160, 1, ss::PixelType::kF32);
  for (std::size_t i = 0; i < g.data.size(); ++i) {
    const int v = int(g.data[i]);
    u8.data[i] = std::uint8_t(v);
    u16.as<std::uint16_t>()[i] = std::uint16_t(v * 257);
    f32.as<float>()[i] = float(v) / 255.0f;
  }
  auto ctx = cpu_context();
  const ss::Features a = ss::detect_and_compute(ctx, u8);
  const ss::Features b = ss::detect_and_compute(ctx, u16);
  const ss::Features c = ss::detect_and_compute(ctx, f32);
  const ss::Features d = ss::detect_and_compute(ctx, g);
  ASSERT_GT(a.size(), 20u);
  EXPECT_TRUE(same_features(a, b));
  EXPECT_TRUE(same_features(a, c));
  EXPECT_TRUE(same_features(a, d));
}

// RootSIFT: each row r satisfies sum((r / 512)^2) = 1, i.e. the squared values are the L1-normalised
// default descriptor, and r = 512 sqrt(v / sum(v)) elementwise.
TEST(Sift, RootSiftRowsAreSquareRootsOfL1NormalisedDescriptors) {
  const ss::ImageF im = texture(200, 200, 17);
  auto ctx = cpu_context();
  const ss::Features plain = ss::detect_and_compute(ctx, im);
  ss::SiftOptions o;
  o.root_sift = true;
  const ss::Features root = ss::detect_and_compute(ctx, im, o);
  ASSERT_EQ(plain.size(), root.size());
  ASSERT_GT(root.size(), 10u);
  for (std::size_t i = 0; i < root.size(); ++i) {
    double l1 = 0, sq = 0;
    for (int t = 0; t < 128; ++t) {
      l1 += plain.descriptor(i)[t];
      const double r = root.descriptor(i)[t] / 512.0;
      sq += r * r;
    }
    EXPECT_NEAR(sq, 1.0, 1e-5);
    for (int t = 0; t < 128; ++t)
      EXPECT_NEAR(root.descriptor(i)[t], 512.0 * std::sqrt(plain.descriptor(i)[t] / l1), 1e-3);
  }
}

// u8 descriptors on the CPU backend: the float run's keypoints and values as bytes; matched alike (the CPU
// backend converts them back to floats).
TEST(Sift, U8DescriptorsAreTheFloatValuesAndMatchAlike) {
  auto ctx = cpu_context();
  ss::test::check_u8_descriptors(ctx);
}

// Features::to_u8 and the two conversions: exact for integer values, refused for others; the names.
TEST(Features, DescriptorTypeConversions) {
  ss::Features f;
  f.keypoints.resize(2);
  f.descriptors.assign(256, 0.0f);
  for (int i = 0; i < 256; ++i) f.descriptors[std::size_t(i)] = float(i % 256);
  const ss::Features u = f.to_u8();
  EXPECT_EQ(u.descriptor_type, ss::DescriptorType::kU8);
  EXPECT_TRUE(u.descriptors.empty());
  ASSERT_EQ(u.descriptor_bytes.size(), 256u);
  for (int i = 0; i < 256; ++i) EXPECT_EQ(u.descriptor_bytes[std::size_t(i)], std::uint8_t(i));
  EXPECT_EQ(u.descriptors_f32(), f.descriptors);
  EXPECT_EQ(u.descriptors_u8(), f.descriptors_u8());
  EXPECT_EQ(u.descriptor_u8(1)[5], 133);
  EXPECT_EQ(u.descriptor_values(), 256u);
  EXPECT_EQ(f.keypoints.size(), 2u);  // the const overload copies
  for (float bad : {0.5f, -1.0f, 256.0f, std::numeric_limits<float>::quiet_NaN()}) {
    ss::Features g = f;
    g.descriptors[200] = bad;
    EXPECT_EQ(code_of([&] { (void)g.to_u8(); }), ss::ErrorCode::kInvalidArgument) << bad;
  }
  EXPECT_EQ(ss::parse_descriptor_type("U8"), ss::DescriptorType::kU8);
  EXPECT_EQ(ss::parse_descriptor_type("float32"), ss::DescriptorType::kF32);
  EXPECT_STREQ(ss::to_string(ss::DescriptorType::kU8), "u8");
  EXPECT_EQ(code_of([] { ss::parse_descriptor_type("f16"); }), ss::ErrorCode::kInvalidArgument);
}

TEST(Sift, EveryGpuBackendRunsSift) {
  // OpenCL and CUDA both have SIFT (tests/sift_opencl_test.cpp, tests/sift_cuda_test.cpp): asked for
  // explicitly, each runs it on its device (no "not implemented" error) and finds the texture's keypoints.
  bool ran = false;
  for (const auto& d : ss::list_devices()) {
    if (d.backend == ss::Backend::kCpu) continue;
    ss::ContextOptions o;
    o.backend = d.backend;
    o.device = d.index;
    ss::Context ctx(o);
    const ss::Features f = ss::detect_and_compute(ctx, texture(64, 64, 1));
    EXPECT_FALSE(f.keypoints.empty()) << ss::to_string(d.backend) << " device " << d.index;
    EXPECT_EQ(f.descriptors.size(), f.keypoints.size() * ss::Features::kDescriptorSize);
    ran = true;
  }
  if (!ran) GTEST_SKIP() << "no GPU backend device on this machine";
}

#ifdef SPECTRASIFT_HAVE_OPENCV
namespace {

struct Agreement {
  std::size_t ours = 0, theirs = 0, matched = 0, ours_matched = 0;
  double median_desc = 0, p95_desc = 0;
  double median_px = 0, max_px = 0;  ///< position differences of the matched pairs
};

// A cv::SIFT keypoint is matched if one of ours lies within 1 px, with size within 10 % and angle
// within 10 degrees; precision counts our keypoints that have such a partner among OpenCV's.
// With `our_reader` our side reads the file itself (read_image(file, ReadMode::kGray)), as the CLI does;
// otherwise it is given OpenCV's grey pixels.
Agreement compare_with_opencv(const std::string& file, bool our_reader = false) {
  const cv::Mat img = cv::imread(file, cv::IMREAD_GRAYSCALE);
  EXPECT_FALSE(img.empty()) << file;
  std::vector<cv::KeyPoint> ck;
  cv::Mat cd;
  cv::SIFT::create()->detectAndCompute(img, cv::noArray(), ck, cd);
  ss::ImageF g;
  g.width = img.cols;
  g.height = img.rows;
  g.data.resize(img.total());
  for (int y = 0; y < img.rows; ++y)
    for (int x = 0; x < img.cols; ++x) g.at(x, y) = img.at<std::uint8_t>(y, x);
  auto ctx = cpu_context();
  const ss::Features f = our_reader ? ss::detect_and_compute(ctx, ss::read_image(file, ss::ReadMode::kGray))
                                    : ss::detect_and_compute(ctx, g);
  std::vector<double> px;
  auto close = [](const ss::Keypoint& q, const cv::KeyPoint& k) {
    return std::hypot(q.x - k.pt.x, q.y - k.pt.y) <= 1.0 && std::abs(q.size - k.size) <= 0.1 * k.size &&
           angle_diff(q.angle, k.angle) <= 10.0;
  };
  Agreement a;
  a.ours = f.size();
  a.theirs = ck.size();
  std::vector<double> dist;
  for (std::size_t i = 0; i < ck.size(); ++i) {
    std::size_t best = f.size();
    double best_d = 1e9;
    for (std::size_t j = 0; j < f.size(); ++j) {
      if (!close(f.keypoints[j], ck[i])) continue;
      const double d = std::hypot(f.keypoints[j].x - ck[i].pt.x, f.keypoints[j].y - ck[i].pt.y);
      if (d < best_d) { best_d = d; best = j; }
    }
    if (best == f.size()) continue;
    ++a.matched;
    px.push_back(best_d);
    double s = 0;
    for (int t = 0; t < 128; ++t) {
      const double e = f.descriptor(best)[t] - cd.at<float>(int(i), t);
      s += e * e;
    }
    dist.push_back(std::sqrt(s));
  }
  for (const auto& q : f.keypoints)
    a.ours_matched += std::any_of(ck.begin(), ck.end(), [&](const cv::KeyPoint& k) { return close(q, k); });
  std::sort(px.begin(), px.end());
  if (!px.empty()) {
    a.median_px = px[px.size() / 2];
    a.max_px = px.back();
  }
  std::sort(dist.begin(), dist.end());
  if (!dist.empty()) {
    a.median_desc = dist[dist.size() / 2];
    a.p95_desc = dist[dist.size() * 95 / 100];
  }
  return a;
}

}  // namespace

// Measured on Debian 12 (OpenCV 4.6): box 603/604 matched, camera 791/791, coins 655/655; precision 1.0;
// descriptor L2 distance of matched pairs (descriptor norm 512): median 0, 95th percentile 0.
class SiftVsOpenCV : public ::testing::TestWithParam<const char*> {};

TEST_P(SiftVsOpenCV, KeypointsAndDescriptorsAgree) {
  const std::string file = std::string(SPECTRASIFT_TEST_DATA) + "/" + GetParam();
  const Agreement a = compare_with_opencv(file);
  ASSERT_GT(a.theirs, 100u);
  const double recall = double(a.matched) / double(a.theirs);
  const double precision = double(a.ours_matched) / double(a.ours);
  RecordProperty("recall", std::to_string(recall));
  RecordProperty("precision", std::to_string(precision));
  std::printf("%s: OpenCV %zu, ours %zu, recall %.4f, precision %.4f, descriptor L2 median %.2f p95 %.2f\n",
              GetParam(), a.theirs, a.ours, recall, precision, a.median_desc, a.p95_desc);
  EXPECT_GE(recall, 0.99);
  EXPECT_GE(precision, 0.99);
  EXPECT_LE(a.median_desc, 1.0);
  EXPECT_LE(a.p95_desc, 4.0);
}

INSTANTIATE_TEST_SUITE_P(RealImages, SiftVsOpenCV, ::testing::Values("box.png", "camera.png", "coins.png"));

// A colour JPEG read by us (libjpeg's luma plane, read_image(path, ReadMode::kGray)) gives OpenCV's keypoints
// from cv2.imread(path, IMREAD_GRAYSCALE): the same pixels, so the same positions (issue 20, item 8).
TEST(SiftVsOpenCVFromFile, ColourJpegGivesOpenCvKeypoints) {
  const std::string file = std::string(SPECTRASIFT_TEST_DATA) + "/HappyFish.jpg";
  const Agreement a = compare_with_opencv(file, /*our_reader=*/true);
  ASSERT_GT(a.theirs, 30u);  // a small picture (259 x 194): 43 keypoints
  std::printf("HappyFish.jpg from our reader: OpenCV %zu, ours %zu, matched %zu, position median %.2g max %.2g px, "
              "descriptor L2 median %.2f p95 %.2f\n",
              a.theirs, a.ours, a.matched, a.median_px, a.max_px, a.median_desc, a.p95_desc);
  EXPECT_GE(double(a.matched) / double(a.theirs), 0.99);
  EXPECT_GE(double(a.ours_matched) / double(a.ours), 0.99);
  EXPECT_LE(a.median_px, 1e-3);
  EXPECT_LE(a.median_desc, 1.0);
}
#else
TEST(SiftVsOpenCV, KeypointsAndDescriptorsAgree) { GTEST_SKIP() << "OpenCV C++ (libopencv-dev) not found"; }
#endif

// The batch call on the CPU backend: a loop over the images reusing the plan, each with the single call's bits.
TEST(SiftBatch, EveryImageHasTheSingleCallsBits) {
  ss::Context ctx = cpu_context();
  ss::test::check_batch(ctx);
  ss::test::check_batch_errors(ctx);
}

// Warping on the GPU backends (issue 19 item 3) against the CPU backend: the same output pixels, bit for bit,
// for u8 / u16 / f32 images of 1, 3 and 4 channels, through planted homographies, rotations, shifts that put
// sample points exactly on the half-pixel border, a model whose line at infinity crosses the output, and
// graf1 through its ground-truth homography; bad input gets the CPU backend's errors. Runs on OpenCL (PoCL
// here) and CUDA; a backend that is not on the machine is skipped with a message.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "device_geometry_test_util.hpp"
#include "spectrasift/error.hpp"
#include "spectrasift/geometry.hpp"
#include "spectrasift/io.hpp"

namespace ss = spectrasift;

namespace {

using Mat3 = std::array<double, 9>;

/// A random image whose values cover the type's range (f32: signed values, some non-integers, one NaN).
ss::Image random_image(int w, int h, int channels, ss::PixelType type, std::uint64_t seed) {
  ss::Image im = ss::Image::allocate(w, h, channels, type);
  std::mt19937_64 g(seed);
  const std::size_t n = im.pixel_count() * std::size_t(channels);
  for (std::size_t i = 0; i < n; ++i) {
    switch (type) {
      case ss::PixelType::kU8:
        im.as<std::uint8_t>()[i] = std::uint8_t(g() & 0xFF);
        break;
      case ss::PixelType::kU16:
        im.as<std::uint16_t>()[i] = std::uint16_t(g() & 0xFFFF);
        break;
      case ss::PixelType::kF32:
        im.as<float>()[i] = float(double(std::int64_t(g() % 2000001) - 1000000) / 3.0);
        break;
    }
  }
  if (type == ss::PixelType::kF32) im.as<float>()[n / 2] = std::nanf("");
  return im;
}

/// Whether sample i of two images is the same: the same bits, or NaN in both (a NaN's payload and sign are
/// the processor's: x86 propagates the input's, NVIDIA GPUs return a canonical NaN).
bool same_sample(const ss::Image& a, const ss::Image& b, std::size_t i) {
  const std::size_t bytes = ss::bytes_per_sample(a.type);
  if (std::memcmp(a.data.data() + i * bytes, b.data.data() + i * bytes, bytes) == 0) return true;
  return a.type == ss::PixelType::kF32 && std::isnan(a.as<float>()[i]) && std::isnan(b.as<float>()[i]);
}

/// Every sample the same (same_sample), with the first differing one reported.
void expect_same_image(const ss::Image& cpu, const ss::Image& dev, const std::string& what) {
  ASSERT_EQ(cpu.width, dev.width) << what;
  ASSERT_EQ(cpu.height, dev.height) << what;
  ASSERT_EQ(cpu.channels, dev.channels) << what;
  ASSERT_EQ(cpu.type, dev.type) << what;
  ASSERT_EQ(cpu.data.size(), dev.data.size()) << what;
  const std::size_t samples = cpu.pixel_count() * std::size_t(cpu.channels);
  for (std::size_t i = 0; i < samples; ++i) {
    if (same_sample(cpu, dev, i)) continue;
    const std::size_t px = i / std::size_t(cpu.channels);
    ADD_FAILURE() << what << ": first difference at pixel (" << px % std::size_t(cpu.width) << ", "
                  << px / std::size_t(cpu.width) << ") channel " << i % std::size_t(cpu.channels);
    return;
  }
}

/// Models of every case: planted homography, rotation about the centre with scale, integer and half-pixel
/// shifts (sample points exactly on the -0.5 / w - 0.5 border and on pixel centres), a mirror, and a
/// projective model whose line at infinity crosses the output.
std::vector<std::pair<std::string, Mat3>> models(int w, int h) {
  const double c = std::cos(0.3), s = std::sin(0.3), cx = w / 2.0, cy = h / 2.0;
  return {
      {"planted", {0.92, 0.11, 5.0, -0.07, 1.03, -8.0, 4.1e-4, -2.4e-4, 1.0}},
      {"rotation",
       {1.2 * c, -1.2 * s, cx - 1.2 * (c * cx - s * cy), 1.2 * s, 1.2 * c, cy - 1.2 * (s * cx + c * cy), 0, 0, 1}},
      {"identity", {1, 0, 0, 0, 1, 0, 0, 0, 1}},
      {"half-pixel shift", {1, 0, 0.5, 0, 1, -0.5, 0, 0, 1}},
      {"integer shift", {1, 0, -3, 0, 1, 2, 0, 0, 1}},
      {"mirror", {-1, 0, w - 1.0, 0, 1, 0, 0, 0, 1}},
      {"horizon", {1, 0, 0, 0, 1, 0, 0.02, 0.0, 1}},
  };
}

class WarpBackend : public ::testing::TestWithParam<ss::Backend> {
 protected:
  void SetUp() override {
    std::string why;
    ctx_ = ss::test::device_context_for(GetParam(), ss::detail::Operation::kWarp, why);
    if (!ctx_) GTEST_SKIP() << why;
  }
  std::unique_ptr<ss::Context> ctx_;
};

TEST_P(WarpBackend, EveryTypeAndModelGivesTheCpuPixels) {
  const int w = 61, h = 43;  // odd sizes: partial work-groups on both axes
  for (ss::PixelType type : {ss::PixelType::kU8, ss::PixelType::kU16, ss::PixelType::kF32}) {
    for (int channels : {1, 3, 4}) {
      const ss::Image im = random_image(w, h, channels, type, std::uint64_t(channels) * 7 + std::uint64_t(type));
      for (const auto& [name, m] : models(w, h)) {
        for (const auto& [ow, oh] : {std::pair{w, h}, std::pair{70, 37}}) {
          const std::string what = std::string(ss::to_string(type)) + " x" + std::to_string(channels) + " " + name +
                                   " " + std::to_string(ow) + "x" + std::to_string(oh);
          expect_same_image(ss::warp_image(im, m, ow, oh), ss::warp_image(*ctx_, im, m, ow, oh), what);
        }
      }
    }
  }
}

// The border rule: a half-pixel shift samples exactly -0.5 / w - 0.5 on the edges (inside, clamped) and one
// more ulp leaves the image (0).
TEST_P(WarpBackend, HalfPixelBorderIsTheCpuRule) {
  ss::Image im = ss::Image::allocate(8, 6, 1, ss::PixelType::kU8);
  for (std::size_t i = 0; i < im.data.size(); ++i) im.data[i] = std::uint8_t(10 + i);
  // matrix maps MOVING -> FIXED; x_fixed = x_moving + 0.5, so output x = 0 samples x = -0.5 (kept).
  const Mat3 in_shift{1, 0, 0.5, 0, 1, 0.5, 0, 0, 1};
  const ss::Image a = ss::warp_image(*ctx_, im, in_shift, 8, 6);
  expect_same_image(ss::warp_image(im, in_shift, 8, 6), a, "on the border");
  EXPECT_EQ(a.data[0], im.data[0]) << "the border half pixel repeats the edge";
  const Mat3 out_shift{1, 0, std::nextafter(0.5, 1.0), 0, 1, 0, 0, 0, 1};
  const ss::Image b = ss::warp_image(*ctx_, im, out_shift, 8, 6);
  expect_same_image(ss::warp_image(im, out_shift, 8, 6), b, "just outside");
  EXPECT_EQ(b.data[0], 0) << "a sample beyond the border half pixel is 0";
}

// graf1 (800 x 640, u8) through its ground-truth homography onto graf3's frame, and a 3-channel version.
TEST_P(WarpBackend, Graf1ThroughItsHomography) {
  const ss::Image g1 = ss::test::load_test_image("graf1_gray.png");
  std::ifstream f(std::string(SPECTRASIFT_TEST_DATA) + "/H1to3p.xml");
  std::stringstream text;
  text << f.rdbuf();
  const std::string s = text.str();
  const auto a = s.find("<data>"), b = s.find("</data>");
  ASSERT_NE(a, std::string::npos);
  std::istringstream in(s.substr(a + 6, b - a - 6));
  Mat3 h{};
  for (double& v : h) in >> v;
  const ss::Image cpu = ss::warp_image(g1, h, g1.width, g1.height);
  const ss::Image dev = ss::warp_image(*ctx_, g1, h, g1.width, g1.height);
  expect_same_image(cpu, dev, "graf1 grey");
  std::size_t nonzero = 0;
  for (std::uint8_t v : dev.data) nonzero += v != 0;
  EXPECT_GT(nonzero, dev.data.size() / 2) << "the warped image covers most of the frame";
  const ss::Image rgb = ss::test::convert_sift_input(g1, ss::PixelType::kU8, 3);
  expect_same_image(ss::warp_image(rgb, h, 1000, 700), ss::warp_image(*ctx_, rgb, h, 1000, 700), "graf1 rgb");
}

TEST_P(WarpBackend, BadInputIsRefusedAsOnTheCpu) {
  const ss::Image im = random_image(16, 16, 1, ss::PixelType::kU8, 1);
  const Mat3 id{1, 0, 0, 0, 1, 0, 0, 0, 1};
  const auto code_of = [&](auto&& call) {
    try {
      call();
    } catch (const ss::Error& e) {
      return e.code();
    }
    return ss::ErrorCode::kInternal;  // no error
  };
  EXPECT_EQ(code_of([&] { (void)ss::warp_image(*ctx_, ss::Image{}, id, 8, 8); }), ss::ErrorCode::kInvalidArgument);
  EXPECT_EQ(code_of([&] { (void)ss::warp_image(*ctx_, im, id, 0, 8); }), ss::ErrorCode::kInvalidArgument);
  Mat3 nan = id;
  nan[2] = std::nan("");
  EXPECT_EQ(code_of([&] { (void)ss::warp_image(*ctx_, im, nan, 8, 8); }), ss::ErrorCode::kInvalidArgument);
  ss::Image short_data = im;
  short_data.data.resize(10);
  EXPECT_EQ(code_of([&] { (void)ss::warp_image(*ctx_, short_data, id, 8, 8); }), ss::ErrorCode::kInvalidArgument);
  const Mat3 singular{1, 0, 0, 1, 0, 0, 0, 0, 1};
  EXPECT_EQ(code_of([&] { (void)ss::warp_image(*ctx_, im, singular, 8, 8); }),
            code_of([&] { (void)ss::warp_image(im, singular, 8, 8); }));
}

INSTANTIATE_TEST_SUITE_P(Gpu, WarpBackend, ::testing::Values(ss::Backend::kOpenCL, ss::Backend::kCuda),
                         [](const ::testing::TestParamInfo<ss::Backend>& i) {
                           return std::string(ss::to_string(i.param));
                         });

}  // namespace

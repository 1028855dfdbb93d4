// Image I/O, grey conversion, feature files and drawing: round trips, real files decoded against
// values computed elsewhere (cv2, formulas), and bad input rejected with the right code and the file name.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <numbers>
#include <random>
#include <sstream>
#include <string>

#include "spectrasift/draw.hpp"
#include "spectrasift/error.hpp"
#include "spectrasift/io.hpp"

#ifdef SPECTRASIFT_HAVE_OPENCV
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#endif

namespace fs = std::filesystem;
using namespace spectrasift;

namespace {

const fs::path kData = SPECTRASIFT_TEST_DATA;
constexpr double kPi = std::numbers::pi;

class IoFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("spectrasift_io_test_" + std::to_string(::getpid()) + "_" + info->test_suite_name() + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  fs::path path(const std::string& name) const { return dir_ / name; }
  fs::path write_bytes(const std::string& name, const std::string& bytes) const {
    const fs::path p = path(name);
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
  }
  /// Files in the directory (to check that nothing partial was left behind).
  std::size_t file_count() const {
    std::size_t n = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir_)) ++n;
    return n;
  }
  fs::path dir_;
};

std::string file_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// A deterministic test pattern covering the whole value range of the type.
Image pattern(int w, int h, int c, PixelType type) {
  Image im = Image::allocate(w, h, c, type);
  std::mt19937 rng(1234u + unsigned(w * 31 + c * 7 + int(type)));
  const std::size_t n = im.pixel_count() * std::size_t(c);
  for (std::size_t i = 0; i < n; ++i) {
    switch (type) {
      case PixelType::kU8: im.data[i] = std::uint8_t(rng() & 0xFF); break;
      case PixelType::kU16: im.as<std::uint16_t>()[i] = std::uint16_t(rng() & 0xFFFF); break;
      case PixelType::kF32: im.as<float>()[i] = float(rng() % 100001) / 100000.0f; break;
    }
  }
  // Make sure the extremes appear.
  if (type == PixelType::kU8) { im.data[0] = 0; im.data[n - 1] = 255; }
  if (type == PixelType::kU16) { im.as<std::uint16_t>()[0] = 0; im.as<std::uint16_t>()[n - 1] = 65535; }
  return im;
}

void expect_same_image(const Image& a, const Image& b) {
  EXPECT_EQ(a.width, b.width);
  EXPECT_EQ(a.height, b.height);
  EXPECT_EQ(a.channels, b.channels);
  EXPECT_EQ(a.type, b.type);
  EXPECT_TRUE(a.data == b.data) << "pixel data differ";
}

/// Runs f, expects an Error with `code` whose message contains `needle`.
template <class F>
void expect_error(F&& f, ErrorCode code, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no Error thrown (expected '" << needle << "')";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << "message: " << e.what();
  }
}

std::uint32_t crc32(const std::string& s) {
  std::uint32_t c = 0xFFFFFFFFu;
  for (unsigned char ch : s) {
    c ^= ch;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
  }
  return c ^ 0xFFFFFFFFu;
}

std::string be32(std::uint32_t v) {
  return {char(v >> 24), char((v >> 16) & 0xFF), char((v >> 8) & 0xFF), char(v & 0xFF)};
}

std::string png_chunk(const std::string& type, const std::string& data) {
  return be32(std::uint32_t(data.size())) + type + data + be32(crc32(type + data));
}

Features sample_features_for_fuzz() {
  Features f;
  f.image_width = 64;
  f.image_height = 48;
  for (int i = 0; i < 3; ++i) {
    Keypoint k;
    k.x = 1.5f + float(i);
    k.y = 2.25f * float(i);
    k.size = 3.0f + float(i);
    k.angle = 30.0f * float(i);
    k.layer = 1;
    f.keypoints.push_back(k);
    for (int d = 0; d < Features::kDescriptorSize; ++d) f.descriptors.push_back(float((d * 7 + i) % 256));
  }
  return f;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------
// Round trips

TEST_F(IoFiles, PngRoundTripEveryDepthAndChannelCount) {
  for (PixelType t : {PixelType::kU8, PixelType::kU16})
    for (int c = 1; c <= 4; ++c) {
      SCOPED_TRACE(std::string(to_string(t)) + " channels " + std::to_string(c));
      const Image im = pattern(37, 23, c, t);
      const fs::path p = path("rt.png");
      write_png(p, im);
      expect_same_image(read_image(p), im);
    }
}

TEST_F(IoFiles, PngFloatIsWrittenAsClampedU16) {
  Image im = Image::allocate(6, 1, 1, PixelType::kF32);
  const float v[6] = {-0.5f, 0.0f, 0.5f, 1.0f, 2.0f, std::numeric_limits<float>::quiet_NaN()};
  std::memcpy(im.data.data(), v, sizeof v);
  write_png(path("f.png"), im);
  const Image r = read_image(path("f.png"));
  ASSERT_EQ(r.type, PixelType::kU16);
  const std::uint16_t expected[6] = {0, 0, 32768, 65535, 65535, 0};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(r.as<std::uint16_t>()[i], expected[i]) << i;
}

TEST_F(IoFiles, PnmBinaryRoundTrip8And16Bit) {
  for (PixelType t : {PixelType::kU8, PixelType::kU16})
    for (int c : {1, 3}) {
      SCOPED_TRACE(std::string(to_string(t)) + " channels " + std::to_string(c));
      const Image im = pattern(19, 11, c, t);
      const fs::path p = path(c == 1 ? "rt.pgm" : "rt.ppm");
      write_image(p, im);
      const std::string bytes = file_bytes(p);
      EXPECT_EQ(bytes.substr(0, 2), c == 1 ? "P5" : "P6");
      expect_same_image(read_image(p), im);
    }
}

TEST_F(IoFiles, PnmBinary16BitIsBigEndian) {
  const fs::path p = write_bytes("be.pgm", std::string("P5\n2 1\n65535\n") + "\x12\x34\xAB\xCD");
  const Image im = read_image(p);
  ASSERT_EQ(im.type, PixelType::kU16);
  EXPECT_EQ(im.as<std::uint16_t>()[0], 0x1234);
  EXPECT_EQ(im.as<std::uint16_t>()[1], 0xABCD);
}

TEST_F(IoFiles, PnmAsciiWithCommentsAndMaxvals) {
  // P2, comments everywhere, maxval 255.
  Image a = read_image(write_bytes("a.pgm", "P2\n# a comment\n3 2 # inline\n255\n0 1 2\n# row 2\n253 254 255\n"));
  ASSERT_EQ(a.width, 3);
  ASSERT_EQ(a.height, 2);
  ASSERT_EQ(a.channels, 1);
  ASSERT_EQ(a.type, PixelType::kU8);
  EXPECT_EQ(a.data, (std::vector<std::uint8_t>{0, 1, 2, 253, 254, 255}));
  // P3 with maxval 65535: 16-bit RGB.
  Image b = read_image(write_bytes("b.ppm", "P3 2 1 65535\n0 1 2\n65535 40000 300\n"));
  ASSERT_EQ(b.type, PixelType::kU16);
  ASSERT_EQ(b.channels, 3);
  const std::uint16_t* s = b.as<std::uint16_t>();
  EXPECT_EQ(std::vector<std::uint16_t>(s, s + 6), (std::vector<std::uint16_t>{0, 1, 2, 65535, 40000, 300}));
  // maxval 15 is rescaled to the full 8-bit range (v * 255 / 15).
  Image c = read_image(write_bytes("c.pgm", "P2 3 1 15\n0 1 15\n"));
  EXPECT_EQ(c.data, (std::vector<std::uint8_t>{0, 17, 255}));
  // maxval 1023 -> 16 bit, rescaled to 65535.
  Image d = read_image(write_bytes("d.pgm", "P2 2 1 1023\n1023 512\n"));
  ASSERT_EQ(d.type, PixelType::kU16);
  EXPECT_EQ(d.as<std::uint16_t>()[0], 65535);
  EXPECT_EQ(d.as<std::uint16_t>()[1], 32800);  // round(512 * 65535 / 1023)
}

TEST_F(IoFiles, TiffRoundTripU8U16F32) {
  if (!tiff_supported()) GTEST_SKIP() << "this build has no libtiff";
  for (PixelType t : {PixelType::kU8, PixelType::kU16, PixelType::kF32})
    for (int c : {1, 2, 3, 4}) {
      SCOPED_TRACE(std::string(to_string(t)) + " channels " + std::to_string(c));
      const Image im = pattern(33, 17, c, t);
      write_tiff(path("rt.tif"), im);
      expect_same_image(read_image(path("rt.tif")), im);
    }
}

TEST(Tiff, UnsupportedBuildSaysSo) {
  if (tiff_supported()) GTEST_SKIP() << "this build has libtiff";
  expect_error([] { write_tiff(fs::temp_directory_path() / "never.tif", Image::allocate(2, 2, 1, PixelType::kU8)); },
               ErrorCode::kUnsupported, "libtiff");
  expect_error([] { read_image(kData / "io_tiled_u8.tif"); }, ErrorCode::kUnsupported, "io_tiled_u8.tif: TIFF image");
}

TEST(Tiff, SeparatePlanesTilesAndMinIsWhiteDecodeExactly) {
  if (!tiff_supported()) GTEST_SKIP() << "this build has no libtiff";
  // Files made by tests/data/make_io_data.py with tifffile; the values follow its formulas.
  const Image a = read_image(kData / "io_planar_separate_u16.tif");
  ASSERT_EQ(a.width, 16);
  ASSERT_EQ(a.height, 12);
  ASSERT_EQ(a.channels, 3);
  ASSERT_EQ(a.type, PixelType::kU16);
  for (int y = 0; y < 12; ++y)
    for (int x = 0; x < 16; ++x)
      for (int c = 0; c < 3; ++c)
        ASSERT_EQ(a.as<std::uint16_t>()[(y * 16 + x) * 3 + c], (x * 1000 + y * 37 + c * 5000) % 65536) << x << "," << y;
  const Image b = read_image(kData / "io_tiled_u8.tif");
  ASSERT_EQ(b.width, 40);
  ASSERT_EQ(b.height, 20);
  ASSERT_EQ(b.channels, 1);
  for (int y = 0; y < 20; ++y)
    for (int x = 0; x < 40; ++x) ASSERT_EQ(b.data[std::size_t(y * 40 + x)], (x * 7 + y * 13) % 256) << x << "," << y;
  const Image w = read_image(kData / "io_miniswhite_u8.tif");
  for (int y = 0; y < 12; ++y)
    for (int x = 0; x < 16; ++x) ASSERT_EQ(w.data[std::size_t(y * 16 + x)], 255 - (x * 7 + y * 13) % 256);
}

// ---------------------------------------------------------------------------------------------------
// Real files

TEST(Png, PaletteWithTransparencyAndOneBitGreyAreExpanded) {
  const Image p = read_image(kData / "io_palette_trns.png");
  ASSERT_EQ(p.channels, 4);
  ASSERT_EQ(p.type, PixelType::kU8);
  const std::uint8_t pal[4][4] = {{255, 0, 0, 255}, {0, 255, 0, 255}, {0, 0, 255, 255}, {10, 20, 30, 0}};
  for (int y = 0; y < p.height; ++y)
    for (int x = 0; x < p.width; ++x)
      for (int c = 0; c < 4; ++c)
        ASSERT_EQ(p.data[std::size_t((y * p.width + x) * 4 + c)], pal[(x + y) % 4][c]) << x << "," << y;
  const Image g = read_image(kData / "io_gray_1bit.png");
  ASSERT_EQ(g.channels, 1);
  for (int y = 0; y < g.height; ++y)
    for (int x = 0; x < g.width; ++x) ASSERT_EQ(g.data[std::size_t(y * g.width + x)], (x + y) % 3 == 0 ? 255 : 0);
}

TEST(Png, RealGreyImage) {
  const Image im = read_image(kData / "box.png");
  EXPECT_EQ(im.width, 324);
  EXPECT_EQ(im.height, 223);
  EXPECT_EQ(im.channels, 1);
  EXPECT_EQ(im.type, PixelType::kU8);
  // Sum of all samples as cv2.imread reports it (numpy .sum() of box.png).
  std::uint64_t sum = 0;
  for (auto v : im.data) sum += v;
  EXPECT_EQ(sum, 9548299u);
}

TEST(Jpeg, DecodeEqualsOpenCv) {
  // HappyFish.jpg (opencv-doc) and the same image decoded by cv2.imread, stored as an RGB PNG.
  const Image j = read_image(kData / "HappyFish.jpg");
  const Image ref = read_image(kData / "HappyFish_cv2_rgb.png");
  ASSERT_EQ(j.width, 259);
  ASSERT_EQ(j.height, 194);
  ASSERT_EQ(j.channels, 3);
  ASSERT_EQ(ref.channels, 3);
  ASSERT_EQ(j.data.size(), ref.data.size());
  int max_diff = 0;
  std::size_t differing = 0;
  for (std::size_t i = 0; i < j.data.size(); ++i) {
    const int d = std::abs(int(j.data[i]) - int(ref.data[i]));
    max_diff = std::max(max_diff, d);
    differing += d != 0;
  }
  // The same libjpeg with the same settings decodes bit-identically; allow 1 level for other builds.
  EXPECT_LE(max_diff, 1);
  EXPECT_LE(differing, j.data.size() / 100);
}

// ---------------------------------------------------------------------------------------------------
// Grey conversion

TEST(Gray, U8ColourUsesOpenCvFixedPoint) {
  // OpenCV 4.6's 8-bit BGR2GRAY is (9798 R + 19235 G + 3735 B + 16384) >> 15 (EqualsCvtColor checks
  // that against cv::cvtColor for every colour).
  // Every combination of a few levels, including the extremes and rounding-sensitive values.
  const int levels[] = {0, 1, 2, 37, 100, 127, 128, 200, 254, 255};
  const int n = 10;
  Image rgb = Image::allocate(n * n, n, 3, PixelType::kU8);
  Image rgba = Image::allocate(n * n, n, 4, PixelType::kU8);
  for (int r = 0; r < n; ++r)
    for (int g = 0; g < n; ++g)
      for (int b = 0; b < n; ++b) {
        const std::size_t px = std::size_t(b) * n * n + std::size_t(r * n + g);
        rgb.data[px * 3] = rgba.data[px * 4] = std::uint8_t(levels[r]);
        rgb.data[px * 3 + 1] = rgba.data[px * 4 + 1] = std::uint8_t(levels[g]);
        rgb.data[px * 3 + 2] = rgba.data[px * 4 + 2] = std::uint8_t(levels[b]);
        rgba.data[px * 4 + 3] = std::uint8_t(px % 256);  // alpha must not matter
      }
  const ImageF g3 = to_gray_float(rgb), g4 = to_gray_float(rgba);
  for (std::size_t px = 0; px < rgb.pixel_count(); ++px) {
    const unsigned R = rgb.data[px * 3], G = rgb.data[px * 3 + 1], B = rgb.data[px * 3 + 2];
    const float expected = float((9798 * R + 19235 * G + 3735 * B + 16384) >> 15);
    ASSERT_EQ(g3.data[px], expected) << R << " " << G << " " << B;
    ASSERT_EQ(g4.data[px], expected);
    // Within half a level (plus the fixed-point weight error, < 255 * 3e-5) of the real-valued weights.
    ASSERT_NEAR(expected, 0.299 * R + 0.587 * G + 0.114 * B, 0.51);
  }
}

#ifdef SPECTRASIFT_HAVE_OPENCV
TEST(Gray, EqualsCvtColor) {
  // Every one of the 2^24 colours once: a 4096 x 4096 image.
  Image im = Image::allocate(4096, 4096, 3, PixelType::kU8);
  for (std::uint32_t v = 0; v < (1u << 24); ++v) {
    im.data[std::size_t(v) * 3] = std::uint8_t(v >> 16);
    im.data[std::size_t(v) * 3 + 1] = std::uint8_t(v >> 8);
    im.data[std::size_t(v) * 3 + 2] = std::uint8_t(v);
  }
  const cv::Mat rgb(im.height, im.width, CV_8UC3, im.data.data());
  cv::Mat gray;
  cv::cvtColor(rgb, gray, cv::COLOR_RGB2GRAY);
  const ImageF ours = to_gray_float(im);
  std::size_t mismatches = 0;
  for (int y = 0; y < im.height; ++y)
    for (int x = 0; x < im.width; ++x) mismatches += ours.at(x, y) != float(gray.at<std::uint8_t>(y, x));
  EXPECT_EQ(mismatches, 0u);
}
#endif

#ifdef SPECTRASIFT_HAVE_OPENCV
// read_image(path, ReadMode::kGray) gives cv::imread(path, IMREAD_GRAYSCALE)'s pixels for each format: a
// colour JPEG (libjpeg's luma plane), a colour PNG (libpng's rule), PPM and TIFF (OpenCV's 14-bit rule).
TEST_F(IoFiles, ReadGrayEqualsOpenCvImreadGrayscale) {
  const Image rgb = read_image(kData / "HappyFish_cv2_rgb.png");
  std::vector<fs::path> files = {kData / "HappyFish.jpg", kData / "HappyFish_cv2_rgb.png", path("fish.ppm")};
  write_image(files.back(), rgb);
  if (tiff_supported()) {
    files.push_back(path("fish.tif"));
    write_image(files.back(), rgb);
  }
  for (const fs::path& f : files) {
    SCOPED_TRACE(f.filename().string());
    const Image ours = read_image(f, ReadMode::kGray);
    const cv::Mat cv_gray = cv::imread(f.string(), cv::IMREAD_GRAYSCALE);
    ASSERT_EQ(ours.channels, 1);
    ASSERT_EQ(ours.type, PixelType::kU8);
    ASSERT_EQ(ours.width, cv_gray.cols);
    ASSERT_EQ(ours.height, cv_gray.rows);
    std::size_t differ = 0;
    for (int y = 0; y < ours.height; ++y)
      for (int x = 0; x < ours.width; ++x)
        differ += ours.data[std::size_t(y) * ours.width + x] != cv_gray.at<std::uint8_t>(y, x);
    EXPECT_EQ(differ, 0u);
  }
  // The JPEG's luma plane is not the grey of its decoded RGB (6015 of 50246 pixels differ, by up to 21
  // levels): without the JCS_GRAYSCALE decode the comparison above fails.
  const Image luma = read_image(kData / "HappyFish.jpg", ReadMode::kGray);
  const Image via_rgb = to_u8(to_gray_float(read_image(kData / "HappyFish.jpg")));
  std::size_t differ = 0;
  for (std::size_t i = 0; i < luma.data.size(); ++i) differ += luma.data[i] != via_rgb.data[i];
  EXPECT_GT(differ, 1000u);
  // A grey file and an in-memory mode: kAsStored is read_image(path).
  EXPECT_EQ(read_image(kData / "box.png", ReadMode::kGray).data, read_image(kData / "box.png").data);
  EXPECT_EQ(read_image(kData / "HappyFish.jpg", ReadMode::kAsStored).channels, 3);
}
#endif

TEST(Gray, OtherTypesKeepPrecision) {
  Image g16 = Image::allocate(3, 1, 1, PixelType::kU16);
  g16.as<std::uint16_t>()[0] = 65535;
  g16.as<std::uint16_t>()[1] = 1;
  g16.as<std::uint16_t>()[2] = 257 * 100 + 128;
  const ImageF a = to_gray_float(g16);
  EXPECT_EQ(a.data[0], 255.0f);
  EXPECT_FLOAT_EQ(a.data[1], 1.0f / 257.0f);       // not rounded to 0
  EXPECT_FLOAT_EQ(a.data[2], 100.0f + 128.0f / 257.0f);
  Image f = Image::allocate(2, 1, 3, PixelType::kF32);
  const float v[6] = {1.0f, 1.0f, 1.0f, 0.2f, 0.4f, 0.6f};
  std::memcpy(f.data.data(), v, sizeof v);
  const ImageF b = to_gray_float(f);
  EXPECT_FLOAT_EQ(b.data[0], 255.0f);
  EXPECT_FLOAT_EQ(b.data[1], float((0.299 * 0.2f + 0.587 * 0.4f + 0.114 * 0.6f) * 255.0));
  Image ga = Image::allocate(2, 1, 2, PixelType::kU8);  // grey + alpha keeps the grey channel
  ga.data = {10, 255, 200, 0};
  const ImageF c = to_gray_float(ga);
  EXPECT_EQ(c.data[0], 10.0f);
  EXPECT_EQ(c.data[1], 200.0f);
}

TEST(Gray, ToU8RoundsAndClamps) {
  ImageF f;
  f.width = 6;
  f.height = 1;
  f.data = {-3.0f, 0.49f, 0.5f, 254.6f, 300.0f, std::numeric_limits<float>::quiet_NaN()};
  const Image u = to_u8(f);
  EXPECT_EQ(u.data, (std::vector<std::uint8_t>{0, 0, 1, 255, 255, 0}));
}

// ---------------------------------------------------------------------------------------------------
// Bad input

TEST_F(IoFiles, MissingFile) {
  expect_error([&] { read_image(path("nope.png")); }, ErrorCode::kIo, "nope.png: no such file");
}

TEST_F(IoFiles, TruncatedPng) {
  const std::string full = file_bytes(kData / "box.png");
  const fs::path p = write_bytes("half.png", full.substr(0, full.size() / 2));
  expect_error([&] { read_image(p); }, ErrorCode::kBadFormat, "half.png");
  // Cut just before IEND: all pixels are there but the file is incomplete.
  const fs::path q = write_bytes("noend.png", full.substr(0, full.size() - 12));
  expect_error([&] { read_image(q); }, ErrorCode::kBadFormat, "noend.png");
}

TEST_F(IoFiles, CorruptPngCrc) {
  std::string bytes = file_bytes(kData / "box.png");
  const std::size_t idat = bytes.find("IDAT");
  ASSERT_NE(idat, std::string::npos);
  bytes[idat + 100] = char(bytes[idat + 100] ^ 0x55);  // inside the first IDAT's data
  const fs::path p = write_bytes("crc.png", bytes);
  expect_error([&] { read_image(p); }, ErrorCode::kBadFormat, "crc.png");
}

TEST_F(IoFiles, TruncatedJpeg) {
  const std::string full = file_bytes(kData / "HappyFish.jpg");
  const fs::path p = write_bytes("half.jpg", full.substr(0, full.size() / 2));
  expect_error([&] { read_image(p); }, ErrorCode::kBadFormat, "half.jpg");
  const fs::path q = write_bytes("head.jpg", full.substr(0, 100));
  expect_error([&] { read_image(q); }, ErrorCode::kBadFormat, "head.jpg");
}

TEST_F(IoFiles, ZeroSizeImage) {
  expect_error([&] { read_image(write_bytes("zero.pgm", "P5 0 0 255\n")); }, ErrorCode::kBadFormat, "zero size");
  expect_error([&] { read_image(write_bytes("zero2.pgm", "P2 5 0 255\n")); }, ErrorCode::kBadFormat, "zero2.pgm");
}

TEST_F(IoFiles, HugeDimensionsRejectedBeforeAllocating) {
  // 10^10 pixels: over the default limit; the file holds only the header, so an attempt to
  // allocate first would need 10 GB (and a truncation check would give the wrong code).
  expect_error([&] { read_image(write_bytes("huge.pgm", "P5\n100000 100000\n255\n")); }, ErrorCode::kOutOfMemory,
               "exceeds the limit");
  // The same through PNG: a valid IHDR claiming 100000 x 100000, then nothing.
  std::string ihdr = be32(100000) + be32(100000) + std::string("\x08\x00\x00\x00\x00", 5);
  const std::string png = std::string("\x89PNG\r\n\x1a\n", 8) + png_chunk("IHDR", ihdr) +
                          png_chunk("IDAT", std::string("\x78\x9c\x03\x00\x00\x00\x00\x01", 8)) + png_chunk("IEND", "");
  // The message names the size, the limit and how to raise it.
  expect_error([&] { read_image(write_bytes("huge.png", png)); }, ErrorCode::kOutOfMemory,
               "huge.png: image of 100000 x 100000 = 10000000000 pixels exceeds the limit of 1073741824 pixels "
               "(raise it with --max-pixels N or SPECTRASIFT_MAX_PIXELS; ImageLimits::max_pixels / "
               "ContextOptions::max_pixels in the library; 0 = no limit)");
  // Under the limit, but more pixel data than deflate can pack into the file: rejected as corrupt
  // before the 400 MB buffer is allocated.
  std::string ihdr2 = be32(20000) + be32(20000) + std::string("\x08\x00\x00\x00\x00", 5);
  const std::string png2 = std::string("\x89PNG\r\n\x1a\n", 8) + png_chunk("IHDR", ihdr2) +
                           png_chunk("IDAT", std::string("\x78\x9c\x03\x00\x00\x00\x00\x01", 8)) + png_chunk("IEND", "");
  expect_error([&] { read_image(write_bytes("big.png", png2)); }, ErrorCode::kBadFormat, "more than");
  // A caller's own limit.
  write_image(path("small.pgm"), pattern(20, 20, 1, PixelType::kU8));
  ImageLimits lim;
  lim.max_pixels = 399;
  expect_error([&] { read_image(path("small.pgm"), lim); }, ErrorCode::kOutOfMemory,
               "small.pgm: image of 20 x 20 = 400 pixels exceeds the limit of 399 pixels (raise it with --max-pixels");
  lim.max_pixels = 400;
  EXPECT_EQ(read_image(path("small.pgm"), lim).width, 20);
  lim.max_pixels = 0;  // no limit
  EXPECT_EQ(read_image(path("small.pgm"), lim).width, 20);
  // Overflow of int dimensions.
  expect_error([&] { read_image(write_bytes("ovf.pgm", "P5\n4294967295 4294967295\n255\n")); },
               ErrorCode::kOutOfMemory, "ovf.pgm");
}

TEST_F(IoFiles, MalformedPnm) {
  expect_error([&] { read_image(write_bytes("t.pgm", std::string("P5\n4 4\n255\n") + "abc")); },
               ErrorCode::kBadFormat, "truncated");
  expect_error([&] { read_image(write_bytes("m.pgm", "P2 2 1 100\n5 101\n")); }, ErrorCode::kBadFormat, "exceeds maxval");
  expect_error([&] { read_image(write_bytes("z.pgm", "P5 2 2 0\n")); }, ErrorCode::kBadFormat, "maxval");
  expect_error([&] { read_image(write_bytes("x.pgm", "P2 2 1 255\n5 x\n")); }, ErrorCode::kBadFormat, "x.pgm");
  expect_error([&] { read_image(write_bytes("s.pgm", "P2 3 1 255\n5\n")); }, ErrorCode::kBadFormat, "truncated");
  expect_error([&] { read_image(write_bytes("s2.pgm", "P2 2 1 255\n5 \n")); }, ErrorCode::kBadFormat, "file ends");
  expect_error([&] { read_image(write_bytes("b.pbm", "P4 8 1\n\xff")); }, ErrorCode::kUnsupported, "b.pbm");
}

TEST_F(IoFiles, CorruptedFilesOnlyEverThrowError) {
  // Random byte flips and cuts of real files: every outcome is a decoded image or an Error, never a
  // crash, another exception or a huge allocation (ASan/UBSan builds make this test stricter).
  std::vector<std::pair<std::string, std::string>> sources = {
      {"png", file_bytes(kData / "io_palette_trns.png")},
      {"png", file_bytes(kData / "box.png").substr(0, 6000) + file_bytes(kData / "box.png").substr(50000)},
      {"jpg", file_bytes(kData / "HappyFish.jpg")},
  };
  write_image(path("src.pgm"), pattern(20, 10, 1, PixelType::kU16));
  sources.emplace_back("pgm", file_bytes(path("src.pgm")));
  sources.emplace_back("ppm", "P3 2 2 255\n1 2 3 4 5 6\n7 8 9 10 11 12\n");
  if (tiff_supported()) {
    write_tiff(path("src.tif"), pattern(20, 10, 3, PixelType::kF32));
    sources.emplace_back("tif", file_bytes(path("src.tif")));
    sources.emplace_back("tif", file_bytes(kData / "io_tiled_u8.tif"));
  }
  ImageLimits limits;
  limits.max_pixels = 1u << 22;
  std::mt19937 rng(2024);
  int decoded = 0, rejected = 0;
  for (const auto& [ext, original] : sources) {
    for (int iter = 0; iter < 100; ++iter) {
      std::string b = original;
      const int flips = 1 + int(rng() % 6);
      for (int k = 0; k < flips; ++k) b[rng() % b.size()] = char(rng() & 0xFF);
      if (rng() % 3 == 0) b.resize(rng() % b.size());
      const fs::path p = write_bytes("fuzz." + ext, b);
      try {
        const Image im = read_image(p, limits);
        EXPECT_EQ(im.data.size(), im.pixel_count() * std::size_t(im.channels) * bytes_per_sample(im.type));
        ++decoded;
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("fuzz."), std::string::npos) << e.what();
        ++rejected;
      } catch (const std::exception& e) {
        ADD_FAILURE() << ext << " iteration " << iter << ": unexpected exception " << e.what();
      }
    }
  }
  EXPECT_GT(rejected, 0);
  // Feature files: the same.
  write_features_bin(path("f.bin"), sample_features_for_fuzz());
  write_features_json(path("f.json"), sample_features_for_fuzz());
  write_features_key(path("f.key"), sample_features_for_fuzz());
  write_features_bin(path("u8.bin"), sample_features_for_fuzz().to_u8());  // version 2
  write_features_json(path("u8.json"), sample_features_for_fuzz().to_u8());
  for (const char* name : {"f.bin", "f.json", "f.key", "u8.bin", "u8.json"}) {
    const std::string original = file_bytes(path(name));
    for (int iter = 0; iter < 100; ++iter) {
      std::string b = original;
      const int flips = 1 + int(rng() % 4);
      for (int k = 0; k < flips; ++k) b[rng() % b.size()] = char(rng() & 0xFF);
      if (rng() % 3 == 0) b.resize(rng() % b.size());
      const fs::path p = write_bytes(std::string("fuzz_") + name, b);
      try {
        const Features f = read_features(p);
        EXPECT_EQ(f.descriptor_values(), f.size() * 128u);
        EXPECT_TRUE(f.descriptor_type == DescriptorType::kU8 ? f.descriptors.empty() : f.descriptor_bytes.empty());
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("fuzz_"), std::string::npos) << e.what();
      } catch (const std::exception& e) {
        ADD_FAILURE() << name << " iteration " << iter << ": unexpected exception " << e.what();
      }
    }
  }
}

TEST_F(IoFiles, UnsupportedTypes) {
  expect_error([&] { read_image(write_bytes("text.png", "hello, this is text\n")); }, ErrorCode::kUnsupported,
               "text.png: unknown image format");
  expect_error([&] { read_image(write_bytes("img.bmp", std::string("BM\x36\x00\x00\x00\x00\x00", 8))); },
               ErrorCode::kUnsupported, "img.bmp: unknown image format");
  expect_error([&] { read_image(write_bytes("empty.png", "")); }, ErrorCode::kBadFormat, "empty.png");
  expect_error([&] { read_image(dir_); }, ErrorCode::kIo, "directory");
}

TEST_F(IoFiles, WriterFailuresLeaveNothing) {
  expect_error([&] { write_png(path("no/such/dir/x.png"), pattern(4, 4, 1, PixelType::kU8)); }, ErrorCode::kIo,
               "x.png");
  expect_error([&] { write_image(path("x.bmp"), pattern(4, 4, 1, PixelType::kU8)); }, ErrorCode::kUnsupported, ".bmp");
  expect_error([&] { write_image(path("x.pgm"), pattern(4, 4, 2, PixelType::kU8)); }, ErrorCode::kUnsupported, "x.pgm");
  Image bad = pattern(4, 4, 1, PixelType::kU8);
  bad.data.resize(3);
  expect_error([&] { write_png(path("bad.png"), bad); }, ErrorCode::kInvalidArgument, "bad.png");
  EXPECT_EQ(file_count(), 0u);
}

// An OutputSet commits several files together: nothing before commit(), everything after it, and
// nothing at all (no target, no temporary) when a write or a rename fails.
TEST_F(IoFiles, OutputSetCommitsAllOrNothing) {
  const Image img = pattern(4, 4, 1, PixelType::kU8);
  const std::vector<float> scores(6 * 5 * 2, 0.5f);
  {
    OutputSet out;
    write_png(out.add(path("a.png")), img);
    write_envi_f32(out, path("s.hdr"), 6, 5, {"one", "two"}, scores.data());
    EXPECT_EQ(out.targets().size(), 3u);  // a.png, s.img, s.hdr
    EXPECT_FALSE(fs::exists(path("a.png")));
    EXPECT_FALSE(fs::exists(path("s.hdr")));
    EXPECT_FALSE(fs::exists(path("s.img")));
    out.commit();
  }
  EXPECT_EQ(read_image(path("a.png")).width, 4);
  EXPECT_EQ(open_envi(path("s.hdr")).header().bands, 2);
  EXPECT_EQ(file_count(), 3u);  // no temporary left
  fs::remove(path("a.png"));
  fs::remove(path("s.hdr"));
  fs::remove(path("s.img"));

  // A failure while writing a later output (its folder does not exist): the earlier ones never appear.
  try {
    OutputSet out;
    write_envi_f32(out, path("s.hdr"), 6, 5, {"one", "two"}, scores.data());
    write_png(out.add(path("no/such/dir/p.png")), img);
    out.commit();
    ADD_FAILURE() << "no Error thrown";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kIo) << e.what();
  }
  EXPECT_EQ(file_count(), 0u);

  // A rename that fails inside commit() (the last target became a directory after add()): the targets
  // already renamed are removed again, and so are the remaining temporaries.
  try {
    OutputSet out;
    write_png(out.add(path("a.png")), img);
    write_png(out.add(path("b.png")), img);
    write_png(out.add(path("c.png")), img);
    fs::create_directory(path("c.png"));
    out.commit();
    ADD_FAILURE() << "no Error thrown";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kIo) << e.what();
    EXPECT_NE(std::string(e.what()).find("c.png"), std::string::npos) << e.what();
  }
  EXPECT_EQ(file_count(), 1u);  // only the directory c.png
  EXPECT_TRUE(fs::is_directory(path("c.png")));

  // An existing directory as a target, and one target given twice, are refused at once.
  OutputSet out;
  expect_error([&] { out.add(path("c.png")); }, ErrorCode::kIo, "is a directory");
  write_png(out.add(path("a.png")), img);
  expect_error([&] { out.add(dir_ / "x" / ".." / "a.png"); }, ErrorCode::kInvalidArgument, "two outputs");
  EXPECT_EQ(file_count(), 2u);  // c.png and a.png's temporary
}

// ---------------------------------------------------------------------------------------------------
// Feature files

namespace {

Features sample_features(bool integral_descriptors = true) {
  Features f;
  f.image_width = 640;
  f.image_height = 480;
  const float angles[] = {0.0f, 90.5f, 180.0f, 270.25f, 359.9f, 45.0f, 1e-3f};
  std::mt19937 rng(7);
  for (int i = 0; i < 7; ++i) {
    Keypoint k;
    k.x = 12.25f + float(i) * 37.3f;
    k.y = 400.125f - float(i) * 11.7f;
    k.size = 1.6f * float(i + 1) + 0.3f;
    k.angle = angles[i];
    k.response = 0.01f * float(i + 1);
    k.octave = i % 4 - 1;
    k.layer = 1 + i % 3;
    f.keypoints.push_back(k);
    for (int d = 0; d < Features::kDescriptorSize; ++d)
      f.descriptors.push_back(integral_descriptors ? float(rng() % 256) : float(rng() % 100000) / 997.0f);
  }
  f.descriptors[5] = 0.0f;
  f.descriptors[6] = 255.0f;
  return f;
}

void expect_same_features(const Features& a, const Features& b) {
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(a.image_width, b.image_width);
  EXPECT_EQ(a.image_height, b.image_height);
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a.keypoints[i].x, b.keypoints[i].x);
    EXPECT_EQ(a.keypoints[i].y, b.keypoints[i].y);
    EXPECT_EQ(a.keypoints[i].size, b.keypoints[i].size);
    EXPECT_EQ(a.keypoints[i].angle, b.keypoints[i].angle);
    EXPECT_EQ(a.keypoints[i].response, b.keypoints[i].response);
    EXPECT_EQ(a.keypoints[i].octave, b.keypoints[i].octave);
    EXPECT_EQ(a.keypoints[i].layer, b.keypoints[i].layer);
  }
  EXPECT_EQ(a.descriptor_type, b.descriptor_type);
  EXPECT_TRUE(a.descriptors == b.descriptors);
  EXPECT_TRUE(a.descriptor_bytes == b.descriptor_bytes);
}

std::string le32(std::uint32_t v) {
  return {char(v & 0xFF), char((v >> 8) & 0xFF), char((v >> 16) & 0xFF), char(v >> 24)};
}
std::string le32f(float v) {
  std::uint32_t u;
  std::memcpy(&u, &v, 4);
  return le32(u);
}

/// The header and keypoint records of a binary feature file, built by hand from io.hpp's layout (not by the
/// writer): `version` 1 has no type field, 2 has `type` at offset 24.
std::string bin_head(const Features& f, std::uint32_t version, std::uint32_t type = 0) {
  std::string b = "SSFT" + le32(version) + le32(std::uint32_t(f.size())) + le32(128) +
                  le32(std::uint32_t(f.image_width)) + le32(std::uint32_t(f.image_height));
  if (version == 2) b += le32(type);
  for (const Keypoint& k : f.keypoints)
    b += le32f(k.x) + le32f(k.y) + le32f(k.size) + le32f(k.angle) + le32f(k.response) + le32(std::uint32_t(k.octave)) +
         le32(std::uint32_t(k.layer));
  return b;
}

}  // namespace

TEST_F(IoFiles, FeatureBinaryAndJsonRoundTripExactly) {
  for (bool integral : {true, false}) {
    const Features f = sample_features(integral);
    write_features_bin(path("f.bin"), f);
    write_features_json(path("f.json"), f);
    expect_same_features(read_features_bin(path("f.bin")), f);
    expect_same_features(read_features_json(path("f.json")), f);
    expect_same_features(read_features(path("f.bin")), f);
    expect_same_features(read_features(path("f.json")), f);
  }
  EXPECT_EQ(file_bytes(path("f.bin")).size(), 24u + 7u * (7u * 4u + 128u * 4u));
  EXPECT_EQ(file_bytes(path("f.bin")).substr(0, 4), "SSFT");
}

// f32 features are written as version 1, exactly the layout of io.hpp (readers from before version 2 read them);
// u8 features as version 2, one byte a value.
TEST_F(IoFiles, FeatureBinaryVersionFollowsTheDescriptorType) {
  const Features f = sample_features();
  write_features_bin(path("f32.bin"), f);
  std::string expected = bin_head(f, 1);
  for (float v : f.descriptors) expected += le32f(v);
  EXPECT_TRUE(file_bytes(path("f32.bin")) == expected) << "version 1 layout changed";

  const Features u = f.to_u8();
  ASSERT_EQ(u.descriptor_type, DescriptorType::kU8);
  write_features_bin(path("u8.bin"), u);
  expected = bin_head(u, 2, 1) + std::string(u.descriptor_bytes.begin(), u.descriptor_bytes.end());
  EXPECT_TRUE(file_bytes(path("u8.bin")) == expected) << "version 2 layout";
  EXPECT_EQ(file_bytes(path("u8.bin")).size(), 28u + 7u * (7u * 4u + 128u));

  // Version 2 may also say f32 (float32 rows after the 28-byte header): read as such.
  std::string v2f32 = bin_head(f, 2, 0);
  for (float v : f.descriptors) v2f32 += le32f(v);
  expect_same_features(read_features_bin(write_bytes("v2f32.bin", v2f32)), f);
}

// u8 features come back as u8 (the same bytes) from JSON and binary; Lowe's .key names no type and reads as f32
// with the same values (io.hpp).
TEST_F(IoFiles, FeatureU8RoundTripsInEveryFormat) {
  const Features u = sample_features().to_u8();
  ASSERT_EQ(u.descriptor_bytes[5], 0);
  ASSERT_EQ(u.descriptor_bytes[6], 255);
  for (auto fmt : {FeatureFormat::kBinary, FeatureFormat::kJson}) {
    SCOPED_TRACE(int(fmt));
    write_features(path("u8.out"), u, fmt);
    const Features r = read_features(path("u8.out"));
    expect_same_features(r, u);
    EXPECT_TRUE(r.descriptors.empty());
  }
  expect_same_features(read_features_bin([&] { write_features_bin(path("u.bin"), u); return path("u.bin"); }()), u);
  expect_same_features(read_features_json([&] { write_features_json(path("u.json"), u); return path("u.json"); }()), u);
  EXPECT_NE(file_bytes(path("u.json")).find(R"("descriptor_type":"u8")"), std::string::npos);

  write_features_key(path("u.key"), u);
  write_features_key(path("f.key"), sample_features());
  EXPECT_TRUE(file_bytes(path("u.key")) == file_bytes(path("f.key")));  // the same text for the same values
  const Features k = read_features(path("u.key"));
  EXPECT_EQ(k.descriptor_type, DescriptorType::kF32);
  EXPECT_TRUE(k.descriptors_u8() == u.descriptor_bytes);
  EXPECT_TRUE(k.to_u8().descriptor_bytes == u.descriptor_bytes);

  // An empty u8 set keeps its type where the format has one.
  Features empty;
  empty.descriptor_type = DescriptorType::kU8;
  write_features_bin(path("e.bin"), empty);
  write_features_json(path("e.json"), empty);
  EXPECT_EQ(read_features(path("e.bin")).descriptor_type, DescriptorType::kU8);
  EXPECT_EQ(read_features(path("e.json")).descriptor_type, DescriptorType::kU8);
  EXPECT_EQ(file_bytes(path("e.bin")).size(), 28u);
}

// JSON files written before u8 descriptors existed have no "descriptor_type": they read as f32, values as written.
TEST_F(IoFiles, FeatureJsonWithoutTypeReadsAsF32) {
  std::string row = "[";
  for (int i = 0; i < 128; ++i) row += std::to_string(i) + (i < 127 ? "," : "]");
  const Features f = read_features(write_bytes(
      "old.json",
      R"({"format":"spectrasift-features","version":1,"image":{"width":5,"height":6},"keypoints":[{"x":1,"y":2,"size":3,"angle":4}],"descriptors":[)" +
          row + "]}"));
  EXPECT_EQ(f.descriptor_type, DescriptorType::kF32);
  ASSERT_EQ(f.descriptors.size(), 128u);
  EXPECT_TRUE(f.descriptor_bytes.empty());
  EXPECT_EQ(f.descriptors[127], 127.0f);
  // And f32 files say so.
  write_features_json(path("f.json"), sample_features());
  EXPECT_NE(file_bytes(path("f.json")).find(R"("descriptor_type":"f32")"), std::string::npos);
}

TEST_F(IoFiles, FeatureEmptySetRoundTrips) {
  Features f;
  for (auto fmt : {FeatureFormat::kKey, FeatureFormat::kJson, FeatureFormat::kBinary}) {
    write_features(path("e"), f, fmt);
    EXPECT_EQ(read_features(path("e")).size(), 0u);
  }
}

TEST_F(IoFiles, FeatureKeyFormatIsLowes) {
  const Features f = sample_features();
  write_features(path("f.key"), f, feature_format_from_path(path("f.key")));
  // Layout: "N 128", then per feature "y x scale orientation" and 128 integers, 20 per line.
  std::istringstream in(file_bytes(path("f.key")));
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "7 128");
  for (std::size_t i = 0; i < f.size(); ++i) {
    std::getline(in, line);
    std::istringstream ls(line);
    double y, x, s, o;
    ASSERT_TRUE(ls >> y >> x >> s >> o) << line;
    EXPECT_FLOAT_EQ(float(y), f.keypoints[i].y);
    EXPECT_FLOAT_EQ(float(x), f.keypoints[i].x);
    EXPECT_FLOAT_EQ(float(s), f.keypoints[i].size / 2);
    EXPECT_GT(o, -kPi);
    EXPECT_LE(o, kPi + 1e-6);
    EXPECT_NEAR(std::remainder(o - f.keypoints[i].angle * kPi / 180.0, 2 * kPi), 0.0, 1e-6);
    for (int l = 0; l < 7; ++l) {
      std::getline(in, line);
      std::istringstream ds(line);
      int v, count = 0;
      while (ds >> v) ++count;
      EXPECT_EQ(count, l < 6 ? 20 : 8);
    }
  }
  const Features r = read_features(path("f.key"));
  ASSERT_EQ(r.size(), f.size());
  for (std::size_t i = 0; i < f.size(); ++i) {
    EXPECT_EQ(r.keypoints[i].x, f.keypoints[i].x);
    EXPECT_EQ(r.keypoints[i].y, f.keypoints[i].y);
    EXPECT_EQ(r.keypoints[i].size, f.keypoints[i].size);
    const double da = std::remainder(double(r.keypoints[i].angle) - f.keypoints[i].angle, 360.0);
    EXPECT_NEAR(da, 0.0, 1e-3);
    EXPECT_GE(r.keypoints[i].angle, 0.0f);
    EXPECT_LT(r.keypoints[i].angle, 360.0f);
    EXPECT_EQ(r.keypoints[i].octave, 0);
    EXPECT_EQ(r.keypoints[i].response, 0.0f);
  }
  EXPECT_TRUE(r.descriptors == f.descriptors);
}

TEST_F(IoFiles, FeatureFormatNames) {
  EXPECT_EQ(parse_feature_format("key"), FeatureFormat::kKey);
  EXPECT_EQ(parse_feature_format("JSON"), FeatureFormat::kJson);
  EXPECT_EQ(parse_feature_format("bin"), FeatureFormat::kBinary);
  expect_error([] { parse_feature_format("xml"); }, ErrorCode::kInvalidArgument, "xml");
  EXPECT_EQ(feature_format_from_path("a/b.sift"), FeatureFormat::kKey);
  EXPECT_EQ(feature_format_from_path("a/b.JSON"), FeatureFormat::kJson);
  EXPECT_EQ(feature_format_from_path("a/b.feat"), FeatureFormat::kBinary);
}

TEST_F(IoFiles, MalformedKeyFilesAreRejected) {
  const std::string good = [&] {
    write_features_key(path("good.key"), sample_features());
    return file_bytes(path("good.key"));
  }();
  auto reject = [&](const std::string& name, const std::string& content, const std::string& needle) {
    SCOPED_TRACE(name);
    expect_error([&] { read_features_key(write_bytes(name, content)); }, ErrorCode::kBadFormat, needle);
  };
  reject("trunc.key", good.substr(0, good.size() / 2), "truncated");
  reject("count.key", "8" + good.substr(1), "truncated");
  reject("lie.key", "100000000 128\n1 2 3 4\n", "too short");
  reject("dim.key", "1 64\n", "descriptor length 64");
  reject("neg.key", "-1 128\n", "negative");
  std::string big = good;
  big.replace(big.find('\n', big.find('\n') + 1) + 1, 2, "256");  // a descriptor value out of range
  reject("range.key", big, "outside 0..255");
  reject("nan.key", "1 128\n1 2 nan 0\n", "finite");
  reject("word.key", "1 128\n1 2 x 0\n", "line 2");
  reject("extra.key", good + "5\n", "unexpected data");
}

TEST_F(IoFiles, MalformedJsonFilesAreRejected) {
  write_features_json(path("good.json"), sample_features());
  const std::string good = file_bytes(path("good.json"));
  auto reject = [&](const std::string& name, const std::string& content, const std::string& needle) {
    SCOPED_TRACE(name);
    expect_error([&] { read_features_json(write_bytes(name, content)); }, ErrorCode::kBadFormat, needle);
  };
  reject("syntax.json", good.substr(0, good.size() - 10), "invalid JSON at byte");
  reject("tag.json", R"({"format":"other","version":1,"keypoints":[],"descriptors":[]})", "not a spectrasift");
  reject("ver.json", R"({"format":"spectrasift-features","version":2,"keypoints":[],"descriptors":[]})", "version");
  reject("count.json",
         R"({"format":"spectrasift-features","version":1,"keypoints":[{"x":1,"y":2,"size":3,"angle":4}],"descriptors":[]})",
         "1 keypoints but 0 descriptors");
  std::string row = "[";
  for (int i = 0; i < 127; ++i) row += "1,";
  row += "1]";
  reject("short.json",
         R"({"format":"spectrasift-features","version":1,"keypoints":[{"x":1,"y":2,"size":3,"angle":4}],"descriptors":[)" +
             row.substr(0, row.size() - 3) + "]]}",
         "does not have 128");
  reject("field.json",
         R"({"format":"spectrasift-features","version":1,"keypoints":[{"y":2,"size":3,"angle":4}],"descriptors":[)" + row + "]}",
         "\"x\"");
  reject("str.json",
         R"({"format":"spectrasift-features","version":1,"keypoints":[{"x":"1","y":2,"size":3,"angle":4}],"descriptors":[)" + row + "]}",
         "keypoint 0");
  // The descriptor type: a string naming f32 or u8; a u8 file holds integers 0..255 only.
  const std::string head = R"({"format":"spectrasift-features","version":1,)";
  const std::string one_kp = R"("keypoints":[{"x":1,"y":2,"size":3,"angle":4}],"descriptors":[)";
  reject("type_num.json", head + R"("descriptor_type":8,)" + one_kp + row + "]}", "\"descriptor_type\" is not a string");
  reject("type_f16.json", head + R"("descriptor_type":"f16",)" + one_kp + row + "]}", "unknown \"descriptor_type\" \"f16\"");
  const std::string u8_head = head + R"("descriptor_type":"u8",)" + one_kp;
  auto u8_row = [&](const std::string& v) { return "[" + v + row.substr(2); };  // v, then 127 ones
  reject("u8_256.json", u8_head + u8_row("256") + "]}", "not an integer 0..255");
  reject("u8_neg.json", u8_head + u8_row("-1") + "]}", "u8_neg.json");
  reject("u8_frac.json", u8_head + u8_row("1.5") + "]}", "descriptor 0 value 0 (1.5)");
  reject("u8_big.json", u8_head + u8_row("1e300") + "]}", "not an integer 0..255");
  reject("u8_short.json", u8_head + row.substr(0, row.size() - 3) + "]]}", "does not have 128");
  {
    // 3.0 is the value 3; "uint8" (parse_descriptor_type's other name) is u8.
    const Features u = read_features_json(write_bytes(
        "u8_ok.json", head + R"("descriptor_type":"uint8",)" + one_kp + u8_row("3.0") + "]}"));
    EXPECT_EQ(u.descriptor_type, DescriptorType::kU8);
    ASSERT_EQ(u.descriptor_bytes.size(), 128u);
    EXPECT_EQ(u.descriptor_bytes[0], 3);
    EXPECT_EQ(u.descriptor_bytes[1], 1);
  }
  // And a minimal valid one is accepted.
  const Features f = read_features_json(write_bytes(
      "ok.json",
      R"({"format":"spectrasift-features","version":1,"keypoints":[{"x":1,"y":2,"size":3,"angle":4}],"descriptors":[)" + row + "]}"));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f.keypoints[0].size, 3.0f);
}

TEST_F(IoFiles, MalformedBinaryFilesAreRejected) {
  write_features_bin(path("good.bin"), sample_features());
  const std::string good = file_bytes(path("good.bin"));
  auto reject = [&](const std::string& name, const std::string& content, const std::string& needle) {
    SCOPED_TRACE(name);
    expect_error([&] { read_features_bin(write_bytes(name, content)); }, ErrorCode::kBadFormat, needle);
  };
  reject("short.bin", good.substr(0, 10), "truncated header");
  reject("magic.bin", "XXXX" + good.substr(4), "magic");
  reject("trunc.bin", good.substr(0, good.size() - 1), "truncated");
  reject("extra.bin", good + "x", "unexpected data");
  std::string huge = good.substr(0, 24);
  huge[8] = huge[9] = huge[10] = huge[11] = char(0xFF);  // 4 billion keypoints in a 24-byte file
  reject("huge.bin", huge, "truncated");
  std::string ver = good;
  ver[4] = 9;
  reject("ver.bin", ver, "version 9");
  std::string nan = good;
  const float q = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(&nan[24], &q, 4);  // x of keypoint 0
  reject("nan.bin", nan, "offset 24");
  // Version 2: the type field at offset 24 and the sizes it implies.
  write_features_bin(path("good_u8.bin"), sample_features().to_u8());
  const std::string good_u8 = file_bytes(path("good_u8.bin"));
  ASSERT_EQ(good_u8[4], 2);
  reject("v2_short.bin", good_u8.substr(0, 26), "truncated header (26 bytes, version 2 needs 28)");
  std::string type7 = good_u8;
  type7[24] = 7;
  reject("v2_type.bin", type7, "unknown descriptor type 7 at offset 24");
  std::string type_big = good_u8;
  type_big[27] = char(0x80);
  reject("v2_type_big.bin", type_big, "unknown descriptor type 2147483649 at offset 24");
  reject("v2_trunc.bin", good_u8.substr(0, good_u8.size() - 1), "truncated");
  reject("v2_extra.bin", good_u8 + "x", "unexpected data");
  std::string as_f32 = good_u8;
  as_f32[24] = 0;  // f32 rows would need 4 bytes a value
  reject("v2_as_f32.bin", as_f32, "truncated");
  std::string as_v1 = good_u8;
  as_v1[4] = 1;  // version 1 reads no type field: the sizes no longer agree
  reject("v2_as_v1.bin", as_v1, "bytes, the file has");
  std::string v3 = good_u8;
  v3[4] = 3;
  reject("v3.bin", v3, "unsupported version 3 at offset 4");
  std::string v2nan = good_u8;
  std::memcpy(&v2nan[28 + 4], &q, 4);  // y of keypoint 0, after the 28-byte header
  reject("v2_nan.bin", v2nan, "offset 28");
  huge = good_u8.substr(0, 28);
  huge[8] = huge[9] = huge[10] = huge[11] = char(0xFF);
  reject("v2_huge.bin", huge, "truncated");
  expect_error([&] { read_features(write_bytes("junk.feat", "\x01\x02junk")); }, ErrorCode::kBadFormat, "junk.feat");
}

TEST_F(IoFiles, FeatureWriterRejectsInconsistentFeatures) {
  Features f = sample_features();
  f.descriptors.pop_back();
  for (auto fmt : {FeatureFormat::kKey, FeatureFormat::kJson, FeatureFormat::kBinary})
    expect_error([&] { write_features(path("x.out"), f, fmt); }, ErrorCode::kInvalidArgument, "x.out");
  // u8 features are checked on their bytes: floats beside them do not count, a missing byte does.
  Features u = sample_features().to_u8();
  u.descriptor_bytes.pop_back();
  u.descriptors = sample_features().descriptors;
  for (auto fmt : {FeatureFormat::kKey, FeatureFormat::kJson, FeatureFormat::kBinary})
    expect_error([&] { write_features(path("u.out"), u, fmt); }, ErrorCode::kInvalidArgument, "u8 descriptor values");
  Features odd = sample_features();
  odd.descriptor_type = DescriptorType(7);
  expect_error([&] { write_features(path("t.out"), odd, FeatureFormat::kBinary); }, ErrorCode::kInvalidArgument,
               "unknown descriptor type");
  EXPECT_EQ(file_count(), 0u);
}

// ---------------------------------------------------------------------------------------------------
// Drawing

namespace {
Rgb pixel(const Image& im, int x, int y) {
  const std::uint8_t* p = im.data.data() + (std::size_t(y) * im.width + x) * 3;
  return {p[0], p[1], p[2]};
}
bool same(Rgb a, Rgb b) { return a.r == b.r && a.g == b.g && a.b == b.b; }
std::size_t count_color(const Image& im, Rgb c) {
  std::size_t n = 0;
  for (int y = 0; y < im.height; ++y)
    for (int x = 0; x < im.width; ++x) n += same(pixel(im, x, y), c);
  return n;
}
}  // namespace

TEST(Draw, MakeRgbFromEveryType) {
  Image g = Image::allocate(2, 1, 1, PixelType::kU8);
  g.data = {7, 250};
  EXPECT_TRUE(same(pixel(make_rgb(g), 1, 0), Rgb{250, 250, 250}));
  Image w = Image::allocate(1, 1, 3, PixelType::kU16);
  w.as<std::uint16_t>()[0] = 65535;
  w.as<std::uint16_t>()[1] = 257 * 10;
  w.as<std::uint16_t>()[2] = 0;
  EXPECT_TRUE(same(pixel(make_rgb(w), 0, 0), Rgb{255, 10, 0}));
  Image f = Image::allocate(1, 1, 4, PixelType::kF32);
  const float v[4] = {0.5f, 2.0f, -1.0f, 0.0f};
  std::memcpy(f.data.data(), v, sizeof v);
  EXPECT_TRUE(same(pixel(make_rgb(f), 0, 0), Rgb{128, 255, 0}));
  ImageF gf;
  gf.width = 2;
  gf.height = 1;
  gf.data = {10.0f, 20.0f};
  EXPECT_TRUE(same(pixel(make_rgb(gf, 10.0f, 20.0f), 1, 0), colors::kWhite));
  EXPECT_THROW(draw_line(g, {0, 0}, {1, 0}, colors::kRed), Error);  // not an RGB canvas
}

TEST(Draw, LinesAndCirclesHitTheRightPixels) {
  Image im = blank_rgb(100, 80);
  draw_line(im, {10, 20}, {90, 20}, colors::kRed, 1.0, false);
  for (int x = 10; x <= 90; ++x) EXPECT_TRUE(same(pixel(im, x, 20), colors::kRed)) << x;
  EXPECT_TRUE(same(pixel(im, 50, 22), colors::kBlack));
  EXPECT_TRUE(same(pixel(im, 5, 20), colors::kBlack));
  EXPECT_EQ(count_color(im, colors::kRed), 81u);
  // A diagonal: every pixel on it is fully covered.
  draw_line(im, {0, 79}, {79, 0}, colors::kGreen, 1.0, true);
  for (int x = 0; x < 80; ++x) EXPECT_TRUE(same(pixel(im, x, 79 - x), colors::kGreen)) << x;
  // Circle of radius 15 around (50, 50): the axis points are inked, the centre and the outside are not.
  Image c = blank_rgb(100, 100);
  draw_circle(c, {50, 50}, 15, colors::kBlue, 1.0, false);
  for (auto [x, y] : {std::pair{65, 50}, {35, 50}, {50, 65}, {50, 35}}) EXPECT_TRUE(same(pixel(c, x, y), colors::kBlue));
  EXPECT_TRUE(same(pixel(c, 50, 50), colors::kBlack));
  EXPECT_TRUE(same(pixel(c, 50, 53), colors::kBlack));
  EXPECT_TRUE(same(pixel(c, 67, 50), colors::kBlack));
  // About 2 pi r pixels.
  EXPECT_NEAR(double(count_color(c, colors::kBlue)), 2 * kPi * 15, 2 * kPi * 15 * 0.35);
  // Shapes far outside are clipped without touching anything.
  Image e = blank_rgb(10, 10);
  draw_line(e, {-1e6, -5}, {-1e5, -7}, colors::kRed);
  draw_circle(e, {1e7, 1e7}, 5, colors::kRed);
  fill_rect(e, -100, -100, 50, 50, colors::kRed);
  EXPECT_EQ(count_color(e, colors::kBlack), 100u);
  fill_rect(e, 8, 8, 100, 100, colors::kRed);
  EXPECT_EQ(count_color(e, colors::kRed), 4u);
}

TEST(Draw, TextUsesTheBuiltInFont) {
  Image im = blank_rgb(60, 30);
  draw_text(im, 2, 3, "1", colors::kWhite, 2);
  // The glyph '1' has 10 ink pixels; at scale 2 each is a 2x2 block.
  EXPECT_EQ(count_color(im, colors::kWhite), 40u);
  EXPECT_TRUE(same(pixel(im, 2 + 2 * 2, 3), colors::kWhite));  // top of the stem (column 2, row 0)
  EXPECT_TRUE(same(pixel(im, 2, 3), colors::kBlack));
  EXPECT_EQ(text_width("AB"), 11);
  EXPECT_EQ(text_width("AB", 3), 33);
  EXPECT_EQ(text_height("A\nB"), 16);
  // Lower case has its own glyphs; unknown characters draw as a box (distinct from space).
  Image a = blank_rgb(20, 10), b = blank_rgb(20, 10), u = blank_rgb(20, 10);
  draw_text(a, 0, 0, "sift", colors::kWhite);
  draw_text(b, 0, 0, "SIFT", colors::kWhite);
  draw_text(u, 0, 0, "\x01", colors::kWhite);
  EXPECT_FALSE(a.data == b.data);
  EXPECT_EQ(count_color(u, colors::kWhite), 20u);
  // Every letter a-z has a glyph of its own: none is the unknown box, none equals its capital, all differ.
  std::vector<std::vector<std::uint8_t>> seen;
  for (char c = 'a'; c <= 'z'; ++c) {
    Image l = blank_rgb(6, 8), cap = blank_rgb(6, 8);
    draw_text(l, 0, 0, std::string(1, c), colors::kWhite);
    draw_text(cap, 0, 0, std::string(1, char(c - 'a' + 'A')), colors::kWhite);
    EXPECT_FALSE(l.data == u.data) << c;
    EXPECT_FALSE(l.data == cap.data) << c;
    EXPECT_GT(count_color(l, colors::kWhite), 5u) << c;
    for (const auto& d : seen) EXPECT_FALSE(d == l.data) << c;
    seen.push_back(l.data);
  }
  // A descender reaches the 8th row: g's tail.
  Image g = blank_rgb(6, 8);
  draw_text(g, 0, 0, "g", colors::kWhite);
  EXPECT_TRUE(same(pixel(g, 2, 7), colors::kWhite));
}

TEST(Draw, AddTitlePutsAStripAboveTheImage) {
  Image im = blank_rgb(40, 10, colors::kRed);
  const Image t = add_title(im, "Spectral angle to 'a very long reference name'\nscene.hdr");
  EXPECT_EQ(t.width, 40);
  EXPECT_EQ(t.height, 10 + 2 * kGlyphHeight + 4);  // two lines and a margin
  // The image sits unchanged below the strip; the strip holds white text on a dark background.
  EXPECT_TRUE(std::equal(im.data.begin(), im.data.end(), t.data.begin() + std::ptrdiff_t(std::size_t(2 * kGlyphHeight + 4) * t.row_bytes())));
  EXPECT_GT(count_color(t, colors::kWhite), 20u);
  EXPECT_EQ(count_color(t, colors::kRed), 400u);
}

TEST(Draw, ColormapsAndLegend) {
  EXPECT_TRUE(same(colormap_color(Colormap::kViridis, 0.0), Rgb{68, 1, 84}));
  EXPECT_TRUE(same(colormap_color(Colormap::kViridis, 1.0), Rgb{253, 231, 37}));
  EXPECT_TRUE(same(colormap_color(Colormap::kTurbo, 0.0), Rgb{48, 18, 59}));
  EXPECT_TRUE(same(colormap_color(Colormap::kGray, 0.5), Rgb{128, 128, 128}));
  EXPECT_TRUE(same(colormap_color(Colormap::kGray, 7.0), colors::kWhite));  // clamped
  EXPECT_EQ(parse_colormap("Turbo"), Colormap::kTurbo);
  EXPECT_THROW(parse_colormap("jet"), Error);
  // Viridis gets brighter monotonically (its defining property); check the green channel + red.
  int prev = -1;
  for (int i = 0; i <= 255; i += 5) {
    const Rgb c = colormap_color(Colormap::kViridis, i / 255.0);
    const int lum = 299 * c.r + 587 * c.g + 114 * c.b;
    EXPECT_GE(lum, prev) << i;
    prev = lum;
  }
  ImageF v;
  v.width = 3;
  v.height = 1;
  v.data = {0.0f, 1.0f, std::numeric_limits<float>::quiet_NaN()};
  const Image h = apply_colormap(v, 0.0f, 1.0f, Colormap::kInferno, colors::kCyan);
  EXPECT_TRUE(same(pixel(h, 0, 0), colormap_color(Colormap::kInferno, 0.0)));
  EXPECT_TRUE(same(pixel(h, 1, 0), colormap_color(Colormap::kInferno, 1.0)));
  EXPECT_TRUE(same(pixel(h, 2, 0), colors::kCyan));
  Image canvas = blank_rgb(120, 140);
  const int used = draw_colorbar(canvas, 10, 20, 12, 100, Colormap::kViridis, 0.0, 1.0, "SAM");
  EXPECT_GT(used, 12);
  EXPECT_TRUE(same(pixel(canvas, 15, 20), colormap_color(Colormap::kViridis, 1.0)));   // top = hi
  EXPECT_TRUE(same(pixel(canvas, 15, 119), colormap_color(Colormap::kViridis, 0.0)));  // bottom = lo
}

TEST(Draw, KeypointsAreRichCirclesWithOrientation) {
  Image grey = Image::allocate(120, 100, 1, PixelType::kU8);
  Features f;
  Keypoint k;
  k.x = 50;
  k.y = 50;
  k.size = 40;   // radius 20
  k.angle = 90;  // y down: the line points down the image
  f.keypoints.push_back(k);
  f.descriptors.assign(128, 0.0f);
  const Image out = draw_keypoints(grey, f, colors::kYellow);
  ASSERT_EQ(out.channels, 3);
  EXPECT_TRUE(same(pixel(out, 70, 50), colors::kYellow));  // on the circle
  EXPECT_TRUE(same(pixel(out, 30, 50), colors::kYellow));
  EXPECT_TRUE(same(pixel(out, 50, 60), colors::kYellow));  // on the orientation line (down)
  EXPECT_TRUE(same(pixel(out, 50, 40), colors::kBlack));   // not up
  EXPECT_TRUE(same(pixel(out, 60, 50), colors::kBlack));   // inside the circle, off the line
  const Image side = hconcat(out, make_rgb(grey));
  EXPECT_EQ(side.width, 240);
  EXPECT_EQ(side.height, 100);
  EXPECT_TRUE(same(pixel(side, 70, 50), colors::kYellow));
  EXPECT_TRUE(same(pixel(side, 190, 50), colors::kBlack));
}

// Regression tests for bugs found by fuzzing and the sanitizer builds (issue 5). Each test names the
// fuzz target or build that found the bug and carries the reproducer inline.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "spectrasift/envi.hpp"
#include "spectrasift/error.hpp"
#include "spectrasift/io.hpp"

namespace {

using namespace spectrasift;
namespace fs = std::filesystem;

class Regression : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("spectrasift_regression_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path write(const std::string& name, const std::string& bytes) {
    const fs::path p = dir_ / name;
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
  }
  fs::path dir_;
};

std::string json_features(const std::string& width, const std::string& octave = "0") {
  std::string desc = "[";
  for (int i = 0; i < 128; ++i) desc += (i ? ",1" : "1");
  desc += "]";
  return R"({"format":"spectrasift-features","version":1,"image":{"width":)" + width +
         R"(,"height":48},"keypoints":[{"x":1.5,"y":2.5,"size":3,"angle":10,"response":0.01,"octave":)" + octave +
         R"(,"layer":1}],"descriptors":[)" + desc + "]}";
}

ErrorCode read_error(const fs::path& p) {
  try {
    (void)read_features(p);
  } catch (const Error& e) {
    return e.code();
  }
  ADD_FAILURE() << p << " was read without an error";
  return ErrorCode::kInternal;
}

// features_fuzz / UBSan: "image":{"width":1e300} was converted with nlohmann's get<int>(), a float-to-int
// conversion out of range (undefined behaviour; UBSan: "1e+300 is outside the range of representable
// values of type 'int'"), and an integer width of 5e9 wrapped to 705032704 and was accepted.
TEST_F(Regression, FeaturesJsonImageSizeOutOfIntRangeIsAnError) {
  EXPECT_EQ(read_error(write("float.json", json_features("1e300"))), ErrorCode::kBadFormat);
  EXPECT_EQ(read_error(write("wrap.json", json_features("5000000000"))), ErrorCode::kBadFormat);
  EXPECT_EQ(read_error(write("negative.json", json_features("-1"))), ErrorCode::kBadFormat);
  EXPECT_EQ(read_error(write("fraction.json", json_features("64.5"))), ErrorCode::kBadFormat);
  // A keypoint's octave that does not fit in 32 bits wrapped the same way (2^32 + 1 read as octave 1).
  EXPECT_EQ(read_error(write("octave.json", json_features("64", "4294967297"))), ErrorCode::kBadFormat);
  // The valid file next to them reads.
  const Features f = read_features(write("ok.json", json_features("64", "-1")));
  EXPECT_EQ(f.image_width, 64);
  EXPECT_EQ(f.image_height, 48);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f.keypoints[0].octave, -1);
}

// Review of the readers while writing features_fuzz: Lowe's .key reader accepted a finite double that
// overflows float ("1e300" -> +inf coordinates, "1e39" as scale -> +inf size) although the JSON and binary
// readers refuse non-finite keypoints; the infinities then reached matching and RANSAC.
TEST_F(Regression, FeaturesKeyCoordinatesBeyondFloatRangeAreAnError) {
  auto key = [](const std::string& y, const std::string& scale) {
    std::string s = "1 128\n" + y + " 20.5 " + scale + " 0.5\n";
    for (int i = 0; i < 128; ++i) s += (i % 20 == 0 ? "\n " : " ") + std::to_string(i);
    return s + "\n";
  };
  EXPECT_EQ(read_error(write("y.key", key("1e300", "1.6"))), ErrorCode::kBadFormat);
  EXPECT_EQ(read_error(write("scale.key", key("10", "1e39"))), ErrorCode::kBadFormat);
  const Features f = read_features(write("ok.key", key("10", "1.6")));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_FLOAT_EQ(f.keypoints[0].y, 10.0f);
  EXPECT_FLOAT_EQ(f.keypoints[0].size, 3.2f);
  EXPECT_EQ(f.descriptors[127], 127.0f);
}

// features_fuzz (crash-a605ba9a...): a JSON number that overflows a double ("1e999") makes nlohmann's parser
// throw out_of_range (406), not parse_error; it escaped read_features as a foreign exception.
TEST_F(Regression, FeaturesJsonNumberOverflowIsAnError) {
  EXPECT_EQ(read_error(write("overflow.json", R"({"format":1e999})")), ErrorCode::kBadFormat);
  EXPECT_EQ(read_error(write("overflow2.json", json_features("1e999"))), ErrorCode::kBadFormat);
}

// library_fuzz (CI smoke, 2026-11-29): a .sli whose 'file type' was damaged ("ENVI Spectral Libra" + NULs)
// escaped the header parser's library check, so 'wavelength = {8}' (1 value) passed for a 4-sample library
// and read_envi_library returned 1 wavelength for 4 bands. Read as a library, the counts are checked
// against the samples.
TEST_F(Regression, SpectralLibraryWavelengthCountIsCheckedAgainstSamples) {
  write("lib.hdr", std::string("ENVI\nsamples = 4\nlines = 2\nbands = 1\ndata type = 1\nfile type = ENVI Spectral Libra") +
                       std::string(8, '\0') + "\ninterleave = bsq\nwavelength = {8}\n");
  const fs::path sli = write("lib.sli", std::string("\x00\x01\x02\x03\x04\x05\x06\x07", 8));
  try {
    (void)read_envi_library(sli);
    ADD_FAILURE() << "a 1-value wavelength list was accepted for a 4-sample library";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBadFormat) << e.what();
    EXPECT_NE(std::string(e.what()).find("wavelength"), std::string::npos) << e.what();
  }
  // The same library with 4 wavelengths reads.
  write("lib.hdr", "ENVI\nsamples = 4\nlines = 2\nbands = 1\ndata type = 1\nfile type = ENVI Spectral Library\n"
                   "interleave = bsq\nwavelength = {400, 500, 600, 700}\n");
  const SpectralLibrary lib = read_envi_library(sli);
  EXPECT_EQ(lib.bands, 4);
  EXPECT_EQ(lib.wavelength.size(), 4u);
}

}  // namespace

// ENVI reader and writer: every data type, interleave and byte order; header syntax; data file lookup;
// malformed input gives clear errors; writers round-trip and leave no partial output; libraries.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "spectral_test_util.hpp"
#include "spectrasift/envi.hpp"
#include "spectrasift/error.hpp"

using namespace spectrasift;
using namespace spectrasift::test;

namespace {

/// Expects `f` to throw Error with `code` and a message containing every one of `parts`.
template <class F>
void expect_error(F&& f, ErrorCode code, std::initializer_list<std::string> parts) {
  try {
    f();
    ADD_FAILURE() << "no error thrown";
  } catch (const Error& e) {
    EXPECT_EQ(int(e.code()), int(code)) << e.what();
    for (const auto& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << "'" << p << "' not in: " << e.what();
  }
}

const char* kMinimal = "ENVI\nsamples = 3\nlines = 2\nbands = 4\nheader offset = 0\ndata type = 2\ninterleave = bsq\nbyte order = 0\n";

}  // namespace

TEST(EnviHeader, ParsesBracesOverLinesCommentsAndKeysInAnyCase) {
  TempDir dir("envi");
  write_text(dir / "a.hdr",
             "ENVI\n"
             "; a comment line\n"
             "description = {two\n  lines}\n"
             "SAMPLES = 3\n"
             "Lines=2\n"
             "  Bands   =  4\n"
             "Data  Type = 12\n"
             "INTERLEAVE = BIL\n"
             "byte order = 1\n"
             "header offset = 16\n"
             "wavelength units = Nanometers\n"
             "wavelength = {400.5, 500,\n 600.25,\n 700}\n"
             "fwhm = {10, 10, 10, 12}\n"
             "bbl = {1, 0, 1.0, 1}\n"
             "data ignore value = -9999\n"
             "reflectance scale factor = 10000\n"
             "band names = {a b, c,\n d, e}\n"
             "map info = {UTM, 1.000, 1.000, 500000.0, 4000000.0, 2.0, 2.0, 11, North, WGS-84}\n");
  const EnviHeader h = read_envi_header(dir / "a.hdr");
  EXPECT_EQ(h.samples, 3);
  EXPECT_EQ(h.lines, 2);
  EXPECT_EQ(h.bands, 4);
  EXPECT_EQ(h.data_type, SampleType::kU16);
  EXPECT_EQ(h.interleave, Interleave::kBil);
  EXPECT_TRUE(h.big_endian);
  EXPECT_EQ(h.header_offset, 16u);
  ASSERT_EQ(h.wavelength.size(), 4u);
  EXPECT_DOUBLE_EQ(h.wavelength[0], 400.5);
  EXPECT_DOUBLE_EQ(h.wavelength[2], 600.25);
  EXPECT_EQ(h.wavelength_units, "Nanometers");
  EXPECT_EQ(h.fwhm.size(), 4u);
  EXPECT_EQ(h.bbl, (std::vector<int>{1, 0, 1, 1}));
  ASSERT_TRUE(h.data_ignore_value);
  EXPECT_EQ(*h.data_ignore_value, -9999.0);
  ASSERT_TRUE(h.reflectance_scale_factor);
  EXPECT_EQ(*h.reflectance_scale_factor, 10000.0);
  EXPECT_EQ(h.band_names, (std::vector<std::string>{"a b", "c", "d", "e"}));
  EXPECT_NE(h.fields.at("map info").find("UTM"), std::string::npos);
  EXPECT_NE(h.description.find("two"), std::string::npos);
}

TEST(EnviHeader, MalformedHeadersGiveClearErrors) {
  TempDir dir("envi");
  struct Case {
    std::string text;
    ErrorCode code;
    std::vector<std::string> parts;
  };
  const std::vector<Case> cases = {
      {"ENVI\nlines = 2\nbands = 4\ndata type = 2\n", ErrorCode::kBadFormat, {"samples", "missing"}},
      {"ENVI\nsamples = 3\nlines = 2\nbands = 4\n", ErrorCode::kBadFormat, {"data type", "missing"}},
      {"ENVI\nsamples = 3\nlines = 2\nbands = 4\ndata type = 7\n", ErrorCode::kBadFormat, {"data type = 7"}},
      {"ENVI\nsamples = 3\nlines = 2\nbands = 4\ndata type = 6\n", ErrorCode::kUnsupported, {"complex"}},
      {"ENVI\nsamples = 3\nlines = 2\nbands = 4\ndata type = 9\n", ErrorCode::kUnsupported, {"complex"}},
      {"ENVI\nsamples = 3x\nlines = 2\nbands = 4\ndata type = 2\n", ErrorCode::kBadFormat, {"samples = 3x", "integer"}},
      {"ENVI\nsamples = 0\nlines = 2\nbands = 4\ndata type = 2\n", ErrorCode::kBadFormat, {"samples = 0", "range"}},
      {"ENVI\nsamples = 3\nlines = 2\nbands = 4\ndata type = 2\nwavelength = {1, 2, x, 4}\n", ErrorCode::kBadFormat,
       {"wavelength", "'x'"}},
      {"ENVI\nsamples = 3\nlines = 2\nbands = 4\ndata type = 2\nwavelength = {1, 2, 3}\n", ErrorCode::kBadFormat,
       {"wavelength", "3 values", "4 bands"}},
      {"ENVI\nsamples = 3\nlines = 2\nbands = 4\ndata type = 2\nbbl = {1, 2, 1, 1}\n", ErrorCode::kBadFormat, {"bbl"}},
      {"ENVI\nsamples = 3\nlines = 2\nbands = 4\ndata type = 2\ninterleave = bip2\n", ErrorCode::kBadFormat, {"interleave"}},
      {"ENVI\nsamples = 3\nlines = 2\nbands = 4\ndata type = 2\nbyte order = 2\n", ErrorCode::kBadFormat, {"byte order"}},
      {"ENVI\nsamples = 3\nlines = 2\nbands = 4\ndata type = 2\nband names = {a, b\n", ErrorCode::kBadFormat,
       {"never closed"}},
      {"ENVI\nsamples = 3\nlines = 2\nbands = 4\ndata type = 2\nreflectance scale factor = -1\n", ErrorCode::kBadFormat,
       {"reflectance scale factor"}},
      {"ENVI\nsamples = 3\nlines = 2\nbands = 4\ndata type = 2\ndata ignore value = abc\n", ErrorCode::kBadFormat,
       {"data ignore value", "not a number"}},
      {"ENVI\nsamples = 3\njunk line\n", ErrorCode::kBadFormat, {"line 3", "key = value"}},
      {"not an envi header\nsamples = 3\n", ErrorCode::kBadFormat, {"ENVI"}},
  };
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const fs::path p = dir / ("h" + std::to_string(i) + ".hdr");
    write_text(p, cases[i].text);
    SCOPED_TRACE(cases[i].text);
    std::initializer_list<std::string> dummy{};
    (void)dummy;
    try {
      read_envi_header(p);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(int(e.code()), int(cases[i].code)) << e.what();
      EXPECT_NE(std::string(e.what()).find(p.string()), std::string::npos) << "the message names the file: " << e.what();
      for (const auto& part : cases[i].parts)
        EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << "'" << part << "' not in: " << e.what();
    }
  }
}

TEST(EnviCube, EveryTypeInterleaveAndByteOrderReadsTheSameValues) {
  TempDir dir("envi");
  TestCube c = TestCube::zeros(5, 3, 4);
  for (int y = 0; y < 3; ++y)
    for (int x = 0; x < 5; ++x)
      for (int b = 0; b < 4; ++b) c.at(y, x, b) = 1 + y * 37 + x * 7 + b * 3;  // <= 127: fits every type
  for (int type : {1, 2, 3, 4, 5, 12, 13, 14, 15})
    for (const char* il : {"bsq", "bil", "bip"})
      for (bool big : {false, true}) {
        const std::string name = "c" + std::to_string(type) + il + (big ? "b" : "l");
        SCOPED_TRACE(name);
        const auto hdr = write_cube(dir.path(), name, c, type, il, big);
        const EnviCube cube = open_envi(hdr);
        EXPECT_EQ(int(cube.header().data_type), type);
        EXPECT_EQ(cube.data_bytes(), 5u * 3 * 4 * type_size(type));
        for (int y = 0; y < 3; ++y)
          for (int x = 0; x < 5; ++x)
            for (int b = 0; b < 4; ++b) ASSERT_EQ(cube.value(y, x, b), c.at(y, x, b)) << y << "," << x << "," << b;
      }
}

TEST(EnviCube, ExtremeValuesOfEachType) {
  TempDir dir("envi");
  struct V {
    int type;
    double value;
  };
  for (const V& v : {V{1, 255}, V{2, -32768}, V{2, 32767}, V{3, -2147483648.0}, V{12, 65535}, V{13, 4294967295.0},
                     V{4, -1.5e-3}, V{5, 1.0 / 3.0}, V{14, -9007199254740992.0}, V{15, 18446744073709549568.0}}) {
    TestCube c = TestCube::zeros(1, 1, 1);
    c.at(0, 0, 0) = v.value;
    for (bool big : {false, true}) {
      const auto hdr = write_cube(dir.path(), "x", c, v.type, "bsq", big);
      const double expected = v.type == 4 ? double(float(v.value)) : v.value;
      EXPECT_EQ(open_envi(hdr).value(0, 0, 0), expected) << "type " << v.type << " big " << big;
    }
  }
}

TEST(EnviCube, HeaderOffsetIsSkipped) {
  TempDir dir("envi");
  TestCube c = TestCube::random(4, 3, 5, 1, true, 100);
  const auto hdr = write_cube(dir.path(), "off", c, 2, "bip", false, {}, 123);
  const EnviCube cube = open_envi(hdr);
  for (int y = 0; y < 3; ++y)
    for (int x = 0; x < 4; ++x)
      for (int b = 0; b < 5; ++b) ASSERT_EQ(cube.value(y, x, b), c.at(y, x, b));
}

TEST(EnviCube, DataFileIsFoundByName) {
  TempDir dir("envi");
  TestCube c = TestCube::random(2, 2, 2, 2, true, 50);
  for (const char* ext : {"", ".img", ".dat", ".raw", ".bsq", ".bil", ".bip", ".IMG", ".DAT", ".Raw"}) {
    const std::string name = std::string("f") + (ext[0] ? ext + 1 : "none");
    const auto hdr = write_cube(dir.path(), name, c, 2, "bsq", false, {}, 0, ext);
    if (std::string(ext) == ".Raw") {
      // Mixed case is not one of the two spellings tried: the error lists what was tried.
      expect_error([&] { open_envi(hdr); }, ErrorCode::kIo, {"no data file", name + ".img", name + ".RAW"});
      continue;
    }
    EXPECT_EQ(open_envi(hdr).data_path().filename().string(), name + ext) << ext;
  }
  // Opening by the data file's path finds the header beside it.
  const auto hdr = write_cube(dir.path(), "bydata", c, 2, "bsq", false);
  EXPECT_EQ(open_envi(dir / "bydata.img").header().samples, 2);
}

TEST(EnviCube, TruncatedDataNamesBothFilesAndSizes) {
  TempDir dir("envi");
  TestCube c = TestCube::random(5, 4, 3, 3, true, 100);
  const auto hdr = write_cube(dir.path(), "t", c, 2, "bsq", false);
  fs::resize_file(dir / "t.img", 5 * 4 * 3 * 2 - 1);
  expect_error([&] { open_envi(hdr); }, ErrorCode::kBadFormat,
               {(dir / "t.img").string(), hdr.string(), "119 bytes", "120 bytes", "too small"});
  // A header offset counts too.
  const auto hdr2 = write_cube(dir.path(), "t2", c, 2, "bsq", false, {}, 10);
  fs::resize_file(dir / "t2.img", 120);
  expect_error([&] { open_envi(hdr2); }, ErrorCode::kBadFormat, {"header offset of 10", "130 bytes"});
}

TEST(EnviCube, PixelLimitIsCheckedBeforeMapping) {
  TempDir dir("envi");
  write_text(dir / "big.hdr", "ENVI\nsamples = 100000\nlines = 100000\nbands = 200\ndata type = 2\n");
  write_text(dir / "big.img", "x");
  expect_error([&] { open_envi(dir / "big.hdr", 1u << 30); }, ErrorCode::kOutOfMemory,
               {"big.hdr: cube of 100000 x 100000 = 10000000000 pixels exceeds the limit of 1073741824 pixels",
                "--max-pixels", "SPECTRASIFT_MAX_PIXELS"});
  // Without a limit the size check still catches it.
  expect_error([&] { open_envi(dir / "big.hdr"); }, ErrorCode::kBadFormat, {"too small"});
}

TEST(EnviCube, MissingHeaderOrDataFile) {
  TempDir dir("envi");
  expect_error([&] { open_envi(dir / "nothing.hdr"); }, ErrorCode::kIo, {"nothing.hdr"});
  write_text(dir / "lonely.hdr", kMinimal);
  expect_error([&] { open_envi(dir / "lonely.hdr"); }, ErrorCode::kIo, {"no data file", "lonely.img"});
}

TEST(EnviWriter, Float32RoundTripCopiesMapInfoAndBandNames) {
  TempDir dir("envi");
  EnviHeader like;
  like.bands = 2;
  like.wavelength = {450, 550};
  like.wavelength_units = "Nanometers";
  like.fields["map info"] = "UTM, 1, 1, 10, 20, 2, 2, 11, North, WGS-84";
  like.fields["coordinate system string"] = "PROJCS[\"x\"]";
  const std::vector<float> data = {1, 2, 3, 4, 5, 6, -7.5f, std::nanf(""), 9, 10, 11, 12};
  write_envi_f32(dir / "o.hdr", 3, 2, {"first band", "second"}, data.data(), &like);
  const EnviCube c = open_envi(dir / "o.hdr");
  EXPECT_EQ(c.data_path().filename(), "o.img");
  EXPECT_EQ(c.header().data_type, SampleType::kF32);
  EXPECT_EQ(c.header().interleave, Interleave::kBsq);
  EXPECT_EQ(c.header().band_names, (std::vector<std::string>{"first band", "second"}));
  EXPECT_EQ(c.header().fields.at("map info"), like.fields["map info"]);
  EXPECT_EQ(c.header().fields.at("coordinate system string"), like.fields["coordinate system string"]);
  EXPECT_EQ(c.header().wavelength, like.wavelength);  // same band count: wavelengths copied
  EXPECT_EQ(c.value(0, 0, 0), 1.0);
  EXPECT_EQ(c.value(1, 2, 0), 6.0);
  EXPECT_EQ(c.value(0, 0, 1), -7.5);
  EXPECT_TRUE(std::isnan(c.value(0, 1, 1)));
  // A different band count: no wavelengths (they would describe other bands).
  write_envi_f32(dir / "p.hdr", 3, 2, {"x", "y", "z"}, std::vector<float>(18, 1.0f).data(), &like);
  EXPECT_TRUE(open_envi(dir / "p.hdr").header().wavelength.empty());
  EXPECT_EQ(open_envi(dir / "p.hdr").header().fields.at("map info"), like.fields["map info"]);
}

TEST(EnviWriter, Int32RoundTrip) {
  TempDir dir("envi");
  const std::vector<std::int32_t> idx = {-1, 0, 1, 2, 2147483647, -2147483647 - 1};
  write_envi_i32(dir / "i.hdr", 2, 3, {"index"}, idx.data());
  const EnviCube c = open_envi(dir / "i.hdr");
  EXPECT_EQ(c.header().data_type, SampleType::kI32);
  for (int k = 0; k < 6; ++k) EXPECT_EQ(c.value(k / 2, k % 2, 0), double(idx[k]));
}

TEST(EnviWriter, FailureLeavesNoPartialOutput) {
  TempDir dir("envi");
  const std::vector<float> data(6, 1.0f);
  // A directory where the data file should go makes the rename fail after both temporaries are written.
  fs::create_directories(dir / "o.img" / "sub");
  EXPECT_THROW(write_envi_f32(dir / "o.hdr", 3, 2, {"b"}, data.data()), Error);
  EXPECT_FALSE(fs::exists(dir / "o.hdr"));
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir.path())) files += e.is_regular_file();
  EXPECT_EQ(files, 0) << "temporary files were left behind";
  // Names ENVI cannot hold are refused before writing anything.
  EXPECT_THROW(write_envi_f32(dir / "q.hdr", 3, 2, {"a,b"}, data.data()), Error);
  EXPECT_FALSE(fs::exists(dir / "q.hdr"));
  EXPECT_FALSE(fs::exists(dir / "q.img"));
}

TEST(EnviLibrary, SliWithSpectraNamesAndWavelengths) {
  TempDir dir("envi");
  TestCube c = TestCube::zeros(4, 2, 1);  // 2 spectra of 4 samples
  for (int i = 0; i < 2; ++i)
    for (int s = 0; s < 4; ++s) c.at(i, s, 0) = 0.25 * (i + 1) * (s + 1);
  write_cube(dir.path(), "lib", c, 4, "bsq", true,
             "file type = ENVI Spectral Library\nspectra names = {grass, dry soil}\nwavelength = {0.4, 0.5, 0.6, 0.7}\n"
             "wavelength units = Micrometers\n",
             0, ".sli");
  const SpectralLibrary lib = read_library(dir / "lib.sli");
  EXPECT_EQ(lib.count, 2);
  EXPECT_EQ(lib.bands, 4);
  EXPECT_EQ(lib.names, (std::vector<std::string>{"grass", "dry soil"}));
  EXPECT_EQ(lib.wavelength.size(), 4u);
  EXPECT_EQ(lib.wavelength_units, "Micrometers");
  EXPECT_FLOAT_EQ(lib.spectra[1 * 4 + 3], 0.25f * 2 * 4);
  EXPECT_EQ(read_library(dir / "lib.hdr").count, 2);
}

TEST(EnviLibrary, CsvReadsAndReportsBadRows) {
  TempDir dir("envi");
  write_text(dir / "l.csv", "Wavelength (nm),grass,\"soil\"\n400,0.1,0.2\n500,0.15,0.25\n\n600,0.3,0.35\n");
  const SpectralLibrary lib = read_library(dir / "l.csv");
  EXPECT_EQ(lib.count, 2);
  EXPECT_EQ(lib.bands, 3);
  EXPECT_EQ(lib.names, (std::vector<std::string>{"grass", "soil"}));
  EXPECT_EQ(lib.wavelength, (std::vector<double>{400, 500, 600}));
  EXPECT_EQ(lib.wavelength_units, "nm");
  EXPECT_FLOAT_EQ(lib.spectra[1 * 3 + 2], 0.35f);
  write_text(dir / "ragged.csv", "wavelength,a,b\n400,1,2\n500,1\n");
  expect_error([&] { read_csv_library(dir / "ragged.csv"); }, ErrorCode::kBadFormat, {"ragged.csv", "line 3", "2 values"});
  write_text(dir / "nan.csv", "wavelength,a\n400,1\n500,one\n");
  expect_error([&] { read_csv_library(dir / "nan.csv"); }, ErrorCode::kBadFormat, {"line 3", "'one'", "not a number"});
  write_text(dir / "empty.csv", "");
  expect_error([&] { read_csv_library(dir / "empty.csv"); }, ErrorCode::kBadFormat, {"empty"});
}

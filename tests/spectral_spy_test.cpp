// Spectral Python (Debian's python3-spectral, run with /usr/bin/python3) against the CPU backend on the
// real HYDICE scene of tests/data: spectral_angles with the mean target spectrum and five pixel spectra.
// Skipped with a message when /usr/bin/python3 or its spectral module is missing (e.g. the GPU machine).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <array>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "harness_util.hpp"
#include "spectral_test_util.hpp"
#include "spectrasift/spectral.hpp"

using namespace spectrasift;
using namespace spectrasift::test;

TEST(SpectralSpy, SpectralAnglesAgreeOnTheHydiceScene) {
  int status = 0;
  run_capture("/usr/bin/python3 -c 'import spectral, numpy' 2>/dev/null", status);
  if (status != 0) GTEST_SKIP() << "Spectral Python is missing (/usr/bin/python3 with python3-spectral and python3-numpy)";

  const fs::path data = SPECTRASIFT_TEST_DATA;
  const EnviCube cube = open_envi(data / "hydice_data.hdr");
  const EnviCube targets = open_envi(data / "hydice_data_targets.hdr");
  std::vector<std::uint8_t> mask;
  for (int y = 0; y < 100; ++y)
    for (int x = 0; x < 80; ++x) mask.push_back(targets.value(y, x, 0) != 0);
  SpectralLibrary lib = reference_from_mask(cube, mask, "targets");
  const std::vector<std::pair<int, int>> xy = {{10, 10}, {40, 50}, {79, 99}, {0, 0}, {33, 3}};
  const SpectralLibrary px = reference_from_pixels(cube, xy);
  lib.count += px.count;
  lib.spectra.insert(lib.spectra.end(), px.spectra.begin(), px.spectra.end());
  ContextOptions co;
  co.backend = Backend::kCpu;
  Context ctx(co);
  SpectralOptions o;
  o.metric = Metric::kSpectralAngle;
  const SpectralResult r = spectral_match(ctx, cube, lib, o);

  TempDir dir("spy");
  {
    std::ofstream f(dir / "ours.f32", std::ios::binary);
    f.write(reinterpret_cast<const char*>(r.scores.data()), std::streamsize(r.scores.size() * sizeof(float)));
  }
  // (Built piece by piece: GCC 12 warns falsely on literal + std::string chains at -O3.)
  auto quoted = [](const fs::path& p) {
    std::string s(1, '"');
    s += p.string();
    s += '"';
    return s;
  };
  std::string cmd = "/usr/bin/python3 ";
  cmd += quoted(fs::path(SPECTRASIFT_TEST_DATA).parent_path() / "spy_compare.py");
  for (const fs::path& p : {data / "hydice_data.hdr", data / "hydice_data_targets.hdr", dir / "ours.f32"}) {
    cmd += ' ';
    cmd += quoted(p);
  }
  for (const auto& [x, y] : xy) {
    cmd += ' ';
    cmd += std::to_string(x);
    cmd += ',';
    cmd += std::to_string(y);
  }
  const std::string out = run_capture(cmd, status);
  ASSERT_EQ(status, 0) << out;
  const auto j = nlohmann::json::parse(out);
  std::cout << "Spectral Python " << j["spy_version"] << ": " << out << "\n";
  EXPECT_EQ(j["pixels"], 8000);
  EXPECT_EQ(j["references"], 6);
  // Stated tolerance (float32 dot products against SPy's float64): 3e-6 on the cosine everywhere; on the
  // angle 1e-4 rad where SPy's angle exceeds 0.01 rad, and 5e-4 rad overall (near 0, acos turns a 1e-7
  // error of the cosine into sqrt(2e-7) = 4.5e-4 rad: a reference pixel against itself).
  EXPECT_LT(j["max_cos_diff"].get<double>(), 3e-6);
  EXPECT_LT(j["max_abs_diff_rad_above_0_01"].get<double>(), 1e-4);
  EXPECT_LT(j["max_abs_diff_rad"].get<double>(), 5e-4);
  // The best of the six references is the same on at least 99.9% of the pixels (only near-ties may differ).
  EXPECT_GE(j["best_agreement"].get<double>(), 0.999);
  // The figure of /work/shared/data/README.md for hydice_data, from both implementations.
  EXPECT_NEAR(j["auc_spy"].get<double>(), 0.9964, 0.00005);
  EXPECT_NEAR(j["auc_ours"].get<double>(), j["auc_spy"].get<double>(), 1e-6);
}

// resample_library against Spectral Python's BandResampler: a library on a fine grid (3 nm steps, FWHM 3.5 nm,
// so neighbouring source bands overlap) onto an AVIRIS-like grid that reaches beyond the library (NaN there,
// in both), with and without FWHM values on either side; values agree to float precision.
TEST(SpectralSpy, ResamplingEqualsBandResampler) {
  int status = 0;
  run_capture("/usr/bin/python3 -c 'import spectral, numpy' 2>/dev/null", status);
  if (status != 0) GTEST_SKIP() << "Spectral Python is missing (/usr/bin/python3 with python3-spectral and python3-numpy)";
  SpectralLibrary lib;
  lib.count = 3;
  for (double w = 400; w <= 1000; w += 3) lib.wavelength.push_back(w);
  lib.bands = int(lib.wavelength.size());
  lib.wavelength_units = "nm";
  for (int s = 0; s < 3; ++s)
    for (double w : lib.wavelength)
      lib.spectra.push_back(float(1000 + 400 * std::sin(w / (37.0 + 11 * s)) + 300 * std::exp(-0.5 * std::pow((w - 650 - 40 * s) / 12, 2))));
  lib.names = {"a", "b", "c"};
  std::vector<double> c2, f2;
  for (int i = 0; i < 90; ++i) {
    c2.push_back(380 + 9.7 * i);  // 380 .. 1243 nm: the last bands have no overlap
    f2.push_back(9 + 0.05 * i);
  }
  struct Case {
    bool src_fwhm, dst_fwhm;
  };
  nlohmann::json in = nlohmann::json::array();
  std::vector<SpectralLibrary> ours;
  for (const Case c : {Case{true, true}, Case{false, true}, Case{true, false}, Case{false, false}}) {
    SpectralLibrary l = lib;
    if (c.src_fwhm) l.fwhm.assign(std::size_t(l.bands), 3.5);
    ours.push_back(resample_library(l, c2, c.dst_fwhm ? f2 : std::vector<double>{}));
    nlohmann::json j;
    j["c1"] = l.wavelength;
    j["c2"] = c2;
    j["f1"] = c.src_fwhm ? nlohmann::json(l.fwhm) : nlohmann::json(nullptr);
    j["f2"] = c.dst_fwhm ? nlohmann::json(f2) : nlohmann::json(nullptr);
    nlohmann::json spectra = nlohmann::json::array();
    for (int s = 0; s < l.count; ++s)
      spectra.push_back(std::vector<float>(l.spectra.begin() + std::ptrdiff_t(s) * l.bands,
                                           l.spectra.begin() + std::ptrdiff_t(s + 1) * l.bands));
    j["spectra"] = spectra;
    in.push_back(j);
  }
  TempDir dir("spy-resample");
  { std::ofstream(dir / "in.json") << in.dump(); }
  std::string cmd = "/usr/bin/python3 \"";
  cmd += (fs::path(SPECTRASIFT_TEST_DATA).parent_path() / "spy_resample.py").string();
  cmd += "\" \"";
  cmd += (dir / "in.json").string();
  cmd += '"';
  const std::string out = run_capture(cmd, status);
  ASSERT_EQ(status, 0) << out;
  const auto spy = nlohmann::json::parse(out);
  ASSERT_EQ(spy.size(), ours.size());
  for (std::size_t c = 0; c < ours.size(); ++c) {
    int nan_bands = 0;
    for (int s = 0; s < 3; ++s)
      for (std::size_t d = 0; d < c2.size(); ++d) {
        const float mine = ours[c].spectra[std::size_t(s) * c2.size() + d];
        const auto& theirs = spy[c][std::size_t(s)][d];
        if (theirs.is_null()) {
          EXPECT_TRUE(std::isnan(mine)) << "case " << c << " spectrum " << s << " band " << d;
          nan_bands += s == 0;
          continue;
        }
        // SPy integrates with a 1.5e-7 approximation of erf, we with std::erf; then float32.
        EXPECT_NEAR(mine, theirs.get<double>(), 2e-6 * std::abs(theirs.get<double>()) + 1e-4)
            << "case " << c << " spectrum " << s << " band " << d;
      }
    EXPECT_GE(nan_bands, 20) << "case " << c;  // the grid reaches ~240 nm beyond the library
    EXPECT_LE(nan_bands, 30) << "case " << c;
  }
}


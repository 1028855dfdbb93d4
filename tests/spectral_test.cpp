// Spectral matching on the CPU backend: against the float64 reference on constructed and real cubes,
// exact squared ED on integer cubes, identical results over layouts / byte orders / types, reductions,
// no-data rules, bad bands, scale factor, references, resampling, AUC on real scenes, and the CLI.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "harness_util.hpp"
#include "spectral_test_util.hpp"
#include "spectrasift/error.hpp"
#include "spectrasift/spectral.hpp"
#include "tolerances.hpp"

using namespace spectrasift;
using namespace spectrasift::test;

namespace {

Context cpu_context() {
  ContextOptions o;
  o.backend = Backend::kCpu;
  return Context(o);
}

SpectralResult run(const EnviCube& cube, const SpectralLibrary& lib, Metric m, Reduction r = Reduction::kAll, int k = 1,
                   double threshold = 0) {
  Context ctx = cpu_context();
  SpectralOptions o;
  o.metric = m;
  o.reduction = r;
  o.top_k = k;
  o.threshold = threshold;
  return spectral_match(ctx, cube, lib, o);
}

/// Compares every score band of `r` (kAll) with the float64 reference; returns the number of mismatches.
int compare_with_reference(const SpectralResult& r, const TestCube& values, const SpectralLibrary& lib, Metric m,
                           const std::vector<int>& bbl = {}, const double* ignore = nullptr, const TestCube* raw = nullptr) {
  int bad = 0;
  const std::size_t npix = std::size_t(values.samples) * values.lines;
  for (int k = 0; k < lib.count; ++k) {
    std::vector<double> ref(lib.spectra.begin() + std::ptrdiff_t(k) * lib.bands,
                            lib.spectra.begin() + std::ptrdiff_t(k + 1) * lib.bands);
    const auto expected = reference_scores(m, values, ref, bbl, ignore, raw);
    for (std::size_t i = 0; i < npix; ++i) {
      const double got = r.scores[k * npix + i];
      if (!scores_agree(m, got, expected[i], cpu_vs_f64(m))) {
        if (bad < 5)
          ADD_FAILURE() << to_string(m) << " ref " << k << " pixel " << i << ": got " << got << ", float64 " << expected[i];
        ++bad;
      }
    }
  }
  return bad;
}

fs::path data_dir() { return fs::path(SPECTRASIFT_TEST_DATA); }

/// ROC AUC of `score` (higher = more target-like) against binary labels, ties counted half.
double auc(const std::vector<double>& score, const std::vector<int>& label) {
  std::vector<std::size_t> order(score.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return score[a] < score[b]; });
  double rank_sum = 0, pos = 0;
  for (std::size_t i = 0; i < order.size();) {
    std::size_t j = i;
    while (j < order.size() && score[order[j]] == score[order[i]]) ++j;
    const double mid = 0.5 * double(i + 1 + j);  // mean rank of the tie group (1-based)
    for (std::size_t t = i; t < j; ++t)
      if (label[order[t]]) {
        rank_sum += mid;
        pos += 1;
      }
    i = j;
  }
  const double neg = double(score.size()) - pos;
  return (rank_sum - pos * (pos + 1) / 2) / (pos * neg);
}

}  // namespace

TEST(SpectralOptions, MetricsAndChecks) {
  for (Metric m : all_metrics()) EXPECT_EQ(parse_metric(to_string(m)), m);
  EXPECT_EQ(parse_metric("SAM"), Metric::kSpectralAngle);
  EXPECT_THROW(parse_metric("cosine"), Error);
  EXPECT_TRUE(higher_is_better(Metric::kCorrelation));
  EXPECT_FALSE(higher_is_better(Metric::kSpectralAngle));
  SpectralOptions o;
  EXPECT_NO_THROW(o.check());
  o.reduction = Reduction::kTopK;
  o.top_k = 0;
  EXPECT_THROW(o.check(), Error);
  o = {};
  o.chunk_lines = -1;
  EXPECT_THROW(o.check(), Error);
  o = {};
  o.reduction = Reduction::kThreshold;
  o.threshold = std::nan("");
  EXPECT_THROW(o.check(), Error);
}

TEST(SpectralCpu, AgreesWithFloat64OnAConstructedFloatCube) {
  TempDir dir("spectral");
  // 70 samples: more than one tile per line and a partial tile; 37 bands: not a multiple of any vector width.
  TestCube c = TestCube::random(70, 9, 37, 11, false, 0.7);
  const auto hdr = write_cube(dir.path(), "f", c, 4, "bip", false);
  const EnviCube cube = open_envi(hdr);
  const TestCube values = read_values(cube);
  // One reference (the single pass) and 7 references (the blocked product, with padding).
  std::vector<std::vector<double>> refs;
  for (int k = 0; k < 7; ++k) refs.push_back(pixel_spectrum(values, 3 * k + 1, k % 9));
  refs[5][3] += 0.1;  // not exactly a pixel of the cube
  for (Metric m : all_metrics()) {
    SCOPED_TRACE(to_string(m));
    const SpectralLibrary one = library_of({refs[2]});
    EXPECT_EQ(compare_with_reference(run(cube, one, m), values, one, m), 0);
    const SpectralLibrary many = library_of(refs);
    EXPECT_EQ(compare_with_reference(run(cube, many, m), values, many, m), 0);
  }
}

TEST(SpectralCpu, AgreesWithFloat64OnTheRealHydiceScene) {
  const EnviCube cube = open_envi(data_dir() / "hydice_data.hdr");
  const EnviCube targets = open_envi(data_dir() / "hydice_data_targets.hdr");
  const TestCube values = read_values(cube);
  std::vector<std::uint8_t> mask(std::size_t(80) * 100);
  for (int y = 0; y < 100; ++y)
    for (int x = 0; x < 80; ++x) mask[std::size_t(y) * 80 + x] = targets.value(y, x, 0) != 0;
  SpectralLibrary lib = reference_from_mask(cube, mask, "targets");
  const SpectralLibrary px = reference_from_pixels(cube, {{10, 10}, {40, 50}, {79, 99}, {0, 0}, {33, 3}});
  lib.count += px.count;
  lib.spectra.insert(lib.spectra.end(), px.spectra.begin(), px.spectra.end());
  lib.names.insert(lib.names.end(), px.names.begin(), px.names.end());
  for (Metric m : all_metrics()) {
    SCOPED_TRACE(to_string(m));
    EXPECT_EQ(compare_with_reference(run(cube, lib, m), values, lib, m), 0);
  }
}

TEST(SpectralCpu, SquaredEdIsExactOnIntegerCubes) {
  TempDir dir("spectral");
  TestCube c = TestCube::random(67, 5, 224, 5, true, 3000.0);  // int16-range values, AVIRIS band count
  const auto hdr = write_cube(dir.path(), "i", c, 2, "bsq", false);
  const EnviCube cube = open_envi(hdr);
  std::vector<std::vector<double>> refs;
  for (int k = 0; k < 9; ++k) refs.push_back(pixel_spectrum(c, 7 * k, k % 5));
  refs[4][10] = 17;  // still integer
  for (int count : {1, 9}) {
    const SpectralLibrary lib = library_of(std::vector<std::vector<double>>(refs.begin(), refs.begin() + count));
    const SpectralResult r = run(cube, lib, Metric::kEuclidean);
    for (int k = 0; k < count; ++k)
      for (int y = 0; y < c.lines; ++y)
        for (int x = 0; x < c.samples; ++x) {
          long long d2 = 0;  // the exact integer sum
          for (int b = 0; b < c.bands; ++b) {
            const long long d = (long long)c.at(y, x, b) - (long long)refs[k][b];
            d2 += d * d;
          }
          const float expected = float(std::sqrt(double(d2)));
          const float got = r.scores[std::size_t(k) * c.samples * c.lines + std::size_t(y) * c.samples + x];
          ASSERT_EQ(std::memcmp(&got, &expected, sizeof got), 0) << "ref " << k << " pixel " << x << "," << y << ": "
                                                                 << got << " vs " << expected;
        }
  }
}

TEST(SpectralCpu, LayoutsByteOrdersAndTypesGiveIdenticalResults) {
  TempDir dir("spectral");
  TestCube c = TestCube::random(13, 6, 11, 9, true, 50.0);  // 0..~110: fits every type
  std::vector<std::vector<double>> refs = {pixel_spectrum(c, 2, 3), pixel_spectrum(c, 12, 5), pixel_spectrum(c, 0, 0)};
  const SpectralLibrary lib = library_of(refs);
  std::vector<float> base_sam, base_ed;
  std::vector<std::int32_t> base_best;
  for (int type : {2, 1, 3, 4, 5, 12, 13, 14, 15})
    for (const char* il : {"bsq", "bil", "bip"})
      for (bool big : {false, true}) {
        std::string name = "c";
        name += std::to_string(type);
        name += il;
        name += big ? "b" : "l";
        SCOPED_TRACE(name);
        const EnviCube cube = open_envi(write_cube(dir.path(), name, c, type, il, big));
        const auto sam = run(cube, lib, Metric::kSpectralAngle).scores;
        const auto ed = run(cube, lib, Metric::kEuclidean).scores;
        const auto best = run(cube, lib, Metric::kSpectralAngle, Reduction::kBest).index;
        if (base_sam.empty()) {
          base_sam = sam;
          base_ed = ed;
          base_best = best;
          continue;
        }
        ASSERT_EQ(std::memcmp(sam.data(), base_sam.data(), sam.size() * 4), 0);
        ASSERT_EQ(std::memcmp(ed.data(), base_ed.data(), ed.size() * 4), 0);
        ASSERT_EQ(best, base_best);
      }
}

// One reference on BIP cubes: small integers in host byte order take a conversion-free pass (integer pixel
// statistics), big-endian and wider types the general one; sam and scc must be the same bits on all of them,
// with a band count that is not a multiple of 8 and one that is, with and without a data ignore value.
TEST(SpectralCpu, OneReferenceOnBipGivesTheSameBitsForEveryTypeAndByteOrder) {
  TempDir dir("spectral-bip1");
  for (int bands : {11, 24}) {
    TestCube c = TestCube::random(17, 5, bands, 3 + bands, true, 50.0);  // 0..~110: fits every type
    c.at(2, 4, bands / 2) = 7.0;  // the ignore value in one band of one pixel
    std::vector<double> ref = pixel_spectrum(c, 3, 1);
    for (double& v : ref) v += 0.25;  // fractional: the dot product's rounding matters
    const SpectralLibrary lib = library_of({ref});
    for (bool ignore : {false, true}) {
      std::vector<float> base_sam, base_scc;
      for (int type : {2, 1, 12, 3, 4})
        for (bool big : {false, true}) {
          std::string name = "b";  // (built step by step: GCC 12 warns falsely on a chain of + here)
          name += std::to_string(bands);
          name += "t";
          name += std::to_string(type);
          name += big ? "b" : "l";
          name += ignore ? "i" : "";
          SCOPED_TRACE(name);
          const EnviCube cube = open_envi(write_cube(dir.path(), name, c, type, "bip", big, ignore ? "data ignore value = 7\n" : ""));
          const auto sam = run(cube, lib, Metric::kSpectralAngle).scores;
          const auto scc = run(cube, lib, Metric::kCorrelation).scores;
          ASSERT_EQ(sam.size(), std::size_t(17 * 5));
          EXPECT_EQ(std::isnan(sam[std::size_t(2) * 17 + 4]), ignore);
          if (base_sam.empty()) {
            base_sam = sam;
            base_scc = scc;
            continue;
          }
          EXPECT_EQ(std::memcmp(sam.data(), base_sam.data(), sam.size() * 4), 0);
          EXPECT_EQ(std::memcmp(scc.data(), base_scc.data(), scc.size() * 4), 0);
        }
    }
  }
}

TEST(SpectralCpu, BestTopAndThresholdFollowTheScores) {
  TempDir dir("spectral");
  TestCube c = TestCube::random(21, 7, 15, 21, false, 1.0);
  const EnviCube cube = open_envi(write_cube(dir.path(), "r", c, 4, "bil", false));
  std::vector<std::vector<double>> refs;
  for (int k = 0; k < 12; ++k) refs.push_back(pixel_spectrum(c, k, k % 7));
  refs.push_back(refs[3]);  // a duplicate: ties must go to the lower index (3, never 12)
  const SpectralLibrary lib = library_of(refs);
  const std::size_t npix = 21 * 7;
  for (Metric m : all_metrics()) {
    SCOPED_TRACE(to_string(m));
    const auto all = run(cube, lib, m);
    const auto best = run(cube, lib, m, Reduction::kBest);
    const auto top = run(cube, lib, m, Reduction::kTopK, 4);
    const auto ranked = run(cube, lib, m, Reduction::kTopK, lib.count);  // every reference, in order
    const bool hib = higher_is_better(m);
    // A threshold between the best and worst score of the pixel set rejects some pixels and keeps others.
    std::vector<float> bests;
    for (std::size_t i = 0; i < npix; ++i) bests.push_back(best.scores[i]);
    std::vector<float> sorted = bests;
    std::sort(sorted.begin(), sorted.end());
    const double thr = sorted[sorted.size() / 2];
    const auto th = run(cube, lib, m, Reduction::kThreshold, 1, thr);
    int rejected = 0;
    for (std::size_t i = 0; i < npix; ++i) {
      std::vector<std::pair<float, int>> s;
      for (int k = 0; k < lib.count; ++k) s.push_back({all.scores[k * npix + i], k});
      std::stable_sort(s.begin(), s.end(), [&](auto a, auto b) { return hib ? a.first > b.first : a.first < b.first; });
      ASSERT_EQ(best.index[i], s[0].second) << "pixel " << i;
      ASSERT_EQ(best.scores[i], s[0].first);
      ASSERT_NE(best.index[i], 12);
      for (int r = 0; r < 4; ++r) {
        ASSERT_EQ(top.index[r * npix + i], s[r].second) << "pixel " << i << " rank " << r;
        ASSERT_EQ(top.scores[r * npix + i], s[r].first);
      }
      for (int r = 0; r < lib.count; ++r) {
        ASSERT_EQ(ranked.index[r * npix + i], s[r].second) << "pixel " << i << " rank " << r;
        ASSERT_EQ(ranked.scores[r * npix + i], s[r].first);
      }
      const bool pass = hib ? s[0].first >= float(thr) : s[0].first <= float(thr);
      if (pass) {
        ASSERT_EQ(th.index[i], s[0].second);
      } else {
        ASSERT_EQ(th.index[i], -1);
        ASSERT_TRUE(std::isnan(th.scores[i]));
        ++rejected;
      }
    }
    EXPECT_GT(rejected, 0);
    EXPECT_LT(rejected, int(npix));
  }
  Context ctx = cpu_context();
  SpectralOptions o;
  o.reduction = Reduction::kTopK;
  o.top_k = lib.count + 1;
  EXPECT_THROW(spectral_match(ctx, cube, lib, o), Error);
}

TEST(SpectralCpu, NoDataPixelsGiveNanAndNeverMatch) {
  TempDir dir("spectral");
  TestCube c = TestCube::random(9, 4, 6, 31, true, 100.0);
  for (int b = 0; b < 6; ++b) {
    c.at(0, 0, b) = 0;         // zero pixel: sam undefined
    c.at(1, 1, b) = 42;        // constant pixel: scc undefined
  }
  c.at(2, 2, 3) = -9999;       // the ignore value in one band
  const EnviCube cube = open_envi(write_cube(dir.path(), "n", c, 2, "bip", false, "data ignore value = -9999\n"));
  const SpectralLibrary lib = library_of({pixel_spectrum(c, 5, 3), pixel_spectrum(c, 8, 0)});
  const std::size_t z = 0, k = 1 * 9 + 1, ig = 2 * 9 + 2;
  for (Metric m : all_metrics()) {
    SCOPED_TRACE(to_string(m));
    const auto all = run(cube, lib, m);
    const auto best = run(cube, lib, m, Reduction::kBest);
    for (int r = 0; r < 2; ++r) EXPECT_TRUE(std::isnan(all.scores[r * 36 + ig]));
    EXPECT_EQ(best.index[ig], -1);
    EXPECT_TRUE(std::isnan(best.scores[ig]));
    if (m == Metric::kSpectralAngle) {
      EXPECT_TRUE(std::isnan(all.scores[z]));
      EXPECT_EQ(best.index[z], -1);
    }
    if (m == Metric::kCorrelation) {
      EXPECT_TRUE(std::isnan(all.scores[k]));
      EXPECT_EQ(best.index[k], -1);
    }
    if (m == Metric::kEuclidean) {
      EXPECT_FALSE(std::isnan(all.scores[z]));
    }
    // Every other pixel has a score.
    for (std::size_t i = 3; i < 36; ++i)
      if (i != k && i != ig) {
        EXPECT_GE(best.index[i], 0) << i;
      }
  }
  // A reference that is no data itself is refused.
  EXPECT_THROW(reference_from_pixels(cube, {{2, 2}}), Error);
  // So are references for which the metric is undefined.
  const SpectralLibrary zero = library_of({std::vector<double>(6, 0.0)});
  EXPECT_THROW(run(cube, zero, Metric::kSpectralAngle), Error);
  EXPECT_THROW(run(cube, library_of({std::vector<double>(6, 3.0)}), Metric::kCorrelation), Error);
  EXPECT_NO_THROW(run(cube, zero, Metric::kEuclidean));
}

TEST(SpectralCpu, BadBandsAreLeftOutAndTheScaleFactorApplies) {
  TempDir dir("spectral");
  TestCube c = TestCube::random(10, 5, 8, 41, true, 100.0);
  TestCube noisy = c;
  for (int y = 0; y < 5; ++y)
    for (int x = 0; x < 10; ++x) {
      noisy.at(y, x, 1) = 30000 - x * 100;  // garbage in the bad bands
      noisy.at(y, x, 6) = y * 1000;
    }
  const std::string bbl = "bbl = {1, 0, 1, 1, 1, 1, 0, 1}\n";
  const EnviCube clean = open_envi(write_cube(dir.path(), "clean", c, 2, "bsq", false, bbl));
  const EnviCube dirty = open_envi(write_cube(dir.path(), "dirty", noisy, 2, "bsq", false, bbl));
  SpectralLibrary lib = library_of({pixel_spectrum(c, 4, 4), pixel_spectrum(c, 9, 1)});
  lib.spectra[1] = 12345;  // a reference's bad band is ignored too
  for (Metric m : all_metrics()) {
    const auto a = run(clean, lib, m).scores, b = run(dirty, lib, m).scores;
    EXPECT_EQ(a, b) << to_string(m);
    EXPECT_EQ(compare_with_reference(run(dirty, lib, m), read_values(dirty), lib, m, clean.header().bbl), 0);
  }
  // Reflectance scale factor 4: values are divided by 4, so ED with scaled references is a quarter.
  const EnviCube scaled = open_envi(write_cube(dir.path(), "scaled", c, 2, "bsq", false, "reflectance scale factor = 4\n"));
  const EnviCube plain = open_envi(write_cube(dir.path(), "plain", c, 2, "bsq", false));
  const SpectralLibrary ps = reference_from_pixels(scaled, {{4, 4}}), pp = reference_from_pixels(plain, {{4, 4}});
  EXPECT_FLOAT_EQ(ps.spectra[0] * 4, pp.spectra[0]);
  const auto es = run(scaled, ps, Metric::kEuclidean).scores, ep = run(plain, pp, Metric::kEuclidean).scores;
  for (std::size_t i = 0; i < es.size(); ++i) EXPECT_NEAR(es[i] * 4, ep[i], 1e-3 * (1 + ep[i]));
  // All bands bad: a clear error.
  const EnviCube none = open_envi(write_cube(dir.path(), "none", c, 2, "bsq", false, "bbl = {0,0,0,0,0,0,0,0}\n"));
  EXPECT_THROW(run(none, lib, Metric::kSpectralAngle), Error);
}

TEST(SpectralReferences, PixelsMaskAndErrors) {
  TempDir dir("spectral");
  TestCube c = TestCube::random(6, 4, 5, 51, true, 100.0);
  const EnviCube cube = open_envi(write_cube(dir.path(), "p", c, 12, "bil", true));
  const SpectralLibrary px = reference_from_pixels(cube, {{5, 3}, {0, 1}});
  ASSERT_EQ(px.count, 2);
  for (int b = 0; b < 5; ++b) {
    EXPECT_EQ(px.spectra[b], float(c.at(3, 5, b)));
    EXPECT_EQ(px.spectra[5 + b], float(c.at(1, 0, b)));
  }
  EXPECT_THROW(reference_from_pixels(cube, {{6, 0}}), Error);
  EXPECT_THROW(reference_from_pixels(cube, {{0, -1}}), Error);
  std::vector<std::uint8_t> mask(24, 0);
  mask[1 * 6 + 2] = 1;
  mask[3 * 6 + 4] = 255;
  const SpectralLibrary m = reference_from_mask(cube, mask, "two");
  for (int b = 0; b < 5; ++b) EXPECT_FLOAT_EQ(m.spectra[b], float((c.at(1, 2, b) + c.at(3, 4, b)) / 2));
  EXPECT_THROW(reference_from_mask(cube, std::vector<std::uint8_t>(24, 0), "empty"), Error);
  EXPECT_THROW(reference_from_mask(cube, std::vector<std::uint8_t>(23, 1), "short"), Error);
  // Wrong band count.
  EXPECT_THROW(run(cube, library_of({std::vector<double>(4, 1.0)}), Metric::kEuclidean), Error);
}

TEST(SpectralReferences, ResamplingFollowsGaussianResponses) {
  // A library sampled every 2 nm from 400 to 800 nm; a linear spectrum is reproduced exactly at every
  // cube band inside the range (a symmetric response averages a linear function to its centre value).
  SpectralLibrary lib;
  lib.count = 2;
  for (double w = 400; w <= 800; w += 2) lib.wavelength.push_back(w);
  lib.bands = int(lib.wavelength.size());
  for (double w : lib.wavelength) lib.spectra.push_back(float(0.001 * w));
  for (double w : lib.wavelength) lib.spectra.push_back(float(std::exp(-0.5 * std::pow((w - 600) / 30, 2))));
  lib.names = {"linear", "peak"};
  lib.wavelength_units = "nm";
  // Cube bands in micrometres (converted), FWHM 10 nm; 1.2 um lies outside the library: NaN.
  const std::vector<double> wl = {0.45, 0.6, 0.75, 1.2}, fwhm = {0.01, 0.01, 0.01, 0.01};
  const SpectralLibrary out = resample_library(lib, wl, fwhm);
  ASSERT_EQ(out.bands, 4);
  EXPECT_NEAR(out.spectra[0], 0.45, 1e-4);
  EXPECT_NEAR(out.spectra[1], 0.60, 1e-4);
  EXPECT_NEAR(out.spectra[2], 0.75, 1e-4);
  EXPECT_TRUE(std::isnan(out.spectra[3]));
  // The Gaussian peak (sigma 30 nm) seen through a 10 nm FWHM band: slightly lowered, near 1.
  EXPECT_GT(out.spectra[4 + 1], 0.98);
  EXPECT_LT(out.spectra[4 + 1], 1.0);
  EXPECT_NEAR(out.spectra[4 + 0], std::exp(-0.5 * 25.0), 1e-3);
  // The band without overlap is left out of the metric for every reference.
  TempDir dir("spectral");
  TestCube c = TestCube::random(3, 2, 4, 3, false, 1.0);
  const EnviCube cube = open_envi(write_cube(dir.path(), "w", c, 4, "bsq", false, "wavelength = {0.45, 0.6, 0.75, 1.2}\n"));
  const auto r = run(cube, out, Metric::kSpectralAngle);
  EXPECT_EQ(compare_with_reference(r, read_values(cube), out, Metric::kSpectralAngle, {1, 1, 1, 0}), 0);
  EXPECT_THROW(resample_library(lib, {}, {}), Error);
}

TEST(SpectralAuc, HydiceSamWithTheMeanTargetMatchesTheSharedFigure) {
  // /work/shared/data/README.md: Spectral Python 0.22 spectral_angles, float64, mean target spectrum:
  // ROC AUC 0.9964 for hydice_data.
  const EnviCube cube = open_envi(data_dir() / "hydice_data.hdr");
  const EnviCube targets = open_envi(data_dir() / "hydice_data_targets.hdr");
  std::vector<std::uint8_t> mask;
  std::vector<int> label;
  for (int y = 0; y < 100; ++y)
    for (int x = 0; x < 80; ++x) {
      mask.push_back(targets.value(y, x, 0) != 0);
      label.push_back(mask.back());
    }
  const auto r = run(cube, reference_from_mask(cube, mask, "t"), Metric::kSpectralAngle);
  std::vector<double> s(r.scores.begin(), r.scores.end());
  for (auto& v : s) v = -v;
  EXPECT_NEAR(auc(s, label), 0.9964, 0.00005);
}

TEST(SpectralAuc, SharedScenesWhenPresent) {
  // The other three figures of /work/shared/data/README.md; these scenes are not copied into the
  // project (too large), so the test runs only where ../shared is reachable.
  const fs::path shared = "/work/shared/data/hyperspectral";
  if (!fs::exists(shared / "sandiego_plane.hdr")) GTEST_SKIP() << "shared scenes not present at " << shared;
  struct Scene {
    const char* name;
    double auc;
  };
  for (const Scene& sc : {Scene{"sandiego_plane", 0.9930}, Scene{"abu_urban_2", 0.9332}, Scene{"abu_beach_4", 0.8709}}) {
    const EnviCube cube = open_envi(shared / (std::string(sc.name) + ".hdr"));
    const EnviCube targets = open_envi(shared / (std::string(sc.name) + "_targets.hdr"));
    std::vector<std::uint8_t> mask;
    std::vector<int> label;
    for (int y = 0; y < cube.header().lines; ++y)
      for (int x = 0; x < cube.header().samples; ++x) {
        mask.push_back(targets.value(y, x, 0) != 0);
        label.push_back(mask.back());
      }
    const auto r = run(cube, reference_from_mask(cube, mask, "t"), Metric::kSpectralAngle);
    std::vector<double> s(r.scores.begin(), r.scores.end());
    for (auto& v : s) v = -v;
    EXPECT_NEAR(auc(s, label), sc.auc, 0.00005) << sc.name;
  }
}

// ---- the command line ------------------------------------------------------------------------------------

namespace {

struct CliRun {
  int exit_code;
  std::string out;
};

CliRun run_cli(const std::string& args) {
  const std::string cmd = std::string("\"") + SPECTRASIFT_CLI + "\" " + args + " 2>&1";
  int status = -1;
  std::string out = test::run_capture(cmd, status);
  return {status, std::move(out)};
}

std::string q(const fs::path& p) {
  std::string s(1, '"');
  s += p.string();
  s += '"';
  return s;
}

}  // namespace

TEST(SpectralCli, ScoresBestJsonAndPicture) {
  TempDir dir("spectral-cli");
  const fs::path cube = data_dir() / "hydice_data.hdr", mask = data_dir() / "hydice_data_targets.hdr";
  auto r = run_cli("spectral " + q(cube) + " --metric sam --ref-mask " + q(mask) + " -o " + q(dir / "sam.hdr") +
                   " --png " + q(dir / "sam.png") + " --backend cpu --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["backend"], "cpu");
  EXPECT_EQ(j["references"], 1);
  EXPECT_EQ(j["pixels"], 8000);
  for (const char* stage : {"read", "upload", "compute", "download", "write"}) EXPECT_TRUE(j["times_ms"].contains(stage)) << stage;
  const EnviCube out = open_envi(dir / "sam.hdr");
  EXPECT_EQ(out.header().samples, 80);
  EXPECT_EQ(out.header().lines, 100);
  EXPECT_EQ(out.header().bands, 1);
  EXPECT_EQ(out.header().data_type, SampleType::kF32);
  // The same numbers as the library call.
  const EnviCube in = open_envi(cube);
  const EnviCube t = open_envi(mask);
  std::vector<std::uint8_t> m;
  for (int y = 0; y < 100; ++y)
    for (int x = 0; x < 80; ++x) m.push_back(t.value(y, x, 0) != 0);
  const auto lib = run(in, reference_from_mask(in, m, "t"), Metric::kSpectralAngle);
  for (int i = 0; i < 8000; i += 97) EXPECT_EQ(out.value(i / 80, i % 80, 0), double(lib.scores[i]));
  EXPECT_GT(fs::file_size(dir / "sam.png"), 1000u);

  // --best with three reference pixels: indices file and scores file.
  r = run_cli("spectral " + q(cube) + " --metric scc --ref-pixel 10,10 --ref-pixel 40,50 --ref-pixel 3,99 -o " +
              q(dir / "best.hdr") + " --best --png " + q(dir / "classes.png") + " --backend cpu");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const EnviCube idx = open_envi(dir / "best_index.hdr");
  EXPECT_EQ(idx.header().data_type, SampleType::kI32);
  EXPECT_EQ(idx.value(10, 10, 0), 0.0);  // a reference pixel matches itself
  EXPECT_EQ(idx.value(50, 40, 0), 1.0);
  EXPECT_EQ(idx.value(99, 3, 0), 2.0);
  EXPECT_NEAR(open_envi(dir / "best.hdr").value(50, 40, 0), 1.0, 1e-6);
  EXPECT_TRUE(fs::exists(dir / "classes.png"));

  // --top 2 and --threshold.
  r = run_cli("spectral " + q(cube) + " --metric ed --ref-pixel 10,10 --ref-pixel 40,50 -o " + q(dir / "top.hdr") +
              " --top 2 --backend cpu");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(open_envi(dir / "top_index.hdr").header().bands, 2);
  r = run_cli("spectral " + q(cube) + " --metric sam --ref-pixel 10,10 -o " + q(dir / "thr.hdr") +
              " --threshold 0.05 --backend cpu --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto jt = nlohmann::json::parse(r.out);
  EXPECT_GT(jt["matched_pixels"].get<int>(), 0);
  EXPECT_LT(jt["matched_pixels"].get<int>(), 8000);
}

TEST(SpectralCli, LibraryCsvAndPngMask) {
  TempDir dir("spectral-cli");
  const fs::path cube = data_dir() / "hydice_data.hdr";
  const EnviCube in = open_envi(cube);
  // A CSV library without wavelengths, with the cube's band count: used as is.
  std::string csv = "name_a,name_b\n";
  for (int b = 0; b < in.header().bands; ++b)
    csv += std::to_string(in.value(5, 5, b)) + "," + std::to_string(in.value(60, 20, b)) + "\n";
  write_text(dir / "lib.csv", csv);
  auto r = run_cli("spectral " + q(cube) + " --metric sam --library " + q(dir / "lib.csv") + " -o " + q(dir / "l.hdr") +
                   " --best --backend cpu");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const EnviCube idx = open_envi(dir / "l_index.hdr");
  EXPECT_EQ(idx.value(5, 5, 0), 0.0);
  EXPECT_EQ(idx.value(60, 20, 0), 1.0);
  EXPECT_NE(idx.header().description.find("name_b"), std::string::npos);
  // A PGM mask of the cube's size.
  std::string pgm = "P5\n80 100\n255\n";
  std::string px(8000, '\0');
  px[30 * 80 + 20] = char(255);
  write_text(dir / "m.pgm", pgm + px);
  r = run_cli("spectral " + q(cube) + " --metric ed --ref-mask " + q(dir / "m.pgm") + " -o " + q(dir / "m.hdr") + " --backend cpu");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(open_envi(dir / "m.hdr").value(30, 20, 0), 0.0);
}

TEST(SpectralCli, ErrorsExitNonZeroAndLeaveNoOutput) {
  TempDir dir("spectral-cli");
  const fs::path cube = data_dir() / "hydice_data.hdr";
  struct Case {
    std::string args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {q(dir / "missing.hdr") + " --ref-pixel 1,1", "no such file"},
      {q(cube) + " --ref-pixel 1,1 --ref-pixel 500,1", "outside the cube"},
      {q(cube) + " --ref-pixel 1x1", "X,Y"},
      {q(cube) + " --ref-pixel 1,2x", "X,Y"},
      {q(cube) + " --ref-pixel 99999999999,1", "X,Y"},  // beyond int: refused, not wrapped
      {q(cube) + " --ref-pixel ,1", "X,Y"},
      {q(cube), "exactly one of"},
      {q(cube) + " --ref-pixel 1,1 --ref-mask " + q(cube), "exactly one of"},
      {q(cube) + " --ref-pixel 1,1 --top 2", "more than the 1 references"},
      {q(cube) + " --ref-mask " + q(data_dir() / "box.png"), "mask"},
      {q(cube) + " --ref-pixel 1,1 --backend cuda --device 99", "CUDA"},  // no such device anywhere
      {q(cube) + " --ref-pixel 1,1 --max-pixels 7999",  // the cube is 80 x 100
       "cube of 80 x 100 = 8000 pixels exceeds the limit of 7999 pixels (raise it with --max-pixels N"},
  };
  for (const auto& c : cases) {
    const auto r = run_cli("spectral " + c.args + " -o " + q(dir / "o.hdr") + " --png " + q(dir / "o.png"));
    EXPECT_NE(r.exit_code, 0) << c.args;
    EXPECT_NE(r.out.find(c.message), std::string::npos) << c.args << "\n" << r.out;
    EXPECT_NE(r.out.find("error"), std::string::npos) << r.out;
  }
  // A truncated cube: a clear error and no output files at all.
  fs::copy_file(cube, dir / "trunc.hdr");
  {
    std::ifstream in(data_dir() / "hydice_data.img", std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), {});
    write_text(dir / "trunc.img", bytes.substr(0, bytes.size() - 1000));
  }
  const auto r = run_cli("spectral " + q(dir / "trunc.hdr") + " --ref-pixel 1,1 -o " + q(dir / "o.hdr"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("too small"), std::string::npos) << r.out;
  for (const auto& e : fs::directory_iterator(dir.path())) {
    const auto name = e.path().filename().string();
    EXPECT_TRUE(name.rfind("trunc", 0) == 0) << "unexpected output " << name;
  }
}

// The outputs of one run are committed as a set: when the last one (the picture) cannot be written, the
// scores and index cubes that were complete before it do not appear either, and no temporary is left.
TEST(SpectralCli, ALateOutputFailureLeavesNoOutputAtAll) {
  TempDir dir("spectral-cli-set");
  const fs::path cube = data_dir() / "hydice_data.hdr";
  fs::create_directory(dir / "a_directory.png");
  const auto listing = [&] {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir.path())) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  };
  const std::vector<std::string> before = listing();
  struct Case {
    std::string png;
    std::string message;
    int exit_code;  // 1: run-time error; 2: usage error (a picture name that is not .png)
  };
  const std::vector<Case> cases = {{q(dir / "no_such_dir" / "p.png"), "p.png", 1},
                                   {q(dir / "a_directory.png"), "a_directory.png: is a directory", 1},
                                   {q(dir / "o.img"), "o.img: --png writes a .png file", 2}};
  for (const auto& c : cases)
    for (const char* reduction : {"", " --best", " --top 2"}) {
      const auto r = run_cli("spectral " + q(cube) + " --ref-pixel 1,1 --ref-pixel 5,7" + reduction + " -o " +
                             q(dir / "o.hdr") + " --png " + c.png);
      EXPECT_EQ(r.exit_code, c.exit_code) << c.png << reduction << "\n" << r.out;
      EXPECT_NE(r.out.find(c.message), std::string::npos) << r.out;
      EXPECT_EQ(listing(), before) << c.png << reduction << ": something was left in the output folder";
    }
  // The same command with a good picture path writes all five files, and nothing else.
  const auto r = run_cli("spectral " + q(cube) + " --ref-pixel 1,1 --ref-pixel 5,7 --best -o " + q(dir / "o.hdr") +
                         " --png " + q(dir / "o.png"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  std::vector<std::string> after = before;
  for (const char* f : {"o.hdr", "o.img", "o.png", "o_index.hdr", "o_index.img"}) after.push_back(f);
  std::sort(after.begin(), after.end());
  EXPECT_EQ(listing(), after);
}

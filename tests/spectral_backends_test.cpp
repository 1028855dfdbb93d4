// Cross-backend conformance of spectral matching: the same cases on every backend compiled in and present
// (OpenCL on PoCL in CI, CUDA on the GPU machine), each compared with the CPU backend using the tolerance
// table of tests/tolerances.hpp. Squared ED on integer cubes must be bit-identical; indices must be equal
// except where the CPU's scores of the two references are a near-tie within the tolerance.
// A backend without a device, or whose spectral matching is not implemented yet (Error kUnsupported),
// is skipped with a message.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "spectral_test_util.hpp"
#include "spectrasift/error.hpp"
#include "spectrasift/spectral.hpp"
#include "tolerances.hpp"

using namespace spectrasift;
using namespace spectrasift::test;

namespace {

fs::path data_dir() { return fs::path(SPECTRASIFT_TEST_DATA); }

class SpectralBackends : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    std::string why;
    ctx_ = backend_context_or_reason(GetParam(), why);
    if (!ctx_) GTEST_SKIP() << why;
    ContextOptions c;
    c.backend = Backend::kCpu;
    cpu_ = std::make_unique<Context>(c);
  }

  /// Runs on the backend under test; skips the test when the backend does not implement spectral matching.
  SpectralResult run_backend(const EnviCube& cube, const SpectralLibrary& lib, const SpectralOptions& o) {
    try {
      return spectral_match(*ctx_, cube, lib, o);
    } catch (const Error& e) {
      if (e.code() == ErrorCode::kUnsupported) {
        skipped_ = std::string(e.what());
        return {};
      }
      throw;
    }
  }

  /// Compares the backend with the CPU on one case; returns false when the backend skipped it.
  bool compare(const EnviCube& cube, const SpectralLibrary& lib, SpectralOptions o, bool exact_scores = false) {
    o.allow_tensor_cores = false;  // FP32 products: the tolerance table's rows
    const SpectralResult ref = spectral_match(*cpu_, cube, lib, o);
    const SpectralResult got = run_backend(cube, lib, o);
    if (!skipped_.empty()) return false;
    EXPECT_EQ(got.k, ref.k);
    EXPECT_EQ(got.scores.size(), ref.scores.size());
    EXPECT_EQ(got.index.size(), ref.index.size());
    if (got.scores.size() != ref.scores.size() || got.index.size() != ref.index.size()) return true;
    const Tolerance tol = backend_vs_cpu(GetParam(), o.metric);
    int bad = 0;
    const std::size_t npix = std::size_t(ref.samples) * ref.lines;
    // Full CPU scores, to judge near-ties when indices differ.
    SpectralOptions all = o;
    all.reduction = Reduction::kAll;
    const SpectralResult cpu_all = o.reduction == Reduction::kAll ? SpectralResult{} : spectral_match(*cpu_, cube, lib, all);
    for (std::size_t i = 0; i < ref.scores.size() && bad < 5; ++i) {
      const float a = got.scores[i], b = ref.scores[i];
      if (exact_scores) {
        if (std::memcmp(&a, &b, sizeof a) != 0) {
          ADD_FAILURE() << "score " << i << ": " << a << " vs cpu " << b << " (must be bit-identical)";
          ++bad;
        }
        continue;
      }
      if (!ref.index.empty() && got.index[i] != ref.index[i]) {
        // Different references: acceptable only for a near-tie of the CPU's own scores.
        const std::size_t pix = i % npix;
        const int gi = got.index[i], ri = ref.index[i];
        const bool tie = gi >= 0 && ri >= 0 &&
                         scores_agree(o.metric, cpu_all.scores[std::size_t(gi) * npix + pix],
                                      cpu_all.scores[std::size_t(ri) * npix + pix], tol);
        if (!tie) {
          ADD_FAILURE() << "pixel " << pix << " band " << i / npix << ": index " << gi << " vs cpu " << ri;
          ++bad;
        }
        continue;
      }
      if (!scores_agree(o.metric, a, b, tol)) {
        ADD_FAILURE() << to_string(o.metric) << " score " << i << ": " << a << " vs cpu " << b;
        ++bad;
      }
    }
    return true;
  }

  void skip_if_unsupported() {
    if (!skipped_.empty()) GTEST_SKIP() << to_string(GetParam()) << ": " << skipped_;
  }

  std::unique_ptr<Context> ctx_, cpu_;
  std::string skipped_;
};

SpectralOptions opts(Metric m, Reduction r = Reduction::kAll, int k = 1, double thr = 0, int chunk = 0) {
  SpectralOptions o;
  o.metric = m;
  o.reduction = r;
  o.top_k = k;
  o.threshold = thr;
  o.chunk_lines = chunk;
  return o;
}

SpectralLibrary pixels(const TestCube& c, const std::vector<std::pair<int, int>>& xy) {
  std::vector<std::vector<double>> s;
  for (auto [x, y] : xy) s.push_back(pixel_spectrum(c, x, y));
  return library_of(s);
}

}  // namespace

TEST_P(SpectralBackends, FloatCubeEveryMetricOneAndManyReferences) {
  TempDir dir("backends");
  const TestCube c = TestCube::random(70, 9, 37, 11, false, 0.7);
  const EnviCube cube = open_envi(write_cube(dir.path(), "f", c, 4, "bip", false));
  const SpectralLibrary one = pixels(c, {{5, 2}});
  const SpectralLibrary many = pixels(c, {{1, 0}, {4, 1}, {7, 2}, {10, 3}, {13, 4}, {16, 5}, {19, 6}});
  for (Metric m : all_metrics()) {
    SCOPED_TRACE(to_string(m));
    if (!compare(cube, one, opts(m))) break;
    compare(cube, many, opts(m));
  }
  skip_if_unsupported();
}

TEST_P(SpectralBackends, SquaredEdIsBitIdenticalOnIntegerCubes) {
  TempDir dir("backends");
  const TestCube c = TestCube::random(67, 5, 224, 5, true, 3000.0);
  for (const char* il : {"bsq", "bil", "bip"}) {
    SCOPED_TRACE(il);
    const EnviCube cube = open_envi(write_cube(dir.path(), std::string("i") + il, c, 2, il, std::string(il) == "bil"));
    if (!compare(cube, pixels(c, {{3, 3}}), opts(Metric::kEuclidean), true)) break;
    compare(cube, pixels(c, {{0, 0}, {7, 1}, {14, 2}, {21, 3}, {28, 4}, {35, 0}, {42, 1}, {49, 2}, {56, 3}}),
            opts(Metric::kEuclidean), true);
  }
  skip_if_unsupported();
}

TEST_P(SpectralBackends, RealSceneReductions) {
  const EnviCube cube = open_envi(data_dir() / "hydice_data.hdr");
  const SpectralLibrary lib = reference_from_pixels(cube, {{10, 10}, {40, 50}, {79, 99}, {0, 0}, {33, 3}, {60, 20}});
  for (Metric m : all_metrics()) {
    SCOPED_TRACE(to_string(m));
    if (!compare(cube, lib, opts(m, Reduction::kAll))) break;
    compare(cube, lib, opts(m, Reduction::kBest));
    compare(cube, lib, opts(m, Reduction::kTopK, 3));
  }
  compare(cube, lib, opts(Metric::kSpectralAngle, Reduction::kThreshold, 1, 0.1));
  compare(cube, lib, opts(Metric::kCorrelation, Reduction::kThreshold, 1, 0.9));
  skip_if_unsupported();
}

TEST_P(SpectralBackends, ManyReferencesBest) {
  // 300 references (the matrix-product path), best match on the real scene.
  const EnviCube cube = open_envi(data_dir() / "hydice_data.hdr");
  std::vector<std::pair<int, int>> xy;
  for (int i = 0; i < 300; ++i) xy.push_back({(i * 37) % 80, (i * 53) % 100});
  const SpectralLibrary lib = reference_from_pixels(cube, xy);
  for (Metric m : all_metrics()) {
    SCOPED_TRACE(to_string(m));
    if (!compare(cube, lib, opts(m, Reduction::kBest))) break;
  }
  skip_if_unsupported();
}

TEST_P(SpectralBackends, TopKOfManyReferencesIsTheCpuBackends) {
  // K = 100 of 120 references (above CUDA's product path, kGemmMaxTopK: its spectral_multi heap in the output
  // bands; OpenCL's private heap of KEEP = 100): the same ranks as the CPU backend, lower- and higher-is-better.
  const EnviCube cube = open_envi(data_dir() / "hydice_data.hdr");
  std::vector<std::pair<int, int>> xy;
  for (int i = 0; i < 120; ++i) xy.push_back({(i * 29) % 80, (i * 41) % 100});
  const SpectralLibrary lib = reference_from_pixels(cube, xy);
  for (Metric m : {Metric::kEuclidean, Metric::kCorrelation}) {
    SCOPED_TRACE(to_string(m));
    if (!compare(cube, lib, opts(m, Reduction::kTopK, 100))) break;
  }
  skip_if_unsupported();
}

TEST_P(SpectralBackends, NoDataBadBandsScaleAndSmallChunks) {
  TempDir dir("backends");
  TestCube c = TestCube::random(19, 11, 12, 7, true, 200.0);
  for (int b = 0; b < 12; ++b) c.at(0, 0, b) = 0;
  for (int b = 0; b < 12; ++b) c.at(1, 1, b) = 55;
  c.at(2, 2, 5) = -1;
  const EnviCube cube = open_envi(write_cube(dir.path(), "n", c, 2, "bil", true,
                                             "data ignore value = -1\nreflectance scale factor = 1000\n"
                                             "bbl = {1,1,0,1,1,1,1,1,1,0,1,1}\n"));
  const TestCube v = read_values(cube);
  const SpectralLibrary lib = pixels(v, {{5, 5}, {18, 10}, {3, 7}});
  for (Metric m : all_metrics()) {
    SCOPED_TRACE(to_string(m));
    if (!compare(cube, lib, opts(m, Reduction::kAll, 1, 0, 3))) break;
    compare(cube, lib, opts(m, Reduction::kTopK, 2, 0, 1));
  }
  skip_if_unsupported();
}

INSTANTIATE_TEST_SUITE_P(Gpu, SpectralBackends, ::testing::Values(Backend::kOpenCL, Backend::kCuda),
                         [](const ::testing::TestParamInfo<Backend>& i) { return std::string(to_string(i.param)); });

// RANSAC on the GPU backends (issue 19 item 3, issue 18 item 3) against the CPU backend: the backends'
// score_models and inlier_mask give the CPU backend's counts, masks and sums bit for bit (pairs placed exactly
// on the threshold, points sent to infinity, invalid models), and estimate_model gives the same model (every
// matrix entry's bits), inlier mask, iteration count and rms, on planted homographies with outliers and on
// graf1 -> graf3, for every model kind and ranking; the refits' sums computed on the device (CUDA, OpenCL) are the
// host's bits pass by pass. Runs on OpenCL (PoCL here) and CUDA; a backend that is not on the machine is skipped
// with a message. On OpenCL every test forces the refits' sums onto the device (State::refit_variant = 1; a CPU
// device such as PoCL leaves them to the host by default), so the device's sums and the driver's chains run
// there too.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#if SPECTRASIFT_HAVE_OPENCL
#include "backend/opencl/state.hpp"
#endif
#include "core/estimators/estimators.hpp"
#include "device_geometry_test_util.hpp"
#include "numeric/refit_sums.h"
#include "spectrasift/error.hpp"
#include "spectrasift/geometry.hpp"
#include "spectrasift/match.hpp"
#include "spectrasift/sift.hpp"

namespace ss = spectrasift;

namespace {

using Mat3 = std::array<double, 9>;

bool same_bits(double a, double b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

ss::Context cpu_context() {
  ss::ContextOptions o;
  o.backend = ss::Backend::kCpu;
  o.threads = 2;
  return ss::Context(o);
}

/// n pairs: a fraction `inlier_share` mapped through h with Gaussian noise of `noise_px`, the rest uniform in
/// the image (outliers), shuffled.
void planted(const Mat3& h, int n, double inlier_share, double noise_px, std::uint64_t seed,
             std::vector<ss::Point2>& moving, std::vector<ss::Point2>& fixed) {
  std::mt19937_64 g(seed);
  std::uniform_real_distribution<double> ux(0, 1920), uy(0, 1080);
  std::normal_distribution<double> noise(0, noise_px);
  moving.resize(std::size_t(n));
  fixed.resize(std::size_t(n));
  for (int i = 0; i < n; ++i) {
    const ss::Point2 m{ux(g), uy(g)};
    moving[std::size_t(i)] = m;
    if (i < int(inlier_share * n)) {
      const ss::Point2 f = ss::apply_model(h, m);
      fixed[std::size_t(i)] = {f.x + noise(g), f.y + noise(g)};
    } else {
      fixed[std::size_t(i)] = {ux(g), uy(g)};
    }
  }
  for (int i = n - 1; i > 0; --i) {  // shuffle both lists the same way
    const int j = int(g() % std::uint64_t(i + 1));
    std::swap(moving[std::size_t(i)], moving[std::size_t(j)]);
    std::swap(fixed[std::size_t(i)], fixed[std::size_t(j)]);
  }
}

const Mat3 kPlanted{0.92, 0.11, 35.0, -0.07, 1.03, -18.0, 2.1e-5, -1.4e-5, 1.0};

void expect_same_estimate(const ss::ModelEstimate& cpu, const ss::ModelEstimate& dev, const std::string& what) {
  EXPECT_EQ(cpu.found, dev.found) << what;
  EXPECT_EQ(cpu.inliers, dev.inliers) << what;
  EXPECT_EQ(cpu.iterations, dev.iterations) << what;
  EXPECT_TRUE(same_bits(cpu.rms_px, dev.rms_px)) << what << ": rms " << cpu.rms_px << " vs " << dev.rms_px;
  for (int k = 0; k < 9; ++k)
    EXPECT_TRUE(same_bits(cpu.matrix[std::size_t(k)], dev.matrix[std::size_t(k)]))
        << what << ": matrix[" << k << "] " << cpu.matrix[std::size_t(k)] << " vs " << dev.matrix[std::size_t(k)];
  EXPECT_TRUE(cpu.inlier_mask == dev.inlier_mask) << what << ": inlier masks differ";
}

class RansacBackend : public ::testing::TestWithParam<ss::Backend> {
 protected:
  void SetUp() override {
    std::string why;
    ctx_ = ss::test::device_context_for(GetParam(), ss::detail::Operation::kRansac, why);
    if (!ctx_) GTEST_SKIP() << why;
#if SPECTRASIFT_HAVE_OPENCL
    if (GetParam() == ss::Backend::kOpenCL) dynamic_cast<ss::opencl::State&>(device()).refit_variant = 1;
#endif
  }
  ss::detail::BackendImpl& device() { return *ctx_->impl().backend_impl; }
  std::unique_ptr<ss::Context> ctx_;
};

// Pairs whose squared error is exactly the threshold (inliers), one ulp above it (outliers), exactly zero,
// sent to the line at infinity (w = 0), NaN; models valid and invalid: counts and sums bit for bit.
TEST_P(RansacBackend, ScoresAndMasksAreTheCpuBits) {
  const double thr2 = 9.0;
  std::vector<ss::Point2> moving, fixed;
  planted(kPlanted, 3000, 0.6, 1.2, 7, moving, fixed);
  const Mat3 id{1, 0, 0, 0, 1, 0, 0, 0, 1};
  moving.push_back({10, 20});
  fixed.push_back({13, 20});  // e2 = 9 exactly under the identity: an inlier
  moving.push_back({10, 20});
  fixed.push_back({std::nextafter(13.0, 20.0), 20});  // just above: an outlier
  moving.push_back({5, 5});
  fixed.push_back({5, 5});  // e2 = 0
  moving.push_back({0.5, 0.25});
  fixed.push_back({std::nan(""), 1});  // NaN error: never an inlier
  const int n = int(moving.size());
  // The identity, the planted model, perturbed models, one sending (100, 0) to infinity, invalid slots.
  std::vector<Mat3> models{id, kPlanted};
  std::mt19937_64 g(3);
  std::normal_distribution<double> eps(0, 1e-3);
  for (int k = 0; k < 40; ++k) {
    Mat3 m = kPlanted;
    for (int j = 0; j < 6; ++j) m[std::size_t(j)] += eps(g) * (j % 3 == 2 ? 1000 : 1);
    models.push_back(m);
  }
  models.push_back({1, 0, 0, 0, 1, 0, -0.01, 0, 1});
  const int count = int(models.size());
  std::vector<double> flat;
  for (const auto& m : models) flat.insert(flat.end(), m.begin(), m.end());
  std::vector<std::uint8_t> valid(std::size_t(count), 1);
  valid[5] = 0;
  valid[std::size_t(count) - 2] = 0;
  const ss::detail::PointPairs pairs{moving.data(), fixed.data(), n, 424242};
  const std::size_t nc = static_cast<std::size_t>(count);
  std::vector<int> ci(nc), di(nc, -7);
  std::vector<double> cs(nc), ds(nc, -7);
  ss::detail::host_backend().score_models(flat.data(), valid.data(), count, pairs, thr2, 2, ci.data(), cs.data());
  device().score_models(flat.data(), valid.data(), count, pairs, thr2, 2, di.data(), ds.data());
  for (int h = 0; h < count; ++h) {
    EXPECT_EQ(ci[std::size_t(h)], di[std::size_t(h)]) << "model " << h;
    EXPECT_TRUE(same_bits(cs[std::size_t(h)], ds[std::size_t(h)]))
        << "model " << h << ": " << cs[std::size_t(h)] << " vs " << ds[std::size_t(h)];
  }
  EXPECT_EQ(ci[5], -1);
  EXPECT_GT(ci[1], 1700);  // the planted model finds its inliers
  // Extreme thresholds: infinite (a threshold above 1e154 px; every error but NaN is an inlier, the sums
  // saturate) and subnormal (only exact pairs): still the CPU's counts and sums.
  for (double extreme : {HUGE_VAL, 1e-310}) {
    std::vector<int> ce(nc), de(nc, -7);
    std::vector<double> cse(nc), dse(nc, -7);
    ss::detail::host_backend().score_models(flat.data(), valid.data(), count, pairs, extreme, 2, ce.data(), cse.data());
    device().score_models(flat.data(), valid.data(), count, pairs, extreme, 2, de.data(), dse.data());
    EXPECT_TRUE(ce == de) << "threshold2 " << extreme;
    for (int h = 0; h < count; ++h)
      EXPECT_TRUE(same_bits(cse[std::size_t(h)], dse[std::size_t(h)]))
          << "threshold2 " << extreme << ", model " << h << ": " << cse[std::size_t(h)] << " vs " << dse[std::size_t(h)];
    if (extreme == HUGE_VAL) {
      EXPECT_EQ(ce[0], n - 1) << "every pair but the NaN one";
    }
  }
  // The masks, the identity's included (its threshold pairs), on the same device copy of the pairs.
  for (int h : {0, 1, 7, count - 1}) {
    std::vector<std::uint8_t> cm(std::size_t(n), 9), dm(std::size_t(n), 9);
    double csum = -1, dsum = -1;
    const int cc = ss::detail::host_backend().inlier_mask(&flat[std::size_t(h) * 9], pairs, thr2, cm.data(), &csum);
    const int dc = device().inlier_mask(&flat[std::size_t(h) * 9], pairs, thr2, dm.data(), &dsum);
    EXPECT_EQ(cc, dc) << "model " << h;
    EXPECT_TRUE(same_bits(csum, dsum)) << "model " << h << ": " << csum << " vs " << dsum;
    EXPECT_TRUE(cm == dm) << "model " << h;
    if (h == 0) {
      EXPECT_EQ(cm[std::size_t(n) - 4], 1) << "e2 == threshold2 is an inlier";
      EXPECT_EQ(cm[std::size_t(n) - 3], 0) << "e2 above threshold2 is not";
      EXPECT_EQ(cm[std::size_t(n) - 2], 1);
      EXPECT_EQ(cm[std::size_t(n) - 1], 0) << "a NaN error is not an inlier";
    }
  }
  // The score's sum agrees with the mask's.
  std::vector<std::uint8_t> mask(static_cast<std::size_t>(n));
  double s1 = 0;
  EXPECT_EQ(device().inlier_mask(&flat[9], pairs, thr2, mask.data(), &s1), di[1]);
  EXPECT_TRUE(same_bits(s1, ds[1]));
}

// The refits' sums (numeric/refit_sums.h) on the device against the host's (geometry::host_refit_chain), bit
// for bit: every pass alone and every chain of the refits; pair counts around the 256-pair blocks (1, 255, 256,
// 257, 700, 10,000: one to 40 blocks); masks with half the pairs, all, none, only the last one; pairs with
// exact and signed zeros and pairs that LM's model sends to the line at infinity (skipped there). A backend
// that leaves the sums to the host (BackendImpl::refit_sums returns false: the CPU's order by construction) is
// skipped with a message.
TEST_P(RansacBackend, RefitSumsAreTheHostBits) {
  // q: normalisers; h: a model with h[8] = 1 sending normalised X = 100 to w = 0 (1 - 0.01 X).
  const double centroids[4] = {960.5, 540.25, 951.0, 529.75};
  const double q[6] = {960.5, 540.25, 1.0 / 700.0, 951.0, 529.75, 1.0 / 690.0};
  const double identity_q[6] = {0, 0, 1, 0, 0, 1};
  const double h[9] = {0.93, 0.1, 0.02, -0.06, 1.02, -0.01, 2e-3, -1e-3, 1.0};
  const double horizon[9] = {1, 0, 0, 0, 1, 0, -0.01, 0, 1};
  int compared = 0;
  std::uint64_t run_id = 880000;
  for (int n : {1, 255, 256, 257, 700, 10000}) {
    std::vector<ss::Point2> moving, fixed;
    planted(kPlanted, std::max(n, 2), 0.5, 1.0, std::uint64_t(n), moving, fixed);
    moving.resize(std::size_t(n));
    fixed.resize(std::size_t(n));
    for (int i = 0; i < n; i += 37) moving[std::size_t(i)] = {100.0, double(i % 5)};  // w = 0 under `horizon`
    for (int i = 5; i < n; i += 53) fixed[std::size_t(i)] = {-0.0, 0.0};             // signed zeros
    const ss::detail::PointPairs pairs{moving.data(), fixed.data(), n, ++run_id};
    std::mt19937_64 g(std::uint64_t(n) * 7 + 1);
    std::vector<std::vector<std::uint8_t>> masks(4, std::vector<std::uint8_t>(std::size_t(n), 0));
    for (int i = 0; i < n; ++i) masks[0][std::size_t(i)] = std::uint8_t(g() & 1);
    std::fill(masks[1].begin(), masks[1].end(), 1);
    masks[3][std::size_t(n) - 1] = 1;
    for (const auto& mask : masks) {
      std::vector<int> idx;
      for (int i = 0; i < n; ++i)
        if (mask[std::size_t(i)]) idx.push_back(i);
      const ss::detail::RefitSelection sel{mask.data(), idx.data(), int(idx.size())};
      struct Case {
        std::vector<int> passes;
        std::vector<double> given;
      };
      const std::vector<double> c4(centroids, centroids + 4), q6(q, q + 6);
      std::vector<Case> cases{{{SS_REFIT_CENTROID}, {}},
                              {{SS_REFIT_SPREAD}, c4},
                              {{SS_REFIT_AFFINE}, c4},
                              {{SS_REFIT_SIMILARITY}, c4},
                              {{SS_REFIT_DLT}, q6},
                              // the chains of core/estimators/refit.cpp (parameters derived on the device)
                              {{SS_REFIT_CENTROID, SS_REFIT_SPREAD, SS_REFIT_DLT}, {}},
                              {{SS_REFIT_CENTROID, SS_REFIT_AFFINE}, {}},
                              {{SS_REFIT_CENTROID, SS_REFIT_SIMILARITY}, {}}};
      for (const double* model : {h, horizon}) {
        std::vector<double> given(model == h ? q : identity_q, (model == h ? q : identity_q) + 6);
        given.insert(given.end(), model, model + 9);
        cases.push_back({{SS_REFIT_LM_NORMAL}, given});
        cases.push_back({{SS_REFIT_LM_COST}, given});
        cases.push_back({{SS_REFIT_LM_COST, SS_REFIT_LM_NORMAL}, given});
      }
      for (const Case& c : cases) {
        int k = 0;
        for (int pass : c.passes) k += ss_refit_sum_count(pass);
        const int np = int(c.passes.size());
        std::vector<double> want(std::size_t(k), -7.0), got(std::size_t(k), -9.0);
        ss::geometry::host_refit_chain(c.passes.data(), np, c.given.data(), moving.data(), fixed.data(), n, idx.data(),
                                       int(idx.size()), want.data());
        if (!device().refit_sums(c.passes.data(), np, c.given.data(), pairs, sel, got.data()))
          GTEST_SKIP() << ss::to_string(GetParam()) << " leaves the refit sums to the host (the CPU's order)";
        // NaN where a chain divides by a zero distance (one selected pair; the refit refuses it): any NaN, as
        // devices write their own payload.
        for (int s = 0; s < k; ++s)
          ASSERT_TRUE(same_bits(want[std::size_t(s)], got[std::size_t(s)]) ||
                      (std::isnan(want[std::size_t(s)]) && std::isnan(got[std::size_t(s)])))
              << "n " << n << ", chain of " << np << " from pass " << c.passes[0] << ", sum " << s << ", "
              << idx.size() << " selected: " << want[std::size_t(s)] << " vs " << got[std::size_t(s)];
        ++compared;
      }
    }
  }
  EXPECT_EQ(compared, 6 * 4 * 14);
}

// A second run with other pairs of the same count on the same context: the device must not score the first
// run's pairs (they are kept on the device per run).
TEST_P(RansacBackend, EachRunScoresItsOwnPairs) {
  auto cpu = cpu_context();
  std::vector<ss::Point2> m1, f1, m2, f2;
  planted(kPlanted, 2000, 0.5, 0.8, 11, m1, f1);
  const Mat3 other{1.1, -0.05, -40, 0.04, 0.95, 25, 0, 1e-5, 1};
  planted(other, 2000, 0.5, 0.8, 12, m2, f2);
  ss::RansacOptions o;
  for (int round = 0; round < 2; ++round) {
    const auto& m = round == 0 ? m1 : m2;
    const auto& f = round == 0 ? f1 : f2;
    expect_same_estimate(ss::estimate_model(cpu, m, f, o), ss::estimate_model(*ctx_, m, f, o),
                         "run " + std::to_string(round));
  }
}

// 10,000 planted pairs with outliers (the benchmark's case), every model kind and ranking, several seeds.
TEST_P(RansacBackend, PlantedModelsAreTheCpuModels) {
  auto cpu = cpu_context();
  std::vector<ss::Point2> moving, fixed;
  planted(kPlanted, 10000, 0.55, 1.0, 5, moving, fixed);
  for (ss::GeometryModel model :
       {ss::GeometryModel::kHomography, ss::GeometryModel::kAffine, ss::GeometryModel::kSimilarity}) {
    for (bool msac : {false, true}) {
      for (std::uint64_t seed : {0u, 1u, 2u}) {
        ss::RansacOptions o;
        o.model = model;
        o.msac = msac;
        o.seed = seed;
        const std::string what =
            std::string(ss::to_string(model)) + (msac ? " msac" : "") + " seed " + std::to_string(seed);
        const ss::ModelEstimate c = ss::estimate_model(cpu, moving, fixed, o);
        const ss::ModelEstimate d = ss::estimate_model(*ctx_, moving, fixed, o);
        expect_same_estimate(c, d, what);
        if (model == ss::GeometryModel::kHomography) {
          EXPECT_TRUE(d.found) << what;
          EXPECT_GT(d.inliers, 5000) << what;
        }
      }
    }
  }
}

// graf1 -> graf3 (real matches, many outliers): the same model as the CPU backend, and near the ground truth.
TEST_P(RansacBackend, Graf1ToGraf3IsTheCpuModel) {
  auto cpu = cpu_context();
  const ss::Image g1 = ss::test::load_test_image("graf1_gray.png"), g3 = ss::test::load_test_image("graf3_gray.png");
  const ss::Features f1 = ss::detect_and_compute(cpu, g1), f3 = ss::detect_and_compute(cpu, g3);
  const std::vector<ss::Match> matches = ss::match_features(cpu, f1, f3);  // query = moving graf1, train = graf3
  std::vector<ss::Point2> moving, fixed;
  for (const auto& m : matches) {
    moving.push_back({f1.keypoints[std::size_t(m.query)].x, f1.keypoints[std::size_t(m.query)].y});
    fixed.push_back({f3.keypoints[std::size_t(m.train)].x, f3.keypoints[std::size_t(m.train)].y});
  }
  ASSERT_GT(moving.size(), 500u);
  for (bool msac : {false, true}) {
    for (double thr : {3.0, 2.0}) {
      ss::RansacOptions o;
      o.msac = msac;
      o.threshold_px = thr;
      const std::string what = std::string(msac ? "msac" : "inliers") + " threshold " + std::to_string(thr);
      const ss::ModelEstimate c = ss::estimate_model(cpu, moving, fixed, o);
      const ss::ModelEstimate d = ss::estimate_model(*ctx_, moving, fixed, o);
      expect_same_estimate(c, d, what);
      EXPECT_TRUE(d.found) << what;
      EXPECT_GT(d.inliers, 300) << what;
    }
  }
}

// Too few pairs, coincident points, bad input: the same answers and errors as on the CPU backend.
TEST_P(RansacBackend, SmallAndBadInputs) {
  auto cpu = cpu_context();
  ss::RansacOptions o;
  const std::vector<ss::Point2> three{{0, 0}, {1, 0}, {0, 1}};
  expect_same_estimate(ss::estimate_model(cpu, three, three, o), ss::estimate_model(*ctx_, three, three, o), "3 pairs");
  const std::vector<ss::Point2> same(20, ss::Point2{4, 4});
  expect_same_estimate(ss::estimate_model(cpu, same, same, o), ss::estimate_model(*ctx_, same, same, o), "coincident");
  std::vector<ss::Point2> m, f;
  planted(kPlanted, 12, 1.0, 0.0, 1, m, f);  // exact pairs: every one an inlier
  const ss::ModelEstimate d = ss::estimate_model(*ctx_, m, f, o);
  expect_same_estimate(ss::estimate_model(cpu, m, f, o), d, "12 exact pairs");
  EXPECT_EQ(d.inliers, 12);
  try {
    (void)ss::estimate_model(*ctx_, m, std::vector<ss::Point2>(5), o);
    ADD_FAILURE() << "no error for lists of different sizes";
  } catch (const ss::Error& e) {
    EXPECT_EQ(e.code(), ss::ErrorCode::kInvalidArgument);
  }
  std::vector<ss::Point2> bad = m;
  bad[3].x = std::nan("");
  try {
    (void)ss::estimate_model(*ctx_, bad, f, o);
    ADD_FAILURE() << "no error for a NaN coordinate";
  } catch (const ss::Error& e) {
    EXPECT_EQ(e.code(), ss::ErrorCode::kInvalidArgument);
  }
  ss::RansacOptions neg;
  neg.threshold_px = -1;
  EXPECT_THROW((void)ss::estimate_model(*ctx_, m, f, neg), ss::Error);
}

INSTANTIATE_TEST_SUITE_P(Gpu, RansacBackend, ::testing::Values(ss::Backend::kOpenCL, ss::Backend::kCuda),
                         [](const ::testing::TestParamInfo<ss::Backend>& i) {
                           return std::string(ss::to_string(i.param));
                         });

}  // namespace

// assess_model (spectrasift/verdict.hpp) on real pairs: right pairs pass, wrong pairs are rejected; and on
// constructed correspondences: few inliers with small residuals pass, a handful of chance inliers among
// many matches, folding, mirroring and extreme distortion fail. The figures of the real pairs are
// printed: they are the data the default limits were chosen on.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "spectrasift/geometry.hpp"
#include "spectrasift/io.hpp"
#include "spectrasift/match.hpp"
#include "spectrasift/sift.hpp"
#include "spectrasift/verdict.hpp"

using namespace spectrasift;

namespace {

const std::string kTestData = SPECTRASIFT_TEST_DATA;
const std::string kData = SPECTRASIFT_DATA_DIR;

struct PairResult {
  ModelEstimate est;
  ModelVerdict verdict;
};

/// The CLI's register: query = MOVING, train = FIXED; RANSAC homography MOVING -> FIXED; the verdict.
PairResult register_pair(const std::string& moving_path, const std::string& fixed_path) {
  ContextOptions co;
  co.backend = Backend::kCpu;
  co.threads = 2;
  Context ctx(co);
  const Image moving = read_image(moving_path), fixed = read_image(fixed_path);
  const Features fm = detect_and_compute(ctx, moving), ff = detect_and_compute(ctx, fixed);
  const auto matches = match_features(ctx, fm, ff);
  std::vector<Point2> pm, pf;
  for (const Match& m : matches) {
    pm.push_back({fm.keypoints[std::size_t(m.query)].x, fm.keypoints[std::size_t(m.query)].y});
    pf.push_back({ff.keypoints[std::size_t(m.train)].x, ff.keypoints[std::size_t(m.train)].y});
  }
  PairResult r;
  r.est = estimate_model(ctx, pm, pf);
  r.verdict = assess_model(r.est, pm, pf, moving.width, moving.height, fixed.width, fixed.height);
  std::printf("[verdict] %s -> %s: found %d, %d/%d inliers, rms %.2f, log10 NFA %.1f, scale %.3f, range %.2f, "
              "anisotropy %.2f, folds %d, flips %d -> %s\n",
              moving_path.c_str(), fixed_path.c_str(), int(r.est.found), r.verdict.inliers, r.verdict.matches,
              r.verdict.rms_px, r.verdict.log10_nfa, r.verdict.scale, r.verdict.scale_range, r.verdict.anisotropy,
              int(r.verdict.folds), int(r.verdict.flips), r.verdict.reliable ? "reliable" : r.verdict.summary().c_str());
  return r;
}

TEST(Verdict, RightPairsAreReliable) {
  for (const auto& [moving, fixed] : {std::pair{kData + "/box.png", kData + "/box_in_scene.png"},
                                      std::pair{kTestData + "/graf1_gray.png", kTestData + "/graf3_gray.png"}}) {
    const PairResult r = register_pair(moving, fixed);
    ASSERT_TRUE(r.est.found) << moving;
    EXPECT_TRUE(r.verdict.reliable) << moving << ": " << r.verdict.summary();
    EXPECT_LT(r.verdict.log10_nfa, -20) << "a right pair is far from chance";
  }
}

TEST(Verdict, WrongPairsAreRejected) {
  for (const auto& [moving, fixed] : {std::pair{kData + "/box.png", kTestData + "/camera.png"},
                                      std::pair{kData + "/box.png", kTestData + "/coins.png"},
                                      std::pair{kTestData + "/graf1_gray.png", kData + "/box_in_scene.png"}}) {
    const PairResult r = register_pair(moving, fixed);
    EXPECT_FALSE(r.verdict.reliable) << moving << " -> " << fixed << " was judged reliable";
    EXPECT_FALSE(r.verdict.problems.empty());
    EXPECT_NE(r.verdict.summary().find("no reliable model"), std::string::npos);
  }
}

/// n matches in a fixed image of size x size: the first `good` follow `truth` moved by `offset` px in a
/// random direction, the rest are uniform random pairs.
struct Synthetic {
  std::vector<Point2> moving, fixed;
};
Synthetic synthetic(const std::array<double, 9>& truth, int n, int good, double offset, double size, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> uni(0, size - 1);
  std::uniform_real_distribution<double> angle(0, 6.283185307179586);
  Synthetic s;
  for (int i = 0; i < n; ++i) {
    const Point2 m{uni(rng), uni(rng)};
    s.moving.push_back(m);
    if (i < good) {
      const Point2 f = apply_model(truth, m);
      const double a = angle(rng);
      s.fixed.push_back({f.x + offset * std::cos(a), f.y + offset * std::sin(a)});
    } else {
      s.fixed.push_back({uni(rng), uni(rng)});
    }
  }
  return s;
}

ModelEstimate fit(const Synthetic& s, GeometryModel model, int min_inliers) {
  ContextOptions co;
  co.backend = Backend::kCpu;
  co.threads = 1;
  Context ctx(co);
  RansacOptions ro;
  ro.model = model;
  ro.min_inliers = min_inliers;
  return estimate_model(ctx, s.moving, s.fixed, ro);
}

// Like the cbers_b2_crop_C: 5 inliers, residuals about 1.3 px, among a few dozen matches.
TEST(Verdict, FewInliersWithSmallResidualsPass) {
  const std::array<double, 9> truth{0.98, -0.17, 40, 0.17, 0.98, -25, 0, 0, 1};  // 10 degrees, scale 1
  const Synthetic s = synthetic(truth, 40, 5, 1.8, 1000, 7);
  const ModelEstimate est = fit(s, GeometryModel::kSimilarity, 5);
  std::printf("[verdict] similarity: found %d, %d inliers, rms %.2f\n", int(est.found), est.inliers, est.rms_px);
  ASSERT_TRUE(est.found);
  ASSERT_EQ(est.inliers, 5);
  EXPECT_GT(est.rms_px, 0.6);
  EXPECT_LT(est.rms_px, 1.6);
  const ModelVerdict v = assess_model(est, s.moving, s.fixed, 1000, 1000, 1000, 1000);
  std::printf("[verdict] 5 of 40, rms %.2f px: log10 NFA %.1f\n", v.rms_px, v.log10_nfa);
  EXPECT_TRUE(v.reliable) << v.summary();
}

/// What RANSAC reports when it settles on `truth` with the first `good` pairs as inliers.
ModelEstimate planted(const Synthetic& s, const std::array<double, 9>& truth, int good) {
  ModelEstimate est;
  est.found = true;
  est.matrix = truth;
  est.inliers = good;
  est.inlier_mask.assign(s.moving.size(), 0);
  double sum = 0;
  for (int i = 0; i < good; ++i) {
    est.inlier_mask[std::size_t(i)] = 1;
    const Point2 p = apply_model(truth, s.moving[std::size_t(i)]);
    sum += std::pow(p.x - s.fixed[std::size_t(i)].x, 2) + std::pow(p.y - s.fixed[std::size_t(i)].y, 2);
  }
  est.rms_px = std::sqrt(sum / good);
  return est;
}

// Like the HRC onto a 20 m band: RANSAC's best homography has 9 inliers of 907 matches, within
// the 3 px threshold (9 pairs among 907 that a homography happens to line up).
TEST(Verdict, ChanceInliersAmongManyMatchesFail) {
  const std::array<double, 9> truth{0.125, 0.0, 300, 0.0, 0.125, 200, 0, 0, 1};
  Synthetic s = synthetic(truth, 907, 9, 2.0, 1000, 11);
  const ModelVerdict v = assess_model(planted(s, truth, 9), s.moving, s.fixed, 1000, 1000, 1000, 1000);
  std::printf("[verdict] 9 of 907, rms %.2f px: log10 NFA %.1f\n", v.rms_px, v.log10_nfa);
  EXPECT_FALSE(v.reliable);
  EXPECT_NE(v.summary().find("weak support"), std::string::npos) << v.summary();
  // The same 9 among 30 matches are no longer chance.
  s.moving.resize(30);
  s.fixed.resize(30);
  const ModelVerdict v30 = assess_model(planted(s, truth, 9), s.moving, s.fixed, 1000, 1000, 1000, 1000);
  std::printf("[verdict] 9 of 30, rms %.2f px: log10 NFA %.1f\n", v30.rms_px, v30.log10_nfa);
  EXPECT_TRUE(v30.reliable) << v30.summary();
}

// The NFA counts independent correspondences only: inliers that repeat a location pair (SIFT's extra
// orientations give one point several keypoints, hence several identical matches) must not lower it. 4 true
// inliers among 200 matches at 1.5 px are not significant for a similarity (log10 NFA 0.6); 8 more copies of
// one of them (in place of 8 outliers, so n stays 200) made 12 "inliers" at 1.5 px, log10 NFA -28, before the
// verdict counted distinct locations.
TEST(Verdict, RepeatedLocationsDoNotLowerTheNfa) {
  const std::array<double, 9> truth{0.98, -0.17, 40, 0.17, 0.98, -25, 0, 0, 1};
  Synthetic s = synthetic(truth, 200, 4, 1.5, 1000, 5);
  auto similarity = [&](int good) {
    ModelEstimate est = planted(s, truth, good);
    est.model = GeometryModel::kSimilarity;
    return est;
  };
  const ModelVerdict v0 = assess_model(similarity(4), s.moving, s.fixed, 1000, 1000, 1000, 1000);
  std::printf("[verdict] 4 of 200 (similarity), rms %.2f px: log10 NFA %.1f\n", v0.rms_px, v0.log10_nfa);
  EXPECT_EQ(v0.distinct_inliers, 4);
  ASSERT_FALSE(v0.reliable) << "the base case must be weak for the test to mean anything";
  for (int i = 4; i < 12; ++i) {
    s.moving[std::size_t(i)] = s.moving[1];
    s.fixed[std::size_t(i)] = s.fixed[1];
  }
  const ModelEstimate est = similarity(12);
  const ModelVerdict v1 = assess_model(est, s.moving, s.fixed, 1000, 1000, 1000, 1000);
  std::printf("[verdict] the same + 8 copies of one inlier: %d inliers, %d distinct, log10 NFA %.1f\n", v1.inliers,
              v1.distinct_inliers, v1.log10_nfa);
  EXPECT_EQ(v1.inliers, 12);
  EXPECT_EQ(v1.distinct_inliers, 4);
  EXPECT_GE(v1.log10_nfa, v0.log10_nfa);
  EXPECT_FALSE(v1.reliable) << v1.summary();
  // A copy a fraction of a pixel off (a re-detection at a neighbouring scale) is the same location too; one
  // 2 px off (in both images) is another.
  s.moving[4] = {s.moving[1].x + 0.3, s.moving[1].y};
  s.fixed[4] = {s.fixed[1].x, s.fixed[1].y - 0.3};
  s.moving[5] = {s.moving[1].x + 2, s.moving[1].y};
  s.fixed[5] = apply_model(truth, s.moving[5]);
  EXPECT_EQ(assess_model(est, s.moving, s.fixed, 1000, 1000, 1000, 1000).distinct_inliers, 5);
}

// Many distinct moving points matched to ONE fixed keypoint, which a contracting similarity (scale 0.05, inside
// the scale limit) maps them all near: camera -> coins's 6 "inliers", 5 of them on one camera keypoint. Counted
// once it leaves 2 location pairs, which every 2-point similarity sample fits: no evidence, log10 NFA +inf.
TEST(Verdict, ManyMatchesOfOneFixedPointAreOneCorrespondence) {
  const std::array<double, 9> contract{0.05, 0, 140, 0, 0.05, 380, 0, 0, 1};
  std::vector<Point2> pm, pf;
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> uni(0, 399);
  const Point2 hub = apply_model(contract, {100, 100});
  for (int i = 0; i < 6; ++i) pm.push_back({100 + 10.0 * (i % 3), 100 + 15.0 * (i / 3)}), pf.push_back(hub);
  pm.push_back({300, 200}), pf.push_back(apply_model(contract, pm.back()));
  for (int i = 0; i < 20; ++i) pm.push_back({uni(rng), uni(rng)}), pf.push_back({uni(rng), uni(rng)});
  ModelEstimate est;
  est.found = true;
  est.model = GeometryModel::kSimilarity;
  est.matrix = contract;
  est.inlier_mask.assign(pm.size(), 0);
  for (std::size_t i = 0; i < pm.size(); ++i) {
    const Point2 p = apply_model(contract, pm[i]);
    if (std::hypot(p.x - pf[i].x, p.y - pf[i].y) < 3) est.inlier_mask[i] = 1, ++est.inliers;
  }
  ASSERT_EQ(est.inliers, 7);
  const ModelVerdict v = assess_model(est, pm, pf, 400, 400, 512, 512);
  std::printf("[verdict] 6 moving points onto one fixed point + 1: %d inliers, %d distinct, log10 NFA %.1f\n",
              v.inliers, v.distinct_inliers, v.log10_nfa);
  EXPECT_EQ(v.distinct_inliers, 2);
  EXPECT_TRUE(std::isinf(v.log10_nfa) && v.log10_nfa > 0);
  EXPECT_FALSE(v.reliable);
  EXPECT_NE(v.summary().find("2 distinct location pairs"), std::string::npos) << v.summary();
  EXPECT_EQ(v.summary().find("scale"), std::string::npos) << "the scale (0.05) is within its limit: " << v.summary();
}

/// A perfect model (every point an inlier) with the given matrix, judged on a 400 x 300 moving image.
ModelVerdict judge_matrix(const std::array<double, 9>& h) {
  std::vector<Point2> pm, pf;
  for (int y = 0; y < 300; y += 30)
    for (int x = 0; x < 400; x += 40) {
      pm.push_back({double(x), double(y)});
      pf.push_back(apply_model(h, pm.back()));
    }
  ModelEstimate est;
  est.found = true;
  est.matrix = h;
  est.inliers = int(pm.size());
  est.inlier_mask.assign(pm.size(), 1);
  return assess_model(est, pm, pf, 400, 300, 0, 0);
}

TEST(Verdict, ShapeChecks) {
  EXPECT_TRUE(judge_matrix({1, 0, 0, 0, 1, 0, 0, 0, 1}).reliable);
  const ModelVerdict mirror = judge_matrix({-1, 0, 399, 0, 1, 0, 0, 0, 1});
  EXPECT_TRUE(mirror.flips);
  EXPECT_FALSE(mirror.reliable);
  // The line at infinity x = 200 crosses the image.
  const ModelVerdict fold = judge_matrix({1, 0, 0, 0, 1, 0, -1.0 / 200, 0, 1});
  EXPECT_TRUE(fold.folds);
  EXPECT_FALSE(fold.reliable);
  const ModelVerdict squash = judge_matrix({1, 0, 0, 0, 0.05, 0, 0, 0, 1});
  EXPECT_GT(squash.anisotropy, 8);
  EXPECT_FALSE(squash.reliable);
  const ModelVerdict tiny = judge_matrix({0.01, 0, 0, 0, 0.01, 0, 0, 0, 1});
  EXPECT_FALSE(tiny.reliable);
  // Strong perspective that keeps w > 0: the scale changes by far more than 8x across the image.
  const ModelVerdict persp = judge_matrix({1, 0, 0, 0, 1, 0, -1.0 / 420, 0, 1});
  EXPECT_FALSE(persp.folds);
  EXPECT_GT(persp.scale_range, 8);
  EXPECT_FALSE(persp.reliable);
  ModelEstimate none;
  EXPECT_FALSE(assess_model(none, {}, {}, 10, 10, 10, 10).reliable);
}

}  // namespace

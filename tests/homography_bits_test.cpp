// The homography DLT and Levenberg-Marquardt solvers (core/estimators/refit.cpp, sums of numeric/refit_sums.h)
// accumulate only the structurally non-zero products of A^T A and J^T J, in blocks of 256 pairs added by a
// pairwise tree, and claim the bits of the full 9 x 9 / 8 x 8 loops run block by block and added by that tree.
// This test keeps reference copies of those loops (homography.cpp as of e477ee5, cut into blocks of 256 points
// whose full matrices are added entry by entry: with block b's matrix at b, level by level for w = 1, 2, 4, ...,
// matrix i (a multiple of 2w) += matrix i + w) and compares the solvers' matrices with memcmp on many random
// point sets of 4-700 points (one to three blocks):
// noisy views of a plane, exact zeros (signed-zero products), near-collinear and repeated points, large
// coordinates and points near the line mapped to infinity.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "core/estimators/estimators.hpp"
#include "numeric/homography.h"
#include "numeric/refit_sums.h"

namespace spectrasift::geometry {
namespace {

// ---- reference copies of the full loops (e477ee5), run per block of 256 points ----
constexpr int kBlock = 256;

/// Adds the blocks' values entry by entry in the tree of the file comment; the total is in blocks[0].
template <std::size_t N>
void add_blocks(std::vector<std::array<double, N>>& blocks) {
  const std::size_t nb = blocks.size();
  for (std::size_t w = 1; w < nb; w *= 2)
    for (std::size_t i = 0; i + w < nb; i += 2 * w)
      for (std::size_t e = 0; e < N; ++e) blocks[i][e] += blocks[i + w][e];
}

bool reference_dlt(const std::vector<Point2>& m, const std::vector<Point2>& f, Mat3& h) {
  std::vector<std::array<double, 81>> blocks((m.size() + kBlock - 1) / kBlock, std::array<double, 81>{});
  for (std::size_t i = 0; i < m.size(); ++i) {
    double* ata = blocks[i / kBlock].data();
    const double X = m[i].x, Y = m[i].y, u = f[i].x, v = f[i].y;
    const double r0[9] = {X, Y, 1, 0, 0, 0, -u * X, -u * Y, -u};
    const double r1[9] = {0, 0, 0, X, Y, 1, -v * X, -v * Y, -v};
    for (int p = 0; p < 9; ++p)
      for (int q = p; q < 9; ++q) ata[9 * p + q] += r0[p] * r0[q] + r1[p] * r1[q];
  }
  add_blocks(blocks);
  double ata[9][9];
  for (int p = 0; p < 9; ++p)
    for (int q = 0; q < 9; ++q) ata[p][q] = blocks[0][std::size_t(9 * p + q)];
  for (int p = 0; p < 9; ++p)
    for (int q = 0; q < p; ++q) ata[p][q] = ata[q][p];
  double e[9];
  smallest_eigenvector9(ata, e);
  for (int k = 0; k < 9; ++k) h[k] = e[k];
  return normalise(h);
}

void reference_lm(const std::vector<Point2>& m, const std::vector<Point2>& f, Mat3& h) {
  if (!(std::fabs(h[8]) > 1e-12)) return;
  for (double& v : h) v /= h[8];
  const std::size_t nb = (m.size() + kBlock - 1) / kBlock;
  auto cost = [&](const Mat3& g) {
    std::vector<std::array<double, 1>> c(nb, std::array<double, 1>{});
    for (std::size_t i = 0; i < m.size(); ++i)
      c[i / kBlock][0] += ss_transfer_error2(g.data(), m[i].x, m[i].y, f[i].x, f[i].y);
    add_blocks(c);
    return c[0][0];
  };
  double current = cost(h);
  double lambda = 1e-3;
  for (int it = 0; it < 30 && current > 0; ++it) {
    std::vector<std::array<double, 72>> blocks(nb, std::array<double, 72>{});  // jtj row-major, then jtr
    for (std::size_t i = 0; i < m.size(); ++i) {
      double* jtj = blocks[i / kBlock].data();
      double* jtr = jtj + 64;
      const double X = m[i].x, Y = m[i].y;
      const double w = h[6] * X + h[7] * Y + 1.0;
      if (!(std::fabs(w) > 1e-12)) continue;
      const double u = (h[0] * X + h[1] * Y + h[2]) / w, v = (h[3] * X + h[4] * Y + h[5]) / w;
      const double ju[8] = {X / w, Y / w, 1 / w, 0, 0, 0, -X * u / w, -Y * u / w};
      const double jv[8] = {0, 0, 0, X / w, Y / w, 1 / w, -X * v / w, -Y * v / w};
      const double ru = u - f[i].x, rv = v - f[i].y;
      for (int p = 0; p < 8; ++p) {
        jtr[p] += ju[p] * ru + jv[p] * rv;
        for (int q = p; q < 8; ++q) jtj[8 * p + q] += ju[p] * ju[q] + jv[p] * jv[q];
      }
    }
    add_blocks(blocks);
    double jtj[8][8], jtr[8];
    for (int p = 0; p < 8; ++p) {
      jtr[p] = blocks[0][std::size_t(64 + p)];
      for (int q = 0; q < 8; ++q) jtj[p][q] = blocks[0][std::size_t(8 * p + q)];
    }
    for (int p = 0; p < 8; ++p)
      for (int q = 0; q < p; ++q) jtj[p][q] = jtj[q][p];
    bool improved = false;
    for (int attempt = 0; attempt < 10; ++attempt) {
      double a[8][8], b[8], d[8];
      for (int p = 0; p < 8; ++p) {
        for (int q = 0; q < 8; ++q) a[p][q] = jtj[p][q];
        a[p][p] += lambda * (jtj[p][p] > 0 ? jtj[p][p] : 1.0);
        b[p] = -jtr[p];
      }
      if (!solve<8>(a, b, d)) {
        lambda *= 10;
        continue;
      }
      Mat3 g = h;
      for (int p = 0; p < 8; ++p) g[p] += d[p];
      const double c = cost(g);
      if (c < current) {
        const double gain = (current - c) / current;
        h = g;
        current = c;
        lambda = std::max(lambda / 10, 1e-12);
        improved = gain > 1e-12;
        break;
      }
      lambda *= 10;
    }
    if (!improved) break;
  }
}

// ---- random point sets ----
enum class Shape { kPlane, kZeros, kNearCollinear, kRepeated, kLarge, kNearHorizon, kCount };

struct PointSet {
  std::vector<Point2> m, f;
  Mat3 start;  // the LM's starting model: the true one, perturbed
};

PointSet random_set(std::mt19937_64& rng, Shape shape) {
  std::uniform_real_distribution<double> unit(-1.0, 1.0);
  std::uniform_int_distribution<int> count(4, 700);
  const double scale = shape == Shape::kLarge ? std::pow(10.0, 3.0 + 3.0 * (unit(rng) + 1.0)) : 1.0;
  const double persp = shape == Shape::kNearHorizon ? 0.9 : 0.05;
  Mat3 h{1 + 0.2 * unit(rng), 0.2 * unit(rng), 0.3 * unit(rng) * scale,
         0.2 * unit(rng),     1 + 0.2 * unit(rng), 0.3 * unit(rng) * scale,
         persp * unit(rng) / scale, persp * unit(rng) / scale, 1.0};
  PointSet s;
  const int n = count(rng);
  for (int i = 0; i < n; ++i) {
    Point2 p{unit(rng) * scale, unit(rng) * scale};
    switch (shape) {
      case Shape::kZeros:  // exact zeros in X, Y, u or v: products of -0 and +0 against the full loop's
        if (i % 3 == 0) p.x = 0;
        if (i % 4 == 1) p.y = 0;
        break;
      case Shape::kNearCollinear: p.y = 0.5 * p.x + 1e-9 * unit(rng); break;
      case Shape::kRepeated:
        if (i > 0 && i % 2 == 0) p = s.m[std::size_t(i / 2)];
        break;
      default: break;
    }
    const double w = h[6] * p.x + h[7] * p.y + h[8];
    Point2 q{(h[0] * p.x + h[1] * p.y + h[2]) / w + 1e-3 * scale * unit(rng),
             (h[3] * p.x + h[4] * p.y + h[5]) / w + 1e-3 * scale * unit(rng)};
    if (shape == Shape::kZeros) {
      if (i % 5 == 2) q.x = 0;
      if (i % 7 == 3) q.y = -0.0;
    }
    s.m.push_back(p);
    s.f.push_back(q);
  }
  s.start = h;
  for (int k = 0; k < 8; ++k) s.start[std::size_t(k)] *= 1 + 0.01 * unit(rng);
  return s;
}

TEST(HomographyBits, DltMatchesTheFullNineByNineLoop) {
  std::mt19937_64 rng(20261202);
  int compared = 0;
  for (int round = 0; round < 400; ++round) {
    const Shape shape = Shape(round % int(Shape::kCount));
    const PointSet s = random_set(rng, shape);
    Mat3 got{}, want{};
    const bool ok_got = homography_dlt(s.m, s.f, got), ok_want = reference_dlt(s.m, s.f, want);
    ASSERT_EQ(ok_got, ok_want) << "round " << round;
    ASSERT_EQ(std::memcmp(got.data(), want.data(), sizeof(Mat3)), 0) << "round " << round << " shape " << int(shape);
    compared += ok_got;
  }
  EXPECT_GT(compared, 300);  // most sets give a model (the comparison is not only of failures)
}

TEST(HomographyBits, LevenbergMarquardtMatchesTheFullEightByEightLoop) {
  std::mt19937_64 rng(7);
  int moved = 0;
  for (int round = 0; round < 400; ++round) {
    const Shape shape = Shape(round % int(Shape::kCount));
    const PointSet s = random_set(rng, shape);
    Mat3 got = s.start, want = s.start;
    homography_lm(s.m, s.f, got);
    reference_lm(s.m, s.f, want);
    ASSERT_EQ(std::memcmp(got.data(), want.data(), sizeof(Mat3)), 0) << "round " << round << " shape " << int(shape);
    Mat3 start = s.start;
    for (double& v : start) v /= s.start[8];
    moved += std::memcmp(got.data(), start.data(), sizeof(Mat3)) != 0;
  }
  EXPECT_GT(moved, 300);  // the refinement took steps on most sets (the comparison is not of starting points)
}

// The host's sums over a subset given as indices (skipping the pairs that are not selected) are the bits of the
// device's way (numeric/refit_sums.h; backend/cuda/kernels/ransac.cuh): every pair of a block visited in order,
// adding +0 terms for the pairs not selected, then the partials added by the tree written out here. Every pass,
// 1-2,000 pairs, random subsets, signed zeros.
TEST(HomographyBits, RefitSumsSkippingIsAddingZeros) {
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> unit(-1.0, 1.0);
  std::uniform_int_distribution<int> count(1, 2000);
  const double p[SS_REFIT_MAX_PARAMS] = {0.1, -0.2, 1.5, 0.05, 0.3, 1.25, 0.9, 0.1,
                                         0.2, -0.05, 1.1, 0.1, 0.2, 0.1, 1.0};
  for (int round = 0; round < 60; ++round) {
    const int n = count(rng);
    std::vector<Point2> m(static_cast<std::size_t>(n)), f(static_cast<std::size_t>(n));
    std::vector<int> idx;
    std::vector<std::uint8_t> mask(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) {
      m[std::size_t(i)] = {i % 11 == 0 ? -0.0 : unit(rng), unit(rng)};
      f[std::size_t(i)] = {unit(rng), i % 13 == 0 ? 0.0 : unit(rng)};
      mask[std::size_t(i)] = std::uint8_t(round % 3 == 0 ? 1 : rng() & 1);
      if (mask[std::size_t(i)]) idx.push_back(i);
    }
    for (int pass = 0; pass < SS_REFIT_PASSES; ++pass) {
      const int k = ss_refit_sum_count(pass), nb = (n + 255) / 256;
      std::vector<double> got(static_cast<std::size_t>(k)), part(std::size_t(nb) * std::size_t(k), 0.0);
      host_refit_sums(pass, p, m.data(), f.data(), n, idx.data(), int(idx.size()), got.data());
      for (int i = 0; i < n; ++i) {
        double t[SS_REFIT_MAX_SUMS] = {};
        const Point2 a = m[std::size_t(i)], b = f[std::size_t(i)];
        if (mask[std::size_t(i)]) ss_refit_terms(pass, p, a.x, a.y, b.x, b.y, t);
        for (int s = 0; s < k; ++s) part[std::size_t(i / 256) * std::size_t(k) + std::size_t(s)] += t[s];
      }
      for (int s = 0; s < k; ++s) {
        for (int w = 1; w < nb; w *= 2)
          for (int b = 0; b + w < nb; b += 2 * w)
            part[std::size_t(b * k + s)] += part[std::size_t((b + w) * k + s)];
        ASSERT_EQ(std::memcmp(&got[std::size_t(s)], &part[std::size_t(s)], sizeof(double)), 0)
            << "round " << round << ", n " << n << ", pass " << pass << ", sum " << s;
      }
    }
  }
}

/// The host's sums, counting the calls; with `chains`, asked for as a device is (prefers_chains: LM gets the
/// normal equations with every cost).
class CountingSums final : public RefitSums {
 public:
  CountingSums(const std::vector<Point2>& m, const std::vector<Point2>& f, bool chains)
      : host_(m.data(), f.data(), int(m.size()), nullptr, int(m.size())), chains_(chains) {}
  void chain(const int* passes, int npasses, const double* given, double* out) override {
    ++calls;
    host_.chain(passes, npasses, given, out);
  }
  bool prefers_chains() const override { return chains_; }
  int count() const override { return host_.count(); }
  int calls = 0;

 private:
  HostRefitSums host_;
  bool chains_;
};

// LM on a source that prefers chains (a device: the cost and the normal equations at a step in one trip, the
// normal equations of an accepted step not asked again) takes the same steps as on the host: the same bits, in
// fewer calls.
TEST(HomographyBits, LevenbergMarquardtWithChainsIsTheSameModel) {
  std::mt19937_64 rng(5);
  int plain_calls = 0, chained_calls = 0;
  for (int round = 0; round < 120; ++round) {
    const PointSet s = random_set(rng, Shape(round % int(Shape::kCount)));
    CountingSums plain(s.m, s.f, false), chained(s.m, s.f, true);
    static constexpr double kIdentity[6] = {0, 0, 1, 0, 0, 1};
    Mat3 want = s.start, got = s.start;
    homography_lm(plain, kIdentity, want);
    homography_lm(chained, kIdentity, got);
    ASSERT_EQ(std::memcmp(got.data(), want.data(), sizeof(Mat3)), 0) << "round " << round;
    plain_calls += plain.calls;
    chained_calls += chained.calls;
  }
  EXPECT_LT(chained_calls, plain_calls);  // the accepted steps' normal equations came with their costs
}

// The host's sums split over threads (blocks to workers, from 4,096 selected pairs) are the one-thread bits, with
// indices and without (all pairs).
TEST(HomographyBits, RefitSumsOnThreadsAreTheSameBits) {
  std::mt19937_64 rng(13);
  std::uniform_real_distribution<double> unit(-500.0, 500.0);
  const int n = 10000;
  std::vector<Point2> m(static_cast<std::size_t>(n)), f(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    m[std::size_t(i)] = {unit(rng), unit(rng)};
    f[std::size_t(i)] = {unit(rng), unit(rng)};
  }
  const double p[SS_REFIT_MAX_PARAMS] = {3, -2, 0.002, 1, 4, 0.0021, 0.9, 0.1, 0.2, -0.05, 1.1, 0.1, 0.2, 0.1, 1.0};
  for (int keep : {2, 8, 9}) {  // of every 10 pairs: sparse (below the threshold), dense, nearly all
    std::vector<int> idx;
    for (int i = 0; i < n; ++i)
      if (int(rng() % 10) < keep) idx.push_back(i);
    for (int pass = 0; pass < SS_REFIT_PASSES; ++pass) {
      double one[SS_REFIT_MAX_SUMS], many[SS_REFIT_MAX_SUMS], all_one[SS_REFIT_MAX_SUMS], all_many[SS_REFIT_MAX_SUMS];
      host_refit_sums(pass, p, m.data(), f.data(), n, idx.data(), int(idx.size()), one, 1);
      host_refit_sums(pass, p, m.data(), f.data(), n, idx.data(), int(idx.size()), many, 3);
      host_refit_sums(pass, p, m.data(), f.data(), n, nullptr, n, all_one, 1);
      host_refit_sums(pass, p, m.data(), f.data(), n, nullptr, n, all_many, 4);
      const std::size_t bytes = sizeof(double) * std::size_t(ss_refit_sum_count(pass));
      ASSERT_EQ(std::memcmp(one, many, bytes), 0) << "keep " << keep << ", pass " << pass;
      ASSERT_EQ(std::memcmp(all_one, all_many, bytes), 0) << "pass " << pass;
    }
  }
}

}  // namespace
}  // namespace spectrasift::geometry

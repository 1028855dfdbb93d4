// CPU scoring of RANSAC hypotheses: inlier count and sum of squared transfer errors per model.
// Parallel over models. The residual, the inlier test and the exact fixed-point sum are the per-item maths
// of numeric/ransac_score.h, shared with the GPU backends, so that every backend and every thread count
// gives the same counts and sums, bit for bit.
#include <cstdint>

#include "backend/cpu/operations.hpp"
#include "core/thread_pool.hpp"
#include "numeric/ransac_score.h"

namespace spectrasift::cpu {

namespace {

/// The grid of the fixed-point sums for a threshold (numeric/ransac_score.h).
struct SumGrid {
  double scale, inv_scale;
  explicit SumGrid(double threshold2) : scale(ss_score_scale(threshold2)), inv_scale(ss_score_inv_scale(threshold2)) {}
};

/// Scores one model over every pair; writes mask[i] when mask is not null. Returns the count.
int score_one(const double* m, const Point2* moving, const Point2* fixed, int n, double threshold2, const SumGrid& grid,
              std::uint8_t* mask, double* sum) {
  int c = 0;
  ss_u64 hi = 0, lo = 0;
  for (int i = 0; i < n; ++i) {
    const double e2 = ss_transfer_error2(m, moving[i].x, moving[i].y, fixed[i].x, fixed[i].y);
    const bool in = e2 <= threshold2;
    if (mask) mask[i] = in ? 1 : 0;
    if (in) {
      const ss_u64 q = ss_score_fixed(e2, grid.scale);
      ++c;
      hi += ss_score_hi(q);
      lo += ss_score_lo(q);
    }
  }
  *sum = ss_score_sum(hi, lo, grid.inv_scale);
  return c;
}

}  // namespace

void score_models(const double* models, const std::uint8_t* valid, int count, const Point2* moving, const Point2* fixed,
                  int n, double threshold2, int threads, int* inliers, double* sums) {
  const SumGrid grid(threshold2);
  const auto score = [&](int h0, int h1, int) {
    for (int h = h0; h < h1; ++h) {
      if (!valid[h]) {
        inliers[h] = -1;
        sums[h] = 0;
        continue;
      }
      inliers[h] = score_one(models + std::size_t(h) * 9, moving, fixed, n, threshold2, grid, nullptr, &sums[h]);
    }
  };
  // Threads only for enough work: waking the pool costs tens of microseconds (more on a busy machine),
  // about the time to score 100 models against 200 points.
  if (std::int64_t(count) * n >= (1 << 17)) calling_thread_pool(threads).run(count, 4, score);
  else score(0, count, 0);
}

int inlier_mask(const double* model, const Point2* moving, const Point2* fixed, int n, double threshold2,
                std::uint8_t* mask, double* sum2) {
  return score_one(model, moving, fixed, n, threshold2, SumGrid(threshold2), mask, sum2);
}

}  // namespace spectrasift::cpu

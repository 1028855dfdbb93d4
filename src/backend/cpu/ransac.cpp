// CPU scoring of RANSAC hypotheses: inlier count and sum of squared transfer errors per model.
// Parallel over models (each model's sum is accumulated by one thread in point order, so the result
// does not depend on the thread count). The residual formula is shared with the GPU backends
// (numeric/homography.h).
#include <cstdint>

#include "backend/cpu/operations.hpp"
#include "core/thread_pool.hpp"
#include "numeric/homography.h"

namespace spectrasift::cpu {

void score_models(const double* models, const std::uint8_t* valid, int count, const Point2* moving,
                  const Point2* fixed, int n, double threshold2, int threads, int* inliers, double* sums) {
  const auto score = [&](int h0, int h1, int) {
    for (int h = h0; h < h1; ++h) {
      if (!valid[h]) {
        inliers[h] = -1;
        sums[h] = 0;
        continue;
      }
      const double* m = models + std::size_t(h) * 9;
      int c = 0;
      double s = 0;
      for (int i = 0; i < n; ++i) {
        const double e2 = ss_transfer_error2(m, moving[i].x, moving[i].y, fixed[i].x, fixed[i].y);
        if (e2 <= threshold2) {
          ++c;
          s += e2;
        }
      }
      inliers[h] = c;
      sums[h] = s;
    }
  };
  // Threads only for enough work: waking the pool costs tens of microseconds (more on a busy machine),
  // about the time to score 100 models against 200 points.
  if (std::int64_t(count) * n >= (1 << 17)) calling_thread_pool(threads).run(count, 4, score);
  else score(0, count, 0);
}

int inlier_mask(const double* model, const Point2* moving, const Point2* fixed, int n, double threshold2,
                std::uint8_t* mask, double* sum2) {
  int c = 0;
  double s = 0;
  for (int i = 0; i < n; ++i) {
    const double e2 = ss_transfer_error2(model, moving[i].x, moving[i].y, fixed[i].x, fixed[i].y);
    const bool in = e2 <= threshold2;
    mask[i] = in ? 1 : 0;
    if (in) {
      ++c;
      s += e2;
    }
  }
  *sum2 = s;
  return c;
}

}  // namespace spectrasift::cpu

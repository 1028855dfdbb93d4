/* ransac_score.h — how a RANSAC model is scored against its correspondences, per item, in the common
 * subset of C++, CUDA and OpenCL C (OpenCL needs cl_khr_fp64), so that every backend takes the same
 * inlier decisions and returns the same sums, bit for bit.
 *
 * A pair (m, f) is an inlier of model h when ss_transfer_error2(h, m, f) <= threshold2 (homography.h).
 * The score is the inlier count and the sum of the inliers' squared errors. A double sum depends on the
 * order of its additions, and a device adds in parallel; so the sum is exact and order-independent
 * instead: each inlier error e2 (0 <= e2 <= threshold2 < 2^E, E from frexp) becomes the 62-bit integer
 *   q = trunc(e2 * 2^(62 - E))                                     (ss_score_fixed)
 * and the integers are added in two 64-bit halves, hi = sum (q >> 32) and lo = sum (q & 0xffffffff),
 * exact in any order for up to 2^31 pairs; the double is formed once (ss_score_sum):
 *   sum = (double(hi) * 2^32 + double(lo)) * 2^(E - 62).
 * The grid step 2^(E - 62) is threshold2 * 2^-61 or finer (about 4e-18 px^2 for a 3 px threshold), far below
 * the rounding of a double sum of thousands of terms. E is kept in [-900, 1024] so that 2^(62 - E) and its
 * inverse stay finite. */
#ifndef SPECTRASIFT_NUMERIC_RANSAC_SCORE_H
#define SPECTRASIFT_NUMERIC_RANSAC_SCORE_H

#include "dialect.h"
#include "homography.h"
/* philox.h: ss_u64 */
#include "philox.h"

/* E of the fixed-point grid: threshold2 < 2^E (frexp's exponent), at least -900; 1024 for a threshold2 that
 * is not finite (a threshold above 1e154 px squares to infinity). */
SPECTRASIFT_FN int ss_score_exponent(double threshold2) {
  if (!(threshold2 <= 1.7976931348623157e308)) return 1024;
  int e = 0;
  frexp(threshold2, &e);
  return e < -900 ? -900 : e;
}

/* The grid's scale 2^(62 - E) and its inverse 2^(E - 62) (exact powers of two). */
SPECTRASIFT_FN double ss_score_scale(double threshold2) { return ldexp(1.0, 62 - ss_score_exponent(threshold2)); }
SPECTRASIFT_FN double ss_score_inv_scale(double threshold2) {
  return ldexp(1.0, ss_score_exponent(threshold2) - 62);
}

/* The fixed-point value of an inlier's squared error; scale = 2^(62 - E). Below 2^62 for every e2 <= a finite
 * threshold2; saturated at 2^62 otherwise (an infinite threshold2 admits any e2, infinity included), so that the
 * conversion is defined and the same on every device. */
SPECTRASIFT_FN ss_u64 ss_score_fixed(double e2, double scale) {
  const double v = e2 * scale;
  return v < 4611686018427387904.0 ? (ss_u64)v : ((ss_u64)1 << 62);
}

/* The halves of q that are summed separately. */
SPECTRASIFT_FN ss_u64 ss_score_hi(ss_u64 q) { return q >> 32; }
SPECTRASIFT_FN ss_u64 ss_score_lo(ss_u64 q) { return q & (ss_u64)0xFFFFFFFFu; }

/* The sum of squared errors from the summed halves; inv_scale = 2^(E - 62). (Multiplying by 2^32 is exact,
 * so a fused multiply-add would round the same way.) */
SPECTRASIFT_FN double ss_score_sum(ss_u64 hi, ss_u64 lo, double inv_scale) {
  return ((double)hi * 4294967296.0 + (double)lo) * inv_scale;
}

#endif /* SPECTRASIFT_NUMERIC_RANSAC_SCORE_H */

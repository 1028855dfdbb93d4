/* match_filter.h — match_features' tests on one query's nearest two train descriptors, in the common subset
 * of C++, CUDA and OpenCL C (OpenCL needs cl_khr_fp64), so that the host (CPU backend, and any backend's
 * fallback) and the GPU filter kernels keep the same matches, bit for bit (include/spectrasift/match.hpp):
 *   best1 >= 0, d1 < ratio * d2 (in double: d2 = +inf passes), d1 <= max_distance, and the mutual check
 *   (decided by the caller: the nearest query of train best1 is this query). */
#ifndef SPECTRASIFT_NUMERIC_MATCH_FILTER_H
#define SPECTRASIFT_NUMERIC_MATCH_FILTER_H

#include "dialect.h"

/* 1 when the query's match is kept. */
SPECTRASIFT_FN int ss_match_keep(int best1, float d1, float d2, double ratio, double max_distance, int mutual_ok) {
  if (best1 < 0) return 0;
  if (!((double)d1 < ratio * (double)d2)) return 0; /* an exact tie fails; NaN fails */
  if ((double)d1 > max_distance) return 0;
  return mutual_ok;
}

/* The L2 distance of a squared distance, equal to the host's std::sqrt(float) (correctly rounded): the
 * square root correctly rounded in double and then to float is the correctly rounded float square root
 * (double rounding is innocuous for sqrt when 53 >= 2 * 24 + 2). For devices whose float sqrt may be inexact
 * (OpenCL allows 3 ulp). */
SPECTRASIFT_FN float ss_match_distance(float squared) { return (float)sqrt((double)squared); }

#endif /* SPECTRASIFT_NUMERIC_MATCH_FILTER_H */

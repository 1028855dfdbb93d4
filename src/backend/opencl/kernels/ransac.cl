/* ransac.cl — RANSAC scoring on the device (src/backend/opencl/ransac.cpp): the inlier counts and the sums
 * of squared transfer errors of a batch of models, and one model's inlier mask. The per-pair maths is
 * numeric/homography.h and numeric/ransac_score.h, as on the CPU backend: the same inlier decisions and,
 * because the sums are exact fixed-point integers (order-independent), the same sums, bit for bit.
 * Doubles throughout (the device needs cl_khr_fp64; without it dispatch keeps RANSAC on the host).
 *
 * Pairs are stored as one buffer of 4 n doubles: moving (x, y) pairs at [0, 2n), fixed at [2n, 4n).
 * Build option: -DRANSAC_WG=<work-group size, a power of two <= 256> (the local-memory tree's width). */
#pragma OPENCL FP_CONTRACT OFF
#pragma OPENCL EXTENSION cl_khr_fp64 : enable

#include "ransac_score.h"

/* Adds the work-group's (count, hi, lo) in local memory by a tree (integers: exact in any order); work-item
 * 0 gets the totals. Every work-item must call it. */
inline void ransac_group_sum(int* count, ulong* hi, ulong* lo, __local int* lc, __local ulong* lh,
                             __local ulong* ll) {
  const int t = (int)get_local_id(0);
  lc[t] = *count;
  lh[t] = *hi;
  ll[t] = *lo;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = RANSAC_WG / 2; s > 0; s >>= 1) {
    if (t < s) {
      lc[t] += lc[t + s];
      lh[t] += lh[t + s];
      ll[t] += ll[t + s];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  *count = lc[0];
  *hi = lh[0];
  *lo = ll[0];
}

/* Scores pair i of the buffer (moving at mv, fixed at fx) against model m: adds an inlier's count and
 * fixed-point halves; returns whether it is an inlier. */
inline int ransac_add_pair(const double* m, __global const double* mv, __global const double* fx, int i,
                           double threshold2, double scale, int* count, ulong* hi, ulong* lo) {
  const double e2 = ss_transfer_error2(m, mv[2 * i], mv[2 * i + 1], fx[2 * i], fx[2 * i + 1]);
  if (!(e2 <= threshold2)) return 0;
  const ulong q = ss_score_fixed(e2, scale);
  *count += 1;
  *hi += ss_score_hi(q);
  *lo += ss_score_lo(q);
  return 1;
}

/* Launch: 1-D, global = count * RANSAC_WG, local = RANSAC_WG: work-group h scores model h; its work-item t
 * takes pairs t, t + RANSAC_WG, ... . inliers[h] = count (-1 when valid[h] == 0), sums[h] = the sum of the
 * inliers' squared errors (ss_score_sum; 0 when invalid). */
__kernel void ransac_score(__global const double* models, __global const uchar* valid, __global const double* pairs,
                           int n, double threshold2, double scale, double inv_scale, __global int* inliers,
                           __global double* sums) {
  __local int lc[RANSAC_WG];
  __local ulong lh[RANSAC_WG];
  __local ulong ll[RANSAC_WG];
  const int h = (int)get_group_id(0);
  if (!valid[h]) { /* the whole group leaves: no barrier is reached */
    if (get_local_id(0) == 0) {
      inliers[h] = -1;
      sums[h] = 0.0;
    }
    return;
  }
  double m[9];
  for (int k = 0; k < 9; ++k) m[k] = models[9 * h + k];
  __global const double* mv = pairs;
  __global const double* fx = pairs + 2 * (size_t)n;
  int count = 0;
  ulong hi = 0, lo = 0;
  for (int i = (int)get_local_id(0); i < n; i += RANSAC_WG)
    ransac_add_pair(m, mv, fx, i, threshold2, scale, &count, &hi, &lo);
  ransac_group_sum(&count, &hi, &lo, lc, lh, ll);
  if (get_local_id(0) == 0) {
    inliers[h] = count;
    sums[h] = ss_score_sum(hi, lo, inv_scale);
  }
}

/* Launch: 1-D, global = groups * RANSAC_WG, local = RANSAC_WG: work-item i writes mask[i] for pair i of the
 * one model (grid-stride over n), and each work-group g writes its partial count and halves to
 * part_count[g], part_hi[g], part_lo[g]; the host adds the partials (integers) and forms the sum. */
__kernel void ransac_inlier_mask(__global const double* model, __global const double* pairs, int n,
                                 double threshold2, double scale, __global uchar* mask, __global int* part_count,
                                 __global ulong* part_hi, __global ulong* part_lo) {
  __local int lc[RANSAC_WG];
  __local ulong lh[RANSAC_WG];
  __local ulong ll[RANSAC_WG];
  double m[9];
  for (int k = 0; k < 9; ++k) m[k] = model[k];
  __global const double* mv = pairs;
  __global const double* fx = pairs + 2 * (size_t)n;
  int count = 0;
  ulong hi = 0, lo = 0;
  for (int i = (int)get_global_id(0); i < n; i += (int)get_global_size(0))
    mask[i] = (uchar)ransac_add_pair(m, mv, fx, i, threshold2, scale, &count, &hi, &lo);
  ransac_group_sum(&count, &hi, &lo, lc, lh, ll);
  if (get_local_id(0) == 0) {
    part_count[get_group_id(0)] = count;
    part_hi[get_group_id(0)] = hi;
    part_lo[get_group_id(0)] = lo;
  }
}

/* ransac.cl — RANSAC scoring on the device (src/backend/opencl/ransac.cpp): the inlier counts and the sums
 * of squared transfer errors of a batch of models, and one model's inlier mask. The per-pair maths is
 * numeric/homography.h and numeric/ransac_score.h, as on the CPU backend: the same inlier decisions and,
 * because the sums are exact fixed-point integers (order-independent), the same sums, bit for bit.
 * Also the refits' least-squares sums (numeric/refit_sums.h: blocks of 256 pair indices summed in pair order,
 * then the header's pairwise tree), the host's order, so the host's bits. FP_CONTRACT is off (no fused
 * multiply-add, as the library's -ffp-contract=off) and no fast-math option is given (State::program), and
 * OpenCL's double + - * / and sqrt are correctly rounded, so every term is the host's.
 * Doubles throughout (the device needs cl_khr_fp64; without it dispatch keeps RANSAC on the host).
 *
 * Pairs are stored as one buffer of 4 n doubles: moving (x, y) pairs at [0, 2n), fixed at [2n, 4n).
 * Build option: -DRANSAC_WG=<work-group size, a power of two <= 256> (the local-memory tree's width). */
#pragma OPENCL FP_CONTRACT OFF
#pragma OPENCL EXTENSION cl_khr_fp64 : enable

#include "ransac_score.h"
#include "refit_sums.h"

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

/* ---- the refits' sums (numeric/refit_sums.h): blocks of 256 pair indices in pair order, then the tree ---- */

/* Sums added per round of the block kernel: 15 x 257 doubles = 30.8 KB of local memory, within the 32 KB that
 * every OpenCL 1.2 device has (CUDA's 16 would need 32.9 KB); 30 and 29 sums are two rounds either way. */
#define REFIT_CHUNK 15

/* Launch: 1-D, global = ss_refit_blocks(n) * SS_REFIT_BLOCK, local = SS_REFIT_BLOCK (256; the host checks that
 * the kernel allows it, else the sums stay on the host). Work-group b owns pairs 256 b .. 256 b + 255 (exactly
 * the host's block b), work-item t pair 256 b + t. Every work-item forms the pass's parameters itself with
 * ss_refit_chain_params (from `given` and the chain's done_count earlier totals `done`, as the host does; the
 * header's functions take private arrays, so both are copied first; the same inputs give the same bits in
 * every work-item). Each work-item computes its pair's K = ss_refit_sum_count(pass) terms with ss_refit_terms
 * (all +0 for a pair that is not selected or is past n: adding +0 leaves a sum's bits unchanged, as the host's
 * skipping does). The group then adds each sum's 256 terms in pair order: REFIT_CHUNK sums at a time go
 * through local memory, and work-item k < REFIT_CHUNK adds sum k's terms serially from pair 0 to pair 255,
 * starting at +0, as the host's loop does. `io` holds the given parameters (SS_REFIT_MAX_PARAMS doubles) and
 * then the mask (n bytes, 1 = selected); pairs as the scoring kernels'. part[b * K + k] = block b's partial of
 * sum k. */
__kernel void ransac_refit_blocks(int pass, int first, __global const uchar* io, __global const double* done,
                                  int done_count, int count, __global const double* pairs, int n,
                                  __global double* part) {
  __local double chunk[REFIT_CHUNK][SS_REFIT_BLOCK + 1]; /* + 1: the adding work-items read different banks */
  __global const double* given = (__global const double*)io;
  __global const uchar* mask = io + SS_REFIT_MAX_PARAMS * sizeof(double);
  double p[SS_REFIT_MAX_PARAMS];
  {
    double g[SS_REFIT_MAX_PARAMS], d[12]; /* d: the CENTROID and SPREAD totals, all a pass derives from */
    for (int k = 0; k < SS_REFIT_MAX_PARAMS; ++k) g[k] = given[k];
    for (int k = 0; k < 12; ++k) d[k] = k < done_count ? done[k] : 0.0;
    ss_refit_chain_params(pass, first, g, d, count, p);
  }
  const int lid = (int)get_local_id(0);
  const int k_count = ss_refit_sum_count(pass);
  const int i = (int)get_group_id(0) * SS_REFIT_BLOCK + lid;
  double t[SS_REFIT_MAX_SUMS];
  for (int k = 0; k < SS_REFIT_MAX_SUMS; ++k) t[k] = 0.0;
  if (i < n && mask[i]) {
    __global const double* fx = pairs + 2 * (size_t)n;
    ss_refit_terms(pass, p, pairs[2 * i], pairs[2 * i + 1], fx[2 * i], fx[2 * i + 1], t);
  }
  for (int c0 = 0; c0 < k_count; c0 += REFIT_CHUNK) {
    for (int k = 0; k < REFIT_CHUNK && c0 + k < k_count; ++k) chunk[k][lid] = t[c0 + k];
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid < REFIT_CHUNK && c0 + lid < k_count) {
      double acc = 0.0;
      for (int j = 0; j < SS_REFIT_BLOCK; ++j) acc += chunk[lid][j];
      part[(size_t)get_group_id(0) * k_count + c0 + lid] = acc;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
}

/* Launch: 1-D, global = 32, local = 32 (one work-group). Work-item k < k_count adds sum k's nb block partials
 * (part[b * k_count + k]) by ss_refit_tree, the host's tree, and writes the total to out[at + k]. (nb is ~40
 * for 10,000 pairs: a serial tree per sum is a few microseconds, less than a launch.) */
__kernel void ransac_refit_tree(__global double* part, int nb, int k_count, __global double* out, int at) {
  const int k = (int)get_global_id(0);
  if (k < k_count) out[at + k] = ss_refit_tree_global(part + k, nb, k_count);
}

/* refit_sums.h — the least-squares sums of RANSAC's refits (local optimisation and the final refinement:
 * centroids, spreads and Hartley normalisers, the 30 non-zero sums of the homography DLT's A^T A, the 29 of
 * Levenberg-Marquardt's J^T J and J^T r and its cost, the affine and similarity moments), in the common subset
 * of C++, CUDA and OpenCL C (OpenCL needs cl_khr_fp64), so that the host and a device add the same terms in
 * the same order and get the same bits.
 *
 * The fixed order (docs/performance/ransac.md, "The 0.3 ms target"): the pairs are cut into blocks of
 * SS_REFIT_BLOCK = 256 consecutive pair indices of the run (0-255, 256-511, ...; the block of pair i is
 * i / 256, whatever the mask). Block b's partial of a sum starts at +0 and adds the terms of the block's
 * selected pairs in index order; a pair that is not selected adds nothing (a device adds +0 instead: x + (+0)
 * is x for every x, and a sum that starts at +0 never becomes -0 in round-to-nearest, so the bits are the
 * same). The partials of the nb blocks are then added by the fixed pairwise tree of ss_refit_tree. Every
 * operation is written out (no fused multiply-add: the library builds with -ffp-contract=off and CUDA with
 * --fmad=false), and sqrt is IEEE's correctly rounded square root on every target (hypot is not: glibc's
 * differs from CUDA's and OpenCL's in the last bits, so the Hartley normaliser uses sqrt(dx*dx + dy*dy)).
 *
 * The passes (pass number, parameters p, the number of sums K and their order):
 *   SS_REFIT_CENTROID (p: none), K = 4: mx, my, fx, fy.
 *   SS_REFIT_SPREAD (p: cmx, cmy, cfx, cfy, the centroids), K = 8: for the moving points then the fixed
 *     points, with (dx, dy) = point - centroid: dx*dx, dx*dy, dy*dy, sqrt(dx*dx + dy*dy) (the collinearity
 *     moments and the normaliser's distance).
 *   SS_REFIT_DLT (p: cmx, cmy, sm, cfx, cfy, sf, the two normalisers), K = 30: with the normalised points
 *     X = (mx - cmx) * sm, Y = (my - cmy) * sm, u = (fx - cfx) * sf, v = (fy - cfy) * sf, the rows
 *     r0 = (X, Y, 1, 0, 0, 0, a0, a1, a2) and r1 = (0, 0, 0, X, Y, 1, b0, b1, b2), a = -u (X, Y, 1), b = -v (X, Y, 1):
 *     xx[6] (upper triangle of (X, Y, 1)^T (X, Y, 1), row by row), xu[9] ((X, Y, 1)^T a, row-major),
 *     xv[9] ((X, Y, 1)^T b), uv[6] (upper triangle of a^T a + b^T b).
 *   SS_REFIT_LM_NORMAL (p: the two normalisers, then h[0..8] with h[8] = 1), K = 29: J^T J and J^T r of the
 *     one-sided transfer error at h, on the normalised points (see ss_refit_terms for the order); a pair with
 *     |w| <= 1e-12 adds nothing.
 *   SS_REFIT_LM_COST (p: as SS_REFIT_LM_NORMAL), K = 1: ss_transfer_error2(h, X, Y, u, v).
 *   SS_REFIT_AFFINE (p: the centroids), K = 7: with x, y, u, v the centred points: xx, xy, yy, ux, uy, vx, vy.
 *   SS_REFIT_SIMILARITY (p: the centroids), K = 3: xx + yy, xu + yv, xv - yu.
 *
 * A refit asks for a chain of passes at once (one round trip on a device), the totals of each pass following
 * the previous pass's in one array; a pass's parameters come from the chain's earlier totals where they can
 * (ss_refit_chain_params, the same function on the host and the device, so the same bits): the chains are
 *   CENTROID, SPREAD, DLT    (the homography DLT refit: 4 + 8 + 30 totals)
 *   CENTROID, AFFINE         CENTROID, SIMILARITY
 *   LM_COST, LM_NORMAL       (LM: the cost at a step and the normal equations there, both at the given p)
 * and any single pass with given parameters. */
#ifndef SPECTRASIFT_NUMERIC_REFIT_SUMS_H
#define SPECTRASIFT_NUMERIC_REFIT_SUMS_H

#include "dialect.h"
#include "homography.h"

#define SS_REFIT_BLOCK 256
#define SS_REFIT_MAX_SUMS 30
#define SS_REFIT_MAX_PARAMS 15

#define SS_REFIT_CENTROID 0
#define SS_REFIT_SPREAD 1
#define SS_REFIT_DLT 2
#define SS_REFIT_LM_NORMAL 3
#define SS_REFIT_LM_COST 4
#define SS_REFIT_AFFINE 5
#define SS_REFIT_SIMILARITY 6
#define SS_REFIT_PASSES 7

/* The number of sums of a pass (0 for an unknown pass). */
SPECTRASIFT_FN int ss_refit_sum_count(int pass) {
  switch (pass) {
    case SS_REFIT_CENTROID: return 4;
    case SS_REFIT_SPREAD: return 8;
    case SS_REFIT_DLT: return 30;
    case SS_REFIT_LM_NORMAL: return 29;
    case SS_REFIT_LM_COST: return 1;
    case SS_REFIT_AFFINE: return 7;
    case SS_REFIT_SIMILARITY: return 3;
    default: return 0;
  }
}

/* The number of parameters of a pass (p[0 .. count-1] are read). */
SPECTRASIFT_FN int ss_refit_param_count(int pass) {
  switch (pass) {
    case SS_REFIT_SPREAD: case SS_REFIT_AFFINE: case SS_REFIT_SIMILARITY: return 4;
    case SS_REFIT_DLT: return 6;
    case SS_REFIT_LM_NORMAL: case SS_REFIT_LM_COST: return 15;
    default: return 0;
  }
}

/* The Hartley normalisers (cmx, cmy, sm, cfx, cfy, sf) of `count` selected pairs from the CENTROID totals c
 * and the SPREAD totals s: the centroids c / count, the scales sqrt(2) / (mean distance to the centroid). */
SPECTRASIFT_FN void ss_refit_normalisers(const double* c, const double* s, int count, double* q) {
  const double n = (double)count;
  q[0] = c[0] / n, q[1] = c[1] / n, q[2] = sqrt(2.0) / (s[3] / n);
  q[3] = c[2] / n, q[4] = c[3] / n, q[5] = sqrt(2.0) / (s[7] / n);
}

/* Whether a pass of a chain takes its parameters from `given` (a chain's first pass, the LM passes) rather than
 * from the chain's earlier totals (SPREAD, AFFINE, SIMILARITY, DLT after the first pass). */
SPECTRASIFT_FN int ss_refit_reads_given(int pass, int first) {
  return first || !(pass == SS_REFIT_SPREAD || pass == SS_REFIT_AFFINE || pass == SS_REFIT_SIMILARITY ||
                    pass == SS_REFIT_DLT);
}

/* The parameters p of a pass of a chain (see the file comment) from the chain's earlier totals `done` (the
 * CENTROID totals at done[0..3], then the SPREAD totals at done[4..11] where the chain has them) and `given`:
 * SPREAD, AFFINE, SIMILARITY the centroids done[0..3] / count; DLT ss_refit_normalisers(done, done + 4); the
 * LM passes and a chain's first pass `given` (ss_refit_param_count(pass) values). `first`: the pass opens the
 * chain. */
SPECTRASIFT_FN void ss_refit_chain_params(int pass, int first, const double* given, const double* done, int count,
                                          double* p) {
  if (ss_refit_reads_given(pass, first)) {
    for (int k = 0; k < ss_refit_param_count(pass); ++k) p[k] = given[k];
  } else if (pass == SS_REFIT_DLT) {
    ss_refit_normalisers(done, done + 4, count, p);
  } else {
    for (int k = 0; k < 4; ++k) p[k] = done[k] / (double)count;
  }
}

/* A device's chain (BackendImpl::refit_sums): how many totals it returns (the sums of its passes, concatenated)
 * and how many of `given` its passes read (the most any of them reads), so that a host writes only those. */
SPECTRASIFT_FN int ss_refit_chain_sum_count(const int* passes, int npasses) {
  int total = 0;
  for (int c = 0; c < npasses; ++c) total += ss_refit_sum_count(passes[c]);
  return total;
}
SPECTRASIFT_FN int ss_refit_chain_given_count(const int* passes, int npasses) {
  int count = 0;
  for (int c = 0; c < npasses; ++c)
    if (ss_refit_reads_given(passes[c], c == 0) && ss_refit_param_count(passes[c]) > count)
      count = ss_refit_param_count(passes[c]);
  return count;
}

/* The number of blocks of n pairs. */
SPECTRASIFT_FN int ss_refit_blocks(int n) { return (n + SS_REFIT_BLOCK - 1) / SS_REFIT_BLOCK; }

/* The terms of one selected pair (moving (mx, my), fixed (fx, fy)) for `pass`: t[0 .. K-1]. Returns 0 when the
 * pair adds nothing (LM normal equations at |w| <= 1e-12; t is then all +0), else 1. */
SPECTRASIFT_FN int ss_refit_terms(int pass, const double* p, double mx, double my, double fx, double fy, double* t) {
  switch (pass) {
    case SS_REFIT_CENTROID:
      t[0] = mx, t[1] = my, t[2] = fx, t[3] = fy;
      return 1;
    case SS_REFIT_SPREAD: {
      const double dx = mx - p[0], dy = my - p[1], ex = fx - p[2], ey = fy - p[3];
      t[0] = dx * dx, t[1] = dx * dy, t[2] = dy * dy, t[3] = sqrt(dx * dx + dy * dy);
      t[4] = ex * ex, t[5] = ex * ey, t[6] = ey * ey, t[7] = sqrt(ex * ex + ey * ey);
      return 1;
    }
    case SS_REFIT_DLT: {
      const double X = (mx - p[0]) * p[2], Y = (my - p[1]) * p[2], u = (fx - p[3]) * p[5], v = (fy - p[4]) * p[5];
      const double a0 = -u * X, a1 = -u * Y, a2 = -u, b0 = -v * X, b1 = -v * Y, b2 = -v;
      t[0] = X * X, t[1] = X * Y, t[2] = X, t[3] = Y * Y, t[4] = Y, t[5] = 1.0;
      t[6] = X * a0, t[7] = X * a1, t[8] = X * a2, t[9] = Y * a0, t[10] = Y * a1, t[11] = Y * a2;
      t[12] = a0, t[13] = a1, t[14] = a2;
      t[15] = X * b0, t[16] = X * b1, t[17] = X * b2, t[18] = Y * b0, t[19] = Y * b1, t[20] = Y * b2;
      t[21] = b0, t[22] = b1, t[23] = b2;
      t[24] = a0 * a0 + b0 * b0, t[25] = a0 * a1 + b0 * b1, t[26] = a0 * a2 + b0 * b2;
      t[27] = a1 * a1 + b1 * b1, t[28] = a1 * a2 + b1 * b2, t[29] = a2 * a2 + b2 * b2;
      return 1;
    }
    case SS_REFIT_LM_NORMAL: {
      /* Jacobian rows ju = (g0, g1, g2, 0, 0, 0, a0u, a1u), jv = (0, 0, 0, g0, g1, g2, a0v, a1v) with
       * g = (X, Y, 1) / w, a0 = -X (u, v) / w, a1 = -Y (u, v) / w; residual r = (u - U, v - V).
       * t: [0..5] g0g0 g0g1 g0g2 g1g1 g1g2 g2g2; [6..11] (g0 ru, g0 rv), (g1 ru, g1 rv), (g2 ru, g2 rv);
       * [12..23] for p = 0..2: (gp a0u, gp a0v, gp a1u, gp a1v); [24] a0u ru + a0v rv, [25] a1u ru + a1v rv;
       * [26] a0u a0u + a0v a0v, [27] a0u a1u + a0v a1v, [28] a1u a1u + a1v a1v. */
      const double* h = p + 6;
      const double X = (mx - p[0]) * p[2], Y = (my - p[1]) * p[2], U = (fx - p[3]) * p[5], V = (fy - p[4]) * p[5];
      const double w = h[6] * X + h[7] * Y + h[8];
      if (!(w > 1e-12 || w < -1e-12)) {
        for (int k = 0; k < 29; ++k) t[k] = 0.0;
        return 0;
      }
      const double u = (h[0] * X + h[1] * Y + h[2]) / w, v = (h[3] * X + h[4] * Y + h[5]) / w;
      const double g0 = X / w, g1 = Y / w, g2 = 1 / w;
      const double a0u = -X * u / w, a0v = -X * v / w, a1u = -Y * u / w, a1v = -Y * v / w;
      const double ru = u - U, rv = v - V;
      t[0] = g0 * g0, t[1] = g0 * g1, t[2] = g0 * g2, t[3] = g1 * g1, t[4] = g1 * g2, t[5] = g2 * g2;
      t[6] = g0 * ru, t[7] = g0 * rv, t[8] = g1 * ru, t[9] = g1 * rv, t[10] = g2 * ru, t[11] = g2 * rv;
      t[12] = g0 * a0u, t[13] = g0 * a0v, t[14] = g0 * a1u, t[15] = g0 * a1v;
      t[16] = g1 * a0u, t[17] = g1 * a0v, t[18] = g1 * a1u, t[19] = g1 * a1v;
      t[20] = g2 * a0u, t[21] = g2 * a0v, t[22] = g2 * a1u, t[23] = g2 * a1v;
      t[24] = a0u * ru + a0v * rv, t[25] = a1u * ru + a1v * rv;
      t[26] = a0u * a0u + a0v * a0v, t[27] = a0u * a1u + a0v * a1v, t[28] = a1u * a1u + a1v * a1v;
      return 1;
    }
    case SS_REFIT_LM_COST: {
      const double X = (mx - p[0]) * p[2], Y = (my - p[1]) * p[2], U = (fx - p[3]) * p[5], V = (fy - p[4]) * p[5];
      t[0] = ss_transfer_error2(p + 6, X, Y, U, V);
      return 1;
    }
    case SS_REFIT_AFFINE: {
      const double x = mx - p[0], y = my - p[1], u = fx - p[2], v = fy - p[3];
      t[0] = x * x, t[1] = x * y, t[2] = y * y, t[3] = u * x, t[4] = u * y, t[5] = v * x, t[6] = v * y;
      return 1;
    }
    case SS_REFIT_SIMILARITY: {
      const double x = mx - p[0], y = my - p[1], u = fx - p[2], v = fy - p[3];
      t[0] = x * x + y * y, t[1] = x * u + y * v, t[2] = x * v - y * u;
      return 1;
    }
    default: return 0;
  }
}

/* Adds the K terms of one pair to the partials acc[0 .. K-1] (in the order of the terms). */
SPECTRASIFT_FN void ss_refit_accumulate(int k_count, const double* t, double* acc) {
  for (int k = 0; k < k_count; ++k) acc[k] += t[k];
}

/* The fixed pairwise tree over the nb block partials of one sum, stored at v[0], v[stride], v[2 stride], ...
 * (overwritten): level by level, with width w = 1, 2, 4, ..., partial i (i a multiple of 2w) += partial i + w
 * where it exists. Returns the total (+0 when nb is 0). */
#define SS_REFIT_TREE(SUFFIX, AS)                                                  \
  SPECTRASIFT_FN double ss_refit_tree##SUFFIX(AS double* v, int nb, int stride) {  \
    if (nb <= 0) return 0.0;                                                       \
    for (int w = 1; w < nb; w *= 2)                                                \
      for (int i = 0; i + w < nb; i += 2 * w) v[i * stride] += v[(i + w) * stride]; \
    return v[0];                                                                   \
  }
SPECTRASIFT_AS_VARIANTS(SS_REFIT_TREE)
#undef SS_REFIT_TREE

#endif /* SPECTRASIFT_NUMERIC_REFIT_SUMS_H */

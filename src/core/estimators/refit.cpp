// The least-squares refits of RANSAC (local optimisation, the final refinement) and of fit_model, from the sums
// of numeric/refit_sums.h: a refit asks its source (RefitSums) for one pass of sums at a time and does the
// small dense work itself (normalisers, the 9 x 9 eigenvector, LM's 8 x 8 solves). The sums are in that
// header's fixed order (blocks of 256 pair indices, each in index order, then a pairwise tree), which a device
// can reproduce in parallel: the source is the host here, or the RANSAC backend's device (core/ransac.cpp), and
// the model is the same bits either way.
#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "core/estimators/estimators.hpp"
#include "core/thread_pool.hpp"
#include "numeric/refit_sums.h"

namespace spectrasift::geometry {

namespace {

/// The partials of one pass, accumulated block by block: K is a constant, so the terms and the K running sums
/// stay in registers (a runtime K makes the compiler keep them in memory, 3x slower).
template <int Pass, int K>
void host_pass(const double* p, const Point2* moving, const Point2* fixed, const int* idx, int count, double* part) {
  double acc[K] = {};
  double t[SS_REFIT_MAX_SUMS];
  int block = -1;
  for (int j = 0; j < count; ++j) {
    const int i = idx ? idx[j] : j;
    const int b = i / SS_REFIT_BLOCK;
    if (b != block) {  // a new block: store the previous one's partials (blocks without pairs stay +0)
      if (block >= 0) std::copy(acc, acc + K, part + std::size_t(block) * K);
      std::fill(acc, acc + K, 0.0);
      block = b;
    }
    if (ss_refit_terms(Pass, p, moving[i].x, moving[i].y, fixed[i].x, fixed[i].y, t))
      for (int k = 0; k < K; ++k) acc[k] += t[k];
  }
  if (block >= 0) std::copy(acc, acc + K, part + std::size_t(block) * K);
}

/// Collinear point set from its centred second moments (xx, xy, yy), as all_collinear.
bool collinear_moments(const double* s) {
  const double tr = s[0] + s[2], det = s[0] * s[2] - s[1] * s[1];
  return !(tr > 1e-12) || det <= 1e-8 * tr * tr;
}


}  // namespace

void host_refit_sums(int pass, const double* p, const Point2* moving, const Point2* fixed, int n, const int* idx,
                     int count, double* out, int threads) {
  const int k = ss_refit_sum_count(pass), nb = ss_refit_blocks(n);
  // The partials, block-major; small sets (minimal samples, fit_model on few points) on the stack.
  std::array<double, 4 * SS_REFIT_MAX_SUMS> small{};
  std::vector<double> large;
  double* part = small.data();
  if (std::size_t(nb) * std::size_t(k) > small.size()) {
    large.assign(std::size_t(nb) * std::size_t(k), 0.0);
    part = large.data();
  }
  if (k == 0) return;
  // The selected pairs of blocks [b0, b1): idx is ascending, so a block's pairs are contiguous in it.
  const auto pass_blocks = [&](int b0, int b1) {
    const auto first_of = [&](int b) {  // the first selected pair at or after block b
      return idx ? int(std::lower_bound(idx, idx + count, b * SS_REFIT_BLOCK) - idx) : std::min(b * SS_REFIT_BLOCK, count);
    };
    const int j0 = first_of(b0), j1 = first_of(b1);
    const int* sub = idx ? idx + j0 : nullptr;
    const Point2* m = idx ? moving : moving + j0;  // without idx, pair j is pair j: offset the arrays
    const Point2* f = idx ? fixed : fixed + j0;
    double* pt = idx ? part : part + std::size_t(b0) * std::size_t(k);
    switch (pass) {
      case SS_REFIT_CENTROID: host_pass<SS_REFIT_CENTROID, 4>(p, m, f, sub, j1 - j0, pt); break;
      case SS_REFIT_SPREAD: host_pass<SS_REFIT_SPREAD, 8>(p, m, f, sub, j1 - j0, pt); break;
      case SS_REFIT_DLT: host_pass<SS_REFIT_DLT, 30>(p, m, f, sub, j1 - j0, pt); break;
      case SS_REFIT_LM_NORMAL: host_pass<SS_REFIT_LM_NORMAL, 29>(p, m, f, sub, j1 - j0, pt); break;
      case SS_REFIT_LM_COST: host_pass<SS_REFIT_LM_COST, 1>(p, m, f, sub, j1 - j0, pt); break;
      case SS_REFIT_AFFINE: host_pass<SS_REFIT_AFFINE, 7>(p, m, f, sub, j1 - j0, pt); break;
      case SS_REFIT_SIMILARITY: host_pass<SS_REFIT_SIMILARITY, 3>(p, m, f, sub, j1 - j0, pt); break;
      default: break;
    }
  };
  // Blocks are independent (each its own partials, each in index order), so threads split them without changing
  // a bit; only for enough pairs (waking the pool costs tens of microseconds, a pass over ~4,000 pairs).
  if (threads > 1 && count >= 4096 && nb > 1) {
    calling_thread_pool(threads).run(nb, std::max(1, nb / (4 * threads)),
                                     [&](int b0, int b1, int) { pass_blocks(b0, b1); });
  } else {
    pass_blocks(0, nb);
  }
  for (int s = 0; s < k; ++s) out[s] = ss_refit_tree(part + s, nb, k);
}

void host_refit_chain(const int* passes, int npasses, const double* given, const Point2* moving, const Point2* fixed,
                      int n, const int* idx, int count, double* out, int threads) {
  double* done = out;
  for (int c = 0; c < npasses; ++c) {
    double p[SS_REFIT_MAX_PARAMS] = {};
    ss_refit_chain_params(passes[c], c == 0, given, out, count, p);
    host_refit_sums(passes[c], p, moving, fixed, n, idx, count, done, threads);
    done += ss_refit_sum_count(passes[c]);
  }
}

// The rows of a pair, r0 = (X, Y, 1, 0, 0, 0, -uX, -uY, -u) and r1 = (0, 0, 0, X, Y, 1, -vX, -vY, -v), have
// fixed zeros, so A^T A has four kinds of entry: (0..2, 0..2) from r0 alone, equal term by term to (3..5, 3..5)
// from r1 alone; (0..2, 6..8) from r0 alone; (3..5, 6..8) from r1 alone; (6..8, 6..8) from both; and
// (0..2, 3..5) is zero. The 30 sums of SS_REFIT_DLT carry the products that can be non-zero, each with the
// expression of the full 9 x 9 loop: a product that is exactly zero leaves a sum's bits unchanged (a sum that
// starts at +0 never becomes -0), so per block the matrix is the full loop's bits (homography_bits_test).
bool homography_from_dlt_sums(const double* s, Mat3& h) {
  const double* xx = s;        // upper triangle of (X, Y, 1)^T (X, Y, 1), row by row
  const double* xu = s + 6;    // (X, Y, 1)^T a, row-major
  const double* xv = s + 15;   // (X, Y, 1)^T b
  const double* uv = s + 24;   // upper triangle of a^T a + b^T b
  double ata[9][9] = {};
  for (int p = 0, k = 0; p < 3; ++p)
    for (int q = p; q < 3; ++q, ++k) {
      ata[p][q] = ata[3 + p][3 + q] = xx[k];
      ata[6 + p][6 + q] = uv[k];
    }
  for (int p = 0; p < 3; ++p)
    for (int q = 0; q < 3; ++q) {
      ata[p][6 + q] = xu[3 * p + q];
      ata[3 + p][6 + q] = xv[3 * p + q];
    }
  for (int p = 0; p < 9; ++p)
    for (int q = 0; q < p; ++q) ata[p][q] = ata[q][p];
  double e[9];
  smallest_eigenvector9(ata, e);
  for (int k = 0; k < 9; ++k) h[std::size_t(k)] = e[k];
  return normalise(h);
}

/// The normalisation of FIXED is isotropic, so the cost on normalised points is the pixel cost times a
/// constant and the optimum is the same. Each J^T J pass and each cost is one pass of sums (SS_REFIT_LM_NORMAL,
/// SS_REFIT_LM_COST); a source that prefers chains (a device: one round trip either way) gets the cost and the
/// normal equations at a step together, so that an accepted step needs no second trip. The sums are the same
/// either way, so the model is too.
void homography_lm(RefitSums& src, const double* q, Mat3& h) {
  if (!(std::fabs(h[8]) > 1e-12)) return;
  for (double& v : h) v /= h[8];
  const bool chains = src.prefers_chains();
  static constexpr int kCostAndNormal[2] = {SS_REFIT_LM_COST, SS_REFIT_LM_NORMAL};
  double p[SS_REFIT_MAX_PARAMS];
  std::copy(q, q + 6, p);
  double s[30];  // the cost, then the 29 sums of the normal equations (at h once a step is accepted)
  bool have_normal = false;
  // The cost at g, and with a chain the normal equations there (in t[1..29]).
  auto cost = [&](const Mat3& g, double* t) {
    std::copy(g.begin(), g.end(), p + 6);
    if (chains) src.chain(kCostAndNormal, 2, p, t);
    else src.sums(SS_REFIT_LM_COST, p, t);
    return t[0];
  };
  double current = cost(h, s);
  have_normal = chains;
  double lambda = 1e-3;
  for (int it = 0; it < 30 && current > 0; ++it) {
    // J^T J and J^T r from the 29 sums of SS_REFIT_LM_NORMAL (the structurally non-zero products of the
    // Jacobian rows ju = (g0, g1, g2, 0, 0, 0, a0u, a1u) and jv = (0, 0, 0, g0, g1, g2, a0v, a1v)).
    if (!have_normal) {
      std::copy(h.begin(), h.end(), p + 6);
      src.sums(SS_REFIT_LM_NORMAL, p, s + 1);
    }
    have_normal = false;
    const double* n = s + 1;
    double jtj[8][8] = {}, jtr[8] = {};
    for (int a = 0, k = 0; a < 3; ++a) {
      jtr[a] = n[6 + 2 * a];
      jtr[3 + a] = n[7 + 2 * a];
      for (int b = a; b < 3; ++b, ++k) jtj[a][b] = jtj[3 + a][3 + b] = n[k];
      for (int b = 0; b < 2; ++b) {
        jtj[a][6 + b] = n[12 + 4 * a + 2 * b];
        jtj[3 + a][6 + b] = n[13 + 4 * a + 2 * b];
      }
    }
    jtr[6] = n[24], jtr[7] = n[25];
    jtj[6][6] = n[26], jtj[6][7] = n[27], jtj[7][7] = n[28];
    for (int a = 0; a < 8; ++a)
      for (int b = 0; b < a; ++b) jtj[a][b] = jtj[b][a];
    bool improved = false;
    for (int attempt = 0; attempt < 10; ++attempt) {
      double a[8][8], b[8], d[8];
      for (int r = 0; r < 8; ++r) {
        for (int c = 0; c < 8; ++c) a[r][c] = jtj[r][c];
        a[r][r] += lambda * (jtj[r][r] > 0 ? jtj[r][r] : 1.0);
        b[r] = -jtr[r];
      }
      if (!solve<8>(a, b, d)) {
        lambda *= 10;
        continue;
      }
      Mat3 g = h;
      for (int r = 0; r < 8; ++r) g[std::size_t(r)] += d[r];
      double t[30];
      const double c = cost(g, t);
      if (c < current) {
        const double gain = (current - c) / current;
        h = g;
        current = c;
        lambda = std::max(lambda / 10, 1e-12);
        improved = gain > 1e-12;
        if (chains) {
          std::copy(t, t + 30, s);  // the normal equations at the new h came with its cost
          have_normal = true;
        }
        break;
      }
      lambda *= 10;
    }
    if (!improved) break;
  }
}

bool homography_refit(RefitSums& src, bool nonlinear, Mat3& h) {
  const int n = src.count();
  if (n < 4) return false;
  // One chain (one round trip on a device): the centroids, the spreads about them (collinearity moments and
  // the normalisers' mean distances), the DLT sums on the points normalised by them.
  static constexpr int kDlt[3] = {SS_REFIT_CENTROID, SS_REFIT_SPREAD, SS_REFIT_DLT};
  double t[4 + 8 + 30];
  src.chain(kDlt, 3, nullptr, t);
  const double* sp = t + 4;
  if (collinear_moments(sp) || collinear_moments(sp + 4)) return false;
  // Hartley: the mean distance to the centroid scaled to sqrt(2) (sqrt(dx*dx + dy*dy), not hypot: the same
  // bits on every device). The chain's DLT pass used these normalisers (the same function, the same bits).
  if (!(sp[3] / double(n) > 1e-12) || !(sp[7] / double(n) > 1e-12)) return false;
  double q[6];
  ss_refit_normalisers(t, sp, n, q);
  Mat3 hn;
  if (!homography_from_dlt_sums(t + 12, hn)) return false;
  if (nonlinear) homography_lm(src, q, hn);
  const Normaliser nm{q[0], q[1], q[2]}, nf{q[3], q[4], q[5]};
  h = mul(mul(nf.inverse(), hn), nm.matrix());
  return normalise(h);
}

bool homography_dlt(const std::vector<Point2>& m, const std::vector<Point2>& f, Mat3& h) {
  const int n = int(m.size());
  HostRefitSums src(m.data(), f.data(), n, nullptr, n);
  static constexpr double kIdentity[6] = {0, 0, 1, 0, 0, 1};  // (x - 0) * 1 is x, bit for bit
  double a[30];
  src.sums(SS_REFIT_DLT, kIdentity, a);
  return homography_from_dlt_sums(a, h);
}

void homography_lm(const std::vector<Point2>& m, const std::vector<Point2>& f, Mat3& h) {
  const int n = int(m.size());
  HostRefitSums src(m.data(), f.data(), n, nullptr, n);
  static constexpr double kIdentity[6] = {0, 0, 1, 0, 0, 1};
  homography_lm(src, kIdentity, h);
}

bool affine_refit(RefitSums& src, Mat3& a) {
  if (src.count() < 1) return false;
  static constexpr int kAffine[2] = {SS_REFIT_CENTROID, SS_REFIT_AFFINE};
  double t[4 + 7], c[4];
  src.chain(kAffine, 2, nullptr, t);
  ss_refit_chain_params(SS_REFIT_AFFINE, 0, nullptr, t, src.count(), c);  // the centroids the chain used
  const double* s = t + 4;
  const double mx = c[0], my = c[1], fx = c[2], fy = c[3];
  const double sxx = s[0], sxy = s[1], syy = s[2], uxx = s[3], uxy = s[4], uyx = s[5], uyy = s[6];
  const double det = sxx * syy - sxy * sxy;
  if (!(det > 1e-12 * (sxx + syy) * (sxx + syy))) return false;
  // [a b; c d] = [uxx uxy; uyx uyy] * inverse([sxx sxy; sxy syy])
  const double i00 = syy / det, i01 = -sxy / det, i11 = sxx / det;
  const double A = uxx * i00 + uxy * i01, B = uxx * i01 + uxy * i11;
  const double C = uyx * i00 + uyy * i01, D = uyx * i01 + uyy * i11;
  a = {A, B, fx - A * mx - B * my, C, D, fy - C * mx - D * my, 0, 0, 1};
  return all_finite(a);
}

bool similarity_refit(RefitSums& src, Mat3& a) {
  if (src.count() < 1) return false;
  static constexpr int kSimilarity[2] = {SS_REFIT_CENTROID, SS_REFIT_SIMILARITY};
  double t[4 + 3], c[4];
  src.chain(kSimilarity, 2, nullptr, t);
  ss_refit_chain_params(SS_REFIT_SIMILARITY, 0, nullptr, t, src.count(), c);
  const double* s = t + 4;
  const double mx = c[0], my = c[1], fx = c[2], fy = c[3];
  const double ss = s[0], sc = s[1], sn = s[2];
  if (!(ss > 1e-12)) return false;
  const double cs = sc / ss, sg = sn / ss;  // scale cos(theta), scale sin(theta)
  a = {cs, -sg, fx - cs * mx + sg * my, sg, cs, fy - sg * mx - cs * my, 0, 0, 1};
  return all_finite(a) && (cs * cs + sg * sg) > 1e-24;
}

bool affine_ls(const Point2* m, const Point2* f, int n, Mat3& a) {
  HostRefitSums src(m, f, n, nullptr, n);
  return affine_refit(src, a);
}

bool similarity_ls(const Point2* m, const Point2* f, int n, Mat3& a) {
  HostRefitSums src(m, f, n, nullptr, n);
  return similarity_refit(src, a);
}

}  // namespace spectrasift::geometry

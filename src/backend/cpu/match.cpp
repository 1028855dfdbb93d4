// CPU brute-force matcher: the two nearest train descriptors of every query, without a distance matrix.
//
// Distance: d^2(q, t) = |q|^2 + |t|^2 - 2 q.t, all sums in float in the order k = 0..dim-1. For SIFT's
// integer-valued descriptors (0..255, 128 of them) every partial sum is an integer below 2^24, so this
// is EXACT and equals the float64 value (and every other backend's) bit for bit; for other descriptors
// (RootSIFT) it is deterministic with a relative error of a few float epsilons. Negative results of
// cancellation are clamped to 0.
//
// Layout: the train descriptors are repacked in blocks of kLanes descriptors, dimension-major inside a
// block (packed[(block * dim + d) * kLanes + j] = train[block * kLanes + j][d]). The kernel computes a
// kQueries x kLanes tile of dot products: for each d it broadcasts kQueries query values and multiplies
// them with one row of kLanes train values, so it vectorises across train descriptors without
// reassociating any sum. One train block (kLanes * dim floats = 8 KiB) is reused from L1 by a whole
// query tile, and a chunk of 32 blocks from L2 by a group of 64 queries (see match_top2). The kernel is
// compiled for AVX-512, AVX2 and the baseline ISA and picked at run time (core/cpu_features.hpp); all give
// identical results (same operations per lane, no contraction: -ffp-contract=off).
// Groups of queries run on the WorkPool (core/thread_pool.hpp); every query is handled by one thread in
// train order, so the result does not depend on the thread count.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "backend/cpu/operations.hpp"
#include "core/cpu_features.hpp"
#include "core/thread_pool.hpp"

namespace spectrasift::cpu {

namespace {

constexpr int kLanes = 16;
constexpr int kQueries = 4;

struct Best2 {
  float d1 = std::numeric_limits<float>::infinity();
  float d2 = std::numeric_limits<float>::infinity();
  int i1 = -1;
  int i2 = -1;
  // Train indices arrive in increasing order, so "strictly less" keeps the lower index on ties.
  void push(float d, int i) {
    if (d < d1) {
      d2 = d1;
      i2 = i1;
      d1 = d;
      i1 = i;
    } else if (d < d2) {
      d2 = d;
      i2 = i;
    }
  }
};

// dots[qi][j] = sum_d q[qi][d] * block[d][j] for kQueries = 4 queries (rows of `query`, stride dim).
// Three builds of the same loop with GCC/Clang vector extensions, sized so that the accumulators stay in
// registers: AVX-512 (4 x 1 zmm), AVX2 (4 x 2 ymm), baseline SSE2 (2 passes of 2 x 4 xmm). The operations
// and their order per lane are identical in all three, so they give identical results.
typedef float V4 __attribute__((vector_size(16)));
typedef float V8 __attribute__((vector_size(32)));
typedef float V16 __attribute__((vector_size(64)));
using DotTile = void (*)(const float*, int, const float*, float (*)[kLanes]);

// Unaligned vector loads through memcpy (no function returns a wide vector: that would change the ABI).
#define SPECTRASIFT_LOAD(type, name, ptr) \
  type name;                              \
  std::memcpy(&name, (ptr), sizeof name)

#ifdef SPECTRASIFT_ISA_REGIONS
SPECTRASIFT_ISA_BEGIN("avx512f")
namespace avx512 {
void dot_tile(const float* query, int dim, const float* block, float (*dots)[kLanes]) {
  V16 a0 = {}, a1 = {}, a2 = {}, a3 = {};
  const float *q0 = query, *q1 = query + dim, *q2 = q1 + dim, *q3 = q2 + dim;
  for (int d = 0; d < dim; ++d) {
    SPECTRASIFT_LOAD(V16, row, block + std::size_t(d) * kLanes);
    a0 += q0[d] * row;
    a1 += q1[d] * row;
    a2 += q2[d] * row;
    a3 += q3[d] * row;
  }
  std::memcpy(dots[0], &a0, sizeof a0);
  std::memcpy(dots[1], &a1, sizeof a1);
  std::memcpy(dots[2], &a2, sizeof a2);
  std::memcpy(dots[3], &a3, sizeof a3);
}
}  // namespace avx512
SPECTRASIFT_ISA_END

SPECTRASIFT_ISA_BEGIN("avx2")
namespace avx2 {
void dot_tile(const float* query, int dim, const float* block, float (*dots)[kLanes]) {
  V8 a[4][2] = {};
  for (int d = 0; d < dim; ++d) {
    SPECTRASIFT_LOAD(V8, r0, block + std::size_t(d) * kLanes);
    SPECTRASIFT_LOAD(V8, r1, block + std::size_t(d) * kLanes + 8);
    for (int qi = 0; qi < 4; ++qi) {
      const float qv = query[std::size_t(qi) * dim + d];
      a[qi][0] += qv * r0;
      a[qi][1] += qv * r1;
    }
  }
  for (int qi = 0; qi < 4; ++qi) std::memcpy(dots[qi], a[qi], sizeof a[qi]);
}
}  // namespace avx2
SPECTRASIFT_ISA_END
#endif

namespace base {
void dot_tile(const float* query, int dim, const float* block, float (*dots)[kLanes]) {
  for (int pass = 0; pass < 2; ++pass) {
    V4 a[2][4] = {};
    const float* q = query + std::size_t(2 * pass) * dim;
    for (int d = 0; d < dim; ++d) {
      const float* rp = block + std::size_t(d) * kLanes;
      SPECTRASIFT_LOAD(V4, r0, rp);
      SPECTRASIFT_LOAD(V4, r1, rp + 4);
      SPECTRASIFT_LOAD(V4, r2, rp + 8);
      SPECTRASIFT_LOAD(V4, r3, rp + 12);
      for (int qi = 0; qi < 2; ++qi) {
        const float qv = q[std::size_t(qi) * dim + d];
        a[qi][0] += qv * r0;
        a[qi][1] += qv * r1;
        a[qi][2] += qv * r2;
        a[qi][3] += qv * r3;
      }
    }
    for (int qi = 0; qi < 2; ++qi) std::memcpy(dots[2 * pass + qi], a[qi], sizeof a[qi]);
  }
}
}  // namespace base

/// The widest build this CPU runs (tests cap it with set_cpu_isa_cap).
DotTile pick_dot_tile() {
#ifdef SPECTRASIFT_ISA_REGIONS
  return pick_isa<DotTile>(&avx512::dot_tile, &avx2::dot_tile, &base::dot_tile);
#else
  return &base::dot_tile;
#endif
}

float squared_norm(const float* v, int dim) {
  float s = 0;
  for (int d = 0; d < dim; ++d) s += v[d] * v[d];
  return s;
}

}  // namespace

void match_top2(const float* query, int nq, const float* train, int nt, int dim, int threads, Top2* out,
                const ProgressFn& progress) {
  if (nq <= 0) return;
  const int blocks = (nt + kLanes - 1) / kLanes;
  std::vector<float> packed(std::size_t(blocks) * dim * kLanes, 0.0f);
  std::vector<float> train_norm(std::size_t(blocks) * kLanes, 0.0f);
  for (int t = 0; t < nt; ++t) {
    const int b = t / kLanes, j = t % kLanes;
    const float* src = train + std::size_t(t) * dim;
    float* dst = packed.data() + std::size_t(b) * dim * kLanes + j;
    for (int d = 0; d < dim; ++d) dst[std::size_t(d) * kLanes] = src[d];
    train_norm[std::size_t(t)] = squared_norm(src, dim);
  }
  const DotTile dot_tile = pick_dot_tile();
  // Two-level blocking: a thread takes a group of kGroup queries (padded to whole tiles) and runs it
  // against the train set in chunks of kChunkBlocks blocks (256 KiB, held in L2 while the whole group
  // passes over it); inside a chunk each 8 KiB block stays in L1 for one tile of 4 queries. Every query
  // still sees the train descriptors in increasing index order.
  constexpr int kGroup = 64;
  constexpr int kChunkBlocks = 32;
  const int groups = (nq + kGroup - 1) / kGroup;
  WorkPool& pool = calling_thread_pool(threads);
  struct GroupBuffers {
    std::vector<float> qbuf, qnorm;
    std::vector<Best2> best;
  };
  std::vector<GroupBuffers> buffers(static_cast<std::size_t>(pool.size()));
  for (auto& b : buffers) {
    b.qbuf.resize(std::size_t(kGroup) * dim);
    b.qnorm.resize(kGroup);
    b.best.resize(kGroup);
  }
  const auto run_groups = [&](int g0, int g1, int thread) {
    std::vector<float>& qbuf = buffers[std::size_t(thread)].qbuf;
    std::vector<float>& qnorm = buffers[std::size_t(thread)].qnorm;
    std::vector<Best2>& best = buffers[std::size_t(thread)].best;
    for (int g = g0; g < g1; ++g) {
      const int q0 = g * kGroup;
      const int q1 = std::min(nq, q0 + kGroup);
      const int tiles = (q1 - q0 + kQueries - 1) / kQueries;
      // Rows past q1 are zero queries (their results are not used).
      std::fill(qbuf.begin(), qbuf.end(), 0.0f);
      std::copy(query + std::size_t(q0) * dim, query + std::size_t(q1) * dim, qbuf.begin());
      for (int qi = 0; qi < kGroup; ++qi) qnorm[std::size_t(qi)] = squared_norm(qbuf.data() + std::size_t(qi) * dim, dim);
      std::fill(best.begin(), best.end(), Best2{});
      float dots[kQueries][kLanes];
      for (int c0 = 0; c0 < blocks; c0 += kChunkBlocks) {
        const int c1 = std::min(blocks, c0 + kChunkBlocks);
        for (int tile = 0; tile < tiles; ++tile) {
          const int t0 = tile * kQueries;
          const int live = std::min(kQueries, q1 - q0 - t0);
          for (int b = c0; b < c1; ++b) {
            dot_tile(qbuf.data() + std::size_t(t0) * dim, dim, packed.data() + std::size_t(b) * dim * kLanes, dots);
            const int lanes = std::min(kLanes, nt - b * kLanes);
            const float* tn = train_norm.data() + std::size_t(b) * kLanes;
            for (int qi = 0; qi < live; ++qi) {
              const float qn = qnorm[std::size_t(t0 + qi)];
              Best2& bq = best[std::size_t(t0 + qi)];
              for (int j = 0; j < lanes; ++j) bq.push(std::max(0.0f, (qn + tn[j]) - 2.0f * dots[qi][j]), b * kLanes + j);
            }
          }
        }
      }
      for (int q = q0; q < q1; ++q) {
        const Best2& bq = best[std::size_t(q - q0)];
        Top2& o = out[q];
        o.best1 = bq.i1;
        o.best2 = bq.i2;
        o.distance1 = std::sqrt(bq.d1);
        o.distance2 = std::sqrt(bq.d2);
      }
    }
  };
  // The groups run in up to 16 pieces, one pool job each, so that progress is reported between them
  // (every group writes only its own queries: the pieces do not change a result).
  const int pieces = progress ? std::min(groups, 16) : 1;
  for (int piece = 0; piece < pieces; ++piece) {
    const int first = int(std::int64_t(groups) * piece / pieces);
    const int last = int(std::int64_t(groups) * (piece + 1) / pieces);
    pool.run(last - first, 1, [&](int r0, int r1, int thread) { run_groups(first + r0, first + r1, thread); });
    if (progress) progress(double(last) / double(groups));
  }
}

}  // namespace spectrasift::cpu

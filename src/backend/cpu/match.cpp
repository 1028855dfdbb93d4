// CPU brute-force matcher: the two nearest train descriptors of every query, without a distance matrix.
//
// Layout: the train descriptors are repacked in blocks of kLanes descriptors, dimension-major inside a
// block (packed[(block * dim + d) * kLanes + j] = train[block * kLanes + j][d]). For one query and one
// block the inner loop runs over d and updates kLanes independent accumulators, one per train
// descriptor: it vectorises across descriptors, so each distance is still summed in the order
// d = 0..dim-1 (strict numerics, no reassociation) and equals the plain scalar loop bit for bit.
// Queries are processed kQueryTile at a time so that one train block (kLanes * dim floats = 8 KiB)
// is reused from L1 for several queries. OpenMP splits the query tiles statically; every query is
// handled by exactly one thread in train order, so the result does not depend on the thread count.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/match_ops.hpp"

namespace spectrasift::cpu {

namespace {

constexpr int kLanes = 16;
constexpr int kQueryTile = 8;

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

}  // namespace

void match_top2(const float* query, int nq, const float* train, int nt, int dim, int threads, Top2* out) {
  if (nq <= 0) return;
  const int blocks = (nt + kLanes - 1) / kLanes;
  std::vector<float> packed(std::size_t(blocks) * dim * kLanes, 0.0f);
  for (int t = 0; t < nt; ++t) {
    const int b = t / kLanes, j = t % kLanes;
    const float* src = train + std::size_t(t) * dim;
    float* dst = packed.data() + std::size_t(b) * dim * kLanes + j;
    for (int d = 0; d < dim; ++d) dst[std::size_t(d) * kLanes] = src[d];
  }
  const int tiles = (nq + kQueryTile - 1) / kQueryTile;
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int tile = 0; tile < tiles; ++tile) {
    const int q0 = tile * kQueryTile;
    const int q1 = std::min(nq, q0 + kQueryTile);
    Best2 best[kQueryTile];
    for (int b = 0; b < blocks; ++b) {
      const float* block = packed.data() + std::size_t(b) * dim * kLanes;
      const int lanes = std::min(kLanes, nt - b * kLanes);
      for (int q = q0; q < q1; ++q) {
        const float* qp = query + std::size_t(q) * dim;
        float acc[kLanes] = {};
        for (int d = 0; d < dim; ++d) {
          const float qv = qp[d];
          const float* row = block + std::size_t(d) * kLanes;
          for (int j = 0; j < kLanes; ++j) {
            const float diff = qv - row[j];
            acc[j] += diff * diff;
          }
        }
        Best2& bq = best[q - q0];
        for (int j = 0; j < lanes; ++j) bq.push(acc[j], b * kLanes + j);
      }
    }
    for (int q = q0; q < q1; ++q) {
      const Best2& bq = best[q - q0];
      Top2& o = out[q];
      o.best1 = bq.i1;
      o.best2 = bq.i2;
      o.distance1 = std::sqrt(bq.d1);
      o.distance2 = std::sqrt(bq.d2);
    }
  }
}

}  // namespace spectrasift::cpu

/* match_l2_top2.cl — brute-force descriptor matching: for every query descriptor the nearest and second
 * nearest train descriptor (squared L2), without an N x M distance matrix (src/backend/opencl/match.cpp).
 *
 * The distances are the CPU backend's (backend/cpu/match.cpp) bit for bit, for ANY float descriptors:
 *   d^2(q, t) = max(0, (|q|^2 + |t|^2) - 2 q.t)
 * with |v|^2 and q.t each summed in float from 0 in the order k = 0 .. DIM-1, one multiply and one add per
 * term (no fma: FP_CONTRACT OFF), exactly as the CPU's lanes do. OpenCL rounds float + and * correctly, so
 * every intermediate value is the host's. (One exception: a device that flushes subnormal floats to zero
 * would differ on products below 2^-126, which SIFT and RootSIFT descriptors do not produce.) The square
 * roots are taken on the host, so they round as the CPU's do.
 * Exact integers: when every descriptor value of both sides is an integer of magnitude <= MATCH_EXACT_MAX
 * (floor(sqrt(2^24 / DIM)): 362 for 128, so SIFT's 0..255 always), every product and partial sum is an
 * integer below 2^24, hence exact in float whatever the rounding of its steps: a fused multiply-add then
 * gives the same bits as the separate multiply and add (and as the CPU), at half the instructions. The host
 * runs match_l2_exact_check over both sides first (a flag in device memory: no read-back) and the kernels
 * take the fma loops only when the flag stays 0; other descriptors (RootSIFT) take the multiply-add loops.
 * Ties: the CPU visits train descriptors in increasing index and keeps the first of equal distances, so
 * its best two are the two smallest (distance, index) pairs in lexicographic order; here each work-item
 * keeps that pair over its own subset of train descriptors and the subsets are merged lexicographically,
 * which gives the same two whatever the split.
 *
 * Build options (set by match.cpp from the device's limits):
 *   -DMATCH_DIM=<values per descriptor>  -DMATCH_DK=<dimensions per local-memory chunk, divides DIM>
 *   -DMATCH_WX, -DMATCH_WY               work-group shape
 *   -DMATCH_RX, -DMATCH_RY               train x query descriptors per work-item (register tile)
 * CPU devices (PoCL) take match_l2_top2_rows instead (no local memory, no barrier; see there). */
#pragma OPENCL FP_CONTRACT OFF

#define MATCH_QT (MATCH_WY * MATCH_RY) /* queries per work-group */
#define MATCH_TT (MATCH_WX * MATCH_RX) /* train descriptors per tile */

/* Launch: 1-D, one work-item per descriptor (any work-group size). norms[i] = sum_k desc[i][k]^2 in the
 * order k = 0 .. DIM-1 (the CPU's squared_norm). */
__kernel void match_l2_norms(__global const float* desc, int n, __global float* norms) {
  const int i = (int)get_global_id(0);
  if (i >= n) return;
  __global const float* v = desc + (size_t)i * MATCH_DIM;
  float s = 0.0f;
  for (int k = 0; k < MATCH_DIM; ++k) s += v[k] * v[k];
  norms[i] = s;
}

/* Launch: 1-D, any size (grid-stride loop). Sets *inexact to 1 when a value of desc[0 .. n) is not an
 * integer of magnitude <= MATCH_EXACT_MAX (NaN and infinities included); the host zeroes it before. */
__kernel void match_l2_exact_check(__global const float* desc, long n, __global int* inexact) {
  for (long i = get_global_id(0); i < n; i += get_global_size(0)) {
    const float v = desc[i];
    if (!(fabs(v) <= MATCH_EXACT_MAX && v == rint(v))) atomic_or(inexact, 1);
  }
}

/* Keeps (d1, i1) <= (d2, i2), the two smallest (distance, index) pairs seen; candidates must arrive in
 * increasing index, so a strict < keeps the lower index on ties (the CPU's Best2::push). */
inline void match_push(float d, int i, float* d1, int* i1, float* d2, int* i2) {
  if (d < *d1) {
    *d2 = *d1;
    *i2 = *i1;
    *d1 = d;
    *i1 = i;
  } else if (d < *d2) {
    *d2 = d;
    *i2 = i;
  }
}

/* (d, i) before (e, j) in lexicographic order; an empty slot (index -1) is never before anything. */
inline int match_before(float d, int i, float e, int j) {
  return i >= 0 && (j < 0 || d < e || (d == e && i < j));
}

/* The DK dimensions of one local-memory chunk: acc[i][j] = UPDATE for every query i and train j of the
 * work-item (UPDATE: the fused or the separate multiply-add of a[i] and b[j] into acc[i][j]). */
#define MATCH_TILE_STEPS(UPDATE)                                                  \
  for (int k = 0; k < MATCH_DK; ++k) {                                            \
    float a[MATCH_RY], b[MATCH_RX];                                               \
    for (int i = 0; i < MATCH_RY; ++i) a[i] = lq[k][ly + MATCH_WY * i];           \
    for (int j = 0; j < MATCH_RX; ++j) b[j] = lt[k][lx + MATCH_WX * j];           \
    for (int i = 0; i < MATCH_RY; ++i)                                            \
      for (int j = 0; j < MATCH_RX; ++j) acc[i][j] = UPDATE;                      \
  }

/* Launch: 2-D, work-group (MATCH_WX, MATCH_WY), global (MATCH_WX, MATCH_WY * ceil(nq / MATCH_QT)).
 * Work-group g takes queries g*QT .. g*QT + QT-1 and streams every train descriptor through local memory
 * in tiles of TT descriptors x DK dimensions (dimension-major, so that the inner loop reads rows). Work-item
 * (x, y) accumulates the dot products of queries y + WY*i (i < RY) with train descriptors x + WX*j (j < RX)
 * of each tile, in dimension order, then pushes the tile's distances into its queries' best two. At the end
 * the WX work-items of each query merge their best two through local memory; one work-item per query writes
 * the squared distances and indices (out_dist[2q], [2q+1]; out_index likewise; -1 / +inf when fewer).
 * Local memory: DK * (QT + TT) floats + QT * WX * 2 (float, int) pairs. */
__kernel __attribute__((reqd_work_group_size(MATCH_WX, MATCH_WY, 1)))
void match_l2_top2(__global const float* query, int nq, __global const float* qnorm, __global const float* train,
                   int nt, __global const float* tnorm, __global const int* inexact, __global float* out_dist,
                   __global int* out_index) {
  const int exact = inexact[0] == 0;
  __local float lq[MATCH_DK][MATCH_QT];
  __local float lt[MATCH_DK][MATCH_TT];
  __local float md[MATCH_QT][MATCH_WX][2];
  __local int mi[MATCH_QT][MATCH_WX][2];
  const int lx = (int)get_local_id(0), ly = (int)get_local_id(1);
  const int flat = ly * MATCH_WX + lx;
  const int q0 = (int)get_group_id(1) * MATCH_QT;

  float qn[MATCH_RY], d1[MATCH_RY], d2[MATCH_RY];
  int i1[MATCH_RY], i2[MATCH_RY];
  for (int i = 0; i < MATCH_RY; ++i) {
    const int q = q0 + ly + MATCH_WY * i;
    qn[i] = q < nq ? qnorm[q] : 0.0f;
    d1[i] = d2[i] = INFINITY;
    i1[i] = i2[i] = -1;
  }

  for (int t0 = 0; t0 < nt; t0 += MATCH_TT) {
    float acc[MATCH_RY][MATCH_RX];
    for (int i = 0; i < MATCH_RY; ++i)
      for (int j = 0; j < MATCH_RX; ++j) acc[i][j] = 0.0f;
    for (int k0 = 0; k0 < MATCH_DIM; k0 += MATCH_DK) {
      barrier(CLK_LOCAL_MEM_FENCE);
      /* Consecutive work-items read consecutive dimensions of a descriptor; rows past the end read 0. */
      for (int e = flat; e < MATCH_QT * MATCH_DK; e += MATCH_WX * MATCH_WY) {
        const int r = e / MATCH_DK, c = e % MATCH_DK;
        lq[c][r] = q0 + r < nq ? query[(size_t)(q0 + r) * MATCH_DIM + k0 + c] : 0.0f;
      }
      for (int e = flat; e < MATCH_TT * MATCH_DK; e += MATCH_WX * MATCH_WY) {
        const int r = e / MATCH_DK, c = e % MATCH_DK;
        lt[c][r] = t0 + r < nt ? train[(size_t)(t0 + r) * MATCH_DIM + k0 + c] : 0.0f;
      }
      barrier(CLK_LOCAL_MEM_FENCE);
      if (exact) {
        MATCH_TILE_STEPS(fma(a[i], b[j], acc[i][j]))
      } else {
        MATCH_TILE_STEPS(acc[i][j] + a[i] * b[j])
      }
    }
    for (int j = 0; j < MATCH_RX; ++j) {
      const int t = t0 + lx + MATCH_WX * j;
      if (t >= nt) break;
      const float tn = tnorm[t];
      for (int i = 0; i < MATCH_RY; ++i) {
        const float d = (qn[i] + tn) - 2.0f * acc[i][j];
        match_push(0.0f < d ? d : 0.0f, t, &d1[i], &i1[i], &d2[i], &i2[i]);  /* std::max(0.0f, d) */
      }
    }
  }

  for (int i = 0; i < MATCH_RY; ++i) {
    const int r = ly + MATCH_WY * i;
    md[r][lx][0] = d1[i];
    md[r][lx][1] = d2[i];
    mi[r][lx][0] = i1[i];
    mi[r][lx][1] = i2[i];
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int r = flat; r < MATCH_QT; r += MATCH_WX * MATCH_WY) {
    if (q0 + r >= nq) break;
    float b1 = INFINITY, b2 = INFINITY;
    int j1 = -1, j2 = -1;
    for (int x = 0; x < MATCH_WX; ++x)
      for (int s = 0; s < 2; ++s) {
        const float d = md[r][x][s];
        const int id = mi[r][x][s];
        if (match_before(d, id, b1, j1)) {
          b2 = b1;
          j2 = j1;
          b1 = d;
          j1 = id;
        } else if (match_before(d, id, b2, j2)) {
          b2 = d;
          j2 = id;
        }
      }
    const size_t q = (size_t)(q0 + r);
    out_dist[2 * q] = b1;
    out_dist[2 * q + 1] = b2;
    out_index[2 * q] = j1;
    out_index[2 * q + 1] = j2;
  }
}

/* Launch: 1-D, one work-item per descriptor, global >= n. dst[k * stride + i] = src[i][k]: the queries
 * dimension-major for match_l2_top2_rows (columns n .. stride-1 are left as they are: never pushed). */
__kernel void match_l2_transpose(__global const float* src, int n, int stride, __global float* dst) {
  const int i = (int)get_global_id(0);
  if (i >= n) return;
  for (int k = 0; k < MATCH_DIM; ++k) dst[(size_t)k * stride + i] = src[(size_t)i * MATCH_DIM + k];
}

/* Every dimension k for 16 queries (the float16 at lane group G of the 64) and 4 train descriptors (s0 .. s3):
 * its 4 accumulators = UPDATE(accumulator, query vector, train value). */
#define MATCH_ROW_GROUP(G, UPDATE)                                \
  {                                                               \
    const float16 v = vload16(G, qt + (size_t)k * stride + q0);   \
    acc##G[0] = UPDATE(acc##G[0], v, s0);                         \
    acc##G[1] = UPDATE(acc##G[1], v, s1);                         \
    acc##G[2] = UPDATE(acc##G[2], v, s2);                         \
    acc##G[3] = UPDATE(acc##G[3], v, s3);                         \
  }
/* Every dimension k for the 64 queries and 4 train descriptors. */
#define MATCH_ROW_STEPS(UPDATE)                                   \
  for (int k = 0; k < MATCH_DIM; ++k) {                           \
    const float16 s0 = (float16)(r0[k]), s1 = (float16)(r1[k]);   \
    const float16 s2 = (float16)(r2[k]), s3 = (float16)(r3[k]);   \
    MATCH_ROW_GROUP(0, UPDATE)                                    \
    MATCH_ROW_GROUP(1, UPDATE)                                    \
    MATCH_ROW_GROUP(2, UPDATE)                                    \
    MATCH_ROW_GROUP(3, UPDATE)                                    \
  }
#define MATCH_ROW_Q 64 /* queries per work-item of match_l2_top2_rows (match.cpp: kRowQueries) */
#define MATCH_FMA(acc, x, y) fma(x, y, acc)
#define MATCH_MUL_ADD(acc, x, y) ((acc) + (x) * (y))

/* The CPU-device form (PoCL). Launch: 1-D, one work-item per 64 queries (global = ceil(nq / 64) rounded
 * up to the work-group size, any work-group size). PoCL runs a work-group as a loop over its work-items and
 * does not vectorise this loop nest well by itself, so the vectors are explicit: the queries are read
 * dimension-major (qt[k * stride + q], from match_l2_transpose; stride a multiple of 64), 64 queries in the
 * lanes of four float16, against 4 train descriptors at a time whose values are broadcast (16 accumulators:
 * four query loads and four broadcasts per 16 vector multiply-adds, within AVX-512's 32 registers). Each
 * pass over the train set serves 64 queries: the train set streams from memory once per 64 queries (16
 * queries per work-item: 2.9x the CPU backend on 4096^2; 32: 1.3x; 64: see docs/performance/matching.md). Each lane's dot product is summed in dimension order and
 * pushed in train order: the same bits as match_l2_top2 and the CPU backend. */
__kernel void match_l2_top2_rows(__global const float* qt, int nq, int stride, __global const float* qnorm,
                                 __global const float* train, int nt, __global const float* tnorm,
                                 __global const int* inexact, __global float* out_dist, __global int* out_index) {
  const int exact = inexact[0] == 0;
  const int q0 = (int)get_global_id(0) * MATCH_ROW_Q;
  if (q0 >= nq) return;
  float d1[MATCH_ROW_Q], d2[MATCH_ROW_Q], qn[MATCH_ROW_Q];
  int i1[MATCH_ROW_Q], i2[MATCH_ROW_Q];
  for (int l = 0; l < MATCH_ROW_Q; ++l) {
    qn[l] = q0 + l < nq ? qnorm[q0 + l] : 0.0f;
    d1[l] = d2[l] = INFINITY;
    i1[l] = i2[l] = -1;
  }
  for (int t = 0; t < nt; t += 4) {
    const int live = nt - t < 4 ? nt - t : 4;
    /* a tail of fewer than 4 train descriptors reads the first one again (its results are not pushed) */
    __global const float* r0 = train + (size_t)t * MATCH_DIM;
    __global const float* r1 = train + (size_t)(live > 1 ? t + 1 : t) * MATCH_DIM;
    __global const float* r2 = train + (size_t)(live > 2 ? t + 2 : t) * MATCH_DIM;
    __global const float* r3 = train + (size_t)(live > 3 ? t + 3 : t) * MATCH_DIM;
    float16 acc0[4], acc1[4], acc2[4], acc3[4];
    for (int j = 0; j < 4; ++j) acc0[j] = acc1[j] = acc2[j] = acc3[j] = (float16)(0.0f);
    if (exact) {
      MATCH_ROW_STEPS(MATCH_FMA)
    } else {
      MATCH_ROW_STEPS(MATCH_MUL_ADD)
    }
    float acc[4][MATCH_ROW_Q];
    for (int j = 0; j < 4; ++j) {
      vstore16(acc0[j], 0, acc[j]);
      vstore16(acc1[j], 1, acc[j]);
      vstore16(acc2[j], 2, acc[j]);
      vstore16(acc3[j], 3, acc[j]);
    }
    for (int j = 0; j < live; ++j) {
      const float tn = tnorm[t + j];
      for (int l = 0; l < MATCH_ROW_Q; ++l) {
        const float d = (qn[l] + tn) - 2.0f * acc[j][l];
        match_push(0.0f < d ? d : 0.0f, t + j, &d1[l], &i1[l], &d2[l], &i2[l]);
      }
    }
  }
  for (int l = 0; l < MATCH_ROW_Q && q0 + l < nq; ++l) {
    const size_t q = (size_t)(q0 + l);
    out_dist[2 * q] = d1[l];
    out_dist[2 * q + 1] = d2[l];
    out_index[2 * q] = i1[l];
    out_index[2 * q + 1] = i2[l];
  }
}

/* match_u8_top2.cl — descriptor matching on integer descriptors 0..255 (SIFT's as exported) held as packed
 * bytes, four per uint: the nearest and second nearest train descriptor of every query with integer dot
 * products (src/backend/opencl/match.cpp; docs/performance/matching.md, 'GPU matching: the u8 path').
 *
 * Exactness: |q|^2, |t|^2 and q.t are sums of products of integers 0..255, at most 128 * 255^2 < 2^24, so
 * they are exact in int32 (any order) and exact in float as the CPU backend sums them; the squared distance
 * |q|^2 + |t|^2 - 2 q.t is then the same integer here and there, and its float is the CPU's bits. The
 * ranking uses v = |t|^2 - 2 q.t (|q|^2 is the same for every train descriptor of a query); the output adds
 * |q|^2 back. Ties: each work-item visits its train descriptors in increasing index and keeps the first of
 * equal values (strict <), and the partial best twos are merged lexicographically on (v, index): the two
 * smallest (distance, index) pairs, the CPU's rule, whatever the split.
 *
 * Build options (match.cpp):
 *   -DMATCH_W4=<uints per descriptor, dim / 4>  -DMATCH_WX, -DMATCH_WY  work-group shape
 *   -DMATCH_RX, -DMATCH_RY  train x query descriptors per work-item (register tile)
 *   -DMATCH_DOT4_KHR  dot_4x8packed_uu_uint of cl_khr_integer_dot_product (only when State::match_dot4 forces it)
 *   -DMATCH_DOT4_PTX  NVIDIA's dp4a through inline PTX (the host saw NVIDIA's platform)
 *   neither: four integer multiply-adds (any device; what PoCL runs in the tests). */

#if defined(MATCH_DOT4_KHR)
#pragma OPENCL EXTENSION cl_khr_integer_dot_product : enable
inline uint match_dot4_acc(uint a, uint b, uint acc) { return acc + dot_4x8packed_uu_uint(a, b); }
#elif defined(MATCH_DOT4_PTX)
inline uint match_dot4_acc(uint a, uint b, uint acc) {
  uint r;
  asm("dp4a.u32.u32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(acc));
  return r;
}
#else
inline uint match_dot4_acc(uint a, uint b, uint acc) {
  return acc + (a & 0xffu) * (b & 0xffu) + ((a >> 8) & 0xffu) * ((b >> 8) & 0xffu) +
         ((a >> 16) & 0xffu) * ((b >> 16) & 0xffu) + (a >> 24) * (b >> 24);
}
#endif

#define MATCH_QT (MATCH_WY * MATCH_RY) /* queries per work-group */
#define MATCH_TT (MATCH_WX * MATCH_RX) /* train descriptors per tile */
#define MATCH_EMPTY 0x7fffffff         /* the value of an empty slot (every real v is below 2^24) */

/* Launch: 1-D, one work-item per descriptor, global >= n (any work-group size). Descriptors that live on the
 * device as floats: packed[i][w] = the bytes of values 4w .. 4w+3 (lowest byte first), norms[i] = |desc_i|^2,
 * and *inexact = 1 when a value is not an integer in 0..255 (the host zeroes it before). */
__kernel void match_u8_pack(__global const float* desc, int n, __global uint* packed, __global int* norms,
                            __global int* inexact) {
  const int i = (int)get_global_id(0);
  if (i >= n) return;
  __global const float* v = desc + (size_t)i * (4 * MATCH_W4);
  int norm = 0, bad = 0;
  for (int w = 0; w < MATCH_W4; ++w) {
    uint word = 0;
    for (int b = 0; b < 4; ++b) {
      const float x = v[4 * w + b];
      const float c = fmin(fmax(x, 0.0f), 255.0f); /* NaN -> 0, then differs from x */
      const uint u = (uint)c;
      bad |= (float)u != x;
      word |= u << (8 * b);
      norm += (int)(u * u);
    }
    packed[(size_t)i * MATCH_W4 + w] = word;
  }
  norms[i] = norm;
  if (bad) atomic_or(inexact, 1);
}

/* Keeps the lexicographically smallest two (v, index) pairs; an empty candidate (index < 0) is ignored. */
inline void match_merge(int v, int i, int* v1, int* i1, int* v2, int* i2) {
  if (i < 0) return;
  if (v < *v1 || (v == *v1 && i < *i1)) {
    *v2 = *v1;
    *i2 = *i1;
    *v1 = v;
    *i1 = i;
  } else if (v < *v2 || (v == *v2 && i < *i2)) {
    *v2 = v;
    *i2 = i;
  }
}

/* Launch: 2-D, work-group (MATCH_WX, MATCH_WY), global (MATCH_WX * splits, MATCH_WY * ceil(nq / MATCH_QT)).
 * Work-group (s, g) takes queries g*QT .. g*QT + QT-1 against train descriptors [s * per_split,
 * min(nt, (s + 1) * per_split)) (per_split a multiple of TT). The queries' packed words go to local memory
 * once; train tiles of TT descriptors stream through it (word-major, so that the inner loop reads rows).
 * Work-item (x, y) accumulates the dot products of queries y + WY*i (i < RY) with train descriptors x + WX*j
 * (j < RX) of each tile and keeps its queries' best two; the WX work-items of a query merge theirs through
 * local memory, and partial[s][q] = (v1, i1, v2, i2) (MATCH_EMPTY / -1 for an empty slot).
 * Local memory: W4 * (QT + TT) uints + QT * WX * 4 ints. */
__kernel __attribute__((reqd_work_group_size(MATCH_WX, MATCH_WY, 1)))
void match_u8_top2(__global const uint* query, int nq, __global const uint* train, int nt,
                   __global const int* tnorm, int per_split, __global int4* partial) {
  __local uint lq[MATCH_W4][MATCH_QT];
  __local uint lt[MATCH_W4][MATCH_TT];
  __local int4 merge[MATCH_QT][MATCH_WX];
  const int lx = (int)get_local_id(0), ly = (int)get_local_id(1);
  const int flat = ly * MATCH_WX + lx;
  const int split = (int)get_group_id(0);
  const int q0 = (int)get_group_id(1) * MATCH_QT;
  const int t_begin = split * per_split;
  const int t_end = min(nt, t_begin + per_split);

  for (int e = flat; e < MATCH_QT * MATCH_W4; e += MATCH_WX * MATCH_WY) {
    const int r = e / MATCH_W4, c = e % MATCH_W4;
    lq[c][r] = q0 + r < nq ? query[(size_t)(q0 + r) * MATCH_W4 + c] : 0u;
  }
  int v1[MATCH_RY], v2[MATCH_RY], i1[MATCH_RY], i2[MATCH_RY];
  for (int i = 0; i < MATCH_RY; ++i) {
    v1[i] = v2[i] = MATCH_EMPTY;
    i1[i] = i2[i] = -1;
  }

  for (int t0 = t_begin; t0 < t_end; t0 += MATCH_TT) {
    barrier(CLK_LOCAL_MEM_FENCE); /* the previous tile is consumed (and, the first time, lq is written) */
    for (int e = flat; e < MATCH_TT * MATCH_W4; e += MATCH_WX * MATCH_WY) {
      const int r = e / MATCH_W4, c = e % MATCH_W4;
      lt[c][r] = t0 + r < t_end ? train[(size_t)(t0 + r) * MATCH_W4 + c] : 0u;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    uint acc[MATCH_RY][MATCH_RX];
    for (int i = 0; i < MATCH_RY; ++i)
      for (int j = 0; j < MATCH_RX; ++j) acc[i][j] = 0u;
    for (int k = 0; k < MATCH_W4; ++k) {
      uint a[MATCH_RY], b[MATCH_RX];
      for (int i = 0; i < MATCH_RY; ++i) a[i] = lq[k][ly + MATCH_WY * i];
      for (int j = 0; j < MATCH_RX; ++j) b[j] = lt[k][lx + MATCH_WX * j];
      for (int i = 0; i < MATCH_RY; ++i)
        for (int j = 0; j < MATCH_RX; ++j) acc[i][j] = match_dot4_acc(a[i], b[j], acc[i][j]);
    }
    for (int j = 0; j < MATCH_RX; ++j) {
      const int t = t0 + lx + MATCH_WX * j;
      if (t >= t_end) break;
      const int tn = tnorm[t];
      for (int i = 0; i < MATCH_RY; ++i) {
        const int v = tn - 2 * (int)acc[i][j];
        if (v < v2[i]) { /* strict: train indices arrive in increasing order, the first of equals stays */
          if (v < v1[i]) {
            v2[i] = v1[i];
            i2[i] = i1[i];
            v1[i] = v;
            i1[i] = t;
          } else {
            v2[i] = v;
            i2[i] = t;
          }
        }
      }
    }
  }

  for (int i = 0; i < MATCH_RY; ++i) merge[ly + MATCH_WY * i][lx] = (int4)(v1[i], i1[i], v2[i], i2[i]);
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int r = flat; r < MATCH_QT; r += MATCH_WX * MATCH_WY) {
    if (q0 + r >= nq) break;
    int b1 = MATCH_EMPTY, b2 = MATCH_EMPTY, j1 = -1, j2 = -1;
    for (int x = 0; x < MATCH_WX; ++x) {
      const int4 m = merge[r][x];
      match_merge(m.x, m.y, &b1, &j1, &b2, &j2);
      match_merge(m.z, m.w, &b1, &j1, &b2, &j2);
    }
    partial[(size_t)split * nq + (size_t)(q0 + r)] = (int4)(b1, j1, b2, j2);
  }
}

/* Launch: 1-D, one work-item per query, global >= nq. Merges the `splits` partial best twos of query q and
 * writes its squared distances (|q|^2 + v as float: exact, the CPU's value; +inf for an empty slot) and
 * indices (-1 for an empty slot) as match_l2_top2 does. */
__kernel void match_u8_merge(__global const int4* partial, int nq, int splits, __global const int* qnorm,
                             __global float* out_dist, __global int* out_index) {
  const int q = (int)get_global_id(0);
  if (q >= nq) return;
  int b1 = MATCH_EMPTY, b2 = MATCH_EMPTY, j1 = -1, j2 = -1;
  for (int s = 0; s < splits; ++s) {
    const int4 m = partial[(size_t)s * nq + q];
    match_merge(m.x, m.y, &b1, &j1, &b2, &j2);
    match_merge(m.z, m.w, &b1, &j1, &b2, &j2);
  }
  const int qn = qnorm[q];
  out_dist[2 * (size_t)q] = j1 >= 0 ? (float)(qn + b1) : INFINITY;
  out_dist[2 * (size_t)q + 1] = j2 >= 0 ? (float)(qn + b2) : INFINITY;
  out_index[2 * (size_t)q] = j1;
  out_index[2 * (size_t)q + 1] = j2;
}

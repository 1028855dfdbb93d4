/* match_filter.cl — match_features' tests on the device and the kept matches compacted in query order
 * (opencl/match.cpp, match_filtered; docs/performance/matching.md, 'GPU matching: ratio test and mutual check').
 *
 * Input: the query -> train nearest two (index / dist: two per query, squared distances, as match_l2_top2 and
 * match_u8_merge write them) and, for the mutual check, the train -> query nearest two (back_index: two per
 * train descriptor; only the nearest is read). The tests are numeric/match_filter.h's, so the host's bits.
 * Output `out`: int4 records; record 0 = {count, 0, 0, 0}, record 1 + k = the k-th kept match
 * {query, train, as_int(distance), as_int(second distance)}. Two launches over the same 1-D grid (one work-item
 * per query, work-groups of a power of two WG <= 256 items, `scratch` WG ints of local memory):
 * match_filter_count writes each work-group's number of kept matches, match_filter_compact adds the counts of
 * the work-groups before its own (each group reads them all: G^2 / 2 loads for G groups, nothing next to the
 * matching's nq * nt) and scatters its kept matches at their ranks: the output is the same on every run. */
#pragma OPENCL FP_CONTRACT OFF
#pragma OPENCL EXTENSION cl_khr_fp64 : enable

#include "match_filter.h"

/* Whether query q's match is kept; its train index and distances in *train / *d1 / *d2. */
inline int filter_keep(int q, __global const float* dist, __global const int* index, __global const int* back_index,
                       int mutual, double ratio, double max_distance, int* train, float* d1, float* d2) {
  const int b = index[2 * (size_t)q];
  *train = b;
  *d1 = ss_match_distance(dist[2 * (size_t)q]);
  *d2 = ss_match_distance(dist[2 * (size_t)q + 1]);
  const int mutual_ok = !mutual || (b >= 0 && back_index[2 * (size_t)b] == q);
  return ss_match_keep(b, *d1, *d2, ratio, max_distance, mutual_ok);
}

/* The sum of scratch[0 .. lsize) (lsize a power of two) into scratch[0]; every item must call it. */
inline void filter_reduce(__local int* scratch) {
  const int lid = (int)get_local_id(0);
  for (int s = (int)get_local_size(0) / 2; s > 0; s >>= 1) {
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid < s) scratch[lid] += scratch[lid + s];
  }
  barrier(CLK_LOCAL_MEM_FENCE);
}

__kernel void match_filter_count(__global const float* dist, __global const int* index,
                                 __global const int* back_index, int nq, int mutual, double ratio,
                                 double max_distance, __global int* group_counts, __local int* scratch) {
  const int q = (int)get_global_id(0);
  int train;
  float d1, d2;
  scratch[get_local_id(0)] =
      q < nq ? filter_keep(q, dist, index, back_index, mutual, ratio, max_distance, &train, &d1, &d2) : 0;
  filter_reduce(scratch);
  if (get_local_id(0) == 0) group_counts[get_group_id(0)] = scratch[0];
}

__kernel void match_filter_compact(__global const float* dist, __global const int* index,
                                   __global const int* back_index, int nq, int mutual, double ratio,
                                   double max_distance, __global const int* group_counts, __global int4* out,
                                   __local int* scratch) {
  const int lid = (int)get_local_id(0), lsize = (int)get_local_size(0);
  const int group = (int)get_group_id(0), groups = (int)get_num_groups(0);
  /* The kept matches of the work-groups before this one. */
  int before = 0;
  for (int g = lid; g < group; g += lsize) before += group_counts[g];
  scratch[lid] = before;
  filter_reduce(scratch);
  const int offset = scratch[0];
  barrier(CLK_LOCAL_MEM_FENCE);
  const int q = (int)get_global_id(0);
  int train = -1;
  float d1 = 0.0f, d2 = 0.0f;
  const int keep = q < nq ? filter_keep(q, dist, index, back_index, mutual, ratio, max_distance, &train, &d1, &d2) : 0;
  /* Inclusive scan of the keep flags (Hillis-Steele over lsize items). */
  scratch[lid] = keep;
  for (int s = 1; s < lsize; s <<= 1) {
    barrier(CLK_LOCAL_MEM_FENCE);
    const int add = lid >= s ? scratch[lid - s] : 0;
    barrier(CLK_LOCAL_MEM_FENCE);
    scratch[lid] += add;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  const int rank = scratch[lid];
  if (keep) out[1 + offset + rank - 1] = (int4)(q, train, as_int(d1), as_int(d2));
  if (group == groups - 1 && lid == lsize - 1) out[0] = (int4)(offset + rank, 0, 0, 0);
}

/* sift_select.cl — the select stage on the device (numeric/sift_select.h): duplicates, the cap by response
 * (ties at the cut kept), the mask, the canonical order; then the kept records gathered in that order.
 * (Part of the sift.cl program.)
 *
 * Records stay where the orientation stage wrote them (in arrival order); the stage sorts and compacts an
 * index array. Sorting is a bitonic network over the first P = next power of two >= n positions (n, the
 * live count, is read on the device; positions n .. P - 1 hold -1, which sorts last). The host launches
 * the steps (k, j) for its bound on P; a step whose k exceeds the device's P returns at once. Each
 * comparison is a total order on the records, so the result never depends on the arrival order. */

/* The orders (SIFT_ORDER_*), the comparisons (sift_pow2_at_least, sift_index_before,
 * sift_compare_exchange) and the keep flag of a position (sift_select_flag) are numeric/sift_select.h's,
 * shared with CUDA. */

/* sift_select_init: global >= P_max, any work-group size; one work-item per position: the identity order
 * over the oriented records, -1 past their count. */
__kernel void sift_select_init(__global int* order, __global const uint* counters, uint capacity, uint positions) {
  const uint i = get_global_id(0);
  if (i >= positions) return;
  const uint n = min(counters[SIFT_COUNT_ORIENTED], capacity);
  order[i] = i < n ? (int)i : -1;
}

/* sift_sort_step: global (G), any work-group size; the work-items take the compare-exchange pairs t = id,
 * id + G, ... < P / 2 of bitonic step (k, j), P from the live count in counters[count_slot]. */
__kernel void sift_sort_step(__global int* order, __global const SiftKeypoint* kp, __global const uint* counters,
                             int count_slot, uint capacity, uint k, uint j, int mode) {
  const uint p = sift_pow2_at_least(min(counters[count_slot], capacity));
  if (k > p) return;
  for (uint t = get_global_id(0); t < p / 2; t += get_global_size(0)) {
    const uint i = 2 * j * (t / j) + t % j;  /* the lower position of the pair; partner i + j */
    int a = order[i], b = order[i + j];
    sift_compare_exchange(kp, &a, &b, i, k, mode);
    order[i] = a;
    order[i + j] = b;
  }
}

/* sift_sort_local: global (P_max / 2), work-group (L), L a power of two; work-group g holds positions
 * [2 L g, 2 L g + 2 L) of the order in local memory (block[2 L]) and runs, there, the steps j = L .. 1 of
 * stage k (k_fixed > 0: the merges of a stage larger than the block), or every stage k = 2 .. 2 L with all
 * its steps (k_fixed = 0: the first pass). As sift_sort_step, only pairs below P (from the live count) and
 * stages k <= P are run. */
__kernel void sift_sort_local(__global int* order, __global const SiftKeypoint* kp, __global const uint* counters,
                              int count_slot, uint capacity, uint k_fixed, int mode, __local int* block) {
  const uint p = sift_pow2_at_least(min(counters[count_slot], capacity));
  const uint lid = get_local_id(0), l = get_local_size(0);
  const uint base = 2 * l * get_group_id(0);
  if (base >= p || k_fixed > p) return;  /* uniform in the work-group */
  block[lid] = order[base + lid];
  block[lid + l] = order[base + lid + l];
  barrier(CLK_LOCAL_MEM_FENCE);
  const uint k_first = k_fixed ? k_fixed : 2, k_last = k_fixed ? k_fixed : 2 * l;
  for (uint k = k_first; k <= k_last && k <= p; k <<= 1) {
    for (uint j = min(k / 2, l); j > 0; j >>= 1) {
      const uint i = 2 * j * (lid / j) + lid % j;
      if (base + i < p) {
        int a = block[i], b = block[i + j];
        sift_compare_exchange(kp, &a, &b, base + i, k, mode);
        block[i] = a;
        block[i + j] = b;
      }
      barrier(CLK_LOCAL_MEM_FENCE);
    }
  }
  order[base + lid] = block[lid];
  order[base + lid + l] = block[lid + l];
}

/* sift_select_flags: global >= P_max, any work-group size; one work-item per position of the sorted order.
 * pass 0 (order sorted by SIFT_ORDER_DUPLICATES over the oriented count): keep = not a duplicate of the
 * record before it. pass 1 (order: the unique records, sorted by response when max_features > 0): keep =
 * response >= the max_features-th largest response (when there are more) and the mask set at the
 * record's rounded position (mask_type: -1 none, 0 u8, 1 u16, 2 f32). */
__kernel void sift_select_flags(__global const int* order, __global const SiftKeypoint* kp,
                                __global const uint* counters, int count_slot, uint capacity, int pass,
                                int max_features, __global const uchar* mask, int mask_type, int mask_w, int mask_h,
                                __global int* keep) {
  const uint i = get_global_id(0);
  const uint n = min(counters[count_slot], capacity);
  if (i >= n) return;
  keep[i] = sift_select_flag(order, kp, i, n, pass, max_features, mask, mask_type, mask_w, mask_h);
}

/* sift_select_compact: global (L), work-group (L), L a power of two (one work-group: the scan runs over
 * chunks of L positions in order). Writes the kept entries of order_in, in their order, to order_out,
 * -1 after them up to the next power of two, and their count to counters[out_slot]. */
__kernel void sift_select_compact(__global const int* order_in, __global const int* keep, __global volatile uint* counters,
                                  int in_slot, uint capacity, int out_slot, __global int* order_out,
                                  __local int* scan) {
  const int lid = get_local_id(0), l = get_local_size(0);
  const uint n = min(counters[in_slot], capacity);
  uint base = 0;
  for (uint c0 = 0; c0 < n; c0 += (uint)l) {
    const uint i = c0 + (uint)lid;
    const int f = i < n ? keep[i] : 0;
    scan[lid] = f;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int d = 1; d < l; d <<= 1) {  /* inclusive Hillis-Steele scan */
      const int v = lid >= d ? scan[lid - d] : 0;
      barrier(CLK_LOCAL_MEM_FENCE);
      scan[lid] += v;
      barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (f) order_out[base + (uint)scan[lid] - 1] = order_in[i];
    base += (uint)scan[l - 1];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const uint p = sift_pow2_at_least(base);
  for (uint i = base + (uint)lid; i < p; i += (uint)l) order_out[i] = -1;
  if (lid == 0) counters[out_slot] = base;
}

/* sift_select_gather: global >= the kept count bound, any work-group size; one work-item per kept record:
 * out[i] = kp[order[i]]. */
__kernel void sift_select_gather(__global const int* order, __global const SiftKeypoint* kp,
                                 __global const uint* counters, uint capacity, __global SiftKeypoint* out) {
  const uint i = get_global_id(0);
  if (i >= min(counters[SIFT_COUNT_KEPT], capacity)) return;
  out[i] = kp[order[i]];
}

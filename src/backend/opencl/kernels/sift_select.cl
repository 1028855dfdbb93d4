/* sift_select.cl — the select stage on the device (numeric/sift_select.h): duplicates, the cap by response
 * (ties at the cut kept), the mask, the canonical order; then the kept records gathered in that order.
 * (Part of the sift.cl program.)
 *
 * Records stay where the orientation stage wrote them (in arrival order); the stage sorts and compacts an
 * index array. Sorting is a bitonic network over the first P = next power of two >= n positions (n, the
 * live count, is read on the device; positions n .. P - 1 hold -1, which sorts last). The host launches
 * the steps (k, j) for its bound on P; a step whose k exceeds the device's P returns at once. Each
 * comparison is a total order on the records, so the result never depends on the arrival order.
 *
 * On GPUs a small-count path runs the whole stage first when the oriented count is small: the rank select
 * (sift_select_rank.cl, the default) or sift_select_small (below, one work-group; State::select_rank); it then
 * sets counters[SIFT_COUNT_SELECT_SMALL] and every multi-launch kernel here returns at once. */

/* The orders (SIFT_ORDER_*), the comparisons (sift_pow2_at_least, sift_index_before,
 * sift_compare_exchange) and the keep flag of a position (sift_select_flag) are numeric/sift_select.h's,
 * shared with CUDA. */

/* sift_select_init: global >= P_max, any work-group size; one work-item per position: the identity order
 * over the oriented records, -1 past their count. */
__kernel void sift_select_init(__global int* order, __global const uint* counters, uint capacity, uint positions) {
  const uint i = get_global_id(0);
  if (i >= positions || counters[SIFT_COUNT_SELECT_SMALL]) return;
  const uint n = min(counters[SIFT_COUNT_ORIENTED], capacity);
  order[i] = i < n ? (int)i : -1;
}

/* sift_sort_step: global (G), any work-group size; the work-items take the compare-exchange pairs t = id,
 * id + G, ... < P / 2 of bitonic step (k, j), P from the live count in counters[count_slot]. */
__kernel void sift_sort_step(__global int* order, __global const SiftKeypoint* kp, __global const uint* counters,
                             int count_slot, uint capacity, uint k, uint j, int mode) {
  const uint p = sift_pow2_at_least(min(counters[count_slot], capacity));
  if (k > p || counters[SIFT_COUNT_SELECT_SMALL]) return;
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
  if (base >= p || k_fixed > p || counters[SIFT_COUNT_SELECT_SMALL]) return;  /* uniform in the work-group */
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
  if (i >= n || counters[SIFT_COUNT_SELECT_SMALL]) return;
  keep[i] = sift_select_flag(order, kp, i, n, pass, max_features, mask, mask_type, mask_w, mask_h);
}

/* sift_select_compact: global (L), work-group (L), L a power of two (one work-group: the scan runs over
 * chunks of L positions in order). Writes the kept entries of order_in, in their order, to order_out,
 * -1 after them up to the next power of two, and their count to counters[out_slot]. */
__kernel void sift_select_compact(__global const int* order_in, __global const int* keep, __global volatile uint* counters,
                                  int in_slot, uint capacity, int out_slot, __global int* order_out,
                                  __local int* scan) {
  const int lid = get_local_id(0), l = get_local_size(0);
  if (counters[SIFT_COUNT_SELECT_SMALL]) return;  /* uniform in the work-group */
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
  if (i >= min(counters[SIFT_COUNT_KEPT], capacity) || counters[SIFT_COUNT_SELECT_SMALL]) return;
  out[i] = kp[order[i]];
}

/* ---- The whole stage in one work-group (GPUs, small counts): sift_select_small ----
 *
 * The multi-launch path above costs ~20-50 launches whatever the count, each sort comparison reading two
 * 48-byte records from global memory: ~0.45 ms for 2,411 keypoints on the H200 through NVIDIA OpenCL, where a
 * launch costs several microseconds. Here each sort step is a barrier instead of a launch, the compactions
 * are in place, and each position of the order is one 32-bit word in local memory: a key prefix (19 bits)
 * above the record index (13 bits). The prefix is a monotone function of the order's leading field(s)
 * (sift_select_small_prefix), so where two prefixes differ they decide the comparison, and only equal
 * prefixes read the two records (from global memory) and compare them with numeric/sift_select.h's
 * sift_index_before. Every order sorted is total on the records that reach it (the response order is read
 * only at its cut) and the prefix order never contradicts it, so the kept records and their order are the
 * multi-launch path's, bit for bit, whatever sorting network runs. The keep flags are sift_select_keep's, the
 * rule sift_select_flag applies. (The form of backend/cuda/kernels/sift_select_small.cuh, with 13 index bits:
 * NVIDIA OpenCL gives a work-group 48 KiB of local memory, so 8,192 words (32 KiB) and the scan.) */

#define SIFT_SELECT_SMALL_INDEX_BITS 13
#define SIFT_SELECT_SMALL_MAX_POSITIONS (1u << SIFT_SELECT_SMALL_INDEX_BITS) /* the most records (8,192) */
#define SIFT_SELECT_SMALL_INDEX_MASK (SIFT_SELECT_SMALL_MAX_POSITIONS - 1u)
#define SIFT_SELECT_SMALL_EMPTY 0xffffffffu /* a position without a record (the index -1): sorts last */
/* The largest prefix, 2^19 - 2: every word (prefix << 13 | index <= 0xfffffffe) stays below the empty one. */
#define SIFT_SELECT_SMALL_PREFIX_MAX ((1u << (32 - SIFT_SELECT_SMALL_INDEX_BITS)) - 2u)
/* The most positions per work-item in a compaction (P / L; the host keeps L >= P / 16). */
#define SIFT_SELECT_SMALL_PER_MAX 16

/* min(max(v, 0), hi) truncated: monotone non-decreasing in v. */
uint sift_select_quantize(float v, float hi) { return (uint)fmin(fmax(v, 0.0f), hi); }

/* The key prefix of record k in order `mode`, in [0, SIFT_SELECT_SMALL_PREFIX_MAX]: prefix(a) < prefix(b) only
 * when a goes before b, because each prefix is non-decreasing along the order's leading fields:
 *   duplicates: x times coord_scale, quantised (x ascending leads sift_duplicate_before); coord_scale =
 *               2^19 / (largest input side + 1) from the host, so that x and y in input pixels give [0, 2^19);
 *   response:   the response's order bits, complemented (descending), top 19 bits (clamped: min is monotone);
 *   canonical:  octave + 1 (5 bits), layer (4 bits), y quantised (10 bits) (sift_canonical_before's first
 *               three fields; each field injective on its range, octaves -1 .. 30 and layers 0 .. 15, so a
 *               larger leading field always gives a larger prefix), or 0 for all when canonical_prefix is 0
 *               (the host's choice when a layer could exceed 15). */
uint sift_select_small_prefix(SiftKeypoint k, int mode, float coord_scale, int canonical_prefix) {
  const float hi = (float)SIFT_SELECT_SMALL_PREFIX_MAX;
  if (mode == SIFT_ORDER_DUPLICATES) return sift_select_quantize(k.x * coord_scale, hi);
  if (mode == SIFT_ORDER_RESPONSE)
    return min(~sift_select_ordered_bits(k.response) >> SIFT_SELECT_SMALL_INDEX_BITS, SIFT_SELECT_SMALL_PREFIX_MAX);
  if (!canonical_prefix) return 0u;
  const uint o = (uint)clamp(k.octave + 1, 0, 31), l = (uint)clamp(k.layer, 0, 15);
  const uint y = sift_select_quantize(k.y * coord_scale * (1.0f / 512.0f), 1023.0f);
  return min((o << 14) | (l << 10) | y, SIFT_SELECT_SMALL_PREFIX_MAX);
}

/* 1 when word a goes before word b in order `mode` (the empty word after every record). */
int sift_select_small_before(__global const SiftKeypoint* kp, uint a, uint b, int mode) {
  if (a == SIFT_SELECT_SMALL_EMPTY) return 0;
  if (b == SIFT_SELECT_SMALL_EMPTY) return 1;
  const uint pa = a >> SIFT_SELECT_SMALL_INDEX_BITS, pb = b >> SIFT_SELECT_SMALL_INDEX_BITS;
  if (pa != pb) return pa < pb;
  return sift_index_before(kp, (int)(a & SIFT_SELECT_SMALL_INDEX_MASK), (int)(b & SIFT_SELECT_SMALL_INDEX_MASK), mode);
}

/* Bitonic sort of ord[0, p) (record indices, -1 where none; p a power of two <= the positions) by `mode`: the
 * indices become words (prefix, index) in place, the network runs on the words (one barrier per step), the
 * words become indices again (the empty word is the index -1 already). Every loop that holds a barrier has
 * the same trip count in every work-item (p, k, j are uniform); the pair loop inside a step has none. */
void sift_select_small_sort(__local int* ord, __global const SiftKeypoint* kp, uint p, int mode, float coord_scale,
                            int canonical_prefix) {
  const uint t = get_local_id(0), l = get_local_size(0);
  __local uint* word = (__local uint*)ord;
  for (uint i = t; i < p; i += l) {
    const int r = ord[i];
    word[i] = r < 0 ? SIFT_SELECT_SMALL_EMPTY
                    : (sift_select_small_prefix(kp[r], mode, coord_scale, canonical_prefix) << SIFT_SELECT_SMALL_INDEX_BITS) |
                          (uint)r;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint k = 2; k <= p; k <<= 1) {
    for (uint j = k / 2; j > 0; j >>= 1) {
      for (uint q = t; q < p / 2; q += l) {
        const uint i = 2 * j * (q / j) + q % j; /* the lower position of the pair; partner i + j */
        const uint a = word[i], b = word[i + j];
        const int swap = (i & k) == 0 ? sift_select_small_before(kp, b, a, mode) : sift_select_small_before(kp, a, b, mode);
        if (swap) {
          word[i] = b;
          word[i + j] = a;
        }
      }
      barrier(CLK_LOCAL_MEM_FENCE);
    }
  }
  /* The words back to indices: the index bits, or -1 for the empty word (already all ones). */
  for (uint i = t; i < p; i += l) {
    const uint w = word[i];
    if (w != SIFT_SELECT_SMALL_EMPTY) word[i] = w & SIFT_SELECT_SMALL_INDEX_MASK;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
}

/* Keeps, in place and in order, the positions i < n of ord (n <= positions) whose keep flag (sift_select_keep,
 * pass 0 or 1, reading ord[i - 1] or the cut position as sift_select_flag does) is set; -1 after them up to
 * the next power of two of their count. Work-item t takes the per = positions / L consecutive positions
 * t * per ..; every flag and entry is read before the barrier after which ord is rewritten (a work-item
 * writes at or below its own positions, into those of work-items before it). Returns the count (in every
 * work-item). */
uint sift_select_small_compact(__local int* ord, __local int* scan, __global const SiftKeypoint* kp, uint n, uint per,
                               int pass, int max_features, __global const uchar* mask, int mask_type, int mask_w,
                               int mask_h) {
  const uint t = get_local_id(0), l = get_local_size(0);
  const int cut = pass == 1 && max_features > 0 && n > (uint)max_features ? ord[max_features - 1] : -1;
  int v[SIFT_SELECT_SMALL_PER_MAX];
  uint flags = 0;
  int count = 0;
  for (uint s = 0; s < SIFT_SELECT_SMALL_PER_MAX; ++s) {
    const uint i = t * per + s;
    v[s] = -1;
    if (s < per && i < n) {
      v[s] = ord[i];
      const int prev = pass == 0 && i > 0 ? ord[i - 1] : -1;
      if (sift_select_keep(kp, v[s], prev, cut, pass, mask, mask_type, mask_w, mask_h)) {
        flags |= 1u << s;
        ++count;
      }
    }
  }
  scan[t] = count;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint d = 1; d < l; d <<= 1) { /* inclusive Hillis-Steele scan of the per-work-item counts */
    const int add = t >= d ? scan[t - d] : 0;
    barrier(CLK_LOCAL_MEM_FENCE);
    scan[t] += add;
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const uint total = (uint)scan[l - 1];
  uint w = (uint)(scan[t] - count);
  for (uint s = 0; s < SIFT_SELECT_SMALL_PER_MAX; ++s)
    if (flags & (1u << s)) ord[w++] = v[s];
  const uint p = sift_pow2_at_least(total);
  for (uint i = total + t; i < p; i += l) ord[i] = -1; /* positions no kept entry is written to */
  barrier(CLK_LOCAL_MEM_FENCE);
  return total;
}

/* sift_select_small: global (L), work-group (L), one work-group; L a power of two, positions / 16 <= L <=
 * positions (L = the kernel's work-group limit up to 1024 on GPUs). `positions` (P, a power of two, at most
 * SIFT_SELECT_SMALL_MAX_POSITIONS) from the host's local-memory budget; `shared`: P + L ints of local memory
 * (the order's words, then the scan): 36 KiB at P = 8192, L = 1024, within NVIDIA OpenCL's 48 KiB.
 * When the oriented count n = min(counters[SIFT_COUNT_ORIENTED], capacity) is at most P: the select stage of
 * the multi-launch kernels above on the n records kp, the unique and kept counts into counters, the kept
 * records in canonical order into kept, and counters[SIFT_COUNT_SELECT_SMALL] = 1 (the multi-launch kernels
 * queued after it then return at once, where the host queued them: see select() in sift_features.cpp);
 * otherwise only counters[SIFT_COUNT_SELECT_SMALL] = 0. Every barrier
 * is reached by all work-items: the early return and the cap's sort depend only on values every work-item
 * reads alike (n, the scan's total). */
__kernel void sift_select_small(__global const SiftKeypoint* kp, __global uint* counters, uint capacity, uint positions,
                                int max_features, __global const uchar* mask, int mask_type, int mask_w, int mask_h,
                                float coord_scale, int canonical_prefix, __global SiftKeypoint* kept,
                                __local int* shared) {
  const uint t = get_local_id(0), l = get_local_size(0);
  __local int* ord = shared;
  __local int* scan = shared + positions;
  const uint n = min(counters[SIFT_COUNT_ORIENTED], capacity);
  const int small = n <= positions;
  if (t == 0) counters[SIFT_COUNT_SELECT_SMALL] = small ? 1u : 0u;
  if (!small) return; /* uniform in the work-group */
  const uint per = positions / l;
  const uint p = sift_pow2_at_least(n);
  for (uint i = t; i < p; i += l) ord[i] = i < n ? (int)i : -1;
  barrier(CLK_LOCAL_MEM_FENCE);
  /* 1. duplicates */
  sift_select_small_sort(ord, kp, p, SIFT_ORDER_DUPLICATES, coord_scale, canonical_prefix);
  const uint unique = sift_select_small_compact(ord, scan, kp, n, per, 0, max_features, mask, mask_type, mask_w, mask_h);
  /* 2. the cap (the response order is read only at the cut, when there are more than max_features) and 3. the
   * mask */
  if (max_features > 0 && unique > (uint)max_features)
    sift_select_small_sort(ord, kp, sift_pow2_at_least(unique), SIFT_ORDER_RESPONSE, coord_scale, canonical_prefix);
  const uint n_kept =
      sift_select_small_compact(ord, scan, kp, unique, per, 1, max_features, mask, mask_type, mask_w, mask_h);
  /* 4. the canonical order, and the kept records gathered in it */
  sift_select_small_sort(ord, kp, sift_pow2_at_least(n_kept), SIFT_ORDER_CANONICAL, coord_scale, canonical_prefix);
  for (uint i = t; i < n_kept; i += l) kept[i] = kp[ord[i]];
  if (t == 0) {
    counters[SIFT_COUNT_UNIQUE] = unique;
    counters[SIFT_COUNT_KEPT] = n_kept;
  }
}

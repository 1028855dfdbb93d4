/* sift_select_rank.cl — the whole select stage without sorting (numeric/sift_select.h, "The rank select"; the
 * OpenCL port of backend/cuda/kernels/sift_select_rank.cuh): every record compared with every other, a slice of
 * 32 work-items per record, for counts of up to SIFT_RANK_MAX_RECORDS oriented records. On GPUs it is the select
 * stage's small-count path (State::select_rank; select() in sift_features.cpp), in place of sift_select.cl's
 * one-work-group sift_select_small: three launches in the common case (no cap, no mask), where the one
 * work-group sorts three times behind barriers. The kept records and their order are the sorting paths', bit for
 * bit. (Part of the sift.cl program.)
 *
 * The launches (global sizes from the host's bound on the oriented count; n itself is read on the device):
 *   sift_select_rank_keys    work-item per record: its three keys (numeric/sift_select.h), and the path flag;
 *   sift_select_rank_unique  slice per record: rule 1 (duplicates) over the duplicate keys;
 *   sift_select_rank_keep    slice per record, only with a cap or a mask: rules 2 and 3;
 *   sift_select_rank_place   slice per kept record: rule 4, its position in the canonical order, and the copy.
 * OpenCL 1.2 has no sub-group shuffles: a work-group of L = 32 S work-items holds S slices (S = 8 on GPUs, fewer
 * where the kernel allows fewer work-items); slice s of work-group g takes record i = g S + s, its 32 work-items
 * (lanes) the records j = lane, lane + 32, ..., and the lanes' counts meet in local memory, where one work-item
 * adds them (integer sums: the same total in any order), so the result never depends on scheduling. Each kernel
 * has one barrier, reached by every work-item: a slice without a record (past n, or every slice when n exceeds
 * SIFT_RANK_MAX_RECORDS) carries a flag that skips its work, never a return.
 *
 * The per-record arrays are five runs of `capacity` words of one buffer, `words`: the duplicate, response and
 * canonical keys (sift_rank_ordered_bits of x, its complement for the response, sift_rank_canonical_key), the
 * unique flags (rule 1) and the kept flags (rules 1-3; the unique flags again without a cap and a mask). The
 * unique and kept counts go to their counter slots through atomic increments on slots the upload (and a rerun's
 * clear_feature_counters) zeroed. */

#define SIFT_RANK_LANES 32u      /* work-items a record (a warp on NVIDIA; the host's kRankLanes) */
#define SIFT_RANK_GROUP_MAX 256u /* the largest work-group of the slice kernels (8 slices; the host's kRankGroupMax) */
/* The words of a record, copied one a lane by sift_select_rank_place (12: numeric/sift_keypoint.h's 48 bytes). */
#define SIFT_RANK_RECORD_WORDS ((uint)(sizeof(SiftKeypoint) / sizeof(uint)))

/* The runs of `words` (capacity words each). */
#define SIFT_RANK_DUP_KEY 0u
#define SIFT_RANK_RESPONSE_KEY 1u
#define SIFT_RANK_CANONICAL_KEY 2u
#define SIFT_RANK_UNIQUE 3u
#define SIFT_RANK_KEPT 4u

/* The records the stage takes: the oriented count, within the buffers. */
uint sift_rank_count(__global const uint* counters, uint capacity) {
  return min(counters[SIFT_COUNT_ORIENTED], capacity);
}

/* The sum of the 32 lanes' counts of a slice, part[0 .. 31] (after the barrier that wrote them). */
uint sift_rank_slice_sum(__local const uint* part) {
  uint s = 0;
  for (uint q = 0; q < SIFT_RANK_LANES; ++q) s += part[q];
  return s;
}

/* sift_select_rank_keys: global >= the host's bound on n (rounded up to the work-group), any work-group size;
 * work-item i: the keys of record i < n. Work-item 0 sets counters[SIFT_COUNT_SELECT_SMALL] = 1 when n <=
 * SIFT_RANK_MAX_RECORDS (the multi-launch kernels queued after this path then return at once), else 0 (and every
 * rank kernel skips its work). y_scale = 2^23 / (the largest input side + 1) and canonical_key (0 when the layers
 * do not fit the key's 4 bits) from the host: sift_rank_canonical_key's arguments. */
__kernel void sift_select_rank_keys(__global const SiftKeypoint* kp, __global uint* counters, uint capacity,
                                    float y_scale, int canonical_key, __global uint* words) {
  const uint i = get_global_id(0);
  const uint n = sift_rank_count(counters, capacity);
  if (i == 0) counters[SIFT_COUNT_SELECT_SMALL] = n <= SIFT_RANK_MAX_RECORDS ? 1u : 0u;
  if (i >= n || n > SIFT_RANK_MAX_RECORDS) return; /* no barrier in this kernel */
  const SiftKeypoint k = kp[i];
  words[SIFT_RANK_DUP_KEY * capacity + i] = sift_rank_ordered_bits(k.x);
  words[SIFT_RANK_RESPONSE_KEY * capacity + i] = ~sift_rank_ordered_bits(k.response);
  words[SIFT_RANK_CANONICAL_KEY * capacity + i] = sift_rank_canonical_key(k, y_scale, canonical_key);
}

/* sift_select_rank_unique: global = G L, work-group L = 32 S <= SIFT_RANK_GROUP_MAX, G S >= the host's bound on n;
 * slice s of work-group g: record i = g S + s. unique[i] = no record j drops it (sift_rank_drops; only the j with
 * i's duplicate key, that is its x, read the records; a lane stops at its first drop); the unique count into
 * counters[SIFT_COUNT_UNIQUE], and with keep_is_unique (no cap, no mask) kept[i] and counters[SIFT_COUNT_KEPT]
 * too. */
__kernel void sift_select_rank_unique(__global const SiftKeypoint* kp, __global uint* counters, uint capacity,
                                      __global uint* words, int keep_is_unique) {
  __local uint part[SIFT_RANK_GROUP_MAX];
  const uint lid = get_local_id(0), lane = lid % SIFT_RANK_LANES;
  const uint i = get_group_id(0) * (get_local_size(0) / SIFT_RANK_LANES) + lid / SIFT_RANK_LANES;
  const uint n = sift_rank_count(counters, capacity);
  const int live = i < n && n <= SIFT_RANK_MAX_RECORDS;
  __global const uint* dup_key = words + SIFT_RANK_DUP_KEY * capacity;
  uint drop = 0;
  if (live) {
    const uint key = dup_key[i];
    for (uint j = lane; j < n && !drop; j += SIFT_RANK_LANES)
      if (dup_key[j] == key) drop = (uint)sift_rank_drops(kp[j], (int)j, kp[i], (int)i);
  }
  part[lid] = drop;
  barrier(CLK_LOCAL_MEM_FENCE);
  if (live && lane == 0) {
    const uint unique = sift_rank_slice_sum(part + lid) == 0 ? 1u : 0u;
    words[SIFT_RANK_UNIQUE * capacity + i] = unique;
    if (keep_is_unique) words[SIFT_RANK_KEPT * capacity + i] = unique;
    if (unique) {
      atomic_inc(&counters[SIFT_COUNT_UNIQUE]);
      if (keep_is_unique) atomic_inc(&counters[SIFT_COUNT_KEPT]);
    }
  }
}

/* sift_select_rank_keep: global and work-group as sift_select_rank_unique; queued only with a cap (max_features
 * > 0) or a mask (mask_type: -1 none, 0 u8, 1 u16, 2 f32; mask_w x mask_h pixels). kept[i] = unique[i], and,
 * when there are more than max_features unique records, fewer than max_features unique records j with a larger
 * response (a smaller response key), and the mask set at i (sift_rank_mask_ok); the kept count into
 * counters[SIFT_COUNT_KEPT]. */
__kernel void sift_select_rank_keep(__global const SiftKeypoint* kp, __global uint* counters, uint capacity,
                                    __global uint* words, int max_features, __global const uchar* mask,
                                    int mask_type, int mask_w, int mask_h) {
  __local uint part[SIFT_RANK_GROUP_MAX];
  const uint lid = get_local_id(0), lane = lid % SIFT_RANK_LANES;
  const uint i = get_group_id(0) * (get_local_size(0) / SIFT_RANK_LANES) + lid / SIFT_RANK_LANES;
  const uint n = sift_rank_count(counters, capacity);
  const int live = i < n && n <= SIFT_RANK_MAX_RECORDS;
  __global const uint* response_key = words + SIFT_RANK_RESPONSE_KEY * capacity;
  __global const uint* unique = words + SIFT_RANK_UNIQUE * capacity;
  const uint unique_i = live ? unique[i] : 0u;
  const int capped = unique_i && max_features > 0 && counters[SIFT_COUNT_UNIQUE] > (uint)max_features;
  uint larger = 0;
  if (capped) {
    const uint key = response_key[i];
    for (uint j = lane; j < n; j += SIFT_RANK_LANES) larger += (unique[j] && response_key[j] < key) ? 1u : 0u;
  }
  part[lid] = larger;
  barrier(CLK_LOCAL_MEM_FENCE);
  if (live && lane == 0) {
    int keep = unique_i != 0;
    if (capped) keep = sift_rank_slice_sum(part + lid) < (uint)max_features;
    if (keep) keep = sift_rank_mask_ok(kp[i], mask, mask_type, mask_w, mask_h);
    words[SIFT_RANK_KEPT * capacity + i] = keep ? 1u : 0u;
    if (keep) atomic_inc(&counters[SIFT_COUNT_KEPT]);
  }
}

/* sift_select_rank_place: global and work-group as sift_select_rank_unique; slice s of work-group g: record
 * i = g S + s when kept. Its position = the number of kept records j before it in the canonical order (a smaller
 * canonical key, or an equal key and sift_rank_before), and out[position] = kp[i], lane q < 12 copying word q
 * (each of those lanes adds the slice's counts itself: no second barrier). */
__kernel void sift_select_rank_place(__global const SiftKeypoint* kp, __global const uint* counters, uint capacity,
                                     __global const uint* words, __global SiftKeypoint* out) {
  __local uint part[SIFT_RANK_GROUP_MAX];
  const uint lid = get_local_id(0), lane = lid % SIFT_RANK_LANES;
  const uint i = get_group_id(0) * (get_local_size(0) / SIFT_RANK_LANES) + lid / SIFT_RANK_LANES;
  const uint n = sift_rank_count(counters, capacity);
  __global const uint* canonical_key = words + SIFT_RANK_CANONICAL_KEY * capacity;
  __global const uint* kept = words + SIFT_RANK_KEPT * capacity;
  const int live = i < n && n <= SIFT_RANK_MAX_RECORDS && kept[i];
  uint before = 0;
  if (live) {
    const uint key = canonical_key[i];
    for (uint j = lane; j < n; j += SIFT_RANK_LANES) {
      if (kept[j]) { /* a guard, not a `continue` (sift_descriptor_staged.cl: PoCL 3 and `continue` near barriers) */
        const uint kj = canonical_key[j];
        before += (kj < key || (kj == key && sift_rank_before(kp[j], (int)j, kp[i], (int)i, SIFT_ORDER_CANONICAL)))
                      ? 1u : 0u;
      }
    }
  }
  part[lid] = before;
  barrier(CLK_LOCAL_MEM_FENCE);
  if (live && lane < SIFT_RANK_RECORD_WORDS) {
    const uint position = sift_rank_slice_sum(part + (lid - lane));
    ((__global uint*)(out + position))[lane] = ((__global const uint*)(kp + i))[lane];
  }
}

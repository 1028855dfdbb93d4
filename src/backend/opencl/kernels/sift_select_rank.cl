/* sift_select_rank.cl — the whole select stage without sorting (numeric/sift_select.h, "The rank select"; the
 * OpenCL port of backend/cuda/kernels/sift_select_rank.cuh): every record compared with every other, for counts
 * of up to SIFT_RANK_MAX_RECORDS oriented records. On GPUs it is the select stage's small-count path
 * (State::select_rank; select() in sift_features.cpp), in place of sift_select.cl's one-work-group
 * sift_select_small: three launches in the common case (no cap, no mask), where the one work-group sorts three
 * times behind barriers. The kept records and their order are the sorting paths', bit for bit. (Part of the
 * sift.cl program.)
 *
 * The launches (global sizes from the host's bound on the oriented count; n itself is read on the device):
 *   sift_select_rank_keys    work-item per record: its duplicate and response keys, and the path flag;
 *   sift_select_rank_unique  slice per SIFT_RANK_PER_SLICE records: rule 1 (duplicates) over the duplicate keys;
 *   sift_select_rank_keep    the same slices, only with a cap or a mask: rules 2 and 3;
 *   sift_select_rank_place   the same slices: rule 4, the positions in the canonical order, and the copies.
 * A slice is 32 work-items (lanes; a warp on NVIDIA); a work-group of L = 32 S work-items holds S slices (S = 8 on
 * GPUs, fewer where the kernels allow fewer work-items), slice s of work-group g the records i0 = (g S + s) 8 ..
 * i0 + 7 (those below n). The slice keeps its records' keys in private arrays (registers) and its lanes take the
 * records j = lane, lane + 32, ...: one load of key j serves the comparisons of all eight records with j (CUDA's
 * second form; its first, one record a warp, spent 9-18 instructions a comparison). Only equal keys read the
 * records. OpenCL 1.2 has no sub-group shuffles: the lanes' counts meet in local memory, where one lane per record
 * adds them (integer sums: the same total in any order), so the result never depends on scheduling. Every
 * work-item reaches every barrier: a slice without records (past n, or every slice when n exceeds
 * SIFT_RANK_MAX_RECORDS) carries a count of 0 records, never a return.
 *
 * The per-record keys are three runs of `capacity` words of one buffer, `words`: the duplicate key
 * (sift_select_ordered_bits of x), the response key (its complement for the response; SIFT_RANK_NONE once the
 * record is dropped as a duplicate) and the canonical key (sift_rank_canonical_key; SIFT_RANK_NONE for a record
 * not kept), so the kept-ness of a record travels in its keys and no flag array is read in the loops. The unique
 * and kept counts go to their counter slots through atomic additions (one a slice) on slots that the upload (and
 * a rerun's clear_feature_counters) zeroed. */

#define SIFT_RANK_LANES 32u      /* work-items a slice (the host's kRankLanes) */
#define SIFT_RANK_PER_SLICE 8u   /* records a slice (the host's kRankPerSlice; CUDA's kSelectRankPerWarp) */
#define SIFT_RANK_GROUP_MAX 256u /* the largest work-group of the slice kernels (8 slices; the host's kRankGroupMax) */
/* The words of a record (12: numeric/sift_keypoint.h's 48 bytes): a slice copies 8 x 12 = 96, three a lane. */
#define SIFT_RANK_RECORD_WORDS ((uint)(sizeof(SiftKeypoint) / sizeof(uint)))
/* The stride of a record's run of per-lane counts in local memory: one word more than a work-group, so that the
 * eight lanes adding their records' runs read eight different banks. */
#define SIFT_RANK_RUN (SIFT_RANK_GROUP_MAX + 1u)

/* The runs of `words` (capacity words each). */
#define SIFT_RANK_DUP_KEY 0u
#define SIFT_RANK_RESPONSE_KEY 1u
#define SIFT_RANK_CANONICAL_KEY 2u

/* The records the stage takes: the oriented count, within the buffers. */
uint sift_rank_count(__global const uint* counters, uint capacity) {
  return min(counters[SIFT_COUNT_ORIENTED], capacity);
}

/* The first record of this work-item's slice (the slice kernels). */
uint sift_rank_first(void) {
  return (get_group_id(0) * (get_local_size(0) / SIFT_RANK_LANES) + get_local_id(0) / SIFT_RANK_LANES) *
         SIFT_RANK_PER_SLICE;
}

/* The slice's records below n (0 when it has none, or when n exceeds SIFT_RANK_MAX_RECORDS). */
uint sift_rank_records(uint i0, uint n) {
  return i0 < n && n <= SIFT_RANK_MAX_RECORDS ? min(n - i0, SIFT_RANK_PER_SLICE) : 0u;
}

/* The sum of v[0 .. count - 1] (after the barrier that wrote them). */
uint sift_rank_sum(__local const uint* v, uint count) {
  uint s = 0;
  for (uint q = 0; q < count; ++q) s += v[q];
  return s;
}

/* sift_select_rank_keys: global >= the host's bound on n (rounded up to the work-group), any work-group size;
 * work-item i: the duplicate and response keys of record i < n. Work-item 0 sets counters[SIFT_COUNT_SELECT_SMALL]
 * = 1 when n <= SIFT_RANK_MAX_RECORDS (the multi-launch kernels queued after this path then return at once), else
 * 0 (and every rank kernel skips its work). */
__kernel void sift_select_rank_keys(__global const SiftKeypoint* kp, __global uint* counters, uint capacity,
                                    __global uint* words) {
  const uint i = get_global_id(0);
  const uint n = sift_rank_count(counters, capacity);
  if (i == 0) counters[SIFT_COUNT_SELECT_SMALL] = n <= SIFT_RANK_MAX_RECORDS ? 1u : 0u;
  if (i >= n || n > SIFT_RANK_MAX_RECORDS) return; /* no barrier in this kernel */
  words[SIFT_RANK_DUP_KEY * capacity + i] = sift_select_ordered_bits(kp[i].x);
  words[SIFT_RANK_RESPONSE_KEY * capacity + i] = ~sift_select_ordered_bits(kp[i].response);
}

/* sift_select_rank_unique: global = G L, work-group L = 32 S <= SIFT_RANK_GROUP_MAX, 8 G S >= the host's bound on
 * n; slice s of work-group g: records i0 = (g S + s) 8 .. i0 + 7 below n. Record i is dropped when a record j drops
 * it (sift_rank_drops; only the j with i's duplicate key, that is its x, read the records): its response key
 * becomes SIFT_RANK_NONE. The unique count into counters[SIFT_COUNT_UNIQUE]; with keep_is_unique (no cap, no mask)
 * also the canonical keys (SIFT_RANK_NONE for the dropped; y_scale = 2^23 / (the largest input side + 1) and
 * canonical_key, 0 when the layers or octaves do not fit the key's fields, from the host) and
 * counters[SIFT_COUNT_KEPT]. */
__kernel void sift_select_rank_unique(__global const SiftKeypoint* kp, __global uint* counters, uint capacity,
                                      __global uint* words, float y_scale, int canonical_key, int keep_is_unique) {
  __local uint dropped_of[SIFT_RANK_GROUP_MAX];
  __local uint unique_of[SIFT_RANK_GROUP_MAX];
  const uint lid = get_local_id(0), lane = lid % SIFT_RANK_LANES, base = lid - lane;
  const uint i0 = sift_rank_first();
  const uint n = sift_rank_count(counters, capacity);
  const uint m = sift_rank_records(i0, n);
  __global const uint* dup_key = words + SIFT_RANK_DUP_KEY * capacity;
  uint key[SIFT_RANK_PER_SLICE];
#pragma unroll
  for (uint r = 0; r < SIFT_RANK_PER_SLICE; ++r) key[r] = r < m ? dup_key[i0 + r] : SIFT_RANK_NONE;
  uint dropped = 0; /* bit r: record i0 + r is dropped */
  if (m) {
    for (uint j = lane; j < n; j += SIFT_RANK_LANES) {
      const uint kj = dup_key[j];
      int equal = 0;
#pragma unroll
      for (uint r = 0; r < SIFT_RANK_PER_SLICE; ++r) equal |= kj == key[r];
      if (equal) { /* most j: no record of the slice has its x */
#pragma unroll
        for (uint r = 0; r < SIFT_RANK_PER_SLICE; ++r)
          if (kj == key[r] && r < m && sift_rank_drops(kp[j], (int)j, kp[i0 + r], (int)(i0 + r))) dropped |= 1u << r;
      }
    }
  }
  dropped_of[lid] = dropped;
  barrier(CLK_LOCAL_MEM_FENCE);
  uint unique = 0;
  if (lane < m) {
    uint d = 0;
    for (uint q = 0; q < SIFT_RANK_LANES; ++q) d |= dropped_of[base + q];
    unique = ((d >> lane) & 1u) ? 0u : 1u;
    const uint i = i0 + lane;
    if (!unique) words[SIFT_RANK_RESPONSE_KEY * capacity + i] = SIFT_RANK_NONE;
    if (keep_is_unique)
      words[SIFT_RANK_CANONICAL_KEY * capacity + i] =
          unique ? sift_rank_canonical_key(kp[i], y_scale, canonical_key) : SIFT_RANK_NONE;
  }
  unique_of[lid] = unique;
  barrier(CLK_LOCAL_MEM_FENCE);
  if (lane == 0 && m) {
    const uint count = sift_rank_sum(unique_of + base, SIFT_RANK_PER_SLICE);
    if (count) {
      atomic_add(&counters[SIFT_COUNT_UNIQUE], count);
      if (keep_is_unique) atomic_add(&counters[SIFT_COUNT_KEPT], count);
    }
  }
}

/* sift_select_rank_keep: global and work-group as sift_select_rank_unique; queued only with a cap (max_features
 * > 0) or a mask (mask_type: -1 none, 0 u8, 1 u16, 2 f32; mask_w x mask_h pixels). A unique record i is kept when,
 * with more than max_features unique records, fewer than max_features unique records j have a larger response (a
 * smaller response key: the dropped ones hold SIFT_RANK_NONE), and the mask is set at i (sift_select_mask_ok). Its
 * canonical key (SIFT_RANK_NONE when not kept; y_scale and canonical_key as sift_select_rank_unique's) and the kept
 * count into counters[SIFT_COUNT_KEPT]. */
__kernel void sift_select_rank_keep(__global const SiftKeypoint* kp, __global uint* counters, uint capacity,
                                    __global uint* words, float y_scale, int canonical_key, int max_features,
                                    __global const uchar* mask, int mask_type, int mask_w, int mask_h) {
  __local uint larger_of[SIFT_RANK_PER_SLICE * SIFT_RANK_RUN]; /* record r's count of lane t at [r RUN + t] */
  __local uint kept_of[SIFT_RANK_GROUP_MAX];
  const uint lid = get_local_id(0), lane = lid % SIFT_RANK_LANES, base = lid - lane;
  const uint i0 = sift_rank_first();
  const uint n = sift_rank_count(counters, capacity);
  const uint m = sift_rank_records(i0, n);
  __global const uint* response_key = words + SIFT_RANK_RESPONSE_KEY * capacity;
  uint key[SIFT_RANK_PER_SLICE], larger[SIFT_RANK_PER_SLICE];
#pragma unroll
  for (uint r = 0; r < SIFT_RANK_PER_SLICE; ++r) {
    key[r] = r < m ? response_key[i0 + r] : SIFT_RANK_NONE;
    larger[r] = 0;
  }
  const int capped = max_features > 0 && counters[SIFT_COUNT_UNIQUE] > (uint)max_features;
  if (m && capped) {
    for (uint j = lane; j < n; j += SIFT_RANK_LANES) {
      const uint kj = response_key[j];
#pragma unroll
      for (uint r = 0; r < SIFT_RANK_PER_SLICE; ++r) larger[r] += kj < key[r] ? 1u : 0u;
    }
  }
#pragma unroll
  for (uint r = 0; r < SIFT_RANK_PER_SLICE; ++r) larger_of[r * SIFT_RANK_RUN + lid] = larger[r];
  barrier(CLK_LOCAL_MEM_FENCE);
  uint keep = 0;
  if (lane < m) {
    const uint i = i0 + lane;
    keep = response_key[i] != SIFT_RANK_NONE &&
           (!capped || sift_rank_sum(larger_of + lane * SIFT_RANK_RUN + base, SIFT_RANK_LANES) <
                           (uint)max_features) &&
           sift_select_mask_ok(kp[i], mask, mask_type, mask_w, mask_h);
    words[SIFT_RANK_CANONICAL_KEY * capacity + i] =
        keep ? sift_rank_canonical_key(kp[i], y_scale, canonical_key) : SIFT_RANK_NONE;
  }
  kept_of[lid] = keep;
  barrier(CLK_LOCAL_MEM_FENCE);
  if (lane == 0 && m) {
    const uint count = sift_rank_sum(kept_of + base, SIFT_RANK_PER_SLICE);
    if (count) atomic_add(&counters[SIFT_COUNT_KEPT], count);
  }
}

/* sift_select_rank_place: global and work-group as sift_select_rank_unique. Each kept record i of the slice goes to
 * position = the number of kept records j before it in the canonical order (a smaller canonical key, or an equal
 * key and sift_rank_before; records not kept hold SIFT_RANK_NONE, above every kept key), and out[position] = kp[i],
 * the slice's lanes copying the records' words (three a lane). */
__kernel void sift_select_rank_place(__global const SiftKeypoint* kp, __global const uint* counters, uint capacity,
                                     __global const uint* words, __global SiftKeypoint* out) {
  __local uint before_of[SIFT_RANK_PER_SLICE * SIFT_RANK_RUN]; /* record r's count of lane t at [r RUN + t] */
  __local uint position_of[SIFT_RANK_GROUP_MAX / SIFT_RANK_LANES * SIFT_RANK_PER_SLICE];
  const uint lid = get_local_id(0), lane = lid % SIFT_RANK_LANES, base = lid - lane;
  const uint slice = lid / SIFT_RANK_LANES;
  const uint i0 = sift_rank_first();
  const uint n = sift_rank_count(counters, capacity);
  const uint m = sift_rank_records(i0, n);
  __global const uint* canonical_key = words + SIFT_RANK_CANONICAL_KEY * capacity;
  uint key[SIFT_RANK_PER_SLICE], before[SIFT_RANK_PER_SLICE];
  uint kept = 0; /* bit r: record i0 + r is kept */
#pragma unroll
  for (uint r = 0; r < SIFT_RANK_PER_SLICE; ++r) {
    key[r] = r < m ? canonical_key[i0 + r] : SIFT_RANK_NONE;
    before[r] = 0;
    kept |= key[r] != SIFT_RANK_NONE ? 1u << r : 0u;
  }
  if (kept) {
    for (uint j = lane; j < n; j += SIFT_RANK_LANES) {
      const uint kj = canonical_key[j];
      int equal = 0;
#pragma unroll
      for (uint r = 0; r < SIFT_RANK_PER_SLICE; ++r) {
        before[r] += kj < key[r] ? 1u : 0u;
        equal |= kj == key[r];
      }
      if (equal && kj != SIFT_RANK_NONE) { /* most j: no kept record of the slice has its key */
#pragma unroll
        for (uint r = 0; r < SIFT_RANK_PER_SLICE; ++r)
          if (kj == key[r] && sift_rank_before(kp[j], (int)j, kp[i0 + r], (int)(i0 + r), SIFT_ORDER_CANONICAL))
            ++before[r];
      }
    }
  }
#pragma unroll
  for (uint r = 0; r < SIFT_RANK_PER_SLICE; ++r) before_of[r * SIFT_RANK_RUN + lid] = before[r];
  barrier(CLK_LOCAL_MEM_FENCE);
  if (lane < SIFT_RANK_PER_SLICE)
    position_of[slice * SIFT_RANK_PER_SLICE + lane] =
        sift_rank_sum(before_of + lane * SIFT_RANK_RUN + base, SIFT_RANK_LANES);
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint w = lane; w < SIFT_RANK_PER_SLICE * SIFT_RANK_RECORD_WORDS; w += SIFT_RANK_LANES) {
    const uint r = w / SIFT_RANK_RECORD_WORDS, word = w % SIFT_RANK_RECORD_WORDS;
    if ((kept >> r) & 1u)
      ((__global uint*)(out + position_of[slice * SIFT_RANK_PER_SLICE + r]))[word] =
          ((__global const uint*)(kp + i0 + r))[word];
  }
}

/* sift_select_buckets.cl — the select stage above the rank select's counts, without a cap (numeric/sift_select.h,
 * "The bucketed rank select"; the OpenCL port of backend/cuda/kernels/sift_select_buckets.cuh): the rank select's
 * counts taken only inside hash buckets of x (rule 1) and inside canonical buckets (rule 4), so that each record
 * compares with a few others instead of the sorting path's bitonic launches. The kept records and their order are
 * the sorting path's, bit for bit. (Part of the sift.cl program.)
 *
 * The launches (global sizes from the host's bound on the oriented count; n itself is read on the device; every
 * kernel skips its work when counters[SIFT_COUNT_SELECT_SMALL] says a small-count path already ran the stage):
 *   sift_select_bucket_keys    work-item per record: its duplicate key and bucket, the bucket's count;
 *   sift_select_bucket_scan    one work-group (kind 0: duplicate buckets, 1: canonical): counts to offsets and
 *                              cursors; kind 1 also writes the total into counters[SIFT_COUNT_KEPT];
 *   sift_select_bucket_fill    work-item per record: its index into its bucket's list (any order: atomics);
 *   sift_select_bucket_unique  work-item per record: rule 1 over its duplicate bucket, rule 3, then a kept record's
 *                              canonical key and bucket, the bucket's count; the unique count (one atomic a
 *                              work-group);
 *   sift_select_bucket_place   work-item per kept record: its position, the record copied there.
 *
 * One buffer `w` holds every array, at fixed runs (B = SIFT_SELECT_BUCKETS, c = capacity, in words): duplicate
 * counts [0, B), offsets [B, 2B + 1), cursors [2B + 1, 3B + 1); canonical counts [3B + 1, 4B + 1), offsets
 * [4B + 1, 5B + 2), cursors [5B + 2, 6B + 2); then per record six runs of c: the duplicate key, the duplicate
 * bucket, the duplicate lists, the canonical key, the canonical bucket (SIFT_RANK_NONE: not kept), the canonical
 * lists. The host zeroes both count runs before the keys. */

#define SIFT_BK_B SIFT_SELECT_BUCKETS
#define SIFT_BK_D_COUNT 0u
#define SIFT_BK_D_OFFSET SIFT_BK_B
#define SIFT_BK_D_CURSOR (2u * SIFT_BK_B + 1u)
#define SIFT_BK_C_COUNT (3u * SIFT_BK_B + 1u)
#define SIFT_BK_C_OFFSET (4u * SIFT_BK_B + 1u)
#define SIFT_BK_C_CURSOR (5u * SIFT_BK_B + 2u)
#define SIFT_BK_RECORDS (6u * SIFT_BK_B + 2u)
/* The per-record runs, in runs of `capacity` words after SIFT_BK_RECORDS. */
#define SIFT_BK_DUP_KEY 0u
#define SIFT_BK_D_BUCKET 1u
#define SIFT_BK_D_LIST 2u
#define SIFT_BK_CANONICAL_KEY 3u
#define SIFT_BK_C_BUCKET 4u
#define SIFT_BK_C_LIST 5u

/* Run `run` of the per-record arrays. */
__global uint* sift_bucket_run(__global uint* w, uint capacity, uint run) {
  return w + SIFT_BK_RECORDS + (size_t)run * capacity;
}

/* The oriented count, or 0 when a small-count path ran the stage (every kernel then skips its work). */
uint sift_bucket_records(__global const uint* counters, uint capacity) {
  return counters[SIFT_COUNT_SELECT_SMALL] ? 0u : min(counters[SIFT_COUNT_ORIENTED], capacity);
}

/* sift_select_bucket_keys: global >= the host's bound on n, any work-group; work-item i < n: record i's duplicate key
 * and bucket, and one more record in that bucket's count. */
__kernel void sift_select_bucket_keys(__global const SiftKeypoint* kp, __global const uint* counters, uint capacity,
                                      __global uint* w) {
  const uint i = get_global_id(0);
  if (i >= sift_bucket_records(counters, capacity)) return; /* no barrier in this kernel */
  const uint key = sift_select_ordered_bits(kp[i].x);
  const uint b = sift_duplicate_bucket(key);
  sift_bucket_run(w, capacity, SIFT_BK_DUP_KEY)[i] = key;
  sift_bucket_run(w, capacity, SIFT_BK_D_BUCKET)[i] = b;
  atomic_inc(&w[SIFT_BK_D_COUNT + b]);
}

/* sift_select_bucket_scan: one work-group of L work-items (a power of two dividing SIFT_SELECT_BUCKETS, at most
 * 1024), `sums` L words of local memory; kind 0 the duplicate buckets, 1 the canonical ones. Work-item t sums the
 * SIFT_SELECT_BUCKETS / L consecutive counts from t times that, the sums are scanned in local memory
 * (Hillis-Steele, inclusive), then each bucket's exclusive offset goes to its offset and cursor; the last
 * work-item writes the total after the last offset and, for kind 1, into counters[SIFT_COUNT_KEPT]. */
__kernel void sift_select_bucket_scan(__global uint* counters, uint capacity, __global uint* w, uint kind,
                                      __local uint* sums) {
  if (sift_bucket_records(counters, capacity) == 0u) return; /* uniform in the work-group */
  const uint t = get_local_id(0), l = get_local_size(0), per = SIFT_BK_B / l, b0 = t * per;
  __global const uint* count = w + (kind ? SIFT_BK_C_COUNT : SIFT_BK_D_COUNT);
  __global uint* offset = w + (kind ? SIFT_BK_C_OFFSET : SIFT_BK_D_OFFSET);
  __global uint* cursor = w + (kind ? SIFT_BK_C_CURSOR : SIFT_BK_D_CURSOR);
  uint sum = 0u;
  for (uint k = 0u; k < per; ++k) sum += count[b0 + k];
  sums[t] = sum;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint d = 1u; d < l; d <<= 1) {
    const uint v = t >= d ? sums[t - d] : 0u;
    barrier(CLK_LOCAL_MEM_FENCE);
    sums[t] += v;
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  uint running = sums[t] - sum; /* the exclusive offset of bucket b0 */
  for (uint k = 0u; k < per; ++k) {
    offset[b0 + k] = running;
    cursor[b0 + k] = running;
    running += count[b0 + k];
  }
  if (t == 0u) {
    const uint total = sums[l - 1u];
    offset[SIFT_BK_B] = total;
    if (kind) counters[SIFT_COUNT_KEPT] = total;
  }
}

/* sift_select_bucket_fill: global >= the host's bound on n, any work-group; work-item i < n with a bucket of `kind`
 * (not SIFT_RANK_NONE) writes i at the next free place of its bucket's list. */
__kernel void sift_select_bucket_fill(__global const uint* counters, uint capacity, __global uint* w, uint kind) {
  const uint i = get_global_id(0);
  if (i >= sift_bucket_records(counters, capacity)) return; /* no barrier in this kernel */
  const uint b = sift_bucket_run(w, capacity, kind ? SIFT_BK_C_BUCKET : SIFT_BK_D_BUCKET)[i];
  if (b == SIFT_RANK_NONE) return;
  const uint at = atomic_inc(&w[(kind ? SIFT_BK_C_CURSOR : SIFT_BK_D_CURSOR) + b]);
  sift_bucket_run(w, capacity, kind ? SIFT_BK_C_LIST : SIFT_BK_D_LIST)[at] = i;
}

/* sift_select_bucket_unique: global = the host's bound on n rounded up to the work-group, any work-group size;
 * work-item i < n: record i is dropped when a record j of its duplicate bucket with its duplicate key drops it
 * (sift_rank_drops), kept when not dropped and the mask is set at it; a kept record gets its canonical key and
 * bucket (sift_canonical_bucket with band_bits) and one more record in that bucket's count, the others
 * SIFT_RANK_NONE as bucket. The work-group's unique count is summed in local memory and added to
 * counters[SIFT_COUNT_UNIQUE] once. */
__kernel void sift_select_bucket_unique(__global const SiftKeypoint* kp, __global uint* counters, uint capacity,
                                        __global uint* w, float y_scale, int layers, int octaves, int band_bits,
                                        __global const uchar* mask, int mask_type, int mask_w, int mask_h) {
  __local uint group_unique;
  const uint i = get_global_id(0);
  const uint n = sift_bucket_records(counters, capacity);
  if (get_local_id(0) == 0) group_unique = 0u;
  barrier(CLK_LOCAL_MEM_FENCE);
  if (i < n) {
    __global const uint* dup_key = sift_bucket_run(w, capacity, SIFT_BK_DUP_KEY);
    __global const uint* list = sift_bucket_run(w, capacity, SIFT_BK_D_LIST);
    const uint key = dup_key[i], b = sift_bucket_run(w, capacity, SIFT_BK_D_BUCKET)[i];
    const SiftKeypoint ki = kp[i];
    int dropped = 0;
    for (uint p = w[SIFT_BK_D_OFFSET + b], end = w[SIFT_BK_D_OFFSET + b + 1u]; p < end && !dropped; ++p) {
      const uint j = list[p];
      dropped = dup_key[j] == key && sift_rank_drops(kp[j], (int)j, ki, (int)i);
    }
    uint cb = SIFT_RANK_NONE;
    if (!dropped) {
      atomic_inc(&group_unique);
      if (sift_select_mask_ok(ki, mask, mask_type, mask_w, mask_h)) {
        const uint ck = sift_rank_canonical_key(ki, y_scale, 1);
        cb = sift_canonical_bucket(ki, ck, layers, octaves, band_bits);
        sift_bucket_run(w, capacity, SIFT_BK_CANONICAL_KEY)[i] = ck;
        atomic_inc(&w[SIFT_BK_C_COUNT + cb]);
      }
    }
    sift_bucket_run(w, capacity, SIFT_BK_C_BUCKET)[i] = cb;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  if (get_local_id(0) == 0 && group_unique) atomic_add(&counters[SIFT_COUNT_UNIQUE], group_unique);
}

/* sift_select_bucket_place: global >= the host's bound on n, any work-group; work-item i < n with a canonical bucket
 * (kept): its position = the bucket's offset + the kept records j of the bucket before it (a smaller canonical key,
 * or an equal key and sift_rank_before in the canonical order); out[position] = kp[i]. */
__kernel void sift_select_bucket_place(__global const SiftKeypoint* kp, __global const uint* counters, uint capacity,
                                       __global uint* w, __global SiftKeypoint* out) {
  const uint i = get_global_id(0);
  if (i >= sift_bucket_records(counters, capacity)) return; /* no barrier in this kernel */
  const uint b = sift_bucket_run(w, capacity, SIFT_BK_C_BUCKET)[i];
  if (b == SIFT_RANK_NONE) return;
  __global const uint* ckey = sift_bucket_run(w, capacity, SIFT_BK_CANONICAL_KEY);
  __global const uint* list = sift_bucket_run(w, capacity, SIFT_BK_C_LIST);
  const uint key = ckey[i];
  const SiftKeypoint ki = kp[i];
  uint position = w[SIFT_BK_C_OFFSET + b];
  for (uint p = w[SIFT_BK_C_OFFSET + b], end = w[SIFT_BK_C_OFFSET + b + 1u]; p < end; ++p) {
    const uint j = list[p], kj = ckey[j];
    position += kj < key || (kj == key && sift_rank_before(kp[j], (int)j, ki, (int)i, SIFT_ORDER_CANONICAL)) ? 1u : 0u;
  }
  out[position] = ki;
}

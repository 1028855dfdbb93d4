/* sift_select.h — the rules of the select stage (notes §9), as comparisons on SiftKeypoint records, so that
 * a device sorts and filters with exactly the host's rules. The stage applies, in this order:
 *   1. duplicates (OpenCV's removeDuplicatedSorted): sort by sift_duplicate_before, then drop every record
 *      for which sift_is_duplicate(previous kept record, record);
 *   2. the cap (OpenCV's retainBest): with more than max_features records, cut = the max_features-th largest
 *      response; keep the records with sift_response_kept(response, cut) (ties at the cut are all kept, so
 *      the set is decided by response alone, never by arrival order);
 *   3. the mask (OpenCV's runByPixelsMask): keep a record when the mask pixel at (sift_mask_coord(x, width),
 *      sift_mask_coord(y, height)) is non-zero;
 *   4. the canonical order: sort by sift_canonical_before (octave, layer, y, x, angle, then the rest).
 * The rules take records by value (no pointer, so no address space to choose); the device forms at the end
 * read them from the record array in global memory. */
#ifndef SPECTRASIFT_NUMERIC_SIFT_SELECT_H
#define SPECTRASIFT_NUMERIC_SIFT_SELECT_H

#include "sift_keypoint.h"

/* OpenCV's packed octave field octave & 255 | layer << 8 | round((xi + 0.5) * 255) << 16, used only as a
 * tie-breaker of the duplicate order. */
SPECTRASIFT_FN int sift_packed_octave(SiftKeypoint k) {
  return (k.octave & 255) | (k.layer << 8) | (sift_round((k.layer_offset + 0.5f) * 255.0f) & 255) << 16;
}

/* The order of removeDuplicatedSorted: x, y ascending, size descending, angle ascending, response and packed
 * octave descending; then layer_offset, r, c ascending, which OpenCV leaves to its sort but which makes the
 * order total here, so that the record kept among duplicates never depends on the input order. */
SPECTRASIFT_FN int sift_duplicate_before(SiftKeypoint a, SiftKeypoint b) {
  if (a.x != b.x) return a.x < b.x;
  if (a.y != b.y) return a.y < b.y;
  if (a.size != b.size) return a.size > b.size;
  if (a.angle != b.angle) return a.angle < b.angle;
  if (a.response != b.response) return a.response > b.response;
  const int pa = sift_packed_octave(a), pb = sift_packed_octave(b);
  if (pa != pb) return pa > pb;
  if (a.layer_offset != b.layer_offset) return a.layer_offset < b.layer_offset;
  if (a.r != b.r) return a.r < b.r;
  return a.c < b.c;
}

/* 1 when b duplicates a (equal position, size and angle); b is then dropped. */
SPECTRASIFT_FN int sift_is_duplicate(SiftKeypoint a, SiftKeypoint b) {
  return a.x == b.x && a.y == b.y && a.size == b.size && a.angle == b.angle;
}

/* 1 when a response survives the cap at cut (the max_features-th largest response). */
SPECTRASIFT_FN int sift_response_kept(float response, float cut) { return response >= cut; }

/* The mask pixel of a coordinate: int(v + 0.5) (truncation, as OpenCV), clamped to 0..size-1. */
SPECTRASIFT_FN int sift_mask_coord(float v, int size) {
  const int p = (int)(v + 0.5f);
  return p < 0 ? 0 : (p > size - 1 ? size - 1 : p);
}

/* The canonical order of the output: octave, layer, y, x, angle, then size, response and layer_offset so
 * that the order is total on the public fields. */
SPECTRASIFT_FN int sift_canonical_before(SiftKeypoint a, SiftKeypoint b) {
  if (a.octave != b.octave) return a.octave < b.octave;
  if (a.layer != b.layer) return a.layer < b.layer;
  if (a.y != b.y) return a.y < b.y;
  if (a.x != b.x) return a.x < b.x;
  if (a.angle != b.angle) return a.angle < b.angle;
  if (a.size != b.size) return a.size < b.size;
  if (a.response != b.response) return a.response < b.response;
  return a.layer_offset < b.layer_offset;
}

/* The device select stage (backend/cuda/kernels/sift_select.cuh and backend/opencl/kernels/sift_select.cl)
 * sorts an index array over the records with a bitonic network over P = the next power of two >= the live
 * count (positions past it hold -1, which sorts last), then flags and compacts it. Its per-comparison and
 * per-position maths, on the record array in global memory: */

/* The orders of the sort (mode). */
#define SIFT_ORDER_DUPLICATES 0 /* sift_duplicate_before */
#define SIFT_ORDER_RESPONSE 1   /* response descending (only the cut value is read from this order) */
#define SIFT_ORDER_CANONICAL 2  /* sift_canonical_before */

/* The smallest power of two >= n (1 for 0). */
SPECTRASIFT_FN unsigned int sift_pow2_at_least(unsigned int n) {
  unsigned int p = 1;
  while (p < n) p <<= 1;
  return p;
}

/* 1 when record index a goes before b in the order `mode`; -1 (no record) goes after every record. */
SPECTRASIFT_FN int sift_index_before(SPECTRASIFT_CONST_GLOBAL SiftKeypoint* kp, int a, int b, int mode) {
  if (a < 0) return 0;
  if (b < 0) return 1;
  const SiftKeypoint ka = kp[a], kb = kp[b];
  if (mode == SIFT_ORDER_DUPLICATES) return sift_duplicate_before(ka, kb);
  if (mode == SIFT_ORDER_RESPONSE) return ka.response > kb.response;
  return sift_canonical_before(ka, kb);
}

/* The compare-exchange of the indices *a, *b at positions i < l = i + j of bitonic step (k, j) (ascending
 * where i & k is 0). */
SPECTRASIFT_FN void sift_compare_exchange(SPECTRASIFT_CONST_GLOBAL SiftKeypoint* kp, int* a, int* b, unsigned int i,
                                          unsigned int k, int mode) {
  const int ascending = (i & k) == 0;
  const int swap = ascending ? sift_index_before(kp, *b, *a, mode) : sift_index_before(kp, *a, *b, mode);
  if (swap) {
    const int t = *a;
    *a = *b;
    *b = t;
  }
}

/* The mask rule of one record: 1 when there is no mask (mask_type -1: none, 0 u8, 1 u16, 2 f32; mask_w x mask_h
 * pixels) or the mask is set at its rounded position (OpenCV's runByPixelsMask). */
SPECTRASIFT_FN int sift_select_mask_ok(SiftKeypoint k, SPECTRASIFT_CONST_GLOBAL unsigned char* mask, int mask_type,
                                       int mask_w, int mask_h) {
  if (mask_type < 0) return 1;
  const size_t m = (size_t)sift_mask_coord(k.y, mask_h) * (size_t)mask_w + (size_t)sift_mask_coord(k.x, mask_w);
  if (mask_type == 0) return mask[m] != 0;
  if (mask_type == 1) return ((SPECTRASIFT_CONST_GLOBAL unsigned short*)mask)[m] != 0;
  return ((SPECTRASIFT_CONST_GLOBAL float*)mask)[m] != 0.0f;
}

/* A float as an unsigned integer of the same order (-0 taken as +0; no NaN reaches the select stage): the key
 * words of the one-work-group selects and of the rank select. */
SPECTRASIFT_FN unsigned int sift_select_ordered_bits(float v) {
  union {
    float f;
    unsigned int u;
  } b;
  b.f = v + 0.0f;
  return (b.u & 0x80000000u) ? ~b.u : (b.u | 0x80000000u);
}

/* The keep flag of record r (an index into kp) at its position of a sorted order, given the records the flag
 * reads besides it: prev, the record at the position before (pass 0; -1 at position 0) and cut, the record at
 * position max_features - 1 (pass 1 when the order holds more than max_features records; else -1). pass 0:
 * not a duplicate of prev. pass 1: response >= cut's response (when cut >= 0) and the mask set at the
 * record's rounded position (mask_type: -1 none, 0 u8, 1 u16, 2 f32; mask_w x mask_h pixels). Taking
 * record indices rather than the order lets an order in local (shared) memory use it too
 * (backend/opencl/kernels/sift_select.cl's sift_select_small). */
SPECTRASIFT_FN int sift_select_keep(SPECTRASIFT_CONST_GLOBAL SiftKeypoint* kp, int r, int prev, int cut, int pass,
                                    SPECTRASIFT_CONST_GLOBAL unsigned char* mask, int mask_type, int mask_w,
                                    int mask_h) {
  const SiftKeypoint k = kp[r];
  int flag = 1;
  if (pass == 0) {
    flag = prev < 0 || !sift_is_duplicate(kp[prev], k);
  } else {
    if (cut >= 0) flag = sift_response_kept(k.response, kp[cut].response);
    if (flag) flag = sift_select_mask_ok(k, mask, mask_type, mask_w, mask_h);
  }
  return flag;
}

/* The keep flag of position i < n of the sorted order `order` of n records. pass 0 (order sorted by
 * SIFT_ORDER_DUPLICATES): not a duplicate of the record before it. pass 1 (the unique records, sorted by
 * response when max_features > 0): response >= the max_features-th largest response (when there are more)
 * and the mask set at the record's rounded position (sift_select_keep). */
SPECTRASIFT_FN int sift_select_flag(SPECTRASIFT_CONST_GLOBAL int* order, SPECTRASIFT_CONST_GLOBAL SiftKeypoint* kp,
                                    unsigned int i, unsigned int n, int pass, int max_features,
                                    SPECTRASIFT_CONST_GLOBAL unsigned char* mask, int mask_type, int mask_w,
                                    int mask_h) {
  const int prev = pass == 0 && i > 0 ? order[i - 1] : -1;
  const int cut = pass == 1 && max_features > 0 && n > (unsigned int)max_features ? order[max_features - 1] : -1;
  return sift_select_keep(kp, order[i], prev, cut, pass, mask, mask_type, mask_w, mask_h);
}

/* The rank select: the same stage without sorting, for counts small enough that comparing every record with
 * every other costs less than a sort's launches. Each rule
 * becomes a count over all records j, taken for each record i on its own:
 *   1. i is a duplicate to drop when some j != i is its duplicate and goes before it in the duplicate
 *      order (duplicates are contiguous in that order, and the first of each run is the one kept);
 *   2. with more than max_features unique records, i survives the cap when fewer than max_features unique
 *      records have a larger response (the same set as response >= the max_features-th largest);
 *   3. the mask, per record;
 *   4. the kept record i goes to position rank(i) = the number of kept records j before it in the canonical
 *      order.
 * Records equal in every field an order compares are taken in index order (sift_rank_before), so the ranks
 * are a permutation; such records are duplicates, so only one of them is ever kept, and which one does not
 * change a kept field. The result is the sorting path's, bit for bit.
 * The backends' kernels: backend/cuda/kernels/sift_select_rank.cuh and backend/opencl/kernels/sift_select_rank.cl. */

/* The most oriented records the rank select takes (its kernels and the hosts that queue them read it): the
 * comparisons grow as the count squared, and past this count the multi-launch sorting path runs instead. */
#define SIFT_RANK_MAX_RECORDS 16384u

/* 1 when record j (index jn) goes before record i (index in) in order `mode`, equal records in index order. */
SPECTRASIFT_FN int sift_rank_before(SiftKeypoint kj, int jn, SiftKeypoint ki, int in, int mode) {
  int before, after;
  if (mode == SIFT_ORDER_DUPLICATES) {
    before = sift_duplicate_before(kj, ki);
    after = sift_duplicate_before(ki, kj);
  } else if (mode == SIFT_ORDER_RESPONSE) {
    before = kj.response > ki.response;
    after = ki.response > kj.response;
  } else {
    before = sift_canonical_before(kj, ki);
    after = sift_canonical_before(ki, kj);
  }
  return before || (!after && jn < in);
}

/* 1 when record j drops record i as a duplicate (rule 1). */
SPECTRASIFT_FN int sift_rank_drops(SiftKeypoint kj, int jn, SiftKeypoint ki, int in) {
  return jn != in && sift_is_duplicate(kj, ki) && sift_rank_before(kj, jn, ki, in, SIFT_ORDER_DUPLICATES);
}

/* The keys that let most comparisons of the rank select read one word instead of two records:
 *   duplicate key: x's ordered bits (rule 1 needs equal x, so only equal keys read the records);
 *   response key: the response's ordered bits, complemented (at most 0x7fffffff for responses >= 0): j has the
 *                 larger response exactly when its key is smaller (rule 2 reads nothing else); a dropped
 *                 duplicate's key becomes SIFT_RANK_NONE, above every record's, so it is never counted;
 *   canonical key: octave + 1 (5 bits, at most 30), layer (4 bits), y quantised to 23 bits with y_scale (2^23 /
 *                 (the largest input side + 1)), non-decreasing along the canonical order, so a smaller key
 *                 means "before" and only equal keys read the records; 0 for every record when the plan's
 *                 layers or octaves do not fit (canonical_key 0: layers above 15 or more than 31 octaves); a
 *                 record not kept gets SIFT_RANK_NONE instead (real keys stay below it), so rule 4 counts the
 *                 kept records without a flag array. */
#define SIFT_RANK_NONE 0xffffffffu
SPECTRASIFT_FN unsigned int sift_rank_canonical_key(SiftKeypoint k, float y_scale, int canonical_key) {
  if (!canonical_key) return 0u;
  const int o = k.octave + 1 < 0 ? 0 : (k.octave + 1 > 30 ? 30 : k.octave + 1);
  const int l = k.layer < 0 ? 0 : (k.layer > 15 ? 15 : k.layer);
  float yq = k.y * y_scale;
  yq = yq < 0.0f ? 0.0f : (yq > 8388607.0f ? 8388607.0f : yq);
  return ((unsigned int)o << 27) | ((unsigned int)l << 23) | (unsigned int)yq;
}

/* The bucketed rank select: the rank select's counts taken only over the records that can change them, for
 * counts above SIFT_RANK_MAX_RECORDS without a cap (the cap's count is global: such runs keep the sorting path),
 * and for any count where no small-count path runs (OpenCL's CPU devices).
 *   rule 1: a record is compared only with the records of its duplicate bucket, a hash of its duplicate key:
 *           a duplicate has the same x, so the same key and bucket;
 *   rule 4: a kept record is compared only with the kept records of its canonical bucket (octave + 1, layer and
 *           a band of the canonical key's y field): buckets never decrease along the canonical order, so every
 *           kept record of an earlier bucket goes before it and none of a later one does, and its position is
 *           the kept records of the earlier buckets (an exclusive scan of the buckets' counts) plus the rank
 *           select's count inside its bucket.
 * The counts are the rank select's, so the kept records and their order are the sorting path's, bit for bit.
 * A device fills each bucket's list of record indices in any order (atomics); no count depends on that order.
 * The backends' kernels: backend/cuda/kernels/sift_select_buckets.cuh and backend/opencl/kernels/sift_select_buckets.cl. */

/* Buckets of each kind (a power of two; the scans' single block takes up to 64 a thread). */
#define SIFT_SELECT_BUCKETS 65536u
#define SIFT_SELECT_BUCKET_BITS 16

/* The duplicate bucket of a duplicate key (x's ordered bits): Fibonacci hashing to SIFT_SELECT_BUCKET_BITS. */
SPECTRASIFT_FN unsigned int sift_duplicate_bucket(unsigned int dup_key) {
  return (dup_key * 0x9E3779B1u) >> (32 - SIFT_SELECT_BUCKET_BITS);
}

/* Bits of the y band of a canonical bucket: the most that (octaves + 1) x (layers + 2) slots of 2^bits bands keep
 * within SIFT_SELECT_BUCKETS (at most 23, the y field's width; -1 when even one band a slot does not fit). */
SPECTRASIFT_FN int sift_canonical_band_bits(int layers, int octaves) {
  const unsigned int slots = (unsigned int)(octaves + 1) * (unsigned int)(layers + 2);
  int bits = -1;
  while (bits < 23 && (slots << (bits + 1)) <= SIFT_SELECT_BUCKETS) ++bits;
  return bits;
}

/* The canonical bucket of a kept record with canonical key ckey (sift_rank_canonical_key with the key in use):
 * slot (octave + 1 clamped to 0..octaves, layer clamped to 0..layers + 1), then the top band_bits bits of the
 * key's 23-bit y field. Every part is non-decreasing along the canonical order (octave, then layer, then y). */
SPECTRASIFT_FN unsigned int sift_canonical_bucket(SiftKeypoint k, unsigned int ckey, int layers, int octaves,
                                                  int band_bits) {
  const int o = k.octave + 1 < 0 ? 0 : (k.octave + 1 > octaves ? octaves : k.octave + 1);
  const int l = k.layer < 0 ? 0 : (k.layer > layers + 1 ? layers + 1 : k.layer);
  const unsigned int slot = (unsigned int)(o * (layers + 2) + l);
  return (slot << band_bits) | ((ckey & 0x7fffffu) >> (23 - band_bits));
}

#endif /* SPECTRASIFT_NUMERIC_SIFT_SELECT_H */

// sift_select_buckets.cuh — the select stage for counts above the rank select's (numeric/sift_select.h, "The
// bucketed rank select"), without a cap: the rank select's counts taken only inside hash buckets of x (rule 1)
// and inside canonical buckets (rule 4), so each record compares with a few others instead of all of them or
// the ~130 launches of the sorting path (1.86 ms at elephants 4K upsampled's 121k records on the H200). The kept
// records and their order are the sorting path's, bit for bit.
//
// The launches (grids sized by the host for the keypoint capacity; n, the oriented count, is read on the device;
// every kernel returns at once when counters[kCountSelectSmall] says a small-count path already ran the stage):
//   sift_select_bucket_keys     thread per record: its duplicate key and bucket, the bucket's count;
//   sift_select_bucket_scan     one block: a bucket array's counts to offsets (and cursors), the total;
//   sift_select_bucket_fill     thread per record: its index into its bucket's list (any order: atomics);
//   sift_select_bucket_unique   thread per record: rule 1 over its duplicate bucket, rule 3, then the kept
//                               record's canonical key and bucket, the bucket's count;
//   (scan and fill again for the canonical buckets, the scan's total into counters[kCountKept])
//   sift_select_bucket_place    thread per kept record: its position (its bucket's offset + its count inside the
//                               bucket), the record copied there.
// Buckets hold a few records on photographs (121k records in 65,536 buckets of each kind); a crowded bucket (many
// keypoints on one row) costs its records a longer loop, never a different result.
#pragma once

#include "backend/cuda/kernels/sift_select.cuh"

namespace spectrasift::cuda::kernels {

constexpr unsigned int kSelectBuckets = SIFT_SELECT_BUCKETS;
constexpr unsigned int kRankNoneBucket = SIFT_RANK_NONE;  // no bucket (a record not kept)
constexpr int kSelectBucketScanThreads = 1024;
static_assert(kSelectBuckets % kSelectBucketScanThreads == 0, "the scan's threads take equal runs of buckets");

// The arrays of the bucketed select: per bucket kind (d: duplicate, c: canonical) counts (kSelectBuckets),
// offsets (kSelectBuckets + 1) and cursors (kSelectBuckets); per record (capacity entries each) the keys, the
// buckets (SIFT_RANK_NONE: none) and the lists.
struct SiftBucketArrays {
  unsigned int *d_count, *d_offset, *d_cursor, *c_count, *c_offset, *c_cursor;
  unsigned int *dup_key, *d_bucket, *d_list, *canonical_key, *c_bucket, *c_list;
};

// What the canonical buckets need from the plan (host-computed): the canonical key's y scale (as the rank
// select's), the plan's layers and octaves, and the band bits (sift_canonical_band_bits, >= 0).
struct SiftBucketPlan {
  float y_scale;
  int layers, octaves, band_bits;
};

// The oriented count, or 0 when a small-count path ran the stage (every kernel then returns at once).
__device__ inline unsigned int sift_bucket_count(const unsigned int* counters, unsigned int capacity) {
  return counters[kCountSelectSmall] ? 0u : min(counters[kCountOriented], capacity);
}

// sift_select_bucket_keys: grid ceil(capacity / 256), block 256; thread i < n: record i's duplicate key and bucket,
// and one more record in that bucket's count (the counts zeroed by the host before).
__global__ void sift_select_bucket_keys(const SiftKeypoint* kp, const unsigned int* counters, unsigned int capacity,
                                        SiftBucketArrays a) {
  const unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= sift_bucket_count(counters, capacity)) return;
  const unsigned int key = sift_select_ordered_bits(kp[i].x);
  const unsigned int b = sift_duplicate_bucket(key);
  a.dup_key[i] = key;
  a.d_bucket[i] = b;
  atomicAdd(&a.d_count[b], 1u);
}

// sift_select_bucket_scan: grid 1, block kSelectBucketScanThreads; thread t takes the kSelectBuckets /
// kSelectBucketScanThreads consecutive buckets from t times that: their counts summed, the sums scanned across
// the block (warp shuffles, then the 32 warp totals), then each bucket's exclusive offset into offset[] and
// cursor[], offset[kSelectBuckets] = the total, and the total into *total when total is not null.
__global__ void __launch_bounds__(kSelectBucketScanThreads)
    sift_select_bucket_scan(const unsigned int* counters, unsigned int capacity, const unsigned int* count,
                            unsigned int* offset, unsigned int* cursor, unsigned int* total) {
  __shared__ unsigned int warp_sums[kSelectBucketScanThreads / 32];
  if (sift_bucket_count(counters, capacity) == 0) return;  // uniform in the block
  constexpr unsigned int kPer = kSelectBuckets / kSelectBucketScanThreads;
  const unsigned int t = threadIdx.x, lane = t % 32, warp = t / 32, b0 = t * kPer;
  unsigned int sum = 0;
  for (unsigned int k = 0; k < kPer; ++k) sum += count[b0 + k];
  unsigned int inclusive = sum;  // the inclusive scan of the threads' sums inside the warp
  for (int d = 1; d < 32; d <<= 1) {
    const unsigned int v = __shfl_up_sync(0xffffffffu, inclusive, d);
    if (lane >= (unsigned int)d) inclusive += v;
  }
  if (lane == 31) warp_sums[warp] = inclusive;
  __syncthreads();
  if (warp == 0) {  // the warp totals scanned by the first warp (32 warps)
    unsigned int w = warp_sums[lane];
    for (int d = 1; d < 32; d <<= 1) {
      const unsigned int v = __shfl_up_sync(0xffffffffu, w, d);
      if (lane >= (unsigned int)d) w += v;
    }
    warp_sums[lane] = w;
  }
  __syncthreads();
  unsigned int running = (warp ? warp_sums[warp - 1] : 0u) + inclusive - sum;  // exclusive offset of b0
  for (unsigned int k = 0; k < kPer; ++k) {
    offset[b0 + k] = running;
    cursor[b0 + k] = running;
    running += count[b0 + k];
  }
  if (t == kSelectBucketScanThreads - 1) {
    offset[kSelectBuckets] = running;
    if (total) *total = running;
  }
}

// sift_select_bucket_fill: grid ceil(capacity / 256), block 256; thread i < n with bucket[i] != SIFT_RANK_NONE
// writes i at the next free place of its bucket's list (its cursor, from the scan).
__global__ void sift_select_bucket_fill(const unsigned int* counters, unsigned int capacity, const unsigned int* bucket,
                                        unsigned int* cursor, unsigned int* list) {
  const unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= sift_bucket_count(counters, capacity)) return;
  const unsigned int b = bucket[i];
  if (b != kRankNoneBucket) list[atomicAdd(&cursor[b], 1u)] = i;
}

// sift_select_bucket_unique: grid ceil(capacity / 256), block 256; thread i < n: record i is dropped when a record j
// of its duplicate bucket with its duplicate key drops it (sift_rank_drops), and kept when it is not dropped and
// the mask is set at it; a kept record gets its canonical key and bucket and adds one to that bucket's count (the
// counts zeroed by the host before), the others SIFT_RANK_NONE as bucket. The unique count into
// counters[kCountUnique] (one atomic a warp).
__global__ void sift_select_bucket_unique(const SiftKeypoint* kp, unsigned int* counters, unsigned int capacity,
                                          SiftBucketArrays a, SiftBucketPlan plan, SiftMask mask) {
  const unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
  const unsigned int n = sift_bucket_count(counters, capacity);
  if (blockIdx.x * blockDim.x >= n) return;  // uniform in the block (the warp sum below needs every lane)
  bool unique = false;
  if (i < n) {
    const unsigned int key = a.dup_key[i], b = a.d_bucket[i];
    const SiftKeypoint ki = kp[i];
    bool dropped = false;
    for (unsigned int p = a.d_offset[b], end = a.d_offset[b + 1]; p < end && !dropped; ++p) {
      const unsigned int j = a.d_list[p];
      dropped = a.dup_key[j] == key && sift_rank_drops(kp[j], int(j), ki, int(i));
    }
    unique = !dropped;
    const bool keep = unique && sift_select_mask_ok(ki, mask.data, mask.type, mask.width, mask.height);
    unsigned int cb = kRankNoneBucket;
    if (keep) {
      const unsigned int ck = sift_rank_canonical_key(ki, plan.y_scale, 1);
      cb = sift_canonical_bucket(ki, ck, plan.layers, plan.octaves, plan.band_bits);
      a.canonical_key[i] = ck;
      atomicAdd(&a.c_count[cb], 1u);
    }
    a.c_bucket[i] = cb;
  }
  const unsigned int count = __popc(__ballot_sync(0xffffffffu, unique));
  if (threadIdx.x % 32 == 0 && count) atomicAdd(&counters[kCountUnique], count);
}

// sift_select_bucket_place: grid ceil(capacity / 256), block 256; thread i < n with a canonical bucket (kept): its
// position = the bucket's offset + the kept records j of the bucket before it (a smaller canonical key, or an equal
// key and sift_rank_before in the canonical order); out[position] = kp[i].
__global__ void sift_select_bucket_place(const SiftKeypoint* kp, const unsigned int* counters, unsigned int capacity,
                                         SiftBucketArrays a, SiftKeypoint* out) {
  const unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= sift_bucket_count(counters, capacity)) return;
  const unsigned int b = a.c_bucket[i];
  if (b == kRankNoneBucket) return;
  const unsigned int key = a.canonical_key[i];
  const SiftKeypoint ki = kp[i];
  unsigned int position = a.c_offset[b];
  for (unsigned int p = a.c_offset[b], end = a.c_offset[b + 1]; p < end; ++p) {
    const unsigned int j = a.c_list[p], kj = a.canonical_key[j];
    position += kj < key || (kj == key && sift_rank_before(kp[j], int(j), ki, int(i), kOrderCanonical)) ? 1u : 0u;
  }
  out[position] = ki;
}

}  // namespace spectrasift::cuda::kernels

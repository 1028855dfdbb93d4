// sift_select_rank.cuh — the whole select stage without sorting (numeric/sift_select.h, "The rank select"):
// every record compared with every other, one warp per record, for counts of up to kSelectRankRecords oriented
// records. Three launches in the common case (no cap, no mask), each a few microseconds at 2,400 records,
// where the one-block bitonic select (sift_select_small.cuh) took 0.2 ms on the H200 and the multi-launch path
// ~20 launches. The kept records and their order are the sorting paths', bit for bit.
//
// The launches (grids sized by the host for the keypoint capacity; n, the oriented count, is read on the device):
//   sift_select_rank_keys   thread per record: its three keys (numeric/sift_select.h), and the path flag;
//   sift_select_rank_unique warp per record: rule 1 (duplicates) over the duplicate keys;
//   sift_select_rank_keep   warp per record, only with a cap or a mask: rules 2 and 3;
//   sift_select_rank_place  warp per kept record: rule 4, its position in the canonical order, and the copy.
// Each warp's lanes take the records j = lane, lane + 32, ...; the per-lane counts meet in a warp reduction
// (integer sums: the same total in any order), so the result never depends on scheduling.
#pragma once

#include "backend/cuda/kernels/sift_select.cuh"

namespace spectrasift::cuda::kernels {

constexpr unsigned int kSelectRankRecords = 16384;  // the most oriented records handled here (else multi-launch)
constexpr int kSelectRankWarps = 8;                 // warps a block of the warp-per-record kernels

// What the keys need from the plan (host-computed): y_scale = 2^23 / (largest input side + 1);
// canonical_key = 0 when the layers do not fit the canonical key's 4 bits.
struct SiftRankKeys {
  float y_scale;
  int canonical_key;
};

// The rank path's per-record arrays (capacity entries each), in global memory.
struct SiftRankArrays {
  unsigned int* dup_key;
  unsigned int* response_key;
  unsigned int* canonical_key;
  int* unique;  // rule 1's flag
  int* kept;    // rules 1-3's flag (the unique flag again when there is neither a cap nor a mask)
};

// The sum of v over the warp's lanes (every lane gets it).
__device__ inline unsigned int sift_rank_warp_sum(unsigned int v) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

__device__ inline unsigned int sift_rank_count(const unsigned int* counters, unsigned int capacity) {
  return min(counters[kCountOriented], capacity);
}

// sift_select_rank_keys: grid ceil(capacity / 256), block 256; thread i: the keys of record i < n. Thread 0 sets
// counters[kCountSelectSmall] = 1 when n <= kSelectRankRecords (the multi-launch kernels queued after this path
// then return at once), else 0 (and every rank kernel returns at once).
__global__ void sift_select_rank_keys(const SiftKeypoint* kp, unsigned int* counters, unsigned int capacity,
                                      SiftRankKeys keys, SiftRankArrays a) {
  const unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
  const unsigned int n = sift_rank_count(counters, capacity);
  if (i == 0) counters[kCountSelectSmall] = n <= kSelectRankRecords ? 1u : 0u;
  if (i >= n || n > kSelectRankRecords) return;
  const SiftKeypoint k = kp[i];
  a.dup_key[i] = sift_rank_ordered_bits(k.x);
  a.response_key[i] = ~sift_rank_ordered_bits(k.response);
  a.canonical_key[i] = sift_rank_canonical_key(k, keys.y_scale, keys.canonical_key);
}

// sift_select_rank_unique: grid ceil(capacity / kSelectRankWarps), block 32 kSelectRankWarps; warp w: record i = w.
// unique[i] = no record j drops it (sift_rank_drops; only j with i's duplicate key, that is its x, read the
// records); the unique count into counters[kCountUnique], and with keep_is_unique (no cap, no mask) kept[i] and
// counters[kCountKept] too.
__global__ void __launch_bounds__(32 * kSelectRankWarps)
    sift_select_rank_unique(const SiftKeypoint* kp, unsigned int* counters, unsigned int capacity, SiftRankArrays a,
                            int keep_is_unique) {
  const unsigned int i = blockIdx.x * kSelectRankWarps + threadIdx.x / 32, lane = threadIdx.x % 32;
  const unsigned int n = sift_rank_count(counters, capacity);
  if (i >= n || n > kSelectRankRecords) return;  // uniform in the warp
  const unsigned int key = a.dup_key[i];
  int drop = 0;
  for (unsigned int j = lane; j < n && !drop; j += 32)
    if (a.dup_key[j] == key) drop = sift_rank_drops(kp[j], int(j), kp[i], int(i));
  const int unique = !__any_sync(0xffffffffu, drop);
  if (lane == 0) {
    a.unique[i] = unique;
    if (keep_is_unique) a.kept[i] = unique;
    if (unique) {
      atomicAdd(&counters[kCountUnique], 1u);
      if (keep_is_unique) atomicAdd(&counters[kCountKept], 1u);
    }
  }
}

// sift_select_rank_keep: grid and block as sift_select_rank_unique; queued only with a cap (max_features > 0) or a
// mask. kept[i] = unique[i], and, when there are more than max_features unique records, fewer than max_features
// unique records j with a larger response (a smaller response key), and the mask set at i; the kept count into
// counters[kCountKept].
__global__ void __launch_bounds__(32 * kSelectRankWarps)
    sift_select_rank_keep(const SiftKeypoint* kp, unsigned int* counters, unsigned int capacity, SiftRankArrays a,
                          int max_features, SiftMask mask) {
  const unsigned int i = blockIdx.x * kSelectRankWarps + threadIdx.x / 32, lane = threadIdx.x % 32;
  const unsigned int n = sift_rank_count(counters, capacity);
  if (i >= n || n > kSelectRankRecords) return;
  int keep = a.unique[i];
  if (keep && max_features > 0 && counters[kCountUnique] > (unsigned int)max_features) {
    const unsigned int key = a.response_key[i];
    unsigned int larger = 0;
    for (unsigned int j = lane; j < n; j += 32) larger += (a.unique[j] && a.response_key[j] < key) ? 1u : 0u;
    keep = sift_rank_warp_sum(larger) < (unsigned int)max_features;
  }
  if (lane == 0) {
    if (keep) keep = sift_rank_mask_ok(kp[i], mask.data, mask.type, mask.width, mask.height);
    a.kept[i] = keep;
    if (keep) atomicAdd(&counters[kCountKept], 1u);
  }
}

// sift_select_rank_place: grid and block as sift_select_rank_unique; warp w: record i = w when kept. Its position
// = the number of kept records j before it in the canonical order (a smaller canonical key, or an equal key and
// sift_rank_before), and out[position] = kp[i] (12 words, one a lane).
__global__ void __launch_bounds__(32 * kSelectRankWarps)
    sift_select_rank_place(const SiftKeypoint* kp, const unsigned int* counters, unsigned int capacity,
                           SiftRankArrays a, SiftKeypoint* out) {
  const unsigned int i = blockIdx.x * kSelectRankWarps + threadIdx.x / 32, lane = threadIdx.x % 32;
  const unsigned int n = sift_rank_count(counters, capacity);
  if (i >= n || n > kSelectRankRecords || !a.kept[i]) return;
  const unsigned int key = a.canonical_key[i];
  unsigned int before = 0;
  for (unsigned int j = lane; j < n; j += 32) {
    if (!a.kept[j]) continue;
    const unsigned int kj = a.canonical_key[j];
    before += (kj < key || (kj == key && sift_rank_before(kp[j], int(j), kp[i], int(i), kOrderCanonical))) ? 1u : 0u;
  }
  const unsigned int position = sift_rank_warp_sum(before);
  static_assert(sizeof(SiftKeypoint) % sizeof(unsigned int) == 0 && sizeof(SiftKeypoint) / sizeof(unsigned int) <= 32);
  constexpr unsigned int kWords = sizeof(SiftKeypoint) / sizeof(unsigned int);
  if (lane < kWords)
    reinterpret_cast<unsigned int*>(out + position)[lane] = reinterpret_cast<const unsigned int*>(kp + i)[lane];
}

}  // namespace spectrasift::cuda::kernels

// sift_select_rank.cuh — the whole select stage without sorting (numeric/sift_select.h, "The rank select"):
// every record compared with every other, for counts of up to kSelectRankRecords oriented records. Three
// launches in the common case (no cap, no mask), where the one-block bitonic select (sift_select_small.cuh)
// took 0.2 ms for 2,400 records on the H200 and the multi-launch path ~20 launches. The kept records and their
// order are the sorting paths', bit for bit.
//
// The launches (grids sized by the host for the keypoint capacity; n, the oriented count, is read on the device):
//   sift_select_rank_keys   thread per record: its duplicate and response keys, and the path flag;
//   sift_select_rank_unique warp per kSelectRankPerWarp records: rule 1 (duplicates) over the duplicate keys;
//   sift_select_rank_keep   the same warps, only with a cap or a mask: rules 2 and 3;
//   sift_select_rank_place  the same warps: rule 4, the positions in the canonical order, and the copies.
// A warp holds the keys of its kSelectRankPerWarp records in registers and its lanes take the records j = lane,
// lane + 32, ...: one load of key j serves every comparison of the warp's records with j (the first form, one
// record a warp, spent 9-18 instructions a comparison and took 0.16 + 0.26 ms at 14,000 records, ncu). Only
// equal keys read the records. The per-lane counts meet in warp sums (integers: the same total in any order).
// The kept-ness of a record travels in its keys (SIFT_RANK_NONE), so no flag array is read in the loops.
#pragma once

#include "backend/cuda/kernels/sift_select.cuh"

namespace spectrasift::cuda::kernels {

constexpr unsigned int kSelectRankRecords = SIFT_RANK_MAX_RECORDS;  // the most records handled here (else multi-launch)
constexpr int kSelectRankWarps = 8;                                 // warps a block of the warp kernels
constexpr int kSelectRankPerWarp = 8;                               // records a warp
constexpr unsigned int kRankNone = SIFT_RANK_NONE;

// What the canonical key needs from the plan (host-computed): y_scale = 2^23 / (largest input side + 1);
// canonical_key = 0 when the layers or octaves do not fit the key's fields.
struct SiftRankKeys {
  float y_scale;
  int canonical_key;
};

// The rank path's per-record keys (capacity entries each), in global memory.
struct SiftRankArrays {
  unsigned int* dup_key;
  unsigned int* response_key;   // SIFT_RANK_NONE once the record is dropped as a duplicate
  unsigned int* canonical_key;  // SIFT_RANK_NONE for a record not kept
};

// The sum of v over the warp's lanes (every lane gets it).
__device__ inline unsigned int sift_rank_warp_sum(unsigned int v) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

__device__ inline unsigned int sift_rank_count(const unsigned int* counters, unsigned int capacity) {
  return min(counters[kCountOriented], capacity);
}

// The first record of this warp (warp kernels): blocks of kSelectRankWarps warps, kSelectRankPerWarp records each.
__device__ inline unsigned int sift_rank_first() {
  return (blockIdx.x * kSelectRankWarps + threadIdx.x / 32) * kSelectRankPerWarp;
}

// sift_select_rank_keys: grid ceil(capacity / 256), block 256; thread i: the keys of record i < n. Thread 0 sets
// counters[kCountSelectSmall] = 1 when n <= kSelectRankRecords (the multi-launch kernels queued after this path
// then return at once), else 0 (and every rank kernel returns at once).
__global__ void sift_select_rank_keys(const SiftKeypoint* kp, unsigned int* counters, unsigned int capacity,
                                      SiftRankArrays a) {
  const unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
  const unsigned int n = sift_rank_count(counters, capacity);
  if (i == 0) counters[kCountSelectSmall] = n <= kSelectRankRecords ? 1u : 0u;
  if (i >= n || n > kSelectRankRecords) return;
  a.dup_key[i] = sift_select_ordered_bits(kp[i].x);
  a.response_key[i] = ~sift_select_ordered_bits(kp[i].response);
}

// sift_select_rank_unique: grid ceil(capacity / (kSelectRankWarps kSelectRankPerWarp)), block 32 kSelectRankWarps;
// the warp's records i0 .. i0 + kSelectRankPerWarp - 1 (those below n). Record i is dropped when a record j drops
// it (sift_rank_drops; only j with i's duplicate key, that is its x, read the records): its response key becomes
// SIFT_RANK_NONE. The unique count into counters[kCountUnique]; with keep_is_unique (no cap, no mask) also the
// canonical keys (SIFT_RANK_NONE for the dropped) and counters[kCountKept].
__global__ void __launch_bounds__(32 * kSelectRankWarps)
    sift_select_rank_unique(const SiftKeypoint* kp, unsigned int* counters, unsigned int capacity, SiftRankArrays a,
                            SiftRankKeys keys, int keep_is_unique) {
  const unsigned int i0 = sift_rank_first(), lane = threadIdx.x % 32;
  const unsigned int n = sift_rank_count(counters, capacity);
  if (i0 >= n || n > kSelectRankRecords) return;  // uniform in the warp
  const unsigned int m = min(n - i0, (unsigned int)kSelectRankPerWarp);
  unsigned int key[kSelectRankPerWarp];
#pragma unroll
  for (int r = 0; r < kSelectRankPerWarp; ++r) key[r] = (unsigned int)r < m ? a.dup_key[i0 + r] : kRankNone;
  unsigned int dropped = 0;  // bit r: record i0 + r is dropped
#pragma unroll 4
  for (unsigned int j = lane; j < n; j += 32) {
    const unsigned int kj = a.dup_key[j];
    bool equal = false;
#pragma unroll
    for (int r = 0; r < kSelectRankPerWarp; ++r) equal |= kj == key[r];
    if (!equal) continue;  // most j: no record of the warp has its x
#pragma unroll
    for (int r = 0; r < kSelectRankPerWarp; ++r)  // unrolled: key[] stays in registers
      if (kj == key[r] && (unsigned int)r < m && sift_rank_drops(kp[j], int(j), kp[i0 + r], int(i0 + r)))
        dropped |= 1u << r;
  }
  for (int off = 16; off > 0; off >>= 1) dropped |= __shfl_xor_sync(0xffffffffu, dropped, off);
  const bool unique = lane < m && !((dropped >> lane) & 1u);
  if (lane < m) {
    const unsigned int i = i0 + lane;
    if (!unique) a.response_key[i] = kRankNone;
    if (keep_is_unique) a.canonical_key[i] = unique ? sift_rank_canonical_key(kp[i], keys.y_scale, keys.canonical_key) : kRankNone;
  }
  const unsigned int count = __popc(__ballot_sync(0xffffffffu, unique));
  if (lane == 0 && count) {
    atomicAdd(&counters[kCountUnique], count);
    if (keep_is_unique) atomicAdd(&counters[kCountKept], count);
  }
}

// sift_select_rank_keep: grid and block as sift_select_rank_unique; queued only with a cap (max_features > 0) or a
// mask. A unique record i is kept when, with more than max_features unique records, fewer than max_features unique
// records j have a larger response (a smaller response key: the dropped ones hold SIFT_RANK_NONE), and the mask is
// set at i. Its canonical key (SIFT_RANK_NONE when not kept) and the kept count into counters[kCountKept].
__global__ void __launch_bounds__(32 * kSelectRankWarps)
    sift_select_rank_keep(const SiftKeypoint* kp, unsigned int* counters, unsigned int capacity, SiftRankArrays a,
                          SiftRankKeys keys, int max_features, SiftMask mask) {
  const unsigned int i0 = sift_rank_first(), lane = threadIdx.x % 32;
  const unsigned int n = sift_rank_count(counters, capacity);
  if (i0 >= n || n > kSelectRankRecords) return;
  const unsigned int m = min(n - i0, (unsigned int)kSelectRankPerWarp);
  unsigned int key[kSelectRankPerWarp], larger[kSelectRankPerWarp];
#pragma unroll
  for (int r = 0; r < kSelectRankPerWarp; ++r) {
    key[r] = (unsigned int)r < m ? a.response_key[i0 + r] : kRankNone;
    larger[r] = 0;
  }
  const bool cap = max_features > 0 && counters[kCountUnique] > (unsigned int)max_features;
  if (cap) {
#pragma unroll 4
    for (unsigned int j = lane; j < n; j += 32) {
      const unsigned int kj = a.response_key[j];
#pragma unroll
      for (int r = 0; r < kSelectRankPerWarp; ++r) larger[r] += kj < key[r] ? 1u : 0u;
    }
  }
  // Lane r takes record i0 + r's verdict: its larger-count summed over the warp.
  unsigned int mine = 0;
#pragma unroll
  for (int r = 0; r < kSelectRankPerWarp; ++r) {
    const unsigned int total = sift_rank_warp_sum(larger[r]);
    if (lane == (unsigned int)r) mine = total;
  }
  bool keep = false;
  if (lane < m) {
    const unsigned int i = i0 + lane;
    keep = a.response_key[i] != kRankNone && (!cap || mine < (unsigned int)max_features) &&
           sift_select_mask_ok(kp[i], mask.data, mask.type, mask.width, mask.height);
    a.canonical_key[i] = keep ? sift_rank_canonical_key(kp[i], keys.y_scale, keys.canonical_key) : kRankNone;
  }
  const unsigned int count = __popc(__ballot_sync(0xffffffffu, keep));
  if (lane == 0 && count) atomicAdd(&counters[kCountKept], count);
}

// sift_select_rank_place: grid and block as sift_select_rank_unique. Each kept record i of the warp goes to position
// = the number of kept records j before it in the canonical order (a smaller canonical key, or an equal key and
// sift_rank_before; records not kept hold SIFT_RANK_NONE, above every kept key), and out[position] = kp[i], the
// warp's lanes copying the records' words.
__global__ void __launch_bounds__(32 * kSelectRankWarps)
    sift_select_rank_place(const SiftKeypoint* kp, const unsigned int* counters, unsigned int capacity,
                           SiftRankArrays a, SiftKeypoint* out) {
  const unsigned int i0 = sift_rank_first(), lane = threadIdx.x % 32;
  const unsigned int n = sift_rank_count(counters, capacity);
  if (i0 >= n || n > kSelectRankRecords) return;
  const unsigned int m = min(n - i0, (unsigned int)kSelectRankPerWarp);
  unsigned int key[kSelectRankPerWarp], before[kSelectRankPerWarp];
#pragma unroll
  for (int r = 0; r < kSelectRankPerWarp; ++r) {
    key[r] = (unsigned int)r < m ? a.canonical_key[i0 + r] : kRankNone;
    before[r] = 0;
  }
  unsigned int kept = 0;  // bit r: record i0 + r is kept
#pragma unroll
  for (int r = 0; r < kSelectRankPerWarp; ++r) kept |= key[r] != kRankNone ? 1u << r : 0u;
  if (!kept) return;  // uniform in the warp
#pragma unroll 4
  for (unsigned int j = lane; j < n; j += 32) {
    const unsigned int kj = a.canonical_key[j];
    bool equal = false;
#pragma unroll
    for (int r = 0; r < kSelectRankPerWarp; ++r) {
      before[r] += kj < key[r] ? 1u : 0u;
      equal |= kj == key[r];
    }
    if (!equal || kj == kRankNone) continue;
#pragma unroll
    for (int r = 0; r < kSelectRankPerWarp; ++r)
      if (kj == key[r] && sift_rank_before(kp[j], int(j), kp[i0 + r], int(i0 + r), kOrderCanonical)) ++before[r];
  }
  unsigned int position = 0;  // lane r: record i0 + r's
#pragma unroll
  for (int r = 0; r < kSelectRankPerWarp; ++r) {
    const unsigned int total = sift_rank_warp_sum(before[r]);
    if (lane == (unsigned int)r) position = total;
  }
  static_assert(sizeof(SiftKeypoint) % sizeof(unsigned int) == 0);
  constexpr unsigned int kWords = sizeof(SiftKeypoint) / sizeof(unsigned int);
  static_assert(kSelectRankPerWarp * kWords % 32 == 0, "every lane runs every step of the copy (its shuffle)");
  for (unsigned int w = lane; w < kSelectRankPerWarp * kWords; w += 32) {
    const unsigned int r = w / kWords, word = w % kWords;
    const unsigned int at = __shfl_sync(0xffffffffu, position, r);
    if ((kept >> r) & 1u)
      reinterpret_cast<unsigned int*>(out + at)[word] = reinterpret_cast<const unsigned int*>(kp + i0 + r)[word];
  }
}

}  // namespace spectrasift::cuda::kernels

// sift_select_small.cuh — the whole select stage (sift_select.cuh's rules: duplicates, the cap, the mask, the
// canonical order, the gather) in one block, for the common counts of up to kSelectSmallPositions oriented
// records.
//
// The multi-launch path (sift_select.cuh, sift_sort.cuh) costs about 20 launches at any count, and its sorts
// read two 48-byte records from global memory per comparison: 0.58 ms for 2,400 keypoints on the H200. Here
// each sort step is a barrier instead of a launch and the compactions are in place. The first form of this
// kernel staged the records in shared memory (4,096 of them: 192 KiB) and still read two records per
// comparison: 0.216 ms for 2,411 keypoints (ncu), bound by those loads and compares. Now each position of the
// order is one 32-bit word in shared memory, a key prefix (18 bits) above the record index (14 bits): the
// prefix is a monotone function of the order's leading field(s) (sift_select_small_prefix), so where two
// prefixes differ they decide the comparison, and only equal prefixes read the records (from global memory)
// and compare them with numeric/sift_select.h's functions. Every order sorted is total on the records that
// reach it (the response order is read only at its cut) and the prefix order never contradicts it, so the kept
// records and their order are the multi-launch path's, bit for bit, whatever sorting network runs.
#pragma once

#include "backend/cuda/host/bitonic_plan.hpp"
#include "backend/cuda/kernels/sift_select.cuh"

namespace spectrasift::cuda::kernels {

constexpr int kSelectSmallThreads = 1024;
constexpr int kSelectSmallIndexBits = 14;
constexpr unsigned int kSelectSmallPositions = 1u << kSelectSmallIndexBits;  // the most oriented records handled here
constexpr unsigned int kSelectSmallPer = kSelectSmallPositions / kSelectSmallThreads;  // positions per thread
constexpr unsigned int kSelectSmallIndexMask = kSelectSmallPositions - 1u;
constexpr unsigned int kSelectSmallEmpty = 0xffffffffu;  // a position without a record: sorts last
constexpr unsigned int kSelectSmallPrefixMax = (1u << (32 - kSelectSmallIndexBits)) - 2u;  // words stay below Empty
/// Dynamic shared memory of sift_select_small: the order's words, the scan.
constexpr unsigned long long kSelectSmallShared =
    kSelectSmallPositions * sizeof(unsigned int) + kSelectSmallThreads * sizeof(int);

// What the prefixes need from the plan (host-computed): coord_scale = 2^18 / (largest input side + 1), so that
// a coordinate times it lies in [0, 2^18); canonical_prefix = 0 when the canonical order takes no prefix (a
// layer above 15 would not fit its 4 bits).
struct SiftSelectKeys {
  float coord_scale;
  int canonical_prefix;
};

// min(max(v, 0), hi) truncated: monotone non-decreasing in v.
__device__ inline unsigned int sift_select_quantize(float v, float hi) { return (unsigned int)fminf(fmaxf(v, 0.0f), hi); }

// The key prefix of record k in order `mode`, in [0, kSelectSmallPrefixMax]: prefix(a) < prefix(b) only when a
// goes before b (each prefix is non-decreasing along the order's leading fields):
//   duplicates: x, quantised (x ascending leads sift_duplicate_before);
//   response:   the response's order bits, complemented (descending), top 18 bits;
//   canonical:  octave + 1 (5 bits), layer (4 bits), y quantised (9 bits) (sift_canonical_before's first three
//               fields, each field injective on its range: octaves -1 .. 30, layers 0 .. 15), or 0 for all.
__device__ inline unsigned int sift_select_small_prefix(const SiftKeypoint& k, int mode, SiftSelectKeys keys) {
  const float hi = float(kSelectSmallPrefixMax);
  if (mode == kOrderDuplicates) return sift_select_quantize(k.x * keys.coord_scale, hi);
  if (mode == kOrderResponse)
    return min(~sift_select_ordered_bits(k.response) >> kSelectSmallIndexBits, kSelectSmallPrefixMax);
  if (!keys.canonical_prefix) return 0u;
  const unsigned int o = (unsigned int)min(max(k.octave + 1, 0), 31), l = (unsigned int)min(max(k.layer, 0), 15);
  const unsigned int y = sift_select_quantize(k.y * keys.coord_scale * (1.0f / 512.0f), 511.0f);
  return min((o << 13) | (l << 9) | y, kSelectSmallPrefixMax);
}

// 1 when word a goes before word b in order `mode` (kSelectSmallEmpty after every record).
__device__ inline int sift_select_small_before(const SiftKeypoint* kp, unsigned int a, unsigned int b, int mode) {
  if (a == kSelectSmallEmpty) return 0;
  if (b == kSelectSmallEmpty) return 1;
  const unsigned int pa = a >> kSelectSmallIndexBits, pb = b >> kSelectSmallIndexBits;
  if (pa != pb) return pa < pb;
  return sift_index_before(kp, int(a & kSelectSmallIndexMask), int(b & kSelectSmallIndexMask), mode);
}

// Bitonic sort of ord[0, p) (record indices, -1 where none; p a power of two) by `mode` over the records kp:
// the indices become words (prefix, index) in place, the network runs on the words in shared memory (one
// barrier per step), and the words become indices again.
__device__ inline void sift_select_small_sort(int* ord, const SiftKeypoint* kp, unsigned int p, int mode,
                                              SiftSelectKeys keys) {
  unsigned int* word = reinterpret_cast<unsigned int*>(ord);
  for (unsigned int i = threadIdx.x; i < p; i += blockDim.x) {
    const int r = ord[i];
    word[i] = r < 0 ? kSelectSmallEmpty
                    : (sift_select_small_prefix(kp[r], mode, keys) << kSelectSmallIndexBits) | (unsigned int)r;
  }
  __syncthreads();
  for (unsigned int k = 2; k <= p; k <<= 1) {
    for (unsigned int j = k / 2; j > 0; j >>= 1) {
      for (unsigned int q = threadIdx.x; q < p / 2; q += blockDim.x) {
        const unsigned int i = bitonic_pair_lower(q, j);
        const unsigned int a = word[i], b = word[i + j];
        const int swap = (i & k) == 0 ? sift_select_small_before(kp, b, a, mode) : sift_select_small_before(kp, a, b, mode);
        if (swap) {
          word[i] = b;
          word[i + j] = a;
        }
      }
      __syncthreads();
    }
  }
  for (unsigned int i = threadIdx.x; i < p; i += blockDim.x) {
    const unsigned int w = word[i];
    ord[i] = w == kSelectSmallEmpty ? -1 : int(w & kSelectSmallIndexMask);
  }
  __syncthreads();
}

// Keeps, in place and in order, the positions i < n of ord (n <= p <= kSelectSmallPositions) whose keep flag
// (sift_select_flag, pass 0 or 1) is set; -1 after them up to the next power of two of their count. Each
// thread takes kSelectSmallPer consecutive positions; every flag (which reads ord[i - 1] or the cut position)
// is computed before the barrier after which ord is rewritten. Returns the count (in every thread).
__device__ inline unsigned int sift_select_small_compact(int* ord, const SiftKeypoint* rec, int* scan, unsigned int n,
                                                         int pass, int max_features, SiftMask mask) {
  const unsigned int t = threadIdx.x, l = blockDim.x;
  int v[kSelectSmallPer];
  int f[kSelectSmallPer];
  int count = 0;
  for (unsigned int s = 0; s < kSelectSmallPer; ++s) {
    const unsigned int i = t * kSelectSmallPer + s;
    v[s] = i < n ? ord[i] : -1;
    f[s] = i < n ? sift_select_flag(ord, rec, i, n, pass, max_features, mask.data, mask.type, mask.width, mask.height)
                 : 0;
    count += f[s];
  }
  scan[t] = count;
  __syncthreads();
  for (unsigned int d = 1; d < l; d <<= 1) {  // inclusive Hillis-Steele scan of the per-thread counts
    const int add = t >= d ? scan[t - d] : 0;
    __syncthreads();
    scan[t] += add;
    __syncthreads();
  }
  const unsigned int total = (unsigned int)scan[l - 1];
  unsigned int w = (unsigned int)(scan[t] - count);
  for (unsigned int s = 0; s < kSelectSmallPer; ++s)
    if (f[s]) ord[w++] = v[s];
  const unsigned int p = sift_pow2_at_least(total);
  for (unsigned int i = total + t; i < p; i += l) ord[i] = -1;  // positions no kept entry is written to
  __syncthreads();
  return total;
}

// sift_select_small: grid 1, block kSelectSmallThreads, dynamic shared kSelectSmallShared bytes. When the
// oriented count n = min(counters[kCountOriented], capacity) is at most kSelectSmallPositions: the select
// stage of sift_select.cuh on the n records kp, the unique and kept counts into counters, the kept records
// in canonical order into kept, and counters[kCountSelectSmall] = 1 (the multi-launch kernels queued after it
// then return at once); otherwise only counters[kCountSelectSmall] = 0.
__global__ void __launch_bounds__(kSelectSmallThreads)
    sift_select_small(const SiftKeypoint* kp, unsigned int* counters, unsigned int capacity, int max_features,
                      SiftMask mask, SiftSelectKeys keys, SiftKeypoint* kept) {
  extern __shared__ __align__(16) unsigned char sift_select_small_shared[];
  int* ord = reinterpret_cast<int*>(sift_select_small_shared);
  int* scan = ord + kSelectSmallPositions;
  const unsigned int n = min(counters[kCountOriented], capacity);
  const bool small = n <= kSelectSmallPositions;
  if (threadIdx.x == 0) counters[kCountSelectSmall] = small ? 1u : 0u;
  if (!small) return;  // uniform in the block
  const unsigned int p = sift_pow2_at_least(n);
  for (unsigned int i = threadIdx.x; i < p; i += blockDim.x) ord[i] = i < n ? (int)i : -1;
  __syncthreads();
  // 1. duplicates
  sift_select_small_sort(ord, kp, p, kOrderDuplicates, keys);
  const unsigned int unique = sift_select_small_compact(ord, kp, scan, n, 0, max_features, mask);
  // 2. the cap (the response order is read only at the cut, when there are more than max_features) and 3. the mask
  if (max_features > 0 && unique > (unsigned int)max_features)
    sift_select_small_sort(ord, kp, sift_pow2_at_least(unique), kOrderResponse, keys);
  const unsigned int n_kept = sift_select_small_compact(ord, kp, scan, unique, 1, max_features, mask);
  // 4. the canonical order, and the kept records gathered in it
  sift_select_small_sort(ord, kp, sift_pow2_at_least(n_kept), kOrderCanonical, keys);
  for (unsigned int i = threadIdx.x; i < n_kept; i += blockDim.x) kept[i] = kp[ord[i]];
  if (threadIdx.x == 0) {
    counters[kCountUnique] = unique;
    counters[kCountKept] = n_kept;
  }
}

}  // namespace spectrasift::cuda::kernels

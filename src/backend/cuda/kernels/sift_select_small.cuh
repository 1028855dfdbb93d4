// sift_select_small.cuh — the whole select stage (sift_select.cuh's rules: duplicates, the cap, the mask, the
// canonical order, the gather) in one block, for the common counts of a few thousand oriented records.
//
// The multi-launch path (sift_select.cuh, sift_sort.cuh) costs about 20 launches at any count, and its sorts
// read two 48-byte records from global memory per comparison: 0.58 ms for 2,400 keypoints on the H200. Here
// the records are staged once in shared memory (kSelectSmallPositions of them: 192 KiB), each sort step is a
// barrier instead of a launch, and the compactions are in place. The comparisons and the keep flags are the
// same functions (numeric/sift_select.h) and every order they sort by is total on the records that reach it
// (the response order is read only at its cut), so the kept records and their order are the multi-launch
// path's, bit for bit, whatever sorting network runs.
#pragma once

#include "backend/cuda/host/bitonic_plan.hpp"
#include "backend/cuda/kernels/sift_select.cuh"

namespace spectrasift::cuda::kernels {

constexpr int kSelectSmallThreads = 1024;
constexpr unsigned int kSelectSmallPositions = 4096;  // a power of two; the most oriented records handled here
constexpr unsigned int kSelectSmallPer = kSelectSmallPositions / kSelectSmallThreads;  // positions per thread
/// Dynamic shared memory of sift_select_small: the records, the order, the scan.
constexpr unsigned long long kSelectSmallShared =
    kSelectSmallPositions * (sizeof(SiftKeypoint) + sizeof(int)) + kSelectSmallThreads * sizeof(int);

// Bitonic sort of ord[0, p) (p a power of two; -1 entries sort last) by `mode` over the records rec, in the
// block's shared memory: one barrier per step.
__device__ inline void sift_select_small_sort(int* ord, const SiftKeypoint* rec, unsigned int p, int mode) {
  for (unsigned int k = 2; k <= p; k <<= 1) {
    for (unsigned int j = k / 2; j > 0; j >>= 1) {
      for (unsigned int q = threadIdx.x; q < p / 2; q += blockDim.x) {
        const unsigned int i = bitonic_pair_lower(q, j);
        int a = ord[i], b = ord[i + j];
        sift_compare_exchange(rec, &a, &b, i, k, mode);
        ord[i] = a;
        ord[i + j] = b;
      }
      __syncthreads();
    }
  }
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
                      SiftMask mask, SiftKeypoint* kept) {
  extern __shared__ __align__(16) unsigned char sift_select_small_shared[];
  SiftKeypoint* rec = reinterpret_cast<SiftKeypoint*>(sift_select_small_shared);
  int* ord = reinterpret_cast<int*>(rec + kSelectSmallPositions);
  int* scan = ord + kSelectSmallPositions;
  const unsigned int n = min(counters[kCountOriented], capacity);
  const bool small = n <= kSelectSmallPositions;
  if (threadIdx.x == 0) counters[kCountSelectSmall] = small ? 1u : 0u;
  if (!small) return;  // uniform in the block
  const unsigned int p = sift_pow2_at_least(n);
  for (unsigned int i = threadIdx.x; i < p; i += blockDim.x) {
    if (i < n) rec[i] = kp[i];
    ord[i] = i < n ? (int)i : -1;
  }
  __syncthreads();
  // 1. duplicates
  sift_select_small_sort(ord, rec, p, kOrderDuplicates);
  const unsigned int unique = sift_select_small_compact(ord, rec, scan, n, 0, max_features, mask);
  // 2. the cap (the response order is read only at the cut, when there are more than max_features) and 3. the mask
  if (max_features > 0 && unique > (unsigned int)max_features)
    sift_select_small_sort(ord, rec, sift_pow2_at_least(unique), kOrderResponse);
  const unsigned int n_kept = sift_select_small_compact(ord, rec, scan, unique, 1, max_features, mask);
  // 4. the canonical order, and the kept records gathered in it
  sift_select_small_sort(ord, rec, sift_pow2_at_least(n_kept), kOrderCanonical);
  for (unsigned int i = threadIdx.x; i < n_kept; i += blockDim.x) kept[i] = rec[ord[i]];
  if (threadIdx.x == 0) {
    counters[kCountUnique] = unique;
    counters[kCountKept] = n_kept;
  }
}

}  // namespace spectrasift::cuda::kernels

// sift_select.cuh — the select stage on the device (numeric/sift_select.h): duplicates, the cap by response
// (ties at the cut kept), the mask, the canonical order; then the kept records gathered in that order (the
// CUDA form of backend/opencl/kernels/sift_select.cl).
//
// Records stay where the orientation stage wrote them (in arrival order); the stage sorts and compacts an
// index array. Sorting is a bitonic network (its kernels in sift_sort.cuh) over the first P = next power of
// two >= n positions (n, the live count, is read on the device; positions n .. P - 1 hold -1, which sorts
// last). Each comparison is a total order on the records, so the result never depends on the arrival order.
#pragma once

#include "backend/cuda/kernels/sift_common.cuh"

namespace spectrasift::cuda::kernels {

constexpr int kOrderDuplicates = 0;  // sift_duplicate_before
constexpr int kOrderResponse = 1;    // response descending (only the cut value is read from this order)
constexpr int kOrderCanonical = 2;   // sift_canonical_before

__device__ inline unsigned int sift_pow2_at_least(unsigned int n) {
  unsigned int p = 1;
  while (p < n) p <<= 1;
  return p;
}

// 1 when record index a goes before b in the order `mode`; -1 (no record) goes after every record.
__device__ inline int sift_index_before(const SiftKeypoint* kp, int a, int b, int mode) {
  if (a < 0) return 0;
  if (b < 0) return 1;
  const SiftKeypoint ka = kp[a], kb = kp[b];
  if (mode == kOrderDuplicates) return sift_duplicate_before(ka, kb);
  if (mode == kOrderResponse) return ka.response > kb.response;
  return sift_canonical_before(ka, kb);
}

// The compare-exchange of positions i < l = i + j of bitonic step (k, j) (ascending where i & k is 0).
__device__ inline void sift_compare_exchange(const SiftKeypoint* kp, int* a, int* b, unsigned int i, unsigned int k,
                                             int mode) {
  const bool ascending = (i & k) == 0;
  const int swap = ascending ? sift_index_before(kp, *b, *a, mode) : sift_index_before(kp, *a, *b, mode);
  if (swap) {
    const int t = *a;
    *a = *b;
    *b = t;
  }
}

// sift_select_init: grid ceil(P_max / 256), block 256; one thread per position: the identity order over the
// oriented records, -1 past their count.
__global__ void sift_select_init(int* order, const unsigned int* counters, unsigned int capacity,
                                 unsigned int positions) {
  const unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= positions) return;
  const unsigned int n = min(counters[kCountOriented], capacity);
  order[i] = i < n ? (int)i : -1;
}

// Mask of the select stage (type: -1 none, 0 u8, 1 u16, 2 f32).
struct SiftMask {
  const unsigned char* data;
  int type, width, height;
};

// sift_select_flags: grid ceil(P_max / 256), block 256; one thread per position of the sorted order.
// pass 0 (order sorted by kOrderDuplicates over the oriented count): keep = not a duplicate of the record
// before it. pass 1 (order: the unique records, sorted by response when max_features > 0): keep = response
// >= the max_features-th largest response (when there are more) and the mask set at the record's rounded
// position.
__global__ void sift_select_flags(const int* order, const SiftKeypoint* kp, const unsigned int* counters,
                                  int count_slot, unsigned int capacity, int pass, int max_features, SiftMask mask,
                                  int* keep) {
  const unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
  const unsigned int n = min(counters[count_slot], capacity);
  if (i >= n) return;
  const SiftKeypoint k = kp[order[i]];
  int flag = 1;
  if (pass == 0) {
    flag = i == 0 || !sift_is_duplicate(kp[order[i - 1]], k);
  } else {
    if (max_features > 0 && n > (unsigned int)max_features)
      flag = sift_response_kept(k.response, kp[order[max_features - 1]].response);
    if (flag && mask.type >= 0) {
      const size_t m = (size_t)sift_mask_coord(k.y, mask.height) * (size_t)mask.width +
                       (size_t)sift_mask_coord(k.x, mask.width);
      if (mask.type == 0) flag = mask.data[m] != 0;
      else if (mask.type == 1) flag = reinterpret_cast<const unsigned short*>(mask.data)[m] != 0;
      else flag = reinterpret_cast<const float*>(mask.data)[m] != 0.0f;
    }
  }
  keep[i] = flag;
}

// sift_select_compact: grid 1, block L = kSelectCompactThreads (a power of two; one block: the scan runs
// over chunks of L positions in order). Writes the kept entries of order_in, in their order, to order_out,
// -1 after them up to the next power of two, and their count to counters[out_slot].
constexpr int kSelectCompactThreads = 1024;
__global__ void sift_select_compact(const int* order_in, const int* keep, unsigned int* counters, int in_slot,
                                    unsigned int capacity, int out_slot, int* order_out) {
  __shared__ int scan[kSelectCompactThreads];
  const int lid = threadIdx.x, l = blockDim.x;
  const unsigned int n = min(counters[in_slot], capacity);
  unsigned int base = 0;
  for (unsigned int c0 = 0; c0 < n; c0 += (unsigned int)l) {
    const unsigned int i = c0 + (unsigned int)lid;
    const int f = i < n ? keep[i] : 0;
    scan[lid] = f;
    __syncthreads();
    for (int d = 1; d < l; d <<= 1) {  // inclusive Hillis-Steele scan
      const int v = lid >= d ? scan[lid - d] : 0;
      __syncthreads();
      scan[lid] += v;
      __syncthreads();
    }
    if (f) order_out[base + (unsigned int)scan[lid] - 1] = order_in[i];
    base += (unsigned int)scan[l - 1];
    __syncthreads();
  }
  const unsigned int p = sift_pow2_at_least(base);
  for (unsigned int i = base + (unsigned int)lid; i < p; i += (unsigned int)l) order_out[i] = -1;
  if (lid == 0) counters[out_slot] = base;
}

// sift_select_gather: grid ceil(capacity / 256), block 256; one thread per kept record: out[i] = kp[order[i]].
__global__ void sift_select_gather(const int* order, const SiftKeypoint* kp, const unsigned int* counters,
                                   unsigned int capacity, SiftKeypoint* out) {
  const unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= min(counters[kCountKept], capacity)) return;
  out[i] = kp[order[i]];
}

}  // namespace spectrasift::cuda::kernels

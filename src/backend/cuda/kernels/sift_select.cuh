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

constexpr int kOrderDuplicates = SIFT_ORDER_DUPLICATES;  // sift_duplicate_before
constexpr int kOrderResponse = SIFT_ORDER_RESPONSE;      // response descending (only the cut value is read)
constexpr int kOrderCanonical = SIFT_ORDER_CANONICAL;    // sift_canonical_before

// Set to 1 by sift_select_small (sift_select_small.cuh) when it ran the whole stage: every kernel below and in
// sift_sort.cuh then returns at once. numeric/sift_device.h's slot, which OpenCL's one-work-group select sets the
// same way (the upload zeroes every slot).
constexpr int kCountSelectSmall = SIFT_COUNT_SELECT_SMALL;
static_assert(kCountSelectSmall > kCountKept && kCountSelectSmall < kCounters, "a free counter slot");

// The comparisons (sift_pow2_at_least, sift_index_before, sift_compare_exchange) and the keep flag of a
// position (sift_select_flag) are numeric/sift_select.h's, shared with OpenCL.

// sift_select_init: grid ceil(P_max / 256), block 256; one thread per position: the identity order over the
// oriented records, -1 past their count.
__global__ void sift_select_init(int* order, const unsigned int* counters, unsigned int capacity,
                                 unsigned int positions) {
  const unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= positions || counters[kCountSelectSmall]) return;
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
  if (i >= n || counters[kCountSelectSmall]) return;
  keep[i] = sift_select_flag(order, kp, i, n, pass, max_features, mask.data, mask.type, mask.width, mask.height);
}

// sift_select_compact: grid 1, block L = kSelectCompactThreads (a power of two; one block: the scan runs
// over chunks of L positions in order). Writes the kept entries of order_in, in their order, to order_out,
// -1 after them up to the next power of two, and their count to counters[out_slot].
constexpr int kSelectCompactThreads = 1024;
__global__ void sift_select_compact(const int* order_in, const int* keep, unsigned int* counters, int in_slot,
                                    unsigned int capacity, int out_slot, int* order_out) {
  __shared__ int scan[kSelectCompactThreads];
  if (counters[kCountSelectSmall]) return;  // uniform in the block
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
  if (i >= min(counters[kCountKept], capacity) || counters[kCountSelectSmall]) return;
  out[i] = kp[order[i]];
}

}  // namespace spectrasift::cuda::kernels

// sift_orientation.cuh — the 36-bin orientation histogram of every refined point and one keypoint record
// per peak (numeric/sift_orientation.h; the CUDA form of the GPU kernel of
// backend/opencl/kernels/sift_orientation.cl, same bits).
//
// The fixed reduction order of DESIGN.md: the samples of the window (rows ascending, then columns) are
// taken in chunks; all threads compute their samples' (bin, contribution) into shared memory, then thread
// b (b < 36) adds the contributions of bin b of the chunk in sample order. Every raw bin is thus the CPU's
// float sum, and no float atomic is used.
#pragma once

#include "backend/cuda/kernels/sift_common.cuh"

namespace spectrasift::cuda::kernels {

// sift_orientation: grid G (the host's cap on blocks, at most the candidate count), block L >= 36 threads;
// block g takes refined points g, g + G, ... (the live count is read on the device). Dynamic shared memory
// (host-sized): chunk_bin[chunk] ints, chunk_val[chunk] floats, ex[ex_cap] floats with ex_cap >= 2R + 1 for
// the largest window radius R of the plan.
__global__ void sift_orientation(const float* gauss, const long long* info, const SiftKeypoint* refined,
                                 unsigned int* counters, unsigned int refined_capacity, unsigned int capacity,
                                 SiftKeypoint* keypoints, int chunk, int ex_cap) {
  extern __shared__ float sift_orientation_shared[];
  int* chunk_bin = reinterpret_cast<int*>(sift_orientation_shared);
  float* chunk_val = sift_orientation_shared + chunk;
  float* ex = sift_orientation_shared + 2 * chunk;
  __shared__ float raw[SIFT_ORI_HIST_BINS];
  __shared__ float hist[SIFT_ORI_HIST_BINS];
  const int lid = threadIdx.x, lsize = blockDim.x;
  const unsigned int count = min(counters[kCountRefined], refined_capacity);
  for (unsigned int p = blockIdx.x; p < count; p += gridDim.x) {
    const SiftKeypoint kp = refined[p];
    const int w = sift_oct_w(info, kp.octave_index), h = sift_oct_h(info, kp.octave_index);
    const float* img = sift_level_of(gauss, info, kp);
    const int radius = sift_orientation_radius(kp, ex_cap);
    for (int k = lid; k <= 2 * radius; k += lsize) ex[k] = sift_orientation_weight(kp, k - radius);
    const int x_lo = max(kp.c - radius, 1), x_hi = min(kp.c + radius, w - 2);
    const int n = x_hi - x_lo + 1;
    const int total = n > 0 ? (2 * radius + 1) * n : 0;
    float acc = 0.0f;
    __syncthreads();
    for (int s0 = 0; s0 < total; s0 += chunk) {
      for (int t = lid; t < chunk; t += lsize) {
        const int s = s0 + t;
        int bin = -1;
        float val = 0.0f;
        if (s < total)
          bin = sift_orientation_sample_local(img, w, h, kp.r, kp.c, ex, radius, s / n - radius, x_lo + s % n, &val);
        chunk_bin[t] = bin;
        chunk_val[t] = val;
      }
      __syncthreads();
      if (lid < SIFT_ORI_HIST_BINS) {
        const int m = min(chunk, total - s0);
        for (int t = 0; t < m; ++t)
          if (chunk_bin[t] == lid) acc += chunk_val[t];
      }
      __syncthreads();
    }
    if (lid < SIFT_ORI_HIST_BINS) raw[lid] = acc;
    __syncthreads();
    if (lid == 0) {
      const float omax = sift_orientation_smooth_local(raw, hist);
      const float mag_thr = omax * SIFT_ORI_PEAK_RATIO;
      for (int j = 0; j < SIFT_ORI_HIST_BINS; ++j) {
        if (!sift_orientation_is_peak_local(hist, j, mag_thr)) continue;
        SiftKeypoint out = kp;
        out.angle = sift_orientation_peak_angle_local(hist, j);
        const unsigned int slot = atomicAdd(&counters[kCountOriented], 1u);
        if (slot < capacity) keypoints[slot] = out;
      }
    }
    __syncthreads();
  }
}

}  // namespace spectrasift::cuda::kernels

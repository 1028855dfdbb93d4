// sift_descriptor.cuh — the 4 x 4 x 8 descriptor of every kept keypoint (numeric/sift_descriptor.h), then
// RootSIFT when asked (the CUDA form of the GPU kernel of backend/opencl/kernels/sift_descriptor.cl, same
// bits).
//
// The fixed reduction order of DESIGN.md: every accumulator entry is the float sum of its shares in sample
// order (rows ascending, then columns), as the CPU backend adds them, without float atomics: thread q
// (q < 36) owns the 10 entries of spatial cell q of the (d + 2) x (d + 2) grid, in registers, and walks the
// window in sample order, adding the shares each sample gives to its cell. A walker visits only a box
// around its cells; the cheap part of a sample (its rotated bins) is computed by the walkers whose box holds
// it, the gradient, atan2, weight and shares only by the at most 4 cells it feeds.
#pragma once

#include "backend/cuda/kernels/sift_common.cuh"

namespace spectrasift::cuda::kernels {

constexpr int kDescrCells = SIFT_DESCR_CELLS;
constexpr int kDescrLen = SIFT_DESCR_LEN;

// The frame of a keypoint, its window weights and the per-sample maths of a walker are
// numeric/sift_descriptor.h's (sift_descriptor_frame, _weight, _cell_box, _cell_sample), shared with OpenCL.

// sift_descriptor: grid G (the host's cap on blocks), block L >= 36 threads (the host uses 64); block g
// takes kept keypoints g, g + G, ... (the live count is read on the device); threads 0..35 walk the window,
// all compute the weights. Dynamic shared memory (host-sized): ex[ex_cap] floats, ex_cap >= 2R + 1 for the
// plan's largest window radius R. deg2rad = float(pi / 180) from the host.
__global__ void sift_descriptor(const float* gauss, const long long* info, const SiftKeypoint* kps,
                                const unsigned int* counters, unsigned int capacity, float deg2rad, int root_sift,
                                float* descriptors, int ex_cap) {
  extern __shared__ float sift_descriptor_ex[];
  float* ex = sift_descriptor_ex;
  __shared__ float hist[SIFT_DESCR_HIST_LEN];
  __shared__ float out[kDescrLen];
  const int lid = threadIdx.x, lsize = blockDim.x;
  const int d = SIFT_DESCR_WIDTH;
  const unsigned int count = min(counters[kCountKept], capacity);
  for (unsigned int p = blockIdx.x; p < count; p += gridDim.x) {
    const SiftKeypoint kp = kps[p];
    const SiftDescriptorFrame f = sift_descriptor_frame(kp, info, deg2rad, ex_cap);
    const float* img = sift_level_of(gauss, info, kp);
    for (int k = lid; k <= 2 * f.radius; k += lsize) ex[k] = sift_descriptor_weight(f, k - f.radius);
    __syncthreads();
    if (lid < kDescrCells) {
      float acc[SIFT_DESCR_HIST_BINS + 2];  // the entries of cell lid, o = 0 .. n + 1
      for (int k = 0; k < SIFT_DESCR_HIST_BINS + 2; ++k) acc[k] = 0.0f;
      const int qr = lid / (d + 2), qc = lid % (d + 2);
      int i_lo, i_hi, jb_lo, jb_hi;
      sift_descriptor_cell_box(f, qr, qc, &i_lo, &i_hi, &jb_lo, &jb_hi);
      for (int i = i_lo; i <= i_hi; ++i) {
        for (int j = jb_lo; j <= jb_hi; ++j) {
          int o0;
          float s0, s1;
          if (!sift_descriptor_cell_sample_local(f, img, ex, qr, qc, i, j, &o0, &s0, &s1)) continue;
          // acc[o0] and acc[o0 + 1] with constant indices (a dynamic index would put acc in local memory).
#pragma unroll
          for (int o = 0; o < SIFT_DESCR_HIST_BINS; ++o) {
            if (o == o0) {
              acc[o] += s0;
              acc[o + 1] += s1;
            }
          }
        }
      }
      for (int k = 0; k < SIFT_DESCR_HIST_BINS + 2; ++k) hist[lid * (SIFT_DESCR_HIST_BINS + 2) + k] = acc[k];
    }
    __syncthreads();
    if (lid == 0) {
      sift_descriptor_finalize_local(hist, out);
      if (root_sift) sift_descriptor_root(out);
      float* row = descriptors + (size_t)p * kDescrLen;
      for (int k = 0; k < kDescrLen; ++k) row[k] = out[k];
    }
    __syncthreads();
  }
}

}  // namespace spectrasift::cuda::kernels

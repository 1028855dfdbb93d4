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

constexpr int kDescrCells = (SIFT_DESCR_WIDTH + 2) * (SIFT_DESCR_WIDTH + 2);
constexpr int kDescrLen = SIFT_DESCR_WIDTH * SIFT_DESCR_WIDTH * SIFT_DESCR_HIST_BINS;

// The sample grid of one keypoint, with the CPU backend's float operations in their order (notes §8).
struct SiftDescriptorFrame {
  int w, h;            // the octave's plane
  int cx, cy;          // the rounded centre, octave pixels
  int radius;          // the window is (2 radius + 1)^2 samples
  float ori;           // 360 - angle (0 for 360)
  float cos_t, sin_t;  // divided by the cell width
  float weight_scale;  // 1 / hw^2: the window weight of offset k is exp(k^2 * weight_scale * -1/8)
};

__device__ inline SiftDescriptorFrame sift_descriptor_frame(const SiftKeypoint& kp, const long long* info,
                                                            float deg2rad, int ex_cap) {
  SiftDescriptorFrame f;
  const int d = SIFT_DESCR_WIDTH;
  f.w = sift_oct_w(info, kp.octave_index);
  f.h = sift_oct_h(info, kp.octave_index);
  const int oct = kp.octave;
  const float scale = oct >= 0 ? 1.0f / (float)(1 << oct) : (float)(1 << -oct);
  const float size = kp.size * scale;
  f.cx = sift_round(kp.x * scale);
  f.cy = sift_round(kp.y * scale);
  f.ori = 360.0f - kp.angle;
  if (fabsf(f.ori - 360.0f) < SIFT_FLT_EPSILON) f.ori = 0.0f;
  const float scl = size * 0.5f;
  const float hist_width = SIFT_DESCR_SCL_FCTR * scl;
  int radius = sift_round(hist_width * 1.4142135623730951f * (float)(d + 1) * 0.5f);
  radius = min(radius, (int)sqrt((double)f.w * f.w + (double)f.h * f.h));
  f.radius = min(radius, (ex_cap - 1) / 2);  // the host sizes ex_cap for the plan's largest radius
  f.cos_t = sift_dev_cos(f.ori * deg2rad) / hist_width;
  f.sin_t = sift_dev_sin(f.ori * deg2rad) / hist_width;
  f.weight_scale = 1.0f / (hist_width * hist_width);  // times -1/8 in sift_descriptor_weight
  return f;
}

// The window weight of offset k (exp(k^2 / hw^2 * -1/8), the CPU's operation order).
__device__ inline float sift_descriptor_weight(const SiftDescriptorFrame& f, int k) {
  const float exp_scale = -1.0f / ((float)(SIFT_DESCR_WIDTH * SIFT_DESCR_WIDTH) * 0.5f);
  return sift_dev_exp((float)(k * k) * f.weight_scale * exp_scale);
}

// The spatial bins of sample (i, j); true when it lies inside the grid and not on the plane's outer ring.
__device__ inline bool sift_descriptor_bins(const SiftDescriptorFrame& f, int i, int j, float* rbin, float* cbin) {
  const int d = SIFT_DESCR_WIDTH;
  const float fi = (float)i, fj = (float)j;
  const float c_rot = fj * f.cos_t - fi * f.sin_t;
  const float r_rot = fj * f.sin_t + fi * f.cos_t;
  *rbin = r_rot + 2.0f - 0.5f;
  *cbin = c_rot + 2.0f - 0.5f;
  const int x = f.cx + j, y = f.cy + i;
  return y > 0 && y < f.h - 1 && x > 0 && x < f.w - 1 && *rbin > -1 && *rbin < d && *cbin > -1 && *cbin < d;
}

// The orientation bin o0 (0..n-1), its fraction and the weighted magnitude of sample (i, j).
__device__ inline int sift_descriptor_gradient(const SiftDescriptorFrame& f, const float* img, float wi, float wj,
                                               int i, int j, float* of, float* mag) {
  const int nb = SIFT_DESCR_HIST_BINS;
  const float* mid = img + (size_t)(f.cy + i) * (size_t)f.w;
  const int x = f.cx + j;
  const float dx = mid[x + 1] - mid[x - 1];
  const float dy = mid[x - f.w] - mid[x + f.w];
  int o0 = sift_descriptor_split((sift_atan2_deg(dy, dx) - f.ori) * ((float)nb / 360.0f), of);
  o0 = o0 < 0 ? o0 + nb : o0;
  o0 = o0 >= nb ? o0 - nb : o0;
  *mag = sqrtf(dx * dx + dy * dy) * (wi * wj);
  return o0;
}

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
      // Only samples whose bins fall in cells qr - 1 .. qr, qc - 1 .. qc give this cell shares: a box around
      // that 2 x 2-cell square rotated back to pixels (with a 2-pixel margin; the exact test below decides).
      const float cs = f.cos_t, sn = f.sin_t, dd = cs * cs + sn * sn;
      const float ru = (float)qr - 2.5f, cu = (float)qc - 2.5f;
      const float ic = (cs * ru - sn * cu) / dd, jc = (sn * ru + cs * cu) / dd;
      const float ext = (fabsf(cs) + fabsf(sn)) / dd + 2.0f;
      const int i_lo = max(-f.radius, (int)floorf(ic - ext)), i_hi = min(f.radius, (int)ceilf(ic + ext));
      const int jb_lo = max(-f.radius, (int)floorf(jc - ext)), jb_hi = min(f.radius, (int)ceilf(jc + ext));
      for (int i = i_lo; i <= i_hi; ++i) {
        for (int j = jb_lo; j <= jb_hi; ++j) {
          float rbin, cbin, rf, cf, of, mag;
          if (!sift_descriptor_bins(f, i, j, &rbin, &cbin)) continue;
          const int r0 = sift_descriptor_split(rbin, &rf);
          const int c0 = sift_descriptor_split(cbin, &cf);
          const int dr = qr - (r0 + 1), dc = qc - (c0 + 1);  // this cell takes shares (dr, dc)
          if (dr < 0 || dr > 1 || dc < 0 || dc > 1) continue;
          const int o0 = sift_descriptor_gradient(f, img, ex[i + f.radius], ex[j + f.radius], i, j, &of, &mag);
          const SiftDescriptorShares sh = sift_descriptor_shares(mag, rf, cf, of);
          const int k = 4 * dr + 2 * dc;  // shares k and k + 1, read with constant indices
          const float s0 = k == 0 ? sh.v[0] : k == 2 ? sh.v[2] : k == 4 ? sh.v[4] : sh.v[6];
          const float s1 = k == 0 ? sh.v[1] : k == 2 ? sh.v[3] : k == 4 ? sh.v[5] : sh.v[7];
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

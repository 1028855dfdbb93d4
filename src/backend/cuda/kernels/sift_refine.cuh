// sift_refine.cuh — sub-pixel refinement, contrast and edge tests of the candidates (numeric/sift_refine.h;
// the CUDA form of backend/opencl/kernels/sift_refine.cl).
#pragma once

#include <climits>

#include "backend/cuda/kernels/sift_common.cuh"

namespace spectrasift::cuda::kernels {

// The DoG neighbourhood n[27] of (r, c) in layer l of octave o (the layout of sift_refine.h).
__device__ inline void sift_gather27(const float* dog, const long long* info, int o, int l, int r, int c, float* n) {
  const int w = sift_oct_w(info, o), h = sift_oct_h(info, o);
  const size_t plane = (size_t)w * (size_t)h;
  const float* base = dog + sift_oct_dog(info, o);
  for (int k = 0; k < 3; ++k) {
    const float* p = base + (size_t)(l - 1 + k) * plane;
    for (int dy = 0; dy < 3; ++dy) {
      const float* row = p + (size_t)(r - 1 + dy) * (size_t)w;
      for (int dx = 0; dx < 3; ++dx) n[k * 9 + dy * 3 + dx] = row[c - 1 + dx];
    }
  }
}

// Plan values of the refinement (one argument).
struct SiftRefineParams {
  int layers, border, first_octave;
  float contrast_threshold, edge_threshold, sigma, output_scale;
};

// sift_refine: grid ceil(candidates / 64), block 64 (candidates: the count read back by the host); one
// thread per candidate (the live count is read on the device). Newton steps as the CPU backend's (at most
// SIFT_MAX_INTERP_STEPS, the point moves to the rounded offset), then the contrast and edge tests; an
// accepted point takes a slot of the refined counter and writes its record (angle 0; fields in output
// units, the octave -1 rescale applied as the plan says). octave_scale holds 2^index per pyramid index.
__global__ void sift_refine(const float* dog, const long long* info, const float* octave_scale, const int4* candidates,
                            unsigned int* counters, unsigned int capacity, SiftRefineParams p, SiftKeypoint* refined) {
  const unsigned int id = blockIdx.x * blockDim.x + threadIdx.x;
  const unsigned int count = min(counters[kCountCandidates], capacity);
  if (id >= count) return;
  const int4 cand = candidates[id];
  const int o = cand.x;
  const int w = sift_oct_w(info, o), h = sift_oct_h(info, o);
  int layer = cand.y, r = cand.z, c = cand.w;
  float n[27];
  float off[3] = {0.0f, 0.0f, 0.0f}, g[3];
  int step = 0;
  for (; step < SIFT_MAX_INTERP_STEPS; ++step) {
    sift_gather27(dog, info, o, layer, r, c, n);
    sift_refine_step(n, off, g);
    if (fabsf(off[2]) < 0.5f && fabsf(off[1]) < 0.5f && fabsf(off[0]) < 0.5f) break;
    const float big = (float)(INT_MAX / 3);
    if (fabsf(off[2]) > big || fabsf(off[1]) > big || fabsf(off[0]) > big) return;
    c += sift_round(off[0]);
    r += sift_round(off[1]);
    layer += sift_round(off[2]);
    if (layer < 1 || layer > p.layers || c < p.border || c >= w - p.border || r < p.border || r >= h - p.border) return;
  }
  if (step >= SIFT_MAX_INTERP_STEPS) return;
  sift_gather27(dog, info, o, layer, r, c, n);
  const float contr = sift_refine_contrast(n, off);
  if (fabsf(contr) * (float)p.layers < p.contrast_threshold) return;
  if (!sift_refine_edge_ok(n, p.edge_threshold)) return;
  const float oscale = octave_scale[o];
  const float xi = off[2];
  SiftKeypoint kp;
  kp.x = ((float)c + off[0]) * oscale;
  kp.y = ((float)r + off[1]) * oscale;
  kp.size = p.sigma * sift_dev_exp2(((float)layer + xi) / (float)p.layers) * oscale * 2.0f;
  kp.angle = 0.0f;
  kp.response = fabsf(contr);
  kp.layer_offset = xi;
  kp.sigma_octave = kp.size * 0.5f / oscale;
  kp.octave = o + p.first_octave;
  kp.layer = layer;
  kp.r = r;
  kp.c = c;
  kp.octave_index = o;
  kp.x *= p.output_scale;
  kp.y *= p.output_scale;
  kp.size *= p.output_scale;
  const unsigned int slot = atomicAdd(&counters[kCountRefined], 1u);
  if (slot < capacity) refined[slot] = kp;
}

}  // namespace spectrasift::cuda::kernels

/* sift_refine.cl — sub-pixel refinement, contrast and edge tests of the candidates (numeric/sift_refine.h).
 * (Part of the sift.cl program.) */

/* The DoG neighbourhood n[27] of (r, c) in layer l of octave o (the layout of sift_refine.h). */
inline void sift_gather27(__global const float* dog, __global const long* info, int o, int l, int r, int c,
                          float* n) {
  const int w = SIFT_OCT_W(info, o), h = SIFT_OCT_H(info, o);
  const size_t plane = (size_t)w * (size_t)h;
  __global const float* base = dog + SIFT_OCT_DOG(info, o);
  for (int k = 0; k < 3; ++k) {
    __global const float* p = base + (size_t)(l - 1 + k) * plane;
    for (int dy = 0; dy < 3; ++dy) {
      __global const float* row = p + (size_t)(r - 1 + dy) * (size_t)w;
      for (int dx = 0; dx < 3; ++dx) n[k * 9 + dy * 3 + dx] = row[c - 1 + dx];
    }
  }
}

/* sift_refine: global >= the candidate count, any work-group size; one work-item per candidate. Newton steps
 * as the CPU backend's (at most SIFT_MAX_INTERP_STEPS, the point moves to the rounded offset), then the
 * contrast and edge tests; an accepted point takes a slot of the refined counter and writes its record
 * (angle 0; fields in output units, the octave -1 rescale applied as the plan says). octave_scale holds
 * 2^index per pyramid index. */
__kernel void sift_refine(__global const float* dog, __global const long* info, __global const float* octave_scale,
                          __global const int4* candidates, __global volatile uint* counters, uint capacity,
                          int layers, int border, int first_octave, float contrast_threshold, float edge_threshold,
                          float sigma, float output_scale, __global SiftKeypoint* refined) {
  const uint id = get_global_id(0);
  const uint count = min(counters[SIFT_COUNT_CANDIDATES], capacity);
  if (id >= count) return;
  const int4 cand = candidates[id];
  const int o = cand.x;
  const int w = SIFT_OCT_W(info, o), h = SIFT_OCT_H(info, o);
  int layer = cand.y, r = cand.z, c = cand.w;
  float n[27];
  float off[3] = {0.0f, 0.0f, 0.0f}, g[3];
  int step = 0;
  for (; step < SIFT_MAX_INTERP_STEPS; ++step) {
    sift_gather27(dog, info, o, layer, r, c, n);
    sift_refine_step(n, off, g);
    if (fabs(off[2]) < 0.5f && fabs(off[1]) < 0.5f && fabs(off[0]) < 0.5f) break;
    const float big = (float)(INT_MAX / 3);
    if (fabs(off[2]) > big || fabs(off[1]) > big || fabs(off[0]) > big) return;
    c += sift_round(off[0]);
    r += sift_round(off[1]);
    layer += sift_round(off[2]);
    if (layer < 1 || layer > layers || c < border || c >= w - border || r < border || r >= h - border) return;
  }
  if (step >= SIFT_MAX_INTERP_STEPS) return;
  sift_gather27(dog, info, o, layer, r, c, n);
  const float contr = sift_refine_contrast(n, off);
  if (fabs(contr) * (float)layers < contrast_threshold) return;
  if (!sift_refine_edge_ok(n, edge_threshold)) return;
  const float oscale = octave_scale[o];
  const float xi = off[2];
  SiftKeypoint kp;
  kp.x = ((float)c + off[0]) * oscale;
  kp.y = ((float)r + off[1]) * oscale;
  kp.size = sigma * sift_dev_exp2(((float)layer + xi) / (float)layers) * oscale * 2.0f;
  kp.angle = 0.0f;
  kp.response = fabs(contr);
  kp.layer_offset = xi;
  kp.sigma_octave = kp.size * 0.5f / oscale;
  kp.octave = o + first_octave;
  kp.layer = layer;
  kp.r = r;
  kp.c = c;
  kp.octave_index = o;
  kp.x *= output_scale;
  kp.y *= output_scale;
  kp.size *= output_scale;
  const uint slot = atomic_inc(&counters[SIFT_COUNT_REFINED]);
  if (slot < capacity) refined[slot] = kp;
}

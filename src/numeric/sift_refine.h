/* sift_refine.h — sub-pixel refinement of a DoG extremum (notes §5), per candidate.
 *
 * The DoG values around the integer position (r, c) of layer l are passed as n[27], in grey levels:
 * n[k*9 + (dy+1)*3 + (dx+1)] with k = 0 for layer l-1, 1 for layer l, 2 for layer l+1 and dx, dy in {-1,0,1}.
 * Derivatives are taken with central differences on the values scaled by 1/255; the 3-D quadratic
 * D(x) = D + g.x + x'Hx/2 has its extremum at x = -H^-1 g, solved by Cramer's rule in float32 (a singular
 * H gives a zero step, which counts as converged, as in OpenCV). */
#ifndef SPECTRASIFT_NUMERIC_SIFT_REFINE_H
#define SPECTRASIFT_NUMERIC_SIFT_REFINE_H

#include "sift_device.h"

#define SIFT_IMG_SCALE (1.0f / 255.0f)

/* Gradient g = (d/dx, d/dy, d/ds) of the scaled DoG at the centre of n. */
SPECTRASIFT_FN void sift_refine_gradient(const float* n, float* g) {
  const float deriv_scale = SIFT_IMG_SCALE * 0.5f;
  g[0] = (n[9 + 5] - n[9 + 3]) * deriv_scale;
  g[1] = (n[9 + 7] - n[9 + 1]) * deriv_scale;
  g[2] = (n[18 + 4] - n[4]) * deriv_scale;
}

/* One Newton step: writes the offset (xc, xr, xi) = -H^-1 g and the gradient g. */
SPECTRASIFT_FN void sift_refine_step(const float* n, float* offset, float* g) {
  const float second = SIFT_IMG_SCALE;
  const float cross = SIFT_IMG_SCALE * 0.25f;
  sift_refine_gradient(n, g);
  const float v2 = n[13] * 2.0f;
  const float dxx = (n[9 + 5] + n[9 + 3] - v2) * second;
  const float dyy = (n[9 + 7] + n[9 + 1] - v2) * second;
  const float dss = (n[18 + 4] + n[4] - v2) * second;
  const float dxy = (n[9 + 8] - n[9 + 6] - n[9 + 2] + n[9 + 0]) * cross;
  const float dxs = (n[18 + 5] - n[18 + 3] - n[5] + n[3]) * cross;
  const float dys = (n[18 + 7] - n[18 + 1] - n[7] + n[1]) * cross;
  /* H = [dxx dxy dxs; dxy dyy dys; dxs dys dss], solve H X = g by cofactors. */
  const float c00 = dyy * dss - dys * dys;
  const float c01 = dxy * dss - dys * dxs;
  const float c02 = dxy * dys - dyy * dxs;
  const float det = dxx * c00 - dxy * c01 + dxs * c02;
  if (det == 0.0f) {
    offset[0] = 0.0f;
    offset[1] = 0.0f;
    offset[2] = 0.0f;
    return;
  }
  const float inv = 1.0f / det;
  const float x0 = inv * (g[0] * c00 - dxy * (g[1] * dss - dys * g[2]) + dxs * (g[1] * dys - dyy * g[2]));
  const float x1 = inv * (dxx * (g[1] * dss - dys * g[2]) - g[0] * c01 + dxs * (dxy * g[2] - g[1] * dxs));
  const float x2 = inv * (dxx * (dyy * g[2] - g[1] * dys) - dxy * (dxy * g[2] - g[1] * dxs) + g[0] * c02);
  offset[0] = -x0;
  offset[1] = -x1;
  offset[2] = -x2;
}

/* Interpolated DoG value D^ = D/255 + g.offset/2 (in units of the grey range), the keypoint response. */
SPECTRASIFT_FN float sift_refine_contrast(const float* n, const float* offset) {
  float g[3];
  sift_refine_gradient(n, g);
  const float t = g[0] * offset[0] + g[1] * offset[1] + g[2] * offset[2];
  return n[13] * SIFT_IMG_SCALE + t * 0.5f;
}

/* Edge test on the 2-D Hessian of layer l: accepted (1) when det > 0 and tr^2 * r < (r + 1)^2 * det. */
SPECTRASIFT_FN int sift_refine_edge_ok(const float* n, float edge_threshold) {
  const float second = SIFT_IMG_SCALE;
  const float cross = SIFT_IMG_SCALE * 0.25f;
  const float v2 = n[13] * 2.0f;
  const float dxx = (n[9 + 5] + n[9 + 3] - v2) * second;
  const float dyy = (n[9 + 7] + n[9 + 1] - v2) * second;
  const float dxy = (n[9 + 8] - n[9 + 6] - n[9 + 2] + n[9 + 0]) * cross;
  const float tr = dxx + dyy;
  const float det = dxx * dyy - dxy * dxy;
  return !(det <= 0.0f || tr * tr * edge_threshold >= (edge_threshold + 1.0f) * (edge_threshold + 1.0f) * det);
}

/* The device refinement stage, per candidate (backend/cuda/kernels/sift_refine.cuh and
 * backend/opencl/kernels/sift_refine.cl run one work-item per candidate). */

/* Plan values of the refinement. */
typedef struct SiftRefineParams {
  int layers, border, first_octave;
  float contrast_threshold, edge_threshold, sigma, output_scale;
} SiftRefineParams;

/* The DoG neighbourhood n[27] of (r, c) in layer l of octave o (the layout above), from the DoG buffer of
 * the octave table of sift_device.h. */
SPECTRASIFT_FN void sift_gather27(SPECTRASIFT_CONST_GLOBAL float* dog, SPECTRASIFT_CONST_GLOBAL sift_i64* info, int o,
                                  int l, int r, int c, float* n) {
  const int w = sift_oct_w(info, o), h = sift_oct_h(info, o);
  const size_t plane = (size_t)w * (size_t)h;
  SPECTRASIFT_CONST_GLOBAL float* base = dog + sift_oct_dog(info, o);
  for (int k = 0; k < 3; ++k) {
    SPECTRASIFT_CONST_GLOBAL float* p = base + (size_t)(l - 1 + k) * plane;
    for (int dy = 0; dy < 3; ++dy) {
      SPECTRASIFT_CONST_GLOBAL float* row = p + (size_t)(r - 1 + dy) * (size_t)w;
      for (int dx = 0; dx < 3; ++dx) n[k * 9 + dy * 3 + dx] = row[c - 1 + dx];
    }
  }
}

/* Candidate (layer, r, c) of octave o: Newton steps as the CPU backend's (at most SIFT_MAX_INTERP_STEPS,
 * the point moves to the rounded offset), then the contrast and edge tests. Returns 1 and writes the record
 * to *kp when the point is accepted (angle 0; fields in output units, the octave -1 rescale applied as the
 * plan says), else 0. octave_scale holds 2^index per pyramid index. */
SPECTRASIFT_FN int sift_refine_candidate(SPECTRASIFT_CONST_GLOBAL float* dog, SPECTRASIFT_CONST_GLOBAL sift_i64* info,
                                         SPECTRASIFT_CONST_GLOBAL float* octave_scale, int o, int layer, int r,
                                         int c, SiftRefineParams p, SiftKeypoint* kp) {
  const int w = sift_oct_w(info, o), h = sift_oct_h(info, o);
  float n[27];
  float off[3] = {0.0f, 0.0f, 0.0f}, g[3];
  int step = 0;
  for (; step < SIFT_MAX_INTERP_STEPS; ++step) {
    sift_gather27(dog, info, o, layer, r, c, n);
    sift_refine_step(n, off, g);
    if (SIFT_FABSF(off[2]) < 0.5f && SIFT_FABSF(off[1]) < 0.5f && SIFT_FABSF(off[0]) < 0.5f) break;
    const float big = (float)(SIFT_INT_MAX / 3);
    if (SIFT_FABSF(off[2]) > big || SIFT_FABSF(off[1]) > big || SIFT_FABSF(off[0]) > big) return 0;
    c += sift_round(off[0]);
    r += sift_round(off[1]);
    layer += sift_round(off[2]);
    if (layer < 1 || layer > p.layers || c < p.border || c >= w - p.border || r < p.border || r >= h - p.border)
      return 0;
  }
  if (step >= SIFT_MAX_INTERP_STEPS) return 0;
  sift_gather27(dog, info, o, layer, r, c, n);
  const float contr = sift_refine_contrast(n, off);
  if (SIFT_FABSF(contr) * (float)p.layers < p.contrast_threshold) return 0;
  if (!sift_refine_edge_ok(n, p.edge_threshold)) return 0;
  const float oscale = octave_scale[o];
  const float xi = off[2];
  kp->x = ((float)c + off[0]) * oscale;
  kp->y = ((float)r + off[1]) * oscale;
  kp->size = p.sigma * sift_dev_exp2(((float)layer + xi) / (float)p.layers) * oscale * 2.0f;
  kp->angle = 0.0f;
  kp->response = SIFT_FABSF(contr);
  kp->layer_offset = xi;
  kp->sigma_octave = kp->size * 0.5f / oscale;
  kp->octave = o + p.first_octave;
  kp->layer = layer;
  kp->r = r;
  kp->c = c;
  kp->octave_index = o;
  kp->x *= p.output_scale;
  kp->y *= p.output_scale;
  kp->size *= p.output_scale;
  return 1;
}

#endif /* SPECTRASIFT_NUMERIC_SIFT_REFINE_H */

/* sift_descriptor.h — the 4 x 4 x 8 SIFT descriptor (notes §8), per sample and per keypoint.
 *
 * A sample at integer offset (i = row, j = column) from the rounded keypoint centre has rotated
 * coordinates in cell units u = (j cos a + i sin a) / hw, v = (-j sin a + i cos a) / hw (a = keypoint
 * angle, hw = 3 sigma), spatial bins cbin = u + 1.5, rbin = v + 1.5, orientation bin
 * obin = (theta - (360 - a)) * 8 / 360 and weight |grad| * exp(-(u^2 + v^2) / 8). Its weight is split
 * trilinearly among the 2 x 2 x 2 neighbouring bins. The accumulator has (d+2) x (d+2) x (n+2) entries
 * so that samples next to the grid need no test; after accumulation bin n folds onto bin 0 and the inner
 * d x d cells form the descriptor, index (row * d + col) * n + o. */
#ifndef SPECTRASIFT_NUMERIC_SIFT_DESCRIPTOR_H
#define SPECTRASIFT_NUMERIC_SIFT_DESCRIPTOR_H

#include "sift_device.h"

#define SIFT_DESCR_HIST_LEN ((SIFT_DESCR_WIDTH + 2) * (SIFT_DESCR_WIDTH + 2) * (SIFT_DESCR_HIST_BINS + 2))
#define SIFT_DESCR_CELLS ((SIFT_DESCR_WIDTH + 2) * (SIFT_DESCR_WIDTH + 2)) /* spatial cells of the accumulator */
#define SIFT_DESCR_LEN (SIFT_DESCR_WIDTH * SIFT_DESCR_WIDTH * SIFT_DESCR_HIST_BINS) /* floats of a descriptor */

/* Splits a fractional bin into its integer part (floor) and the fraction in [0, 1). */
SPECTRASIFT_FN int sift_descriptor_split(float bin, float* frac) {
  const int b = (int)SIFT_FLOORF(bin);
  *frac = bin - (float)b;
  return b;
}

/* The 8 shares of a sample's weight mag among its neighbouring bins, with fractions (rf, cf, of) towards the
 * next row, column and orientation bin: mag times a product of (1 - f) or f, computed by differences in
 * OpenCV's order. Share k = 4 dr + 2 dc + do goes to accumulator index idx + sift_descriptor_share_offset(k). */
typedef struct SiftDescriptorShares {
  float v[8];
} SiftDescriptorShares;

SPECTRASIFT_FN SiftDescriptorShares sift_descriptor_shares(float mag, float rf, float cf, float of) {
  SiftDescriptorShares s;
  const float v_r1 = mag * rf, v_r0 = mag - v_r1;
  const float v_rc11 = v_r1 * cf, v_rc10 = v_r1 - v_rc11;
  const float v_rc01 = v_r0 * cf, v_rc00 = v_r0 - v_rc01;
  s.v[7] = v_rc11 * of;
  s.v[6] = v_rc11 - s.v[7];
  s.v[5] = v_rc10 * of;
  s.v[4] = v_rc10 - s.v[5];
  s.v[3] = v_rc01 * of;
  s.v[2] = v_rc01 - s.v[3];
  s.v[1] = v_rc00 * of;
  s.v[0] = v_rc00 - s.v[1];
  return s;
}

/* The accumulator index of integer bins (r0, c0, o0), r0, c0 in -1..d-1 and o0 in 0..n-1. */
SPECTRASIFT_FN int sift_descriptor_index(int r0, int c0, int o0) {
  return ((r0 + 1) * (SIFT_DESCR_WIDTH + 2) + c0 + 1) * (SIFT_DESCR_HIST_BINS + 2) + o0;
}

/* The offset of share k (4 dr + 2 dc + do) from the index of its sample's integer bins. */
SPECTRASIFT_FN int sift_descriptor_share_offset(int k) {
  return ((k >> 2) * (SIFT_DESCR_WIDTH + 2) + ((k >> 1) & 1)) * (SIFT_DESCR_HIST_BINS + 2) + (k & 1);
}

/* The array forms, in the address-space variants of dialect.h (every array in the same space):
 *   sift_descriptor_accumulate_at(hist, r0, c0, o0, rf, cf, of, mag): adds the 8 shares at integer bins;
 *   sift_descriptor_accumulate(hist, rbin, cbin, obin, mag): the same from fractional bins, rbin, cbin in
 *     (-1, d), obin in [-n, 2n);
 *   sift_descriptor_finalize(hist, out): folds the circular orientation bin, clamps at 0.2 of the L2 norm,
 *     rescales to L2 norm 512, rounds (half to even) and saturates to 0..255: out[128] receives
 *     integer-valued floats, as OpenCV's CV_32F descriptors. Its sums run in index order.
 * Summation order (the determinism rule of DESIGN.md): every accumulator entry is the float sum, from 0, of
 * the shares it receives, in sample order (rows i ascending, then columns j ascending). The 8 shares of one
 * sample go to 8 different entries, so adding each sample's shares in turn gives that order; a device
 * computes (index, shares) per sample in parallel and then lets one work-item per entry add its shares in
 * sample order, never float atomics. */
/* The final value of descriptor entry v for scale (sift_descriptor_clip): rounded half to even and saturated
 * to 0..255, as an integer-valued float. */
SPECTRASIFT_FN float sift_descriptor_byte(float v, float scale) {
  int b = sift_round(v * scale);
  b = b < 0 ? 0 : (b > 255 ? 255 : b);
  return (float)b;
}

/* sift_descriptor_norm2(out): the squared L2 norm of out[128], summed in index order;
 * sift_descriptor_clip(out, nrm2): clamps out[128] (squared norm nrm2) at 0.2 of its norm, in place, and
 * returns the scale to norm 512. sift_descriptor_finalize is norm2, clip and byte in turn; the staged CUDA
 * kernel runs the same three, with byte in parallel. */
#define SIFT_DEFINE_DESCRIPTOR_ARRAYS(SUFFIX, AS)                                                         \
  SPECTRASIFT_FN float sift_descriptor_norm2##SUFFIX(AS const float* out) {                              \
    float nrm2 = 0.0f;                                                                                   \
    for (int k = 0; k < SIFT_DESCR_LEN; ++k) nrm2 += out[k] * out[k];                                    \
    return nrm2;                                                                                         \
  }                                                                                                      \
  SPECTRASIFT_FN float sift_descriptor_clip##SUFFIX(AS float* out, float nrm2) {                         \
    const float thr = SIFT_SQRTF(nrm2) * SIFT_DESCR_MAG_THR;                                             \
    nrm2 = 0.0f;                                                                                         \
    for (int k = 0; k < SIFT_DESCR_LEN; ++k) {                                                           \
      const float val = out[k] < thr ? out[k] : thr;                                                     \
      out[k] = val;                                                                                      \
      nrm2 += val * val;                                                                                 \
    }                                                                                                    \
    const float nrm = SIFT_SQRTF(nrm2);                                                                  \
    return SIFT_INT_DESCR_FCTR / (nrm > SIFT_FLT_EPSILON ? nrm : SIFT_FLT_EPSILON);                      \
  }                                                                                                      \
  SPECTRASIFT_FN void sift_descriptor_accumulate_at##SUFFIX(AS float* hist, int r0, int c0, int o0, float rf, \
                                                            float cf, float of, float mag) {            \
    const SiftDescriptorShares s = sift_descriptor_shares(mag, rf, cf, of);                              \
    const int idx = sift_descriptor_index(r0, c0, o0);                                                   \
    for (int k = 0; k < 8; ++k) hist[idx + sift_descriptor_share_offset(k)] += s.v[k];                   \
  }                                                                                                      \
  SPECTRASIFT_FN void sift_descriptor_accumulate##SUFFIX(AS float* hist, float rbin, float cbin, float obin, \
                                                         float mag) {                                   \
    const int n = SIFT_DESCR_HIST_BINS;                                                                  \
    float rf, cf, of;                                                                                    \
    const int r0 = sift_descriptor_split(rbin, &rf);                                                     \
    const int c0 = sift_descriptor_split(cbin, &cf);                                                     \
    int o0 = sift_descriptor_split(obin, &of);                                                           \
    if (o0 < 0) o0 += n;                                                                                 \
    if (o0 >= n) o0 -= n;                                                                                \
    sift_descriptor_accumulate_at##SUFFIX(hist, r0, c0, o0, rf, cf, of, mag);                            \
  }                                                                                                      \
  SPECTRASIFT_FN void sift_descriptor_finalize##SUFFIX(AS float* hist, AS float* out) {                  \
    const int d = SIFT_DESCR_WIDTH;                                                                      \
    const int n = SIFT_DESCR_HIST_BINS;                                                                  \
    const int len = d * d * n;                                                                           \
    for (int i = 0; i < d; ++i) {                                                                        \
      for (int j = 0; j < d; ++j) {                                                                      \
        const int idx = ((i + 1) * (d + 2) + (j + 1)) * (n + 2);                                         \
        hist[idx] += hist[idx + n];                                                                      \
        hist[idx + 1] += hist[idx + n + 1];                                                              \
        for (int k = 0; k < n; ++k) out[(i * d + j) * n + k] = hist[idx + k];                            \
      }                                                                                                  \
    }                                                                                                    \
    const float nrm2 = sift_descriptor_norm2##SUFFIX(out);                                               \
    const float scale = sift_descriptor_clip##SUFFIX(out, nrm2);                                         \
    for (int k = 0; k < len; ++k) out[k] = sift_descriptor_byte(out[k], scale);                          \
  }
SPECTRASIFT_AS_VARIANTS(SIFT_DEFINE_DESCRIPTOR_ARRAYS)
#undef SIFT_DEFINE_DESCRIPTOR_ARRAYS

#if defined(SIFT_HAVE_DOUBLE)
/* RootSIFT of one finished descriptor row v[128] (integer-valued, 0..255): v / sum(v), square root, times
 * 512 (L2 norm 512 like the default rows), in double; an all-zero row stays zero. (OpenCL: needs fp64.) */
SPECTRASIFT_FN void sift_descriptor_root(float* v) {
  const int len = SIFT_DESCR_WIDTH * SIFT_DESCR_WIDTH * SIFT_DESCR_HIST_BINS;
  double l1 = 0;
  for (int k = 0; k < len; ++k) l1 += v[k];
  if (l1 <= 0) return;
  for (int k = 0; k < len; ++k) v[k] = (float)(SIFT_SQRT_DOUBLE((double)v[k] / l1) * 512.0);
}
#endif

/* The device descriptor stage, per keypoint, per cell and per sample: the walker form (both GPU backends:
 * backend/cuda/kernels/sift_descriptor.cuh, backend/opencl/kernels/sift_descriptor.cl) and the staged form
 * (CUDA: backend/cuda/kernels/sift_descriptor_staged.cuh), below the frame, weights and gradient they share. */

/* The sample grid of one keypoint, with the CPU backend's float operations in their order (notes §8). */
typedef struct SiftDescriptorFrame {
  int w, h;           /* the octave's plane */
  int cx, cy;         /* the rounded centre, octave pixels */
  int radius;         /* the window is (2 radius + 1)^2 samples */
  float ori;          /* 360 - angle (0 for 360) */
  float cos_t, sin_t; /* divided by the cell width */
  float weight_scale; /* 1 / hw^2: the window weight of offset k is exp(k^2 * weight_scale * -1/8) */
} SiftDescriptorFrame;

/* The frame of kept keypoint kp in the octave table info; deg2rad = float(pi / 180) from the host; the
 * radius is capped at what the host sized the weight array ex_cap for (the plan's largest). */
SPECTRASIFT_FN SiftDescriptorFrame sift_descriptor_frame(SiftKeypoint kp, SPECTRASIFT_CONST_GLOBAL sift_i64* info,
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
  if (SIFT_FABSF(f.ori - 360.0f) < SIFT_FLT_EPSILON) f.ori = 0.0f;
  const float scl = size * 0.5f;
  const float hist_width = SIFT_DESCR_SCL_FCTR * scl;
  int radius = sift_round(hist_width * 1.4142135623730951f * (float)(d + 1) * 0.5f);
#if defined(SIFT_HAVE_DOUBLE)
  radius = sift_min_i(radius, (int)sqrt((double)f.w * f.w + (double)f.h * f.h));
#else
  radius = sift_min_i(radius, (int)sqrt((float)f.w * f.w + (float)f.h * f.h));
#endif
  f.radius = sift_min_i(radius, (ex_cap - 1) / 2);
  f.cos_t = sift_dev_cos(f.ori * deg2rad) / hist_width;
  f.sin_t = sift_dev_sin(f.ori * deg2rad) / hist_width;
  f.weight_scale = 1.0f / (hist_width * hist_width); /* times -1/8 in sift_descriptor_weight */
  return f;
}

/* The window weight of offset k (exp(k^2 / hw^2 * -1/8), the CPU's operation order). */
SPECTRASIFT_FN float sift_descriptor_weight(SiftDescriptorFrame f, int k) {
  const float exp_scale = -1.0f / ((float)(SIFT_DESCR_WIDTH * SIFT_DESCR_WIDTH) * 0.5f);
  return sift_dev_exp((float)(k * k) * f.weight_scale * exp_scale);
}

/* The spatial bins of sample (i, j); 1 when it lies inside the grid and not on the plane's outer ring. */
SPECTRASIFT_FN int sift_descriptor_bins(SiftDescriptorFrame f, int i, int j, float* rbin, float* cbin) {
  const int d = SIFT_DESCR_WIDTH;
  const float fi = (float)i, fj = (float)j;
  const float c_rot = fj * f.cos_t - fi * f.sin_t;
  const float r_rot = fj * f.sin_t + fi * f.cos_t;
  *rbin = r_rot + 2.0f - 0.5f;
  *cbin = c_rot + 2.0f - 0.5f;
  const int x = f.cx + j, y = f.cy + i;
  return y > 0 && y < f.h - 1 && x > 0 && x < f.w - 1 && *rbin > -1 && *rbin < d && *cbin > -1 && *cbin < d;
}

/* The orientation bin o0 (0..n-1), its fraction and the weighted magnitude of a sample from its pixel
 * differences (sift_descriptor_diffs); wi, wj its window weights. */
SPECTRASIFT_FN int sift_descriptor_gradient_of(SiftDescriptorFrame f, float dx, float dy, float wi, float wj, float* of,
                                               float* mag) {
  const int nb = SIFT_DESCR_HIST_BINS;
  int o0 = sift_descriptor_split((sift_atan2_deg(dy, dx) - f.ori) * ((float)nb / 360.0f), of);
  o0 = o0 < 0 ? o0 + nb : o0;
  o0 = o0 >= nb ? o0 - nb : o0;
  *mag = SIFT_SQRTF(dx * dx + dy * dy) * (wi * wj);
  return o0;
}

/* The pixel differences dx (right - left) and dy (up - down) of sample (i, j) of level img. */
SPECTRASIFT_FN void sift_descriptor_diffs(SiftDescriptorFrame f, SPECTRASIFT_CONST_GLOBAL float* img, int i, int j, float* dx,
                                          float* dy) {
  SPECTRASIFT_CONST_GLOBAL float* mid = img + (size_t)(f.cy + i) * (size_t)f.w;
  const int x = f.cx + j;
  *dx = mid[x + 1] - mid[x - 1];
  *dy = mid[x - f.w] - mid[x + f.w];
}

/* sift_descriptor_gradient_of sample (i, j) of level img. */
SPECTRASIFT_FN int sift_descriptor_gradient(SiftDescriptorFrame f, SPECTRASIFT_CONST_GLOBAL float* img, float wi,
                                            float wj, int i, int j, float* of, float* mag) {
  float dx, dy;
  sift_descriptor_diffs(f, img, i, j, &dx, &dy);
  return sift_descriptor_gradient_of(f, dx, dy, wi, wj, of, mag);
}

/* The offsets [*i_lo, *i_hi] x [*j_lo, *j_hi] (not clamped to any window) that hold every sample giving shares
 * to spatial cell (qr, qc) of the (d + 2) x (d + 2) accumulator grid: only samples whose bins fall in cells
 * qr - 1 .. qr, qc - 1 .. qc do, and this box holds that 2 x 2-cell square rotated back to pixels (with a
 * 2-pixel margin; the per-sample test decides exactly), about a sixth of the window. */
SPECTRASIFT_FN void sift_descriptor_cell_span(SiftDescriptorFrame f, int qr, int qc, int* i_lo, int* i_hi, int* j_lo,
                                              int* j_hi) {
  const float cs = f.cos_t, sn = f.sin_t, dd = cs * cs + sn * sn;
  const float ru = (float)qr - 2.5f, cu = (float)qc - 2.5f;
  const float ic = (cs * ru - sn * cu) / dd, jc = (sn * ru + cs * cu) / dd;
  const float ext = (SIFT_FABSF(cs) + SIFT_FABSF(sn)) / dd + 2.0f;
  *i_lo = (int)SIFT_FLOORF(ic - ext);
  *i_hi = (int)SIFT_CEILF(ic + ext);
  *j_lo = (int)SIFT_FLOORF(jc - ext);
  *j_hi = (int)SIFT_CEILF(jc + ext);
}

/* The walker form: the box that the walker of cell (qr, qc) visits, sift_descriptor_cell_span inside the
 * window (+-radius); sift_descriptor_cell_sample decides per sample. */
SPECTRASIFT_FN void sift_descriptor_cell_box(SiftDescriptorFrame f, int qr, int qc, int* i_lo, int* i_hi, int* j_lo,
                                             int* j_hi) {
  sift_descriptor_cell_span(f, qr, qc, i_lo, i_hi, j_lo, j_hi);
  *i_lo = sift_max_i(-f.radius, *i_lo);
  *i_hi = sift_min_i(f.radius, *i_hi);
  *j_lo = sift_max_i(-f.radius, *j_lo);
  *j_hi = sift_min_i(f.radius, *j_hi);
}

/* Sample (i, j) for the walker of cell (qr, qc): 1 when it gives the cell shares, with its orientation bin
 * *o0 and the two shares *s0, *s1 that go to the cell's entries o0 and o0 + 1 (read with constant indices,
 * so that a device keeps the shares in registers); ex the window weights (ex[k + radius] = w(k)). */
#define SIFT_DEFINE_DESCRIPTOR_CELL_SAMPLE(SUFFIX, AS)                                                     \
  SPECTRASIFT_FN int sift_descriptor_cell_sample##SUFFIX(SiftDescriptorFrame f, SPECTRASIFT_CONST_GLOBAL float* img, \
                                                         AS const float* ex, int qr, int qc, int i, int j,    \
                                                         int* o0, float* s0, float* s1) {                     \
    float rbin, cbin, rf, cf, of, mag;                                                                    \
    if (!sift_descriptor_bins(f, i, j, &rbin, &cbin)) return 0;                                           \
    const int r0 = sift_descriptor_split(rbin, &rf);                                                      \
    const int c0 = sift_descriptor_split(cbin, &cf);                                                      \
    const int dr = qr - (r0 + 1), dc = qc - (c0 + 1); /* this cell takes shares (dr, dc) */               \
    if (dr < 0 || dr > 1 || dc < 0 || dc > 1) return 0;                                                   \
    *o0 = sift_descriptor_gradient(f, img, ex[i + f.radius], ex[j + f.radius], i, j, &of, &mag);           \
    const SiftDescriptorShares sh = sift_descriptor_shares(mag, rf, cf, of);                              \
    const int k = 4 * dr + 2 * dc; /* shares k and k + 1 */                                               \
    *s0 = k == 0 ? sh.v[0] : k == 2 ? sh.v[2] : k == 4 ? sh.v[4] : sh.v[6];                               \
    *s1 = k == 0 ? sh.v[1] : k == 2 ? sh.v[3] : k == 4 ? sh.v[5] : sh.v[7];                               \
    return 1;                                                                                             \
  }
SPECTRASIFT_AS_VARIANTS(SIFT_DEFINE_DESCRIPTOR_CELL_SAMPLE)
#undef SIFT_DEFINE_DESCRIPTOR_CELL_SAMPLE

/* The staged form (CUDA, backend/cuda/kernels/sift_descriptor_staged.cuh): every sample of the window is
 * computed once, in parallel, into a record (code, rf, cf, of, mag); then the owner of each inner cell walks
 * its box (sift_descriptor_owner_box) in sample order and adds the shares the records give to its cell
 * (sift_descriptor_cell_shares). Only the d x d inner cells have owners: finalize never reads the outer ring
 * of the accumulator. Each entry gets the same shares in the same order as from a walker: the same bits.
 *
 * No integer negation may reach an integer max or min chain in these helpers or the kernel: ptxas of CUDA
 * 13.0 (V13.0.88) fuses max(max(a, -b), c) (and min) into one three-input VIMNMX3 on sm_90 and drops the
 * negation, which gave j_lo = max(.., +radius, ..) and all-zero CUDA descriptors (docs/performance/sift.md;
 * scripts/ptx-neg-minmax-check.py, the ctest cuda_ptx_has_no_negated_min_max_chain, checks the PTX). */

/* The half-width, in pixels, of the square of offsets that holds every sample inside the rotated grid
 * (|u|, |v| < (d + 1) / 2 cells, rotated back, with a 2-pixel margin for the float bins; the in-grid test
 * decides exactly): the whole window at 45 degrees, about 0.7 of its side at 0. */
SPECTRASIFT_FN int sift_descriptor_grid_extent(SiftDescriptorFrame f) {
  const float cs = f.cos_t, sn = f.sin_t, dd = cs * cs + sn * sn;
  const float ext = (float)(SIFT_DESCR_WIDTH + 1) * 0.5f * (SIFT_FABSF(cs) + SIFT_FABSF(sn)) / dd + 2.0f;
  return sift_min_i(f.radius, (int)SIFT_CEILF(ext));
}

/* The staged window of a frame: the rows i_first..i_last and columns j_first..j_last of the grid's square off
 * the plane's outer ring (the other samples give no shares), taken in bands of `rows` whole rows (chunk
 * >= 2 radius + 1 samples a band); bands = 0 when no sample is left. */
typedef struct SiftDescriptorBands {
  int i_first, i_last, j_first, j_last;
  int width, rows, bands;
} SiftDescriptorBands;

SPECTRASIFT_FN SiftDescriptorBands sift_descriptor_bands(SiftDescriptorFrame f, int chunk) {
  SiftDescriptorBands b;
  const int ext = sift_descriptor_grid_extent(f);
  b.j_first = 1 - sift_min_i(ext + 1, f.cx); /* max(-ext, 1 - cx), without a negation */
  b.j_last = sift_min_i(ext, f.w - 2 - f.cx);
  b.width = sift_max_i(b.j_last - b.j_first + 1, 0);
  b.i_first = 1 - sift_min_i(ext + 1, f.cy);
  b.i_last = sift_min_i(ext, f.h - 2 - f.cy);
  b.rows = b.width > 0 ? chunk / b.width : 1;
  b.bands = b.width > 0 && b.i_last >= b.i_first ? (b.i_last - b.i_first + b.rows) / b.rows : 0;
  return b;
}

/* The box of the owner of cell (qr, qc): sift_descriptor_cell_span inside the staged window w (which lies
 * inside +-radius, so the walker's box and this one hold the same samples that give shares). */
SPECTRASIFT_FN void sift_descriptor_owner_box(SiftDescriptorFrame f, SiftDescriptorBands w, int qr, int qc, int* i_lo,
                                              int* i_hi, int* j_lo, int* j_hi) {
  sift_descriptor_cell_span(f, qr, qc, i_lo, i_hi, j_lo, j_hi);
  *i_lo = sift_max_i(w.i_first, *i_lo);
  *i_hi = sift_min_i(w.i_last, *i_hi);
  *j_lo = sift_max_i(w.j_first, *j_lo);
  *j_hi = sift_min_i(w.j_last, *j_hi);
}

/* The record of sample (i, j): returns its code, base cell (r0 + 1) (d + 2) + (c0 + 1) of the accumulator
 * grid times n plus its orientation bin o0, with the fractions *rf, *cf, *of towards the next row, column and
 * orientation bin and its weighted magnitude *mag; -1 (and no gradient read) when the sample lies outside
 * the grid or on the plane's outer ring. ex are the window weights (ex[k + radius] = w(k)). */
#define SIFT_DEFINE_DESCRIPTOR_STAGE_SAMPLE(SUFFIX, AS)                                                    \
  SPECTRASIFT_FN int sift_descriptor_stage_sample##SUFFIX(SiftDescriptorFrame f,                          \
                                                          SPECTRASIFT_CONST_GLOBAL float* img,            \
                                                          AS const float* ex, int i, int j, float* rf,    \
                                                          float* cf, float* of, float* mag) {             \
    float rbin, cbin;                                                                                     \
    if (!sift_descriptor_bins(f, i, j, &rbin, &cbin)) return -1;                                          \
    const int r0 = sift_descriptor_split(rbin, rf);                                                       \
    const int c0 = sift_descriptor_split(cbin, cf);                                                       \
    const int o0 = sift_descriptor_gradient(f, img, ex[i + f.radius], ex[j + f.radius], i, j, of, mag);   \
    return ((r0 + 1) * (SIFT_DESCR_WIDTH + 2) + c0 + 1) * SIFT_DESCR_HIST_BINS + o0;                      \
  }
SPECTRASIFT_AS_VARIANTS(SIFT_DEFINE_DESCRIPTOR_STAGE_SAMPLE)
#undef SIFT_DEFINE_DESCRIPTOR_STAGE_SAMPLE

/* The shares that a record (code >= 0, rf, cf, of, mag) gives to cell (qr, qc) of the (d + 2) x (d + 2)
 * grid: 1 when the cell is one of the 2 x 2 its weight is split among, with the orientation bin *o0 and the
 * shares *s0, *s1 of the cell's entries o0 and o0 + 1. The same float operations as sift_descriptor_shares
 * (the two of the 8 that go to this cell), so the same bits. */
SPECTRASIFT_FN int sift_descriptor_cell_shares(int code, int qr, int qc, float rf, float cf, float of, float mag,
                                               int* o0, float* s0, float* s1) {
  const int cell = code / SIFT_DESCR_HIST_BINS;
  const int dr = qr - cell / (SIFT_DESCR_WIDTH + 2), dc = qc - cell % (SIFT_DESCR_WIDTH + 2);
  if (code < 0 || dr < 0 || dr > 1 || dc < 0 || dc > 1) return 0;
  const float v_r1 = mag * rf, v_r0 = mag - v_r1;
  const float v_r = dr ? v_r1 : v_r0;
  const float v_c1 = v_r * cf, v_c0 = v_r - v_c1;
  const float v_c = dc ? v_c1 : v_c0;
  *s1 = v_c * of;
  *s0 = v_c - *s1;
  *o0 = code % SIFT_DESCR_HIST_BINS;
  return 1;
}

/* Entry k (0..127) of the unnormalised descriptor from the inner cells' accumulators acc[e * d * d + t]
 * (entry e = 0 .. n + 1 of inner cell t = row * d + col): the circular bins n, n + 1 folded onto 0, 1 as
 * sift_descriptor_finalize folds them. */
#define SIFT_DEFINE_DESCRIPTOR_INNER_ENTRY(SUFFIX, AS)                                                     \
  SPECTRASIFT_FN float sift_descriptor_inner_entry##SUFFIX(AS const float* acc, int k) {                  \
    const int cells = SIFT_DESCR_WIDTH * SIFT_DESCR_WIDTH;                                                \
    const int t = k / SIFT_DESCR_HIST_BINS, o = k % SIFT_DESCR_HIST_BINS;                                 \
    float v = acc[o * cells + t];                                                                         \
    if (o < 2) v += acc[(o + SIFT_DESCR_HIST_BINS) * cells + t];                                          \
    return v;                                                                                             \
  }
SPECTRASIFT_AS_VARIANTS(SIFT_DEFINE_DESCRIPTOR_INNER_ENTRY)
#undef SIFT_DEFINE_DESCRIPTOR_INNER_ENTRY

/* The row walk (the staged kernel's second owner phase, SiftStagesCuda::DescriptorForm::kStagedRows; OpenCL's
 * sift_descriptor_staged_rows): the same records, but with the cell stored decoded (sift_descriptor_row_code), so
 * that an owner's test is a subtraction and a mask instead of two divisions by d + 2, and with each owner walking,
 * per row i of its box, only the columns where a sample's floor cell can be one of its 2 x 2
 * (sift_descriptor_row_cols: the rotated square of support, widened), instead of the whole row of its box. The
 * exact test (sift_descriptor_row_shares) still decides every visited record, and the columns visited hold every
 * record that passes it, so each entry gets the same shares in the same order as from the box walk: the same bits
 * (tests/sift_stages_test.cpp, SiftDescriptorRowWalk, checks the visited hits against the box walk's on many
 * frames). */

#define SIFT_DESCR_ROW_NONE 0x80 /* the row code of a sample outside the grid: no owner's test passes it */

/* The row code of a sample inside the grid, integer bins r0, c0 (-1..d - 1) and orientation bin o0: cell row
 * r0 + 1 in bits 0-7, cell column c0 + 1 in bits 8-15, o0 from bit 16. */
SPECTRASIFT_FN int sift_descriptor_row_code(int r0, int c0, int o0) { return (r0 + 1) | ((c0 + 1) << 8) | (o0 << 16); }

/* The key of the owner of cell (qr, qc), 1..d each: byte 0 of key - code is qr - (r0 + 1) + 64 and byte 1 is
 * qc - (c0 + 1) + 64 (cell rows and columns are 0..d, so neither byte borrows from the next; SIFT_DESCR_ROW_NONE
 * makes byte 0 borrow and end in 192 + qr); the cell takes the record's shares (dr, dc) = (qr - r0 - 1,
 * qc - c0 - 1) when both are 0 or 1, i.e. both bytes are 64 or 65. */
SPECTRASIFT_FN int sift_descriptor_owner_key(int qr, int qc) { return (qr + 64) | ((qc + 64) << 8); }

/* sift_descriptor_cell_shares for the row code and the owner's key: the same float operations (the shares are
 * computed before the test, which the caller applies: 1 when the cell takes them). */
SPECTRASIFT_FN int sift_descriptor_row_shares(int key, int code, float rf, float cf, float of, float mag, int* o0,
                                              float* s0, float* s1) {
  const int t = key - code;
  const float v_r1 = mag * rf, v_r0 = mag - v_r1;
  const float v_r = (t & 1) ? v_r1 : v_r0; /* dr */
  const float v_c1 = v_r * cf, v_c0 = v_r - v_c1;
  const float v_c = (t & 0x100) ? v_c1 : v_c0; /* dc */
  *s1 = v_c * of;
  *s0 = v_c - *s1;
  *o0 = code >> 16;
  return (t & 0xfefe) == 0x4040;
}

/* The record of sample (i, j) for the row walk from its pixel differences (sift_descriptor_diffs): its row code,
 * or SIFT_DESCR_ROW_NONE (and *rf .. *mag untouched) outside the grid; ex the window weights. The same bins,
 * fractions, gradient and weights as sift_descriptor_stage_sample. */
#define SIFT_DEFINE_DESCRIPTOR_ROW_RECORD(SUFFIX, AS)                                                      \
  SPECTRASIFT_FN int sift_descriptor_row_record##SUFFIX(SiftDescriptorFrame f, AS const float* ex, int i, int j, \
                                                        float dx, float dy, float* rf, float* cf, float* of,   \
                                                        float* mag) {                                        \
    float rbin, cbin;                                                                                     \
    if (!sift_descriptor_bins(f, i, j, &rbin, &cbin)) return SIFT_DESCR_ROW_NONE;                         \
    const int r0 = sift_descriptor_split(rbin, rf);                                                       \
    const int c0 = sift_descriptor_split(cbin, cf);                                                       \
    const int o0 = sift_descriptor_gradient_of(f, dx, dy, ex[i + f.radius], ex[j + f.radius], of, mag);   \
    return sift_descriptor_row_code(r0, c0, o0);                                                          \
  }
SPECTRASIFT_AS_VARIANTS(SIFT_DEFINE_DESCRIPTOR_ROW_RECORD)
#undef SIFT_DEFINE_DESCRIPTOR_ROW_RECORD

/* The columns of each row that the owner of cell (qr, qc) visits. A sample gives the cell shares when its bins
 * (rbin, cbin) = (j sin_t + i cos_t + 1.5, j cos_t - i sin_t + 1.5) lie in [qr - 2, qr) x [qc - 2, qc); in row
 * i each of the two conditions, widened by SIFT_DESCR_SPAN_EPS bins, holds on an interval of j, linear in i:
 * [lo + i step, hi + i step]. Where a coefficient of j is below SIFT_DESCR_SPAN_MIN_SLOPE in magnitude its
 * condition is left out (the interval is the whole row). Why the widened intervals hold every sample that passes
 * the exact test: a sample's float bins are within a few ulp of 8 (~3e-6 bins) of the exact values, the
 * intervals' float endpoints within ~1e-5 / |coefficient| columns of theirs (|L| < 7, |i| < 10^3, coefficients at
 * most 1), and the margin is 1/64 bin, 1 / (64 |coefficient|) columns. */
#define SIFT_DESCR_SPAN_EPS (1.0f / 64.0f)
#define SIFT_DESCR_SPAN_MIN_SLOPE 1e-3f
#define SIFT_DESCR_SPAN_FREE 1e30f /* the bound of a condition left out */

typedef struct SiftDescriptorRowSpan {
  float lo_r, hi_r, step_r; /* the row-bin condition */
  float lo_c, hi_c, step_c; /* the column-bin condition */
} SiftDescriptorRowSpan;

/* The j with a j + b i in [lo, hi] (an interval linear in i) as *p_lo + i *q .. *p_hi + i *q. */
SPECTRASIFT_FN void sift_descriptor_span_axis(float a, float b, float lo, float hi, float* p_lo, float* p_hi, float* q) {
  if (SIFT_FABSF(a) < SIFT_DESCR_SPAN_MIN_SLOPE) {
    *p_lo = -SIFT_DESCR_SPAN_FREE;
    *p_hi = SIFT_DESCR_SPAN_FREE;
    *q = 0.0f;
    return;
  }
  *q = -b / a;
  *p_lo = (a > 0.0f ? lo : hi) / a;
  *p_hi = (a > 0.0f ? hi : lo) / a;
}

SPECTRASIFT_FN SiftDescriptorRowSpan sift_descriptor_row_span(SiftDescriptorFrame f, int qr, int qc) {
  SiftDescriptorRowSpan s;
  const float e = SIFT_DESCR_SPAN_EPS;
  /* rbin in [qr - 2, qr): j sin_t + i cos_t in [qr - 3.5, qr - 1.5); cbin: j cos_t - i sin_t in [qc - 3.5, qc - 1.5) */
  sift_descriptor_span_axis(f.sin_t, f.cos_t, (float)qr - 3.5f - e, (float)qr - 1.5f + e, &s.lo_r, &s.hi_r, &s.step_r);
  sift_descriptor_span_axis(f.cos_t, -f.sin_t, (float)qc - 3.5f - e, (float)qc - 1.5f + e, &s.lo_c, &s.hi_c, &s.step_c);
  return s;
}

/* The columns *jl..*jh (inside the owner's box columns j_lo..j_hi, possibly empty) of row i that the row walk
 * visits. Float min and max only: no integer negation near an integer min/max chain (ptxas 13.0, above). */
SPECTRASIFT_FN void sift_descriptor_row_cols(SiftDescriptorRowSpan s, int i, int j_lo, int j_hi, int* jl, int* jh) {
  const float fi = (float)i;
  const float lo_r = s.lo_r + fi * s.step_r, lo_c = s.lo_c + fi * s.step_c;
  const float hi_r = s.hi_r + fi * s.step_r, hi_c = s.hi_c + fi * s.step_c;
  const float box_lo = (float)j_lo, box_hi = (float)j_hi;
  float lo = lo_r > lo_c ? lo_r : lo_c;
  float hi = hi_r < hi_c ? hi_r : hi_c;
  lo = lo < box_hi + 1.0f ? lo : box_hi + 1.0f; /* both in int range (the box may be empty) */
  hi = hi > box_lo - 1.0f ? hi : box_lo - 1.0f;
  lo = lo > box_lo ? lo : box_lo; /* then floor(lo) >= j_lo and ceil(hi) <= j_hi */
  hi = hi < box_hi ? hi : box_hi;
  *jl = (int)SIFT_FLOORF(lo);
  *jh = (int)SIFT_CEILF(hi);
}

/* The row walk's update of an owner's entries col[e * stride] (e = 0 .. n + 1) by two consecutive records, a then b:
 * shares (sa0, sa1) to entries oa, oa + 1 when hit_a, then (sb0, sb1) to ob, ob + 1 when hit_b (oa in 0..n - 1; ob
 * is read only when hit_b: b may be no record at all). A record that misses adds +0.0f to entries instead (b to
 * a's), which changes no entry (an entry is +0 or a sum of shares >= +0, never -0, and x + +0 is x for every
 * other float). The four entries are loaded before any store, b's inputs taken from a's
 * results where its entries are a's: every entry gets the same additions in the same order as from a's then b's
 * update alone, so the same bits, with one load-add-store chain for two records instead of two chained ones. */
#define SIFT_DEFINE_DESCRIPTOR_OWNER_ADD2(SUFFIX, AS)                                                      \
  SPECTRASIFT_FN void sift_descriptor_owner_add2##SUFFIX(AS float* col, int stride, int hit_a, int oa, float sa0, \
                                                         float sa1, int hit_b, int ob, float sb0, float sb1) { \
    ob = hit_b ? ob : oa;                                                                                 \
    AS float* pa = col + oa * stride;                                                                     \
    AS float* pb = col + ob * stride;                                                                     \
    const float a0 = pa[0], a1 = pa[stride], b0 = pb[0], b1 = pb[stride];                                 \
    const float ra0 = a0 + (hit_a ? sa0 : 0.0f), ra1 = a1 + (hit_a ? sa1 : 0.0f);                         \
    const float ib0 = ob == oa ? ra0 : (ob == oa + 1 ? ra1 : b0);                                         \
    const float ib1 = ob == oa ? ra1 : (ob + 1 == oa ? ra0 : b1);                                         \
    pa[0] = ra0;                                                                                          \
    pa[stride] = ra1;                                                                                     \
    pb[0] = ib0 + (hit_b ? sb0 : 0.0f);                                                                   \
    pb[stride] = ib1 + (hit_b ? sb1 : 0.0f);                                                              \
  }
SPECTRASIFT_AS_VARIANTS(SIFT_DEFINE_DESCRIPTOR_OWNER_ADD2)
#undef SIFT_DEFINE_DESCRIPTOR_OWNER_ADD2

#endif /* SPECTRASIFT_NUMERIC_SIFT_DESCRIPTOR_H */

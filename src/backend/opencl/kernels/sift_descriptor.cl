/* sift_descriptor.cl — the 4 x 4 x 8 descriptor of every kept keypoint (numeric/sift_descriptor.h), then
 * RootSIFT when asked. (Part of the sift.cl program.)
 *
 * The fixed reduction order of DESIGN.md: every accumulator entry is the float sum of its shares in sample
 * order (rows ascending, then columns), as the CPU backend adds them, without float atomics. Two forms:
 *   sift_descriptor (GPUs): one work-group per keypoint; work-item q (q < 36) owns the 10 entries of
 *     spatial cell q of the (d + 2) x (d + 2) grid, in private memory, and walks the window in sample order,
 *     adding the shares each sample gives to its cell. A walker visits only a box around its cells; the
 *     cheap part of a sample (its rotated bins) is computed by the walkers whose box holds it, the
 *     gradient, atan2, weight and shares only by the at most 4 cells it feeds. (A first form staged every sample's bins and shares in local memory for the owners to read
 *     after a barrier: PoCL 3 compiled its accumulation loop to nothing.)
 *   sift_descriptor_serial (CPU devices): one work-item per keypoint, the CPU backend's loop (a work-group
 *     of keypoints vectorises across work-items; a work-group per keypoint would serialise 36 walkers).
 * Both give the same bits. */

#define SIFT_DESCR_CELLS ((SIFT_DESCR_WIDTH + 2) * (SIFT_DESCR_WIDTH + 2))
#define SIFT_DESCR_LEN (SIFT_DESCR_WIDTH * SIFT_DESCR_WIDTH * SIFT_DESCR_HIST_BINS)

/* The sample grid of one keypoint, with the CPU backend's float operations in their order (notes §8). */
typedef struct SiftDescriptorFrame {
  int w, h;           /* the octave's plane */
  int cx, cy;         /* the rounded centre, octave pixels */
  int radius;         /* the window is (2 radius + 1)^2 samples */
  float ori;          /* 360 - angle (0 for 360) */
  float cos_t, sin_t; /* divided by the cell width */
  float weight_scale; /* 1 / hw^2: the window weight of offset k is exp(k^2 * weight_scale * -1/8) */
} SiftDescriptorFrame;

inline SiftDescriptorFrame sift_descriptor_frame(SiftKeypoint kp, __global const long* info, float deg2rad,
                                                 int ex_cap) {
  SiftDescriptorFrame f;
  const int d = SIFT_DESCR_WIDTH;
  f.w = SIFT_OCT_W(info, kp.octave_index);
  f.h = SIFT_OCT_H(info, kp.octave_index);
  const int oct = kp.octave;
  const float scale = oct >= 0 ? 1.0f / (float)(1 << oct) : (float)(1 << -oct);
  const float size = kp.size * scale;
  f.cx = sift_round(kp.x * scale);
  f.cy = sift_round(kp.y * scale);
  f.ori = 360.0f - kp.angle;
  if (fabs(f.ori - 360.0f) < SIFT_FLT_EPSILON) f.ori = 0.0f;
  const float scl = size * 0.5f;
  const float hist_width = SIFT_DESCR_SCL_FCTR * scl;
  int radius = sift_round(hist_width * 1.4142135623730951f * (float)(d + 1) * 0.5f);
#if defined(SIFT_HAVE_DOUBLE)
  radius = min(radius, (int)sqrt((double)f.w * f.w + (double)f.h * f.h));
#else
  radius = min(radius, (int)sqrt((float)f.w * f.w + (float)f.h * f.h));
#endif
  f.radius = min(radius, (ex_cap - 1) / 2);  /* the host sizes ex_cap for the plan's largest radius */
  f.cos_t = sift_dev_cos(f.ori * deg2rad) / hist_width;
  f.sin_t = sift_dev_sin(f.ori * deg2rad) / hist_width;
  f.weight_scale = 1.0f / (hist_width * hist_width);  /* times -1/8 in sift_descriptor_weight */
  return f;
}

/* The window weight of offset k (exp(k^2 / hw^2 * -1/8), the CPU's operation order). */
inline float sift_descriptor_weight(SiftDescriptorFrame f, int k) {
  const float exp_scale = -1.0f / ((float)(SIFT_DESCR_WIDTH * SIFT_DESCR_WIDTH) * 0.5f);
  return sift_dev_exp((float)(k * k) * f.weight_scale * exp_scale);
}

/* The spatial bins of sample (i, j); 1 when it lies inside the grid and not on the plane's outer ring. */
inline int sift_descriptor_bins(SiftDescriptorFrame f, int i, int j, float* rbin, float* cbin) {
  const int d = SIFT_DESCR_WIDTH;
  const float fi = (float)i, fj = (float)j;
  const float c_rot = fj * f.cos_t - fi * f.sin_t;
  const float r_rot = fj * f.sin_t + fi * f.cos_t;
  *rbin = r_rot + 2.0f - 0.5f;
  *cbin = c_rot + 2.0f - 0.5f;
  const int x = f.cx + j, y = f.cy + i;
  return y > 0 && y < f.h - 1 && x > 0 && x < f.w - 1 && *rbin > -1 && *rbin < d && *cbin > -1 && *cbin < d;
}

/* The orientation bin o0 (0..n-1), its fraction and the weighted magnitude of sample (i, j). */
inline int sift_descriptor_gradient(SiftDescriptorFrame f, __global const float* img, float wi, float wj, int i,
                                    int j, float* of, float* mag) {
  const int nb = SIFT_DESCR_HIST_BINS;
  __global const float* mid = img + (size_t)(f.cy + i) * (size_t)f.w;
  const int x = f.cx + j;
  const float dx = mid[x + 1] - mid[x - 1];
  const float dy = mid[x - f.w] - mid[x + f.w];
  int o0 = sift_descriptor_split((sift_atan2_deg(dy, dx) - f.ori) * ((float)nb / 360.0f), of);
  o0 = o0 < 0 ? o0 + nb : o0;
  o0 = o0 >= nb ? o0 - nb : o0;
  *mag = sqrt(dx * dx + dy * dy) * (wi * wj);
  return o0;
}

/* sift_descriptor: global (G L), work-group (L) with L >= 36; work-group g takes kept keypoints g, g + G, ...
 * (the count is read on the device); work-items 0..35 walk the window, all compute the weights.
 * Local memory (host-sized): ex[ex_cap] >= 2R + 1 for the plan's largest window radius R.
 * deg2rad = float(pi / 180) from the host. */
__kernel void sift_descriptor(__global const float* gauss, __global const long* info,
                              __global const SiftKeypoint* kps, __global const uint* counters, uint capacity,
                              float deg2rad, int root_sift, __global float* descriptors, __local float* ex,
                              int ex_cap) {
  __local float hist[SIFT_DESCR_HIST_LEN];
  __local float out[SIFT_DESCR_LEN];
  const int lid = get_local_id(0), lsize = get_local_size(0);
  const int d = SIFT_DESCR_WIDTH;
  const uint count = min(counters[SIFT_COUNT_KEPT], capacity);
  for (uint p = get_group_id(0); p < count; p += get_num_groups(0)) {
    const SiftKeypoint kp = kps[p];
    const SiftDescriptorFrame f = sift_descriptor_frame(kp, info, deg2rad, ex_cap);
    __global const float* img = sift_level_of(gauss, info, kp);
    for (int k = lid; k <= 2 * f.radius; k += lsize) ex[k] = sift_descriptor_weight(f, k - f.radius);
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid < SIFT_DESCR_CELLS) {
      float acc[SIFT_DESCR_HIST_BINS + 2];  /* the entries of cell lid, o = 0 .. n + 1 */
      for (int k = 0; k < SIFT_DESCR_HIST_BINS + 2; ++k) acc[k] = 0.0f;
      const int qr = lid / (d + 2), qc = lid % (d + 2);
      /* Only samples whose bins fall in cells qr - 1 .. qr, qc - 1 .. qc give this cell shares: a box
       * around that 2 x 2-cell square rotated back to pixels (with a 2-pixel margin; the exact test below
       * decides), so that each walker visits about a sixth of the window. */
      const float cs = f.cos_t, sn = f.sin_t, dd = cs * cs + sn * sn;
      const float ru = (float)qr - 2.5f, cu = (float)qc - 2.5f;
      const float ic = (cs * ru - sn * cu) / dd, jc = (sn * ru + cs * cu) / dd;
      const float ext = (fabs(cs) + fabs(sn)) / dd + 2.0f;
      const int i_lo = max(-f.radius, (int)floor(ic - ext)), i_hi = min(f.radius, (int)ceil(ic + ext));
      const int jb_lo = max(-f.radius, (int)floor(jc - ext)), jb_hi = min(f.radius, (int)ceil(jc + ext));
      for (int i = i_lo; i <= i_hi; ++i) {
        for (int j = jb_lo; j <= jb_hi; ++j) {
          float rbin, cbin, rf, cf, of, mag;
          if (!sift_descriptor_bins(f, i, j, &rbin, &cbin)) continue;
          const int r0 = sift_descriptor_split(rbin, &rf);
          const int c0 = sift_descriptor_split(cbin, &cf);
          const int dr = qr - (r0 + 1), dc = qc - (c0 + 1);  /* this cell takes shares (dr, dc) */
          if (dr < 0 || dr > 1 || dc < 0 || dc > 1) continue;
          const int o0 = sift_descriptor_gradient(f, img, ex[i + f.radius], ex[j + f.radius], i, j, &of, &mag);
          const SiftDescriptorShares sh = sift_descriptor_shares(mag, rf, cf, of);
          const int k = 4 * dr + 2 * dc;  /* shares k and k + 1, read with constant indices */
          acc[o0] += k == 0 ? sh.v[0] : k == 2 ? sh.v[2] : k == 4 ? sh.v[4] : sh.v[6];
          acc[o0 + 1] += k == 0 ? sh.v[1] : k == 2 ? sh.v[3] : k == 4 ? sh.v[5] : sh.v[7];
        }
      }
      for (int k = 0; k < SIFT_DESCR_HIST_BINS + 2; ++k) hist[lid * (SIFT_DESCR_HIST_BINS + 2) + k] = acc[k];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid == 0) {
      sift_descriptor_finalize_local(hist, out);
      __global float* row = descriptors + (size_t)p * SIFT_DESCR_LEN;
#if defined(SIFT_HAVE_DOUBLE)
      if (root_sift) {
        float v[SIFT_DESCR_LEN];
        for (int k = 0; k < SIFT_DESCR_LEN; ++k) v[k] = out[k];
        sift_descriptor_root(v);
        for (int k = 0; k < SIFT_DESCR_LEN; ++k) out[k] = v[k];
      }
#endif
      for (int k = 0; k < SIFT_DESCR_LEN; ++k) row[k] = out[k];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
}

/* sift_descriptor_serial: global (G), work-group (L); work-item t takes kept keypoints t, t + G, ... and
 * runs the CPU backend's loop: per row of the window, the samples of a run of SIFT_DESCR_RUN columns are
 * computed first (a loop without branches, which vectorises), then their 8 shares added in turn (sample
 * order). Local memory (host-sized): ex_all[L ex_cap], the weights of each work-item. */
#define SIFT_DESCR_RUN 32

__kernel void sift_descriptor_serial(__global const float* gauss, __global const long* info,
                                     __global const SiftKeypoint* kps, __global const uint* counters, uint capacity,
                                     float deg2rad, int root_sift, __global float* descriptors,
                                     __local float* ex_all, int ex_cap) {
  __local float* ex = ex_all + (size_t)get_local_id(0) * (size_t)ex_cap;
  const uint count = min(counters[SIFT_COUNT_KEPT], capacity);
  for (uint p = get_global_id(0); p < count; p += get_global_size(0)) {
    const SiftKeypoint kp = kps[p];
    const SiftDescriptorFrame f = sift_descriptor_frame(kp, info, deg2rad, ex_cap);
    __global const float* img = sift_level_of(gauss, info, kp);
    for (int k = 0; k <= 2 * f.radius; ++k) ex[k] = sift_descriptor_weight(f, k - f.radius);
    float hist[SIFT_DESCR_HIST_LEN];
    for (int k = 0; k < SIFT_DESCR_HIST_LEN; ++k) hist[k] = 0.0f;
    const int j_lo = max(-f.radius, 1 - f.cx), j_hi = min(f.radius, f.w - 2 - f.cx);
    for (int i = -f.radius; i <= f.radius; ++i) {
      const int y = f.cy + i;
      if (y <= 0 || y >= f.h - 1) continue;
      for (int j0 = j_lo; j0 <= j_hi; j0 += SIFT_DESCR_RUN) {
        const int n = min(SIFT_DESCR_RUN, j_hi - j0 + 1);
        int idx[SIFT_DESCR_RUN];
        float rf[SIFT_DESCR_RUN], cf[SIFT_DESCR_RUN], of[SIFT_DESCR_RUN], mag[SIFT_DESCR_RUN];
        for (int t = 0; t < n; ++t) {
          float rbin, cbin;
          const int inside = sift_descriptor_bins(f, i, j0 + t, &rbin, &cbin);
          const int r0 = sift_descriptor_split(rbin, &rf[t]);
          const int c0 = sift_descriptor_split(cbin, &cf[t]);
          const int o0 = sift_descriptor_gradient(f, img, ex[i + f.radius], ex[j0 + t + f.radius], i, j0 + t, &of[t],
                                                  &mag[t]);
          idx[t] = inside ? sift_descriptor_index(r0, c0, o0) : -1;
        }
        for (int t = 0; t < n; ++t) {
          if (idx[t] < 0) continue;
          const SiftDescriptorShares sh = sift_descriptor_shares(mag[t], rf[t], cf[t], of[t]);
          for (int k = 0; k < 8; ++k) hist[idx[t] + sift_descriptor_share_offset(k)] += sh.v[k];
        }
      }
    }
    float out[SIFT_DESCR_LEN];
    sift_descriptor_finalize(hist, out);
#if defined(SIFT_HAVE_DOUBLE)
    if (root_sift) sift_descriptor_root(out);
#endif
    __global float* row = descriptors + (size_t)p * SIFT_DESCR_LEN;
    for (int k = 0; k < SIFT_DESCR_LEN; ++k) row[k] = out[k];
  }
}

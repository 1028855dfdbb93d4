/* sift_descriptor.cl — the 4 x 4 x 8 descriptor of every kept keypoint (numeric/sift_descriptor.h), then
 * RootSIFT when asked. (Part of the sift.cl program.)
 *
 * The fixed reduction order of DESIGN.md: every accumulator entry is the float sum of its shares in sample
 * order (rows ascending, then columns), as the CPU backend adds them, without float atomics. Two forms:
 *   sift_descriptor (GPUs): one work-group per keypoint, staged. The window is taken in bands of whole rows;
 *     all work-items compute each sample of the band once (bins, gradient, atan2, weight) into a record in
 *     local memory; after a barrier, work-item t (t < 16) owns the 10 entries of inner cell t and walks its
 *     box of the band (numeric/sift_descriptor.h: sift_descriptor_cell_box) in sample order, adding the two
 *     shares each record gives its cell. Then the norms, in the CPU's index order, by one work-item, and the
 *     rest of the finalisation by all. (The walker form it replaces computed every sample in each of the up
 *     to 4 walkers it feeds, and the rotated bins in every walker whose box holds it, with 36 of 64
 *     work-items busy and one work-item finalising: docs/performance/sift.md.)
 *   sift_descriptor_serial (CPU devices): one work-item per keypoint, the CPU backend's loop (a work-group
 *     of keypoints vectorises across work-items; a work-group per keypoint would serialise).
 * Both give the same bits. The owner loop has no `continue` and every barrier is reached by the whole
 * work-group (PoCL compiled a staged form with `continue` between barriers to nothing). */

#define SIFT_DESCR_OWNERS (SIFT_DESCR_WIDTH * SIFT_DESCR_WIDTH)                   /* inner cells */
#define SIFT_DESCR_ACC ((SIFT_DESCR_HIST_BINS + 2) * SIFT_DESCR_OWNERS)           /* their entries */

/* sift_descriptor: global (G L), work-group (L) with L >= 16; work-group g takes kept keypoints g, g + G,
 * ... (the count is read on the device). Local memory (host-sized): ex[ex_cap] >= 2R + 1 for the plan's
 * largest window radius R; codes[chunk] and recs[4 chunk] (rf, cf, of, mag) with chunk >= ex_cap, so that a
 * band holds at least one window row. deg2rad = float(pi / 180) from the host. */
__kernel void sift_descriptor(__global const float* gauss, __global const long* info,
                              __global const SiftKeypoint* kps, __global const uint* counters, uint capacity,
                              float deg2rad, int root_sift, __global float* descriptors, __local float* ex,
                              int ex_cap, __local int* codes, __local float* recs, int chunk) {
  __local float acc[SIFT_DESCR_ACC];  /* entry e of inner cell t at acc[e * 16 + t] */
  __local float out[SIFT_DESCR_LEN];
  __local float scale_of[1];
  const int lid = get_local_id(0), lsize = get_local_size(0);
  const int d = SIFT_DESCR_WIDTH;
  const uint count = min(counters[SIFT_COUNT_KEPT], capacity);
  for (uint p = get_group_id(0); p < count; p += get_num_groups(0)) {
    const SiftKeypoint kp = kps[p];
    const SiftDescriptorFrame f = sift_descriptor_frame(kp, info, deg2rad, ex_cap);
    __global const float* img = sift_level_of(gauss, info, kp);
    for (int k = lid; k <= 2 * f.radius; k += lsize) ex[k] = sift_descriptor_weight(f, k - f.radius);
    const SiftDescriptorBands w = sift_descriptor_bands(f, chunk);
    barrier(CLK_LOCAL_MEM_FENCE);
    const int qr = lid / d + 1, qc = lid % d + 1;  /* the inner cell of owner lid < 16 */
    int i_lo, i_hi, j_lo, j_hi;
    sift_descriptor_cell_box(f, qr, qc, &i_lo, &i_hi, &j_lo, &j_hi);
    j_lo = max(j_lo, w.j_first);
    j_hi = min(j_hi, w.j_last);
    float own[SIFT_DESCR_HIST_BINS + 2];  /* the owner's entries o = 0 .. n + 1, in registers */
    for (int o = 0; o < SIFT_DESCR_HIST_BINS + 2; ++o) own[o] = 0.0f;
    for (int band = 0; band < w.bands; ++band) {
      const int i0 = w.i_first + band * w.rows;
      const int n = min(w.rows, w.i_last - i0 + 1) * w.width;
      for (int s = lid; s < n; s += lsize) {
        float rf = 0.0f, cf = 0.0f, of = 0.0f, mag = 0.0f;
        codes[s] = sift_descriptor_stage_sample_local(f, img, ex, i0 + s / w.width, w.j_first + s % w.width, &rf,
                                                      &cf, &of, &mag);
        recs[4 * s + 0] = rf;
        recs[4 * s + 1] = cf;
        recs[4 * s + 2] = of;
        recs[4 * s + 3] = mag;
      }
      barrier(CLK_LOCAL_MEM_FENCE);
      /* the owner's box in this band, in sample order (no work-item past 15 has rows to walk) */
      const int r_lo = max(i_lo, i0);
      const int r_hi = lid < SIFT_DESCR_OWNERS ? min(min(i_hi, w.i_last), i0 + w.rows - 1) : r_lo - 1;
      for (int i = r_lo; i <= r_hi; ++i) {
        const int s_row = (i - i0) * w.width - w.j_first;
        for (int j = j_lo; j <= j_hi; ++j) {
          const int s = s_row + j;
          int o0 = 0;
          float s0 = 0.0f, s1 = 0.0f;
          const int hit = sift_descriptor_cell_shares(codes[s], qr, qc, recs[4 * s + 0], recs[4 * s + 1],
                                                      recs[4 * s + 2], recs[4 * s + 3], &o0, &s0, &s1);
          /* own[o0] += s0, own[o0 + 1] += s1 with constant indices (a dynamic one would leave registers) */
          for (int o = 0; o < SIFT_DESCR_HIST_BINS; ++o) {
            if (hit && o == o0) {
              own[o] += s0;
              own[o + 1] += s1;
            }
          }
        }
      }
      barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid < SIFT_DESCR_OWNERS)
      for (int o = 0; o < SIFT_DESCR_HIST_BINS + 2; ++o) acc[o * SIFT_DESCR_OWNERS + lid] = own[o];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int k = lid; k < SIFT_DESCR_LEN; k += lsize) out[k] = sift_descriptor_inner_entry_local(acc, k);
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid == 0) scale_of[0] = sift_descriptor_clip_local(out, sift_descriptor_norm2_local(out));
    barrier(CLK_LOCAL_MEM_FENCE);
    const float scale = scale_of[0];
    __global float* row = descriptors + (size_t)p * SIFT_DESCR_LEN;
#if defined(SIFT_HAVE_DOUBLE)
    const int rows_now = !root_sift;  /* RootSIFT rows are written by work-item 0 alone, below */
#else
    const int rows_now = 1;  /* the host refuses RootSIFT without doubles */
#endif
    for (int k = lid; k < SIFT_DESCR_LEN; k += lsize) {
      const float v = sift_descriptor_byte(out[k], scale);
      out[k] = v;
      if (rows_now) row[k] = v;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
#if defined(SIFT_HAVE_DOUBLE)
    barrier(CLK_LOCAL_MEM_FENCE);
    if (root_sift && lid == 0) {
      float v[SIFT_DESCR_LEN];
      for (int k = 0; k < SIFT_DESCR_LEN; ++k) v[k] = out[k];
      sift_descriptor_root(v);
      for (int k = 0; k < SIFT_DESCR_LEN; ++k) row[k] = v[k];
    }
#endif
    barrier(CLK_LOCAL_MEM_FENCE);
  }
}

/* sift_descriptor_serial: global (G), work-group (L); work-item t takes kept keypoints t, t + G, ... and
 * runs the CPU backend's loop: per row of the window, the samples inside the grid (one run of columns, found
 * in O(1), sift_descriptor_row_run: the grid covers about half the window), SIFT_DESCR_RUN at a time, are
 * computed first (a loop without branches, which vectorises), then their 8 shares added in turn (sample
 * order). Local memory (host-sized): ex_all[L ex_cap], the weights of each work-item. */
#define SIFT_DESCR_RUN 32

/* 1 when sample (i, j) of frame f lies inside the rotated 4 x 4 grid (sift_descriptor_bins' test, the CPU
 * backend's float operations). */
inline int sift_descriptor_in_grid(SiftDescriptorFrame f, float fi, int j) {
  const float fj = (float)j;
  const float rbin = fj * f.sin_t + fi * f.cos_t + 2.0f - 0.5f;
  const float cbin = fj * f.cos_t - fi * f.sin_t + 2.0f - 0.5f;
  return rbin > -1 && rbin < SIFT_DESCR_WIDTH && cbin > -1 && cbin < SIFT_DESCR_WIDTH;
}

/* The samples of window row i inside the grid form one run (the float bins are monotone in j): its ends
 * [*j_lo, *j_hi] within [lim_lo, lim_hi], or 0 when the row has none, as the CPU backend finds them (an
 * estimate from the grid's linear bounds, here in float, then the exact test around it). The run is then
 * extended while the exact test holds beyond its ends, so an estimate off by more than the search window
 * still gives the exact run. Samples outside the run give no shares: skipping them changes no sum. */
inline int sift_descriptor_row_run(SiftDescriptorFrame f, int i, int lim_lo, int lim_hi, int* j_lo, int* j_hi) {
  const float s = f.sin_t, c = f.cos_t, fi = (float)i;
  float lo = (float)lim_lo, hi = (float)lim_hi;
  /* -2.5 < j s + i c < 2.5 (rows of cells) and -2.5 < j c - i s < 2.5 (columns of cells) */
  if (s > 0) { lo = fmax(lo, (-2.5f - fi * c) / s); hi = fmin(hi, (2.5f - fi * c) / s); }
  if (s < 0) { lo = fmax(lo, (2.5f - fi * c) / s); hi = fmin(hi, (-2.5f - fi * c) / s); }
  if (c > 0) { lo = fmax(lo, (-2.5f + fi * s) / c); hi = fmin(hi, (2.5f + fi * s) / c); }
  if (c < 0) { lo = fmax(lo, (2.5f + fi * s) / c); hi = fmin(hi, (-2.5f + fi * s) / c); }
  if (hi + 1.0f < lo) return 0;  /* clearly empty: the estimate errs by far less than a column */
  const int g_lo = (int)floor(clamp(lo, (float)(lim_lo - 3), (float)(lim_hi + 3))) + 1;
  const int g_hi = (int)ceil(clamp(hi, (float)(lim_lo - 3), (float)(lim_hi + 3))) - 1;
  int a = max(g_lo - 2, lim_lo);
  const int a_end = min(g_lo + 2, lim_hi);
  while (a <= a_end && !sift_descriptor_in_grid(f, fi, a)) ++a;
  if (a > a_end) {  /* no sample near the estimate: the whole row, tested (rows at the grid's corners) */
    a = lim_lo;
    while (a <= lim_hi && !sift_descriptor_in_grid(f, fi, a)) ++a;
    if (a > lim_hi) return 0;
  }
  while (a > lim_lo && sift_descriptor_in_grid(f, fi, a - 1)) --a;
  int b = max(min(g_hi + 2, lim_hi), a);
  while (b > a && !sift_descriptor_in_grid(f, fi, b)) --b;
  while (b < lim_hi && sift_descriptor_in_grid(f, fi, b + 1)) ++b;
  *j_lo = a;
  *j_hi = b;
  return 1;
}

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
    const int lim_lo = max(-f.radius, 1 - f.cx), lim_hi = min(f.radius, f.w - 2 - f.cx);
    for (int i = -f.radius; i <= f.radius; ++i) {
      const int y = f.cy + i;
      int j_lo, j_hi;
      if (y <= 0 || y >= f.h - 1 || !sift_descriptor_row_run(f, i, lim_lo, lim_hi, &j_lo, &j_hi)) continue;
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

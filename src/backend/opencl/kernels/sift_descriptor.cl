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
 * A third form, sift_descriptor_staged (GPUs, State::descriptor_variant 1 or 2; its row walk
 * sift_descriptor_staged_rows, 3 or 4), each sample computed once for the owners of the inner cells, is in
 * sift_descriptor_staged.cl. All give the same bits. */

/* The frame of a keypoint, its window weights and the per-sample maths (sift_descriptor_frame, _weight,
 * _bins, _gradient, _cell_box, _cell_sample) are numeric/sift_descriptor.h's, shared with CUDA. */

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
      int i_lo, i_hi, jb_lo, jb_hi;
      sift_descriptor_cell_box(f, qr, qc, &i_lo, &i_hi, &jb_lo, &jb_hi);
      for (int i = i_lo; i <= i_hi; ++i) {
        for (int j = jb_lo; j <= jb_hi; ++j) {
          int o0;
          float s0, s1;
          if (!sift_descriptor_cell_sample_local(f, img, ex, qr, qc, i, j, &o0, &s0, &s1)) continue;
          acc[o0] += s0;
          acc[o0 + 1] += s1;
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

/* sift_descriptor_serial: global (G), work-group (L); work-item t takes kept keypoints t, t + G, ... (the host
 * launches G >= the kept count's bound, so one keypoint per work-item, in many small work-groups) and
 * runs the CPU backend's loop: per row of the window, the samples inside the grid (one run of columns, found
 * in O(1), sift_descriptor_row_run: the grid covers about half the window), SIFT_DESCR_RUN at a time, are
 * computed first (a loop without branches and with a constant trip count, which vectorises), then their 8
 * shares added in turn (sample order, unrolled: constant offsets). Local memory (host-sized): ex_all[L ex_cap], the weights of each work-item. */
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
        /* A constant trip count: the loop vectorises with no scalar remainder (PoCL's scalar floor is a
         * branchy call); lanes t >= n repeat sample j_hi and are never added. Every sample of the run is
         * inside the grid and the plane (sift_descriptor_row_run's exact test, lim_lo / lim_hi and the row
         * test above), so the index needs no test, as in the CPU backend's descriptor_row. */
        for (int t = 0; t < SIFT_DESCR_RUN; ++t) {
          const int j = min(j0 + t, j_hi);
          float rbin, cbin;
          (void)sift_descriptor_bins(f, i, j, &rbin, &cbin);
          const int r0 = sift_descriptor_split(rbin, &rf[t]);
          const int c0 = sift_descriptor_split(cbin, &cf[t]);
          const int o0 = sift_descriptor_gradient(f, img, ex[i + f.radius], ex[j + f.radius], i, j, &of[t], &mag[t]);
          idx[t] = sift_descriptor_index(r0, c0, o0);
        }
        for (int t = 0; t < n; ++t) {  /* in sample order; a sample's 8 shares go to 8 different entries */
          const SiftDescriptorShares sh = sift_descriptor_shares(mag[t], rf[t], cf[t], of[t]);
          float* h = hist + idx[t];
#pragma unroll
          for (int k = 0; k < 8; ++k) h[sift_descriptor_share_offset(k)] += sh.v[k];
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

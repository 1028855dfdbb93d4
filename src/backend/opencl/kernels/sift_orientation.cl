/* sift_orientation.cl — the 36-bin orientation histogram of every refined point and one keypoint record per
 * peak (numeric/sift_orientation.h). (Part of the sift.cl program.) Two forms with the same bits:
 * sift_orientation (GPUs, a work-group per point) and sift_orientation_serial (CPU devices, a work-item per
 * point).
 *
 * The fixed reduction order of DESIGN.md: the samples of the window (rows ascending, then columns) are
 * taken in chunks; all work-items compute their samples' (bin, contribution) into local memory, then
 * work-item b (b < 36) adds the contributions of bin b of the chunk in sample order. Every raw bin is thus
 * the CPU's float sum, and no float atomic is used. */

/* sift_orientation: global (G L), work-group (L) with L >= 36; work-group g takes refined points g, g + G,
 * ... (the count is read on the device). Local memory (host-sized): chunk_bin/chunk_val[chunk] and
 * ex[ex_cap] >= 2R + 1 for the largest window radius R of the plan. */
__kernel void sift_orientation(__global const float* gauss, __global const long* info,
                               __global const SiftKeypoint* refined, __global volatile uint* counters,
                               uint refined_capacity, uint capacity, __global SiftKeypoint* keypoints,
                               __local int* chunk_bin, __local float* chunk_val, int chunk, __local float* ex,
                               int ex_cap) {
  __local float raw[SIFT_ORI_HIST_BINS];
  __local float hist[SIFT_ORI_HIST_BINS];
  const int lid = get_local_id(0), lsize = get_local_size(0);
  const uint count = min(counters[SIFT_COUNT_REFINED], refined_capacity);
  for (uint p = get_group_id(0); p < count; p += get_num_groups(0)) {
    const SiftKeypoint kp = refined[p];
    const int w = sift_oct_w(info, kp.octave_index), h = sift_oct_h(info, kp.octave_index);
    __global const float* img = sift_level_of(gauss, info, kp);
    const int radius = sift_orientation_radius(kp, ex_cap);
    for (int k = lid; k <= 2 * radius; k += lsize) ex[k] = sift_orientation_weight(kp, k - radius);
    const int x_lo = max(kp.c - radius, 1), x_hi = min(kp.c + radius, w - 2);
    const int n = x_hi - x_lo + 1;
    const int total = n > 0 ? (2 * radius + 1) * n : 0;
    float acc = 0.0f;
    barrier(CLK_LOCAL_MEM_FENCE);
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
      barrier(CLK_LOCAL_MEM_FENCE);
      if (lid < SIFT_ORI_HIST_BINS) {
        const int m = min(chunk, total - s0);
        for (int t = 0; t < m; ++t)
          if (chunk_bin[t] == lid) acc += chunk_val[t];
      }
      barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid < SIFT_ORI_HIST_BINS) raw[lid] = acc;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid == 0) {
      const float omax = sift_orientation_smooth_local(raw, hist);
      const float mag_thr = omax * SIFT_ORI_PEAK_RATIO;
      for (int j = 0; j < SIFT_ORI_HIST_BINS; ++j) {
        if (!sift_orientation_is_peak_local(hist, j, mag_thr)) continue;
        SiftKeypoint out = kp;
        out.angle = sift_orientation_peak_angle_local(hist, j);
        const uint slot = atomic_inc(&counters[SIFT_COUNT_ORIENTED]);
        if (slot < capacity) keypoints[slot] = out;
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
}

/* sift_orientation_serial (CPU devices): global (G), work-group (L); work-item t takes refined points t,
 * t + G, ... and adds each sample's contribution to its bin in turn (the CPU backend's loop, the same sums).
 * Per row, the (bin, contribution) of a run of SIFT_ORI_RUN samples are computed first (a loop without a
 * scatter, which the compiler vectorises), then added to their bins in sample order.
 * Local memory (host-sized): ex_all[L ex_cap], the window weights of each work-item. */
#define SIFT_ORI_RUN 32

__kernel void sift_orientation_serial(__global const float* gauss, __global const long* info,
                                      __global const SiftKeypoint* refined, __global volatile uint* counters,
                                      uint refined_capacity, uint capacity, __global SiftKeypoint* keypoints,
                                      __local float* ex_all, int ex_cap) {
  __local float* ex = ex_all + (size_t)get_local_id(0) * (size_t)ex_cap;
  const uint count = min(counters[SIFT_COUNT_REFINED], refined_capacity);
  for (uint p = get_global_id(0); p < count; p += get_global_size(0)) {
    const SiftKeypoint kp = refined[p];
    const int w = sift_oct_w(info, kp.octave_index), h = sift_oct_h(info, kp.octave_index);
    __global const float* img = sift_level_of(gauss, info, kp);
    const int radius = sift_orientation_radius(kp, ex_cap);
    for (int k = 0; k <= 2 * radius; ++k) ex[k] = sift_orientation_weight(kp, k - radius);
    float raw[SIFT_ORI_HIST_BINS], hist[SIFT_ORI_HIST_BINS];
    for (int b = 0; b < SIFT_ORI_HIST_BINS; ++b) raw[b] = 0.0f;
    const int x_lo = max(kp.c - radius, 1), x_hi = min(kp.c + radius, w - 2);
    for (int i = -radius; i <= radius; ++i) {
      const int y = kp.r + i;
      if (y <= 0 || y >= h - 1) continue;
      __global const float* mid = img + (size_t)y * (size_t)w;
      for (int x0 = x_lo; x0 <= x_hi; x0 += SIFT_ORI_RUN) {
        const int n = min(SIFT_ORI_RUN, x_hi - x0 + 1);
        int bin[SIFT_ORI_RUN];
        float val[SIFT_ORI_RUN];
        for (int t = 0; t < n; ++t)  /* no scatter: vectorises */
          bin[t] = sift_orientation_gradient(mid, w, x0 + t, ex[i + radius], ex[x0 + t - kp.c + radius], &val[t]);
        for (int t = 0; t < n; ++t) raw[bin[t]] += val[t];  /* in sample order */
      }
    }
    const float mag_thr = sift_orientation_smooth(raw, hist) * SIFT_ORI_PEAK_RATIO;
    for (int j = 0; j < SIFT_ORI_HIST_BINS; ++j) {
      if (!sift_orientation_is_peak(hist, j, mag_thr)) continue;
      SiftKeypoint out = kp;
      out.angle = sift_orientation_peak_angle(hist, j);
      const uint slot = atomic_inc(&counters[SIFT_COUNT_ORIENTED]);
      if (slot < capacity) keypoints[slot] = out;
    }
  }
}

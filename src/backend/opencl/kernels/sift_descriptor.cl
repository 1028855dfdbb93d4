/* sift_descriptor.cl — the 4 x 4 x 8 descriptor of every kept keypoint (numeric/sift_descriptor.h), then
 * RootSIFT when asked. (Part of the sift.cl program.)
 *
 * The fixed reduction order of DESIGN.md: work-item q (q < 36) owns the 10 accumulator entries of spatial
 * cell q of the (d + 2) x (d + 2) grid, in private memory, and walks the window's samples in sample order
 * (rows ascending, then columns), adding the shares that each sample gives to its cell. Every entry is thus
 * the CPU's float sum, without float atomics and without a barrier inside the walk. The cheap part of a
 * sample (its rotated bins) is computed by all 36 walkers; the gradient, atan2, weight and shares only by
 * the at most 4 cells it feeds. (A first form staged every sample's bins and shares in local memory and let
 * the owners read them after a barrier: PoCL 3 compiled its accumulation loop to nothing.) */

#define SIFT_DESCR_CELLS ((SIFT_DESCR_WIDTH + 2) * (SIFT_DESCR_WIDTH + 2))
#define SIFT_DESCR_LEN (SIFT_DESCR_WIDTH * SIFT_DESCR_WIDTH * SIFT_DESCR_HIST_BINS)

/* sift_descriptor: global (G L), work-group (L) with L >= 36; work-group g takes kept keypoints g, g + G, ...
 * (the count is read on the device); work-items 0..35 walk the window, the others help with the weights.
 * Local memory (host-sized): ex[ex_cap] >= 2R + 1 for the plan's largest window radius R.
 * deg2rad = float(pi / 180) from the host. */
__kernel void sift_descriptor(__global const float* gauss, __global const long* info,
                              __global const SiftKeypoint* kps, __global const uint* counters, uint capacity,
                              float deg2rad, int root_sift, __global float* descriptors,
                              __local float* ex, int ex_cap) {
  __local float hist[SIFT_DESCR_HIST_LEN];
  __local float out[SIFT_DESCR_LEN];
  const int lid = get_local_id(0), lsize = get_local_size(0);
  const int d = SIFT_DESCR_WIDTH, nb = SIFT_DESCR_HIST_BINS;
  const uint count = min(counters[SIFT_COUNT_KEPT], capacity);
  for (uint p = get_group_id(0); p < count; p += get_num_groups(0)) {
    const SiftKeypoint kp = kps[p];
    const int o = kp.octave_index;
    const int w = SIFT_OCT_W(info, o), h = SIFT_OCT_H(info, o);
    __global const float* img = gauss + SIFT_OCT_GAUSS(info, o) + (size_t)kp.layer * (size_t)w * (size_t)h;
    /* The sample grid with the CPU backend's float operations in their order (notes §8). */
    const int oct = kp.octave;
    const float scale = oct >= 0 ? 1.0f / (float)(1 << oct) : (float)(1 << -oct);
    const float size = kp.size * scale;
    const float ptx = kp.x * scale, pty = kp.y * scale;
    float ori = 360.0f - kp.angle;
    if (fabs(ori - 360.0f) < SIFT_FLT_EPSILON) ori = 0.0f;
    const float scl = size * 0.5f;
    const int cx = sift_round(ptx), cy = sift_round(pty);
    float cos_t = sift_dev_cos(ori * deg2rad);
    float sin_t = sift_dev_sin(ori * deg2rad);
    const float bins_per_deg = (float)nb / 360.0f;
    const float exp_scale = -1.0f / ((float)(d * d) * 0.5f);
    const float hist_width = SIFT_DESCR_SCL_FCTR * scl;
    int radius = sift_round(hist_width * 1.4142135623730951f * (float)(d + 1) * 0.5f);
#if defined(SIFT_HAVE_DOUBLE)
    radius = min(radius, (int)sqrt((double)w * w + (double)h * h));
#else
    radius = min(radius, (int)sqrt((float)w * w + (float)h * h));
#endif
    radius = min(radius, (ex_cap - 1) / 2);  /* the host sizes ex_cap for the plan's largest radius */
    cos_t /= hist_width;
    sin_t /= hist_width;
    const float inv_hw2 = 1.0f / (hist_width * hist_width);
    for (int k = lid; k <= 2 * radius; k += lsize)
      ex[k] = sift_dev_exp((float)((k - radius) * (k - radius)) * inv_hw2 * exp_scale);
    barrier(CLK_LOCAL_MEM_FENCE);
    float acc[SIFT_DESCR_HIST_BINS + 2];  /* work-item q < 36: the entries of cell q, o = 0 .. n + 1 */
    for (int k = 0; k < SIFT_DESCR_HIST_BINS + 2; ++k) acc[k] = 0.0f;
    if (lid < SIFT_DESCR_CELLS) {
      const int qr = lid / (d + 2), qc = lid % (d + 2);
      for (int i = -radius; i <= radius; ++i) {
        const int y = cy + i;
        if (y <= 0 || y >= h - 1) continue;
        const float fi = (float)i;
        __global const float* mid = img + (size_t)y * (size_t)w;
        for (int j = -radius; j <= radius; ++j) {
          const int x = cx + j;
          const float fj = (float)j;
          const float c_rot = fj * cos_t - fi * sin_t;
          const float r_rot = fj * sin_t + fi * cos_t;
          const float rbin = r_rot + 2.0f - 0.5f;
          const float cbin = c_rot + 2.0f - 0.5f;
          if (x <= 0 || x >= w - 1 || !(rbin > -1 && rbin < d && cbin > -1 && cbin < d)) continue;
          float f0, f1, f2;
          const int r0 = sift_descriptor_split(rbin, &f0);
          const int c0 = sift_descriptor_split(cbin, &f1);
          const int dr = qr - (r0 + 1), dc = qc - (c0 + 1);  /* this cell takes shares (dr, dc) */
          if (dr < 0 || dr > 1 || dc < 0 || dc > 1) continue;
          const float dx = mid[x + 1] - mid[x - 1];
          const float dy = mid[x - w] - mid[x + w];
          int o0 = sift_descriptor_split((sift_atan2_deg(dy, dx) - ori) * bins_per_deg, &f2);
          o0 = o0 < 0 ? o0 + nb : o0;
          o0 = o0 >= nb ? o0 - nb : o0;
          const float mag = sqrt(dx * dx + dy * dy) * (ex[i + radius] * ex[j + radius]);
          const SiftDescriptorShares sh = sift_descriptor_shares(mag, f0, f1, f2);
          const int k = 4 * dr + 2 * dc;
          acc[o0] += k == 0 ? sh.v[0] : k == 2 ? sh.v[2] : k == 4 ? sh.v[4] : sh.v[6];
          acc[o0 + 1] += k == 0 ? sh.v[1] : k == 2 ? sh.v[3] : k == 4 ? sh.v[5] : sh.v[7];
        }
      }
      for (int k = 0; k < SIFT_DESCR_HIST_BINS + 2; ++k) hist[lid * (SIFT_DESCR_HIST_BINS + 2) + k] = acc[k];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid == 0) {
      __global float* row = descriptors + (size_t)p * SIFT_DESCR_LEN;
      sift_descriptor_finalize_local(hist, out);
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


/* sift_descriptor.cl — the 4 x 4 x 8 descriptor of every kept keypoint (numeric/sift_descriptor.h), then
 * RootSIFT when asked. (Part of the sift.cl program.)
 *
 * The fixed reduction order of DESIGN.md: the window's samples (rows ascending, then columns) are taken in
 * chunks; all work-items compute their samples' accumulator index, bin fractions and weighted magnitude
 * into local memory; then work-item q (q < 36) owns the 10 accumulator entries of spatial cell q of the
 * (d + 2) x (d + 2) grid and adds, in sample order, the shares that each sample gives to its cell. Every
 * entry is thus the CPU's float sum, without float atomics. */

#define SIFT_DESCR_CELLS ((SIFT_DESCR_WIDTH + 2) * (SIFT_DESCR_WIDTH + 2))
#define SIFT_DESCR_LEN (SIFT_DESCR_WIDTH * SIFT_DESCR_WIDTH * SIFT_DESCR_HIST_BINS)

/* sift_descriptor: global (G L), work-group (L) with L >= 36; work-group g takes kept keypoints g, g + G, ...
 * (the count is read on the device). Local memory (host-sized): chunk_idx/chunk_frac[chunk], ex[ex_cap] >=
 * 2R + 1 for the plan's largest window radius R. deg2rad = float(pi / 180) from the host. */
__kernel void sift_descriptor(__global const float* gauss, __global const long* info,
                              __global const SiftKeypoint* kps, __global const uint* counters, uint capacity,
                              float deg2rad, int root_sift, __global float* descriptors, __local int* chunk_idx,
                              __local float4* chunk_frac, int chunk, __local float* ex, int ex_cap) {
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
    for (int k = lid; k < SIFT_DESCR_HIST_LEN; k += lsize) hist[k] = 0.0f;
    barrier(CLK_LOCAL_MEM_FENCE);
    const int side = 2 * radius + 1;
    const int total = side * side;
    for (int s0 = 0; s0 < total; s0 += chunk) {
      for (int t = lid; t < chunk; t += lsize) {
        const int s = s0 + t;
        int idx = -1;
        float4 frac = (float4)(0.0f);
        if (s < total) {
          const int i = s / side - radius, j = s % side - radius;
          const int y = cy + i, x = cx + j;
          const float fi = (float)i, fj = (float)j;
          const float c_rot = fj * cos_t - fi * sin_t;
          const float r_rot = fj * sin_t + fi * cos_t;
          const float rbin = r_rot + 2.0f - 0.5f;
          const float cbin = c_rot + 2.0f - 0.5f;
          if (y > 0 && y < h - 1 && x > 0 && x < w - 1 && rbin > -1 && rbin < d && cbin > -1 && cbin < d) {
            __global const float* mid = img + (size_t)y * (size_t)w;
            const float dx = mid[x + 1] - mid[x - 1];
            const float dy = mid[x - w] - mid[x + w];
            float f0, f1, f2;
            const int r0 = sift_descriptor_split(rbin, &f0);
            const int c0 = sift_descriptor_split(cbin, &f1);
            int o0 = sift_descriptor_split((sift_atan2_deg(dy, dx) - ori) * bins_per_deg, &f2);
            o0 = o0 < 0 ? o0 + nb : o0;
            o0 = o0 >= nb ? o0 - nb : o0;
            idx = sift_descriptor_index(r0, c0, o0);
            frac = (float4)(f0, f1, f2, sqrt(dx * dx + dy * dy) * (ex[i + radius] * ex[j + radius]));
          }
        }
        chunk_idx[t] = idx;
        chunk_frac[t] = frac;
      }
      barrier(CLK_LOCAL_MEM_FENCE);
      if (lid < SIFT_DESCR_CELLS) {
        const int m = min(chunk, total - s0);
        for (int t = 0; t < m; ++t) {
          const int idx = chunk_idx[t];
          if (idx < 0) continue;
          const int cell = idx / (nb + 2);
          const int dq = lid - cell;  /* 0, 1, d + 2, d + 3: this cell takes shares (dr, dc) of the sample */
          const int dr = dq >= d + 2 ? 1 : 0;
          const int dc = dq - dr * (d + 2);
          if (dq < 0 || dc < 0 || dc > 1) continue;
          const float4 f = chunk_frac[t];
          const SiftDescriptorShares sh = sift_descriptor_shares(f.w, f.x, f.y, f.z);
          const int k = 4 * dr + 2 * dc;
          const int e = idx + sift_descriptor_share_offset(k);
          hist[e] += sh.v[k];
          hist[e + 1] += sh.v[k + 1];
        }
      }
      barrier(CLK_LOCAL_MEM_FENCE);
    }
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

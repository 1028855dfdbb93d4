/* sift_descriptor_staged.cl — the staged form of the GPU descriptor kernel (numeric/sift_descriptor.h, 'The
 * staged form'; the OpenCL port of backend/cuda/kernels/sift_descriptor_staged.cuh): the same descriptors as
 * the walkers of sift_descriptor.cl and as the CPU backend, bit for bit, with each sample computed once
 * instead of once per cell it feeds. State::descriptor_variant picks the form on GPUs (sift_features.cpp);
 * CPU devices run sift_descriptor_serial. (Part of the sift.cl program.)
 *
 * The fixed reduction order of DESIGN.md: every accumulator entry is the float sum of its shares in sample
 * order (rows ascending, then columns), as the CPU backend adds them, without float atomics.
 *
 * Several keypoints a work-group, a slice of 32 work-items each (a warp on NVIDIA): with S = L / 32 slices
 * (S = 4, work-groups of 128, by default; S = 1 for a comparison), slice k of work-group g takes kept
 * keypoints (g + m G) S + k, m = 0, 1, .... The window is taken in bands of whole
 * rows (sift_descriptor_bands: the grid's bounding square, off the plane's outer ring). Phase A: the 32
 * work-items of the slice compute each sample of the band once (bins, gradient, atan2, weight:
 * sift_descriptor_stage_sample) into a record in local memory. Phase B: work-item t < 16 of the slice owns
 * the 10 entries of inner cell t as a COLUMN of the slice's accumulator in local memory (entry e at
 * acc[e 16 + t]: a dynamic index, no 8-way select of a private array, which made branch s2-desc's OpenCL
 * port slower than the walkers on NVIDIA OpenCL) and walks its box of the band (sift_descriptor_owner_box) in
 * sample order, adding the two shares each record gives its cell (sift_descriptor_cell_shares). Then the
 * inner entries folded by all, the two norms in the CPU's index order by one work-item, the bytes by all.
 *
 * OpenCL 1.2 has no sub-group barrier, so the slices meet at work-group barriers: every loop around a barrier
 * has the same trip count in every slice (the keypoint loop steps over groups of SIFT_DESCR_SLICES keypoints;
 * the band loop runs to the largest band count of the work-group's keypoints, a slice with fewer bands, or
 * none past the kept count, idling), and every barrier is reached by the whole work-group. The owner's walk
 * has no `continue` (a hit guards the two additions): branch s2-desc's first staged form, with `continue`
 * between barriers, was compiled to nothing by PoCL 3. */

#define SIFT_DESCR_SLICES 4                                                 /* the most keypoints a work-group */
#define SIFT_DESCR_SLICE 32                                                 /* work-items a keypoint */
#define SIFT_DESCR_OWNERS (SIFT_DESCR_WIDTH * SIFT_DESCR_WIDTH)             /* inner cells, one work-item each */
#define SIFT_DESCR_ACC ((SIFT_DESCR_HIST_BINS + 2) * SIFT_DESCR_OWNERS)     /* their entries */

/* sift_descriptor_staged: global (G L), work-group (L) = S slices of SIFT_DESCR_SLICE work-items, L = 32 S,
 * S = 1 .. SIFT_DESCR_SLICES (the host launches L = 128, or 32 for State::descriptor_variant 2, where the
 * kernel allows it, else the walkers); work-group g takes kept keypoints S g .. S g + S - 1, then + S G, ...
 * (the kept count is read on the device). Local memory, per slice (host-sized, arguments of S x the slice's
 * size): recs[chunk] float4 (rf, cf, of, mag), codes[chunk],
 * ex[ex_cap] (the window weights), with ex_cap >= 2R + 1 for the plan's largest window radius R and chunk >=
 * ex_cap (a band holds at least one window row); plus its accumulator (160 floats) and output row (128).
 * deg2rad = float(pi / 180) from the host. */
__kernel void sift_descriptor_staged(__global const float* gauss, __global const long* info,
                                     __global const SiftKeypoint* kps, __global const uint* counters, uint capacity,
                                     float deg2rad, int root_sift, __global float* descriptors,
                                     __local float* ex_all, int ex_cap, __local float4* recs_all,
                                     __local int* codes_all, int chunk) {
  /* sized for the most slices; slice k: entry e of inner cell t at [k 160 + e 16 + t] */
  __local float acc_all[SIFT_DESCR_SLICES * SIFT_DESCR_ACC];
  __local float out_all[SIFT_DESCR_SLICES * SIFT_DESCR_LEN];
  __local int bands_of[SIFT_DESCR_SLICES];
  __local float scale_of[SIFT_DESCR_SLICES];
  const int lid = get_local_id(0);
  const int slices = (int)get_local_size(0) / SIFT_DESCR_SLICE;
  const int slice = lid / SIFT_DESCR_SLICE, lane = lid % SIFT_DESCR_SLICE;
  __local float* ex = ex_all + slice * ex_cap;
  __local float4* recs = recs_all + slice * chunk;
  __local int* codes = codes_all + slice * chunk;
  __local float* acc = acc_all + slice * SIFT_DESCR_ACC;
  __local float* out = out_all + slice * SIFT_DESCR_LEN;
  const int d = SIFT_DESCR_WIDTH;
  const uint count = min(counters[SIFT_COUNT_KEPT], capacity);
  /* the same trip count in every slice: base is the work-group's first keypoint */
  for (uint base = get_group_id(0) * (uint)slices; base < count; base += get_num_groups(0) * (uint)slices) {
    const uint p = base + (uint)slice;
    const int live = p < count;
    /* a slice past the kept count takes the frame of the group's first keypoint (valid) and no band */
    const SiftKeypoint kp = kps[live ? p : base];
    const SiftDescriptorFrame f = sift_descriptor_frame(kp, info, deg2rad, ex_cap);
    __global const float* img = sift_level_of(gauss, info, kp);
    for (int k = lane; k <= 2 * f.radius; k += SIFT_DESCR_SLICE) ex[k] = sift_descriptor_weight(f, k - f.radius);
    const SiftDescriptorBands w = sift_descriptor_bands(f, chunk);
    const int bands = live ? w.bands : 0;
    const int qr = lane / d + 1, qc = lane % d + 1; /* the inner cell of owner lane < 16 */
    int i_lo, i_hi, j_lo, j_hi;
    sift_descriptor_owner_box(f, w, qr, qc, &i_lo, &i_hi, &j_lo, &j_hi);
    for (int k = lane; k < SIFT_DESCR_ACC; k += SIFT_DESCR_SLICE) acc[k] = 0.0f;
    if (lane == 0) bands_of[slice] = bands;
    barrier(CLK_LOCAL_MEM_FENCE);
    int max_bands = 0;
    for (int k = 0; k < slices; ++k) max_bands = max(max_bands, bands_of[k]);
    for (int band = 0; band < max_bands; ++band) {
      const int mine = band < bands;
      const int i0 = w.i_first + band * w.rows;
      const int n = mine ? min(w.rows, w.i_last - i0 + 1) * w.width : 0;
      for (int s = lane; s < n; s += SIFT_DESCR_SLICE) {
        float rf = 0.0f, cf = 0.0f, of = 0.0f, mag = 0.0f;
        codes[s] = sift_descriptor_stage_sample_local(f, img, ex, i0 + s / w.width, w.j_first + s % w.width, &rf,
                                                      &cf, &of, &mag);
        recs[s] = (float4)(rf, cf, of, mag);
      }
      barrier(CLK_LOCAL_MEM_FENCE);
      /* the owner's box in this band, in sample order (no work-item past 15, and no idle slice, has rows) */
      const int r_lo = max(i_lo, i0);
      const int r_hi = mine && lane < SIFT_DESCR_OWNERS ? min(i_hi, i0 + w.rows - 1) : r_lo - 1;
      for (int i = r_lo; i <= r_hi; ++i) {
        const int s_row = (i - i0) * w.width - w.j_first;
        for (int j = j_lo; j <= j_hi; ++j) {
          const float4 r = recs[s_row + j];
          int o0 = 0;
          float s0 = 0.0f, s1 = 0.0f;
          if (sift_descriptor_cell_shares(codes[s_row + j], qr, qc, r.x, r.y, r.z, r.w, &o0, &s0, &s1)) {
            acc[o0 * SIFT_DESCR_OWNERS + lane] += s0; /* the owner's column: no other work-item touches it */
            acc[(o0 + 1) * SIFT_DESCR_OWNERS + lane] += s1;
          }
        }
      }
      barrier(CLK_LOCAL_MEM_FENCE); /* the records are rewritten by the next band; acc read below */
    }
    for (int k = lane; k < SIFT_DESCR_LEN; k += SIFT_DESCR_SLICE) out[k] = sift_descriptor_inner_entry_local(acc, k);
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lane == 0) scale_of[slice] = sift_descriptor_clip_local(out, sift_descriptor_norm2_local(out));
    barrier(CLK_LOCAL_MEM_FENCE);
    const float scale = scale_of[slice];
    __global float* row = descriptors + (size_t)p * SIFT_DESCR_LEN;
#if defined(SIFT_HAVE_DOUBLE)
    const int rows_now = live && !root_sift; /* RootSIFT rows are written by one work-item, below */
#else
    const int rows_now = live; /* the host refuses RootSIFT without doubles */
#endif
    for (int k = lane; k < SIFT_DESCR_LEN; k += SIFT_DESCR_SLICE) {
      const float v = sift_descriptor_byte(out[k], scale);
      out[k] = v;
      if (rows_now) row[k] = v;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
#if defined(SIFT_HAVE_DOUBLE)
    if (root_sift && live && lane == 0) {
      float v[SIFT_DESCR_LEN];
      for (int k = 0; k < SIFT_DESCR_LEN; ++k) v[k] = out[k];
      sift_descriptor_root(v);
      for (int k = 0; k < SIFT_DESCR_LEN; ++k) row[k] = v[k];
    }
#endif
    barrier(CLK_LOCAL_MEM_FENCE); /* ex, acc, out and bands_of are rewritten by the next keypoints */
  }
}

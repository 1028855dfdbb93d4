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
 * (S = 1, work-groups of 32, by default on GPUs; S = 4, work-groups of 128), slice k of work-group g takes kept
 * keypoints (g + m G) S + k, m = 0, 1, .... The window is taken in bands of whole
 * rows (sift_descriptor_bands: the grid's bounding square, off the plane's outer ring). Phase A: the 32
 * work-items of the slice compute each sample of the band once (bins, gradient, atan2, weight:
 * sift_descriptor_stage_sample) into a record in local memory. Phase B: work-item t < 16 of the slice owns
 * the 10 entries of inner cell t as a COLUMN of the slice's accumulator in local memory (entry e at
 * acc[e 16 + t]: a dynamic index, no 8-way select of a private array, which made branch s2-desc's OpenCL
 * port slower than the walkers on NVIDIA OpenCL) and walks its box of the band (sift_descriptor_owner_box) in
 * sample order, adding the two shares each record gives its cell (sift_descriptor_cell_shares; the row walk,
 * below, visits only part of the box). Then the
 * inner entries folded by all, the two norms in the CPU's index order by one work-item, the bytes by all.
 *
 * OpenCL 1.2 has no sub-group barrier, so the slices meet at work-group barriers: every loop around a barrier
 * has the same trip count in every slice (the keypoint loop steps over groups of SIFT_DESCR_SLICES keypoints;
 * the band loop runs to the largest band count of the work-group's keypoints, a slice with fewer bands, or
 * none past the kept count, idling), and every barrier is reached by the whole work-group. The owner's walk
 * has no `continue` (a hit guards the additions): branch s2-desc's first staged form, with `continue`
 * between barriers, was compiled to nothing by PoCL 3.
 *
 * Two owner walks, two kernels with the same arguments (one body, sift_descriptor_staged_run, specialised by a
 * constant), as CUDA's sift_descriptor_staged<kRowWalk> (issue 19's profile; numeric/sift_descriptor.h, 'The row
 * walk'):
 * - sift_descriptor_staged, the box walk: records hold the cell as ((r0 + 1) (d + 2) + c0 + 1) n + o0; the owner
 *   walks every column of its box and decodes each record (sift_descriptor_cell_shares).
 * - sift_descriptor_staged_rows, the row walk: phase A loads the pixel differences of a work-item's next
 *   SIFT_DESCR_LOADS samples before computing them (sift_descriptor_diffs, sift_descriptor_row_record); records
 *   hold the cell decoded (sift_descriptor_row_code; the owner's test a subtraction and a mask,
 *   sift_descriptor_row_shares); per row of its box the owner visits only the columns of its rotated square
 *   (sift_descriptor_row_span / row_cols) and adds two records a step (sift_descriptor_owner_add2). The same
 *   records pass the exact test and every entry gets the same additions in the same order: the same bits.
 * State::descriptor_variant 2 (the default on GPUs) and 1 run the box walk in work-groups of 32 and 128, 3 and 4
 * the row walk in work-groups of 32 and 128. The row walk is not the default: CUDA's was 1.4-1.8x faster than its
 * box walk on the H200, but this one has not been measured on NVIDIA OpenCL yet (docs/performance/sift.md). */

#define SIFT_DESCR_SLICES 4                                                 /* the most keypoints a work-group */
#define SIFT_DESCR_SLICE 32                                                 /* work-items a keypoint */
#define SIFT_DESCR_OWNERS (SIFT_DESCR_WIDTH * SIFT_DESCR_WIDTH)             /* inner cells, one work-item each */
#define SIFT_DESCR_ACC ((SIFT_DESCR_HIST_BINS + 2) * SIFT_DESCR_OWNERS)     /* their entries */
/* row walk: samples whose pixels a work-item loads before computing them (128 a slice, CUDA's kDescrLoads) */
#define SIFT_DESCR_LOADS 4
/* records and codes the host adds after the last slice's: the row walk's pipelined loads run up to 3 past a
 * band's last record (into the next slice's records and codes, which nothing writes during phase B, or into
 * these) */
#define SIFT_DESCR_PAD 4

/* The body of both kernels; row_walk a constant: 0 the box walk, 1 the row walk (above). acc_all, out_all: the
 * slices' accumulators and output rows (host-sized local arguments, so a work-group of 32 holds one slice's, not
 * four); bands_of, scale_of: SIFT_DESCR_SLICES each, the kernels' own. */
inline void sift_descriptor_staged_run(__global const float* gauss, __global const long* info,
                                       __global const SiftKeypoint* kps, __global const uint* counters, uint capacity,
                                       float deg2rad, int root_sift, __global float* descriptors,
                                       __local float* ex_all, int ex_cap, __local float4* recs_all,
                                       __local int* codes_all, int chunk, __local float* acc_all,
                                       __local float* out_all, __local int* bands_of, __local float* scale_of,
                                       const int row_walk) {
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
    const int key = sift_descriptor_owner_key(qr, qc);                       /* row walk */
    const SiftDescriptorRowSpan span = sift_descriptor_row_span(f, qr, qc);  /* row walk */
    for (int k = lane; k < SIFT_DESCR_ACC; k += SIFT_DESCR_SLICE) acc[k] = 0.0f;
    if (lane == 0) bands_of[slice] = bands;
    barrier(CLK_LOCAL_MEM_FENCE);
    int max_bands = 0;
    for (int k = 0; k < slices; ++k) max_bands = max(max_bands, bands_of[k]);
    for (int band = 0; band < max_bands; ++band) {
      const int mine = band < bands;
      const int i0 = w.i_first + band * w.rows;
      const int n = mine ? min(w.rows, w.i_last - i0 + 1) * w.width : 0;
      if (row_walk) {
        /* Phase A: the pixel differences of the work-item's next SIFT_DESCR_LOADS samples first (every sample of
         * a band lies off the plane's outer ring, so its four neighbours are in the plane; a work-item past the
         * band's end loads the last sample again), so that their loads are in flight together; then the records. */
        for (int base = 0; base < n; base += SIFT_DESCR_SLICE * SIFT_DESCR_LOADS) {
          float dx[SIFT_DESCR_LOADS], dy[SIFT_DESCR_LOADS];
#pragma unroll
          for (int u = 0; u < SIFT_DESCR_LOADS; ++u) {
            const int s = min(base + SIFT_DESCR_SLICE * u + lane, n - 1);
            sift_descriptor_diffs(f, img, i0 + s / w.width, w.j_first + s % w.width, &dx[u], &dy[u]);
          }
#pragma unroll
          for (int u = 0; u < SIFT_DESCR_LOADS; ++u) {
            const int s = base + SIFT_DESCR_SLICE * u + lane;
            if (s < n) {
              float rf = 0.0f, cf = 0.0f, of = 0.0f, mag = 0.0f;
              codes[s] = sift_descriptor_row_record_local(f, ex, i0 + s / w.width, w.j_first + s % w.width, dx[u],
                                                          dy[u], &rf, &cf, &of, &mag);
              recs[s] = (float4)(rf, cf, of, mag);
            }
          }
        }
      } else {
        for (int s = lane; s < n; s += SIFT_DESCR_SLICE) {
          float rf = 0.0f, cf = 0.0f, of = 0.0f, mag = 0.0f;
          codes[s] = sift_descriptor_stage_sample_local(f, img, ex, i0 + s / w.width, w.j_first + s % w.width, &rf,
                                                        &cf, &of, &mag);
          recs[s] = (float4)(rf, cf, of, mag);
        }
      }
      barrier(CLK_LOCAL_MEM_FENCE);
      /* Phase B: the owner's box in this band, in sample order (no work-item past 15, and no idle slice, has
       * rows) */
      const int r_lo = max(i_lo, i0);
      const int r_hi = mine && lane < SIFT_DESCR_OWNERS ? min(i_hi, i0 + w.rows - 1) : r_lo - 1;
      for (int i = r_lo; i <= r_hi; ++i) {
        const int s_row = (i - i0) * w.width - w.j_first;
        if (row_walk) {
          int jl, jh;
          sift_descriptor_row_cols(span, i, j_lo, j_hi, &jl, &jh);
          if (jl <= jh) {
            /* Two records a step (sift_descriptor_owner_add2: one load-add-store chain for both), software-
             * pipelined: the next two records are loaded before these two's shares are added. Loads run up to 3
             * records past jh, at most past the band's last record (n - 1) into the next slice's records and
             * codes or the host's SIFT_DESCR_PAD after the last slice's (nothing writes there during phase B);
             * a record past jh counts as a miss (its o0 unread). */
            __local const int* cp = codes + s_row + jl;
            __local const float4* rp = recs + s_row + jl;
            int code_a = cp[0], code_b = cp[1];
            float4 ra = rp[0], rb = rp[1];
#pragma unroll 2
            for (int j = jl; j <= jh; j += 2) {
              cp += 2;
              rp += 2;
              const int code_na = cp[0], code_nb = cp[1];
              const float4 rna = rp[0], rnb = rp[1];
              int oa = 0, ob = 0;
              float sa0 = 0.0f, sa1 = 0.0f, sb0 = 0.0f, sb1 = 0.0f;
              const int hit_a = sift_descriptor_row_shares(key, code_a, ra.x, ra.y, ra.z, ra.w, &oa, &sa0, &sa1);
              const int hit_b =
                  sift_descriptor_row_shares(key, code_b, rb.x, rb.y, rb.z, rb.w, &ob, &sb0, &sb1) && j + 1 <= jh;
              /* the owner's column of the accumulator: no other work-item touches it */
              sift_descriptor_owner_add2_local(acc + lane, SIFT_DESCR_OWNERS, hit_a, oa, sa0, sa1, hit_b, ob, sb0,
                                               sb1);
              code_a = code_na;
              code_b = code_nb;
              ra = rna;
              rb = rnb;
            }
          }
        } else {
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

/* sift_descriptor_staged (the box walk) and sift_descriptor_staged_rows (the row walk): global (G L), work-group
 * (L) = S slices of SIFT_DESCR_SLICE work-items, L = 32 S, S = 1 .. SIFT_DESCR_SLICES (the host launches L = 32
 * for State::descriptor_variant 2 and 3, L = 128 for 1 and 4, where the kernel allows it, else the walkers);
 * work-group g takes kept keypoints S g .. S g + S - 1, then + S G, ... (the kept count is read on the device).
 * Local memory, per slice (host-sized, arguments of S x the slice's size): ex[ex_cap] (the window weights),
 * recs[chunk] float4 (rf, cf, of, mag), codes[chunk], acc[SIFT_DESCR_ACC] (entry e of inner cell t at
 * [e 16 + t]), out[SIFT_DESCR_LEN]; recs and codes with SIFT_DESCR_PAD more after the last slice's (the row
 * walk's loads); ex_cap >= 2R + 1 for the plan's largest window radius R and chunk >= ex_cap (a band holds at
 * least one window row; the row walk needs chunk >= 12, as CUDA's). deg2rad = float(pi / 180) from the host. */
__kernel void sift_descriptor_staged(__global const float* gauss, __global const long* info,
                                     __global const SiftKeypoint* kps, __global const uint* counters, uint capacity,
                                     float deg2rad, int root_sift, __global float* descriptors,
                                     __local float* ex_all, int ex_cap, __local float4* recs_all,
                                     __local int* codes_all, int chunk, __local float* acc_all,
                                     __local float* out_all) {
  __local int bands_of[SIFT_DESCR_SLICES];
  __local float scale_of[SIFT_DESCR_SLICES];
  sift_descriptor_staged_run(gauss, info, kps, counters, capacity, deg2rad, root_sift, descriptors, ex_all, ex_cap,
                             recs_all, codes_all, chunk, acc_all, out_all, bands_of, scale_of, 0);
}

__kernel void sift_descriptor_staged_rows(__global const float* gauss, __global const long* info,
                                          __global const SiftKeypoint* kps, __global const uint* counters,
                                          uint capacity, float deg2rad, int root_sift, __global float* descriptors,
                                          __local float* ex_all, int ex_cap, __local float4* recs_all,
                                          __local int* codes_all, int chunk, __local float* acc_all,
                                          __local float* out_all) {
  __local int bands_of[SIFT_DESCR_SLICES];
  __local float scale_of[SIFT_DESCR_SLICES];
  sift_descriptor_staged_run(gauss, info, kps, counters, capacity, deg2rad, root_sift, descriptors, ex_all, ex_cap,
                             recs_all, codes_all, chunk, acc_all, out_all, bands_of, scale_of, 1);
}

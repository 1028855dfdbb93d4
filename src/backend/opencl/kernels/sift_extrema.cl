/* sift_extrema.cl — the candidate search of one octave, written as compact records with an atomic counter.
 * (Part of the sift.cl program.) */

/* sift_extrema (GPUs): global (round_up(w - 2B, X), Y, S) for octave `octave`'s w x h (B = the plan's border),
 * work-group (X, 1, 1) (the host takes X = 128 where the kernel allows it and Y = ceil((h - 2B) / 8), CUDA's
 * sift_extrema geometry: a work-group per row and layer made 1.5 M work-groups of 64 at 4K upsampled, bound by
 * work-group scheduling); one work-item per interior column of DoG layers 1..S, walking the rows r = B + group
 * y, + Y, ..., SIFT_EXTREMA_LOADS rows at a time (their values loaded together, then tested), for each octave
 * octave .. octave_end - 1 in turn (the host launches the large octaves one by
 * one, octave_end = octave + 1, and the trailing small ones, whose own launches would be a few work-groups each
 * and cost a launch's latency, in one launch sized for the first of them: the later octaves are smaller, their
 * columns and rows are checked per octave). A pixel that passes numeric/sift_extrema.h's test takes a slot
 * from the counter and writes (octave index, layer, row, column) there when the slot is below capacity; the
 * counter ends at the true count, which the host reads back (a count above capacity: grow, run again). The
 * slots are in arrival order, which no result depends on: the select stage sorts to canonical order. */
#define SIFT_EXTREMA_LOADS 4
__kernel void sift_extrema(__global const float* dog, __global const long* info, int octave, int octave_end,
                           int border, float thr, __global volatile uint* counters, __global int4* candidates,
                           uint capacity) {
  const int c = border + (int)get_global_id(0);
  const int r0 = border + (int)get_group_id(1), rows_step = (int)get_num_groups(1);
  const int layer = 1 + (int)get_global_id(2);
  for (int o = octave; o < octave_end; ++o) {
    const int w = sift_oct_w(info, o), h = sift_oct_h(info, o);
    if (c >= w - border) continue;
    const size_t plane = (size_t)w * (size_t)h;
    __global const float* column = dog + sift_oct_dog(info, o) + (size_t)layer * plane + c;
    const int r_end = h - border;
    for (int q = r0; q < r_end; q += SIFT_EXTREMA_LOADS * rows_step) {
      float v[SIFT_EXTREMA_LOADS]; /* loaded together: independent loads in flight */
      for (int u = 0; u < SIFT_EXTREMA_LOADS; ++u) {
        const int r = q + u * rows_step;
        v[u] = r < r_end ? column[(size_t)r * (size_t)w] : 0.0f;
      }
      for (int u = 0; u < SIFT_EXTREMA_LOADS; ++u) {
        const int r = q + u * rows_step;
        if (r >= r_end || fabs(v[u]) <= thr) continue; /* most pixels: the test below fails on its first condition */
        __global const float* cur = column + (size_t)r * (size_t)w;
        if (!sift_is_extremum_global(cur - plane, cur, cur + plane, w, thr)) continue;
        const uint slot = atomic_inc(&counters[SIFT_COUNT_CANDIDATES]);
        if (slot < capacity) candidates[slot] = (int4)(o, layer, r, c);
      }
    }
  }
}

/* sift_extrema_rows (CPU devices): global (ceil((w - 2B) / SIFT_EXTREMA_RUN), h - 2B, S), any work-group
 * shape; one work-item per run of SIFT_EXTREMA_RUN pixels of a row. A full run takes numeric/sift_extrema.h's
 * in-layer test 16 pixels at a time in float16 lanes (sift_extremum_in_layer16: the same comparisons and
 * selects per lane, no arithmetic, so the same answers), which rejects all but a few pixels without a branch
 * per pixel; the pixels that pass get the across-layer test and the append. A partial run takes the scalar
 * test per pixel. The same candidates as sift_extrema (their order is never used: select sorts). */
#define SIFT_EXTREMA_RUN 64

/* numeric/sift_extrema.h's sift_extremum_in_layer for pixels c .. c + 15 of row (above and below: the rows
 * around it): the neighbours folded into max and min in the scalar function's order (n[7] first, then n[0]
 * .. n[6]); -1 in the lanes that pass. sift_load16 is sift_blur.cl's. */
inline int16 sift_extremum_in_layer16(__global const float* above, __global const float* row,
                                      __global const float* below, int c, float thr) {
  const float16 v = sift_load16(row + c);
  float16 mx = sift_load16(row + c - 1), mn = mx;
  __global const float* const nb[7] = {row + c + 1, above + c - 1, above + c, above + c + 1,
                                       below + c - 1, below + c, below + c + 1};
  for (int k = 0; k < 7; ++k) {
    const float16 t = sift_load16(nb[k]);
    mx = select(t, mx, mx > t);  /* mx > t ? mx : t */
    mn = select(t, mn, mn < t);  /* mn < t ? mn : t */
  }
  return ((v > thr) & (v >= mx)) | ((v < -thr) & (v <= mn));
}

__kernel void sift_extrema_rows(__global const float* dog, __global const long* info, int octave, int border,
                                float thr, __global volatile uint* counters, __global int4* candidates,
                                uint capacity) {
  const int w = sift_oct_w(info, octave), h = sift_oct_h(info, octave);
  const int c0 = border + (int)get_global_id(0) * SIFT_EXTREMA_RUN;
  const int r = border + (int)get_global_id(1);
  const int layer = 1 + (int)get_global_id(2);
  if (c0 >= w - border || r >= h - border) return;
  const int n = min(SIFT_EXTREMA_RUN, w - border - c0);
  const size_t plane = (size_t)w * (size_t)h;
  __global const float* row = dog + sift_oct_dog(info, octave) + (size_t)layer * plane + (size_t)r * (size_t)w;
  for (int q = 0; q < n; q += 16) {
    int pass[16];
    const int m = min(16, n - q);
    if (m == 16) {
      const int16 lanes = sift_extremum_in_layer16(row - w, row, row + w, c0 + q, thr);
      if (!any(lanes)) continue;  /* most blocks: no pixel passes */
      vstore16(lanes, 0, pass);
    } else {
      for (int t = 0; t < m; ++t) pass[t] = sift_extremum_in_layer_global(row - w, row, row + w, c0 + q + t, thr);
    }
    for (int t = 0; t < m; ++t) {
      if (!pass[t]) continue;
      __global const float* cur = row + c0 + q + t;
      if (!sift_extremum_across_layers_global(cur - plane, cur + plane, w, cur[0])) continue;
      const uint slot = atomic_inc(&counters[SIFT_COUNT_CANDIDATES]);
      if (slot < capacity) candidates[slot] = (int4)(octave, layer, r, c0 + q + t);
    }
  }
}

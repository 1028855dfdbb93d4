/* sift_blur.cl — the separable Gaussian of the scale space and the octave downsample. (Part of the sift.cl
 * program.)
 *
 * Level i = blur(level i - 1) with the half kernel k[0..R] of the plan (OpenCV's float taps): a vertical
 * pass, then a horizontal pass over its results, each value computed with the CPU backend's float
 * operations in its order (k0 * centre, then + k_i * (before_i + after_i) for i = 1..R), borders by
 * BORDER_REFLECT_101, so that the levels are the CPU's bits. GPUs: sift_blur, both passes in one launch
 * through local memory, the tile shape (TX, TY) chosen by the host from the work-group limit and the
 * device's local memory, or (radius up to 16) sift_blur_tiles, the same values from registers, and
 * sift_blur_small_tiles (32 x 16 tiles) for the small planes; the trailing small octaves (planes that fit local
 * memory three times) in one launch of sift_blur_small_octaves, one work-group. CPU devices: sift_blur_rows, a work-item per row, both passes in one launch. */

/* Strict numerics as in sift.cl: this file is also a program of its own (sift_blur_tiles). */
#pragma OPENCL FP_CONTRACT OFF

/* Index of p in a line of len samples under BORDER_REFLECT_101, reflecting as often as needed. */
inline int sift_reflect101(int p, int len) {
  if (len == 1) return 0;
  while (p < 0 || p >= len) p = p < 0 ? -p : 2 * len - 2 - p;
  return p;
}

/* sift_blur: global (ceil(w / TX) TX, ceil(h / TY) TY), work-group (TX, TY); one work-item per output pixel,
 * both passes in one launch. The work-group stages the input rows y0 - R .. y0 + TY - 1 + R and columns
 * x0 - R .. x0 + TX - 1 + R (reflected) in `in` ((TY + 2R) x (TX + 2R) floats), computes the vertical pass
 * of its TY rows over all those columns into `mid` (TY x (TX + 2R)), then the horizontal pass: the CPU's
 * order (the horizontal pass reads vertical results, at reflected columns near the borders). src_off,
 * dst_off: offsets of the planes in their buffers (floats). With dog_off >= 0 the kernel also writes the DoG
 * plane of the level, dst - src (the CPU backend's float subtraction and bits), at dog_off of dog: the
 * octave's DoG needs no launch and no second read of its levels. */
__kernel void sift_blur(__global const float* src, __global float* dst, long src_off, long dst_off, int w, int h,
                        __global const float* taps, int tap_off, int r, __local float* in, __local float* mid,
                        __global float* dog, long dog_off) {
  const int lx = get_local_id(0), ly = get_local_id(1);
  const int tx = get_local_size(0), ty = get_local_size(1);
  const int x0 = get_group_id(0) * tx, y0 = get_group_id(1) * ty;
  const int cols = tx + 2 * r, rows = ty + 2 * r;
  for (int t = ly; t < rows; t += ty) {
    __global const float* row = src + src_off + (size_t)sift_reflect101(y0 - r + t, h) * (size_t)w;
    for (int c = lx; c < cols; c += tx) in[t * cols + c] = row[sift_reflect101(x0 - r + c, w)];
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  __global const float* k = taps + tap_off;
  for (int c = lx; c < cols; c += tx) {
    const int at = (ly + r) * cols + c;
    float acc = k[0] * in[at];
    for (int i = 1; i <= r; ++i) acc += k[i] * (in[at - i * cols] + in[at + i * cols]);
    mid[ly * cols + c] = acc;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  const int x = x0 + lx, y = y0 + ly;
  if (x >= w || y >= h) return;
  const int at = ly * cols + lx + r;
  float acc = k[0] * mid[at];
  for (int i = 1; i <= r; ++i) acc += k[i] * (mid[at - i] + mid[at + i]);
  dst[dst_off + (size_t)y * (size_t)w + (size_t)x] = acc;
  if (dog_off >= 0) dog[dog_off + (size_t)y * (size_t)w + (size_t)x] = acc - in[(ly + r) * cols + lx + r];
}

#ifdef SIFT_BLUR_R
/* sift_blur_tiles: the GPU blur with the radius R = SIFT_BLUR_R fixed when the program is built (the host
 * builds sift_blur.cl on its own with -DSIFT_BLUR_R=r, once per radius of the plan, up to 16). The same
 * values as sift_blur (same taps, same float operations in the same order, the same staged and reflected
 * tile), computed from registers: with R known the loops unroll, the taps live in registers, and each
 * work-item computes a run of consecutive outputs from a window of values it reads from local memory once
 * (register blocking), instead of reading 2R + 1 local values per output and pass. The OpenCL form of CUDA's
 * sift_blur_tiles<R> (round 3, issue 19: float4 staging and write-out in the work-groups away from the
 * borders, where the H200 profile of round 2 found 45 % and 20-30 % of the instructions in the reflected,
 * scalar staging and write-out; docs/performance/sift.md).
 * Global (ceil(w / 64) 64, ceil(h / 32) 8), work-group (32, 8) (required); output tile 64 x 32.
 *   1. stage the source rows y0 - R .. y0 + 31 + R, columns x0 - A .. x0 + 63 + A (A = R rounded up to 4) in
 *      `in` (row pitch a multiple of 4): a work-group whose window lies inside the plane (and plane offset and
 *      width multiples of 4) loads float4 (work-items lx < SIFT_QUADS, rows ly + 8 i), every load before the
 *      first local store; the others reflect each element as sift_blur does (the columns of a tile away from
 *      the side borders need no reflection);
 *   2. vertical pass: 2 (64 + 2R) items (column x0 - R + c, half of the tile's rows), each 16 outputs of a
 *      column from a window of 16 + 2R values, into `mid` (row pitch odd);
 *   3. horizontal pass: work-item (lx, ly) computes row lx, columns 8 ly .. 8 ly + 7 from a window of
 *      8 + 2R values of `mid` (the lanes of a warp read 32 rows: the odd pitch keeps the banks apart), and
 *      puts them in `mid` again as the output tile (2 float4, pitch 68) once every work-item has read its window;
 *   4. the tile leaves in rows (coalesced): dst and, with dog_off >= 0, the DoG plane dst - src; float4 (a
 *      half warp per row) where the tile lies inside the plane and the offsets and width are multiples of 4.
 * Both choices depend on the work-group's position and the launch's arguments only. */
#define SIFT_TILE_W 64
#define SIFT_TILE_H 32
#define SIFT_VRUN 16
#define SIFT_HRUN 8
#define SIFT_A ((SIFT_BLUR_R + 3) / 4 * 4)
#define SIFT_COLS (SIFT_TILE_W + 2 * SIFT_BLUR_R)
#define SIFT_IN_PITCH (SIFT_TILE_W + 2 * SIFT_A)
#define SIFT_QUADS (SIFT_IN_PITCH / 4)
#define SIFT_IN_ROWS (SIFT_TILE_H + 2 * SIFT_BLUR_R)
#define SIFT_FULL_STEPS (SIFT_IN_ROWS / 8)
#define SIFT_TAIL_ROWS (SIFT_IN_ROWS % 8)
#define SIFT_MID_PITCH (SIFT_COLS + 1)
#define SIFT_OUT_PITCH (SIFT_TILE_W + 4)
#define SIFT_MID_FLOATS (SIFT_TILE_H * (SIFT_MID_PITCH > SIFT_OUT_PITCH ? SIFT_MID_PITCH : SIFT_OUT_PITCH))

__kernel __attribute__((reqd_work_group_size(32, 8, 1))) void sift_blur_tiles(
    __global const float* src, __global float* dst, long src_off, long dst_off, int w, int h,
    __global const float* taps, int tap_off, __global float* dog, long dog_off) {
  __local float4 in4[SIFT_IN_ROWS * SIFT_QUADS];  /* float4: 16-byte aligned rows */
  __local float4 mid4[SIFT_MID_FLOATS / 4];
  __local float* in = (__local float*)in4;
  __local float* mid = (__local float*)mid4;
  const int lx = get_local_id(0), ly = get_local_id(1), lid = ly * 32 + lx;
  const int x0 = get_group_id(0) * SIFT_TILE_W, y0 = get_group_id(1) * SIFT_TILE_H;
  float k[SIFT_BLUR_R + 1];
#pragma unroll
  for (int i = 0; i <= SIFT_BLUR_R; ++i) k[i] = taps[tap_off + i];
  const bool cols_inside = x0 >= SIFT_A && x0 + SIFT_TILE_W + SIFT_A <= w;        /* no staged column reflects */
  const bool rows_inside = y0 >= SIFT_BLUR_R && y0 + SIFT_TILE_H + SIFT_BLUR_R <= h; /* no staged row reflects */
  if (cols_inside && rows_inside && (src_off & 3) == 0 && (w & 3) == 0) {
    if (lx < SIFT_QUADS) {
      __global const float4* p =
          (__global const float4*)(src + src_off + (size_t)(y0 - SIFT_BLUR_R + ly) * (size_t)w + (size_t)(x0 - SIFT_A)) + lx;
      const size_t step8 = 2 * (size_t)w; /* 8 rows, in float4 */
      float4 v[SIFT_FULL_STEPS + 1];
#pragma unroll
      for (int i = 0; i < SIFT_FULL_STEPS; ++i) v[i] = p[i * step8];
      if (SIFT_TAIL_ROWS > 0 && ly < SIFT_TAIL_ROWS) v[SIFT_FULL_STEPS] = p[SIFT_FULL_STEPS * step8];
      __local float4* s = in4 + ly * SIFT_QUADS + lx;
#pragma unroll
      for (int i = 0; i < SIFT_FULL_STEPS; ++i) s[i * 8 * SIFT_QUADS] = v[i];
      if (SIFT_TAIL_ROWS > 0 && ly < SIFT_TAIL_ROWS) s[SIFT_FULL_STEPS * 8 * SIFT_QUADS] = v[SIFT_FULL_STEPS];
    }
  } else {
    for (int t = ly; t < SIFT_IN_ROWS; t += 8) {
      const int y = y0 - SIFT_BLUR_R + t;
      __global const float* row = src + src_off + (size_t)(rows_inside ? y : sift_reflect101(y, h)) * (size_t)w;
      for (int c = lx; c < SIFT_IN_PITCH; c += 32) {
        const int x = x0 - SIFT_A + c;
        in[t * SIFT_IN_PITCH + c] = row[cols_inside ? x : sift_reflect101(x, w)];
      }
    }
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  if (lid < 2 * SIFT_COLS) { /* column x0 - R + c, rows t0 .. t0 + 15 of the tile */
    const int c = lid % SIFT_COLS, t0 = (lid / SIFT_COLS) * SIFT_VRUN;
    __local const float* col = in + t0 * SIFT_IN_PITCH + c + (SIFT_A - SIFT_BLUR_R);
    float win[SIFT_VRUN + 2 * SIFT_BLUR_R];
#pragma unroll
    for (int j = 0; j < SIFT_VRUN + 2 * SIFT_BLUR_R; ++j) win[j] = col[j * SIFT_IN_PITCH];
#pragma unroll
    for (int j = 0; j < SIFT_VRUN; ++j) {
      float acc = k[0] * win[j + SIFT_BLUR_R];
#pragma unroll
      for (int i = 1; i <= SIFT_BLUR_R; ++i) acc += k[i] * (win[j + SIFT_BLUR_R - i] + win[j + SIFT_BLUR_R + i]);
      mid[(t0 + j) * SIFT_MID_PITCH + c] = acc;
    }
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  float out[SIFT_HRUN];
  {
    float win[SIFT_HRUN + 2 * SIFT_BLUR_R];
#pragma unroll
    for (int j = 0; j < SIFT_HRUN + 2 * SIFT_BLUR_R; ++j) win[j] = mid[lx * SIFT_MID_PITCH + ly * SIFT_HRUN + j];
#pragma unroll
    for (int j = 0; j < SIFT_HRUN; ++j) {
      float acc = k[0] * win[j + SIFT_BLUR_R];
#pragma unroll
      for (int i = 1; i <= SIFT_BLUR_R; ++i) acc += k[i] * (win[j + SIFT_BLUR_R - i] + win[j + SIFT_BLUR_R + i]);
      out[j] = acc;
    }
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  {
    __local float4* o = mid4 + (lx * SIFT_OUT_PITCH + ly * SIFT_HRUN) / 4;
    o[0] = (float4)(out[0], out[1], out[2], out[3]);
    o[1] = (float4)(out[4], out[5], out[6], out[7]);
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  if (x0 + SIFT_TILE_W <= w && y0 + SIFT_TILE_H <= h && (w & 3) == 0 && (dst_off & 3) == 0 &&
      (dog_off < 0 || (dog_off & 3) == 0)) {
    const int c = 4 * (lx & 15); /* half warp (lx >> 4) per row of 64: rows 16 i + 2 ly + (lx >> 4) */
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int t = 16 * i + 2 * ly + (lx >> 4);
      const float4 v = mid4[(t * SIFT_OUT_PITCH + c) / 4];
      const size_t o = (size_t)(y0 + t) * (size_t)w + (size_t)(x0 + c);
      *(__global float4*)(dst + dst_off + o) = v;
      if (dog_off >= 0) *(__global float4*)(dog + dog_off + o) = v - in4[((t + SIFT_BLUR_R) * SIFT_IN_PITCH + SIFT_A + c) / 4];
    }
    return;
  }
  for (int t = ly; t < SIFT_TILE_H; t += 8) {
    const int y = y0 + t;
    if (y >= h) break;
    for (int c = lx; c < SIFT_TILE_W; c += 32) {
      const int x = x0 + c;
      if (x >= w) break;
      const float v = mid[t * SIFT_OUT_PITCH + c];
      const size_t o = (size_t)y * (size_t)w + (size_t)x;
      dst[dst_off + o] = v;
      if (dog_off >= 0) dog[dog_off + o] = v - in[(t + SIFT_BLUR_R) * SIFT_IN_PITCH + c + SIFT_A];
    }
  }
}

/* sift_blur_small_tiles: the levels of the small planes (State::small_tiles; not yet the GPUs' default: not timed
 * on one yet). On the H200 a level of the 64 x 32 tiles costs 6-8 us from
 * 480 x 270 down whatever the size: one work-group's serial chain over a tile the plane does not fill (CUDA's
 * bench/probes/pyramid_octave_probe.cu). Here the output tile is 32 x 16 and each work-item computes 4
 * vertical and 2 horizontal outputs: a chain about a quarter as long, four times the work-groups. The OpenCL
 * form of CUDA's sift_blur_small<R>; the same values as sift_blur_tiles (the same taps in registers, the same
 * float operations in the same order, BORDER_REFLECT_101; a vertical value at a reflected column is the value
 * at the column it reflects to).
 * Global (ceil(w / 32) 32, ceil(h / 16) 8), work-group (32, 8) (required); output tile 32 x 16.
 *   1. stage the source rows y0 - R .. y0 + 15 + R, columns x0 - R .. x0 + 31 + R in `in` (reflected), every
 *      load of a work-item before its first local store;
 *   2. vertical pass: 4 (32 + 2R) items (column x0 - R + c, a quarter of the tile's rows), each 4 outputs
 *      from a window of 4 + 2R values, into `mid`;
 *   3. horizontal pass: work-item lid computes row lid / 16, columns 2 (lid % 16) and + 1 from a window of
 *      2 + 2R values of `mid`, and writes them and, with dog_off >= 0, the DoG values as sift_blur does. */
#define SIFT_STILE_W 32
#define SIFT_STILE_H 16
#define SIFT_SVRUN 4
#define SIFT_SHRUN 2
#define SIFT_SCOLS (SIFT_STILE_W + 2 * SIFT_BLUR_R)
#define SIFT_SROWS (SIFT_STILE_H + 2 * SIFT_BLUR_R)
#define SIFT_SMID_PITCH (SIFT_SCOLS + 1)
#define SIFT_SROW_STEPS ((SIFT_SROWS + 7) / 8)
#define SIFT_SCOL_STEPS ((SIFT_SCOLS + 31) / 32)

__kernel __attribute__((reqd_work_group_size(32, 8, 1))) void sift_blur_small_tiles(
    __global const float* src, __global float* dst, long src_off, long dst_off, int w, int h,
    __global const float* taps, int tap_off, __global float* dog, long dog_off) {
  __local float in[SIFT_SROWS * SIFT_SCOLS];
  __local float mid[SIFT_STILE_H * SIFT_SMID_PITCH];
  const int lx = get_local_id(0), ly = get_local_id(1), lid = ly * 32 + lx;
  const int x0 = get_group_id(0) * SIFT_STILE_W, y0 = get_group_id(1) * SIFT_STILE_H;
  float k[SIFT_BLUR_R + 1];
#pragma unroll
  for (int i = 0; i <= SIFT_BLUR_R; ++i) k[i] = taps[tap_off + i];
  {
    float v[SIFT_SROW_STEPS][SIFT_SCOL_STEPS];
#pragma unroll
    for (int i = 0; i < SIFT_SROW_STEPS; ++i) {
      const int t = ly + 8 * i;
      __global const float* row =
          src + src_off + (size_t)sift_reflect101(y0 - SIFT_BLUR_R + (t < SIFT_SROWS ? t : 0), h) * (size_t)w;
#pragma unroll
      for (int j = 0; j < SIFT_SCOL_STEPS; ++j) {
        const int c = lx + 32 * j;
        if (t < SIFT_SROWS && c < SIFT_SCOLS) v[i][j] = row[sift_reflect101(x0 - SIFT_BLUR_R + c, w)];
      }
    }
#pragma unroll
    for (int i = 0; i < SIFT_SROW_STEPS; ++i) {
#pragma unroll
      for (int j = 0; j < SIFT_SCOL_STEPS; ++j) {
        const int t = ly + 8 * i, c = lx + 32 * j;
        if (t < SIFT_SROWS && c < SIFT_SCOLS) in[t * SIFT_SCOLS + c] = v[i][j];
      }
    }
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  if (lid < SIFT_STILE_H / SIFT_SVRUN * SIFT_SCOLS) { /* column x0 - R + c, rows t0 .. t0 + 3 of the tile */
    const int c = lid % SIFT_SCOLS, t0 = (lid / SIFT_SCOLS) * SIFT_SVRUN;
    float win[SIFT_SVRUN + 2 * SIFT_BLUR_R];
#pragma unroll
    for (int j = 0; j < SIFT_SVRUN + 2 * SIFT_BLUR_R; ++j) win[j] = in[(t0 + j) * SIFT_SCOLS + c];
#pragma unroll
    for (int j = 0; j < SIFT_SVRUN; ++j) {
      float acc = k[0] * win[j + SIFT_BLUR_R];
#pragma unroll
      for (int i = 1; i <= SIFT_BLUR_R; ++i) acc += k[i] * (win[j + SIFT_BLUR_R - i] + win[j + SIFT_BLUR_R + i]);
      mid[(t0 + j) * SIFT_SMID_PITCH + c] = acc;
    }
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  const int t = lid >> 4, cx = 2 * (lid & 15); /* output row t, columns cx and cx + 1 of the tile */
  const int y = y0 + t;
  if (y >= h) return;
  float win[SIFT_SHRUN + 2 * SIFT_BLUR_R];
#pragma unroll
  for (int j = 0; j < SIFT_SHRUN + 2 * SIFT_BLUR_R; ++j) win[j] = mid[t * SIFT_SMID_PITCH + cx + j];
#pragma unroll
  for (int j = 0; j < SIFT_SHRUN; ++j) {
    const int x = x0 + cx + j;
    if (x >= w) break;
    float acc = k[0] * win[j + SIFT_BLUR_R];
#pragma unroll
    for (int i = 1; i <= SIFT_BLUR_R; ++i) acc += k[i] * (win[j + SIFT_BLUR_R - i] + win[j + SIFT_BLUR_R + i]);
    const size_t o = (size_t)y * (size_t)w + (size_t)x;
    dst[dst_off + o] = acc;
    if (dog_off >= 0) dog[dog_off + o] = acc - in[(t + SIFT_BLUR_R) * SIFT_SCOLS + cx + j + SIFT_BLUR_R];
  }
}
#endif

#ifndef SIFT_BLUR_R
/* sift_blur_small_octaves (GPUs, sift.cl's program only: it needs sift_device.h's octave table): the trailing
 * small octaves o_first .. octaves - 1 of the pyramid in ONE launch, instead of a downsample and levels - 1
 * blur launches per octave. A small octave's launch is one or a few work-groups whose serial chain (staging,
 * vertical pass, barrier, horizontal pass, write) costs the same ~7-10 us on NVIDIA whatever the plane's
 * size: 5 octaves x 5 launches at 1080p upsampled (docs/performance/sift.md, issue 18).
 * Global (N), work-group (N): ONE work-group (N from the kernel's and the device's work-group limits, up to
 * 1024) that computes every level of every one of those octaves in order, the whole plane in local memory:
 * `planes` holds three planes of cap floats (cap: the plane of octave o_first, the largest; the host checks
 * 3 cap + n_taps floats fit the device's local memory), `a` the source level, `m` the vertical pass, `b` the
 * new level (a and b swap per level); `ktaps` the plan's taps (n_taps floats, tap_table[2 i] the offset and
 * tap_table[2 i + 1] the radius R of kernel i, the plan's tap_offset / tap_radius). Per octave o:
 *   level 0: the even pixels of level S (`layers`) of octave o - 1 (sift_downsample's values), into the level
 *     buffer and `a`; octave o - 1 was written by this work-group for o > o_first, hence the barrier with the
 *     global fence at the end of every octave;
 *   levels i = 1 .. levels - 1: the vertical pass of a into m, barrier, the horizontal pass of m into b and the
 *     level buffer, the DoG plane i - 1 = b - a into the DoG buffer, barrier, swap a and b.
 * The bits of sift_blur / sift_blur_tiles: the same taps and the same float operations in the same order
 * (k0 * centre, then + k_i * (before_i + after_i) for i = 1..R, vertical first, horizontal over the vertical
 * results, FP_CONTRACT off, borders by sift_reflect101). The tiles compute the vertical pass at reflected
 * columns too; it is per column, so computing it at the real columns and reflecting the column index in the
 * horizontal pass reads the same values. The DoG is the tiles' level i - staged level i - 1: the same
 * subtraction of the same floats. */
__kernel void sift_blur_small_octaves(__global float* gauss, __global float* dog, __global const long* info,
                                      __global const float* taps, __global const int* tap_table, int n_taps,
                                      int o_first, int octaves, int layers, int levels, int cap,
                                      __local float* planes, __local float* ktaps) {
  const int lid = get_local_id(0), n = get_local_size(0);
  for (int t = lid; t < n_taps; t += n) ktaps[t] = taps[t];
  __local float* a = planes;
  __local float* m = planes + cap;
  __local float* b = planes + 2 * cap;
  for (int o = o_first; o < octaves; ++o) {
    const int w = sift_oct_w(info, o), h = sift_oct_h(info, o), pw = sift_oct_w(info, o - 1);
    const int plane = w * h;
    __global float* g = gauss + sift_oct_gauss(info, o);
    __global float* d = dog + sift_oct_dog(info, o);
    __global const float* prev =
        gauss + sift_oct_gauss(info, o - 1) + (size_t)layers * (size_t)pw * (size_t)sift_oct_h(info, o - 1);
    for (int p = lid; p < plane; p += n) {
      const int y = p / w, x = p - y * w;
      const float v = prev[(size_t)(2 * y) * (size_t)pw + (size_t)(2 * x)];
      g[p] = v;
      a[p] = v;
    }
    barrier(CLK_LOCAL_MEM_FENCE);  /* also the taps, at the first octave */
    for (int i = 1; i < levels; ++i) {
      __local const float* k = ktaps + tap_table[2 * i];
      const int r = tap_table[2 * i + 1];
      for (int p = lid; p < plane; p += n) {
        const int y = p / w, x = p - y * w;
        float acc = k[0] * a[p];
        for (int t = 1; t <= r; ++t)
          acc += k[t] * (a[sift_reflect101(y - t, h) * w + x] + a[sift_reflect101(y + t, h) * w + x]);
        m[p] = acc;
      }
      barrier(CLK_LOCAL_MEM_FENCE);
      for (int p = lid; p < plane; p += n) {
        const int y = p / w, x = p - y * w;
        __local const float* row = m + y * w;
        float acc = k[0] * m[p];
        for (int t = 1; t <= r; ++t) acc += k[t] * (row[sift_reflect101(x - t, w)] + row[sift_reflect101(x + t, w)]);
        b[p] = acc;
        g[(size_t)i * (size_t)plane + (size_t)p] = acc;
        d[(size_t)(i - 1) * (size_t)plane + (size_t)p] = acc - a[p];
      }
      barrier(CLK_LOCAL_MEM_FENCE);  /* the next vertical pass reads b; the next horizontal one overwrites a */
      __local float* s = a;
      a = b;
      b = s;
    }
    barrier(CLK_GLOBAL_MEM_FENCE);  /* level S of octave o, written above, is read by octave o + 1 */
  }
}
#endif

/* sift_downsample: global (w, h) of the new octave, any work-group shape; one work-item per pixel. Level 0
 * of octave o + 1 (at dst_off of the level buffer) is the even pixels of level S of octave o (at src_off,
 * sw floats per row). */
__kernel void sift_downsample(__global float* levels, long src_off, int sw, long dst_off, int w, int h) {
  const int x = get_global_id(0), y = get_global_id(1);
  if (x >= w || y >= h) return;
  levels[dst_off + (size_t)y * (size_t)w + (size_t)x] = levels[src_off + (size_t)(2 * y) * (size_t)sw + (size_t)(2 * x)];
}

/* sift_load16: 16 floats from any address. On clang CPU targets (PoCL) a 4-byte-aligned vector type makes it
 * one unaligned SIMD load (PoCL 3's vload16 assembled it from pairs); elsewhere vload16. */
#if defined(__clang__) && (defined(__x86_64__) || defined(__aarch64__))
typedef float sift_float16_unaligned __attribute__((ext_vector_type(16), aligned(4)));
#define sift_load16(p) (*(__global const sift_float16_unaligned*)(p))
#define sift_store16(v, p) (*(__global sift_float16_unaligned*)(p) = (v))
#define sift_load16_local(p) (*(__local const sift_float16_unaligned*)(p))
#define sift_store16_local(v, p) (*(__local sift_float16_unaligned*)(p) = (v))
#else
#define sift_load16(p) vload16(0, (p))
#define sift_store16(v, p) vstore16((v), 0, (p))
#define sift_load16_local(p) vload16(0, (p))
#define sift_store16_local(v, p) vstore16((v), 0, (p))
#endif

/* sift_blur_rows (CPU devices): global (ceil(h / L) L), work-group (L); one work-item per output row, both
 * passes in one launch, as the CPU backend does it: the vertical pass of row y into the work-item's padded
 * row `line` in local memory (w + 2R floats, L of them, host-sized), its R-sample margins filled by
 * BORDER_REFLECT_101, then the horizontal pass from that row into dst and, with dog_off >= 0, the DoG row
 * (dst - src centre row) into dog. The vertical results never go through a plane in global memory (the former
 * form's temporary plane cost one plane written and read back per level), and a CPU's caches hold the 2R + 1
 * source rows and the line. Runs of SIFT_BLUR_RUN pixels are four float16 accumulators, per tap one contiguous
 * vector load of each source row (vertical) or of each shifted window of the line (horizontal), so that the
 * compiler emits SIMD without having to vectorise across work-items (PoCL 3 left a per-pixel loop over a
 * private array scalar). Each lane gets exactly the scalar float operations of the tiled kernel (k0 * centre,
 * then + k_i * (before_i + after_i), i ascending; FP_CONTRACT is off), so the bits do not change; the tail
 * of a row (w % SIFT_BLUR_RUN pixels) takes the scalar loops. */
#define SIFT_BLUR_RUN 64

__kernel void sift_blur_rows(__global const float* src, __global float* dst, long src_off, long dst_off, int w,
                             int h, __global const float* taps, int tap_off, int r, __local float* lines,
                             __global float* dog, long dog_off) {
  const int y = get_global_id(0);
  if (y >= h) return;
  __global const float* k = taps + tap_off;
  __local float* line = lines + (size_t)get_local_id(0) * (size_t)(w + 2 * r);
  __local float* t = line + r;  /* t[-r .. w - 1 + r] */
  __global const float* base = src + src_off;
  __global const float* c = base + (size_t)y * (size_t)w;
  const float k0 = k[0];
  const int full = w / SIFT_BLUR_RUN * SIFT_BLUR_RUN;
  /* vertical pass of row y into t[0 .. w - 1] */
  for (int x0 = 0; x0 < full; x0 += SIFT_BLUR_RUN) {
    float16 acc0 = k0 * sift_load16(c + x0), acc1 = k0 * sift_load16(c + x0 + 16);
    float16 acc2 = k0 * sift_load16(c + x0 + 32), acc3 = k0 * sift_load16(c + x0 + 48);
    for (int i = 1; i <= r; ++i) {
      __global const float* a = base + (size_t)sift_reflect101(y - i, h) * (size_t)w + x0;
      __global const float* b = base + (size_t)sift_reflect101(y + i, h) * (size_t)w + x0;
      const float ki = k[i];
      acc0 += ki * (sift_load16(a) + sift_load16(b));
      acc1 += ki * (sift_load16(a + 16) + sift_load16(b + 16));
      acc2 += ki * (sift_load16(a + 32) + sift_load16(b + 32));
      acc3 += ki * (sift_load16(a + 48) + sift_load16(b + 48));
    }
    sift_store16_local(acc0, t + x0);
    sift_store16_local(acc1, t + x0 + 16);
    sift_store16_local(acc2, t + x0 + 32);
    sift_store16_local(acc3, t + x0 + 48);
  }
  for (int x = full; x < w; ++x) t[x] = k0 * c[x];
  for (int i = 1; i <= r; ++i) {
    __global const float* a = base + (size_t)sift_reflect101(y - i, h) * (size_t)w;
    __global const float* b = base + (size_t)sift_reflect101(y + i, h) * (size_t)w;
    const float ki = k[i];
    for (int x = full; x < w; ++x) t[x] += ki * (a[x] + b[x]);
  }
  /* the margins: the vertical results at the reflected columns (the CPU backend's padding) */
  for (int i = 1; i <= r; ++i) {
    t[-i] = t[sift_reflect101(-i, w)];
    t[w - 1 + i] = t[sift_reflect101(w - 1 + i, w)];
  }
  /* horizontal pass from the padded line */
  __global float* out = dst + dst_off + (size_t)y * (size_t)w;
  __global float* d = dog_off >= 0 ? dog + dog_off + (size_t)y * (size_t)w : 0;
  for (int x0 = 0; x0 < full; x0 += SIFT_BLUR_RUN) {
    __local const float* s = t + x0;
    float16 acc0 = k0 * sift_load16_local(s), acc1 = k0 * sift_load16_local(s + 16);
    float16 acc2 = k0 * sift_load16_local(s + 32), acc3 = k0 * sift_load16_local(s + 48);
    for (int i = 1; i <= r; ++i) {
      const float ki = k[i];
      acc0 += ki * (sift_load16_local(s - i) + sift_load16_local(s + i));
      acc1 += ki * (sift_load16_local(s + 16 - i) + sift_load16_local(s + 16 + i));
      acc2 += ki * (sift_load16_local(s + 32 - i) + sift_load16_local(s + 32 + i));
      acc3 += ki * (sift_load16_local(s + 48 - i) + sift_load16_local(s + 48 + i));
    }
    sift_store16(acc0, out + x0);
    sift_store16(acc1, out + x0 + 16);
    sift_store16(acc2, out + x0 + 32);
    sift_store16(acc3, out + x0 + 48);
    if (d) {
      sift_store16(acc0 - sift_load16(c + x0), d + x0);
      sift_store16(acc1 - sift_load16(c + x0 + 16), d + x0 + 16);
      sift_store16(acc2 - sift_load16(c + x0 + 32), d + x0 + 32);
      sift_store16(acc3 - sift_load16(c + x0 + 48), d + x0 + 48);
    }
  }
  for (int x = full; x < w; ++x) {
    float acc = k0 * t[x];
    for (int i = 1; i <= r; ++i) acc += k[i] * (t[x - i] + t[x + i]);
    out[x] = acc;
    if (d) d[x] = acc - c[x];
  }
}

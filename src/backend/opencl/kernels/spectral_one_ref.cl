/* spectral_one_ref.cl — the bandwidth-bound kernels of spectral matching: they read a chunk of the cube
 * in its native ENVI type and byte order and convert it on the device (numeric/spectral_metrics.h).
 *
 * Build options (set by src/backend/opencl/spectral.cpp):
 *   -DSAMPLE_TYPE=<ENVI code>      1 2 3 4 5 12 13 14 15
 *   -DSAMPLE_BIG_ENDIAN=0|1        ENVI "byte order"
 *   -DMETRIC=<0..3>                SPECTRAL_METRIC_ED/SAM/SCC/SID
 *   -DREF_IN_LOCAL=0|1             1 when the reference fits in __local memory (sized by the host)
 *   -DSTAGE_TILE=<bands>|0         >0: the work-group copies its pixels' samples through __local memory in
 *                                  tiles of that many bands (GPUs, bip: the file's order is band-fastest,
 *                                  a pixel per work-item would read with a stride of `bands` elements)
 *   -DSTAGE_BAND_FAST=0|1          the order of that copy: 1 band-fastest (bip), 0 pixel-fastest
 *   -DSPECTRASIFT_CPU_DEVICE       on CPU devices (PoCL); no change of results, only of code shape
 *
 * A chunk holds whole lines of the cube as the file stores them (bsq planes were copied with one
 * rectangular copy, so the plane pitch of a chunk is lines_in_chunk * samples). Element (line l of the
 * chunk, sample x, band b) is raw[l * ls + x * ss + b * bs]: every interleave is read in place. */
#include "spectral_metrics.h"

#if SAMPLE_TYPE == SPECTRAL_TYPE_U8
typedef uchar raw_t;
#elif SAMPLE_TYPE == SPECTRAL_TYPE_I16 || SAMPLE_TYPE == SPECTRAL_TYPE_U16
typedef ushort raw_t;
#elif SAMPLE_TYPE == SPECTRAL_TYPE_I32 || SAMPLE_TYPE == SPECTRAL_TYPE_U32 || SAMPLE_TYPE == SPECTRAL_TYPE_F32
typedef uint raw_t;
#else
typedef ulong raw_t;
#endif

/* The element's bits in host order. The chunk buffer starts at offset 0 of a cl_mem, so every element
 * is naturally aligned and one typed load reads it; big-endian data is byte-swapped here. */
inline ulong spectral_raw_bits(__global const raw_t* raw, ulong i) {
  raw_t v = raw[i];
#if SAMPLE_BIG_ENDIAN
#if SAMPLE_TYPE == SPECTRAL_TYPE_U8
  /* one byte: nothing to swap */
#elif SAMPLE_TYPE == SPECTRAL_TYPE_I16 || SAMPLE_TYPE == SPECTRAL_TYPE_U16
  v = (raw_t)((v >> 8) | (v << 8));
#elif SAMPLE_TYPE == SPECTRAL_TYPE_I32 || SAMPLE_TYPE == SPECTRAL_TYPE_U32 || SAMPLE_TYPE == SPECTRAL_TYPE_F32
  v = ((v & 0x000000ffu) << 24) | ((v & 0x0000ff00u) << 8) | ((v & 0x00ff0000u) >> 8) | ((v & 0xff000000u) >> 24);
#else
  v = ((v & 0x00000000000000fful) << 56) | ((v & 0x000000000000ff00ul) << 40) |
      ((v & 0x0000000000ff0000ul) << 24) | ((v & 0x00000000ff000000ul) << 8) |
      ((v & 0x000000ff00000000ul) >> 8) | ((v & 0x0000ff0000000000ul) >> 24) |
      ((v & 0x00ff000000000000ul) >> 40) | ((v & 0xff00000000000000ul) >> 56);
#endif
#endif
  return (ulong)v;
}

/* The converted sample (before scaling) of used band u of the pixel whose first element is at `base`. */
#define SPECTRAL_FETCH(base, u) \
  spectral_sample_from_bits(SAMPLE_TYPE, spectral_raw_bits(raw, (base) + (ulong)band_index[u] * bs))

#if STAGE_TILE
/* Coalesced staging: the work-group's pixels p0 .. p0 + lsz - 1, used bands k0 .. k0 + kt - 1, converted,
 * into stage[kk * (lsz + 1) + pp] (odd row pitch: no bank conflicts either way). Consecutive work-items
 * read consecutive elements of the file's order. Pixels past npix get 0 and are never used. */
inline void spectral_stage_fill(__local float* stage, __global const raw_t* raw, ulong ls, ulong ss, ulong bs,
                                int samples, int npix, __global const int* band_index, int p0, int k0, int kt) {
  const int lid = (int)get_local_id(0), lsz = (int)get_local_size(0);
  for (int e = lid; e < kt * lsz; e += lsz) {
#if STAGE_BAND_FAST
    const int pp = e / kt, kk = e - pp * kt;
#else
    const int kk = e / lsz, pp = e - kk * lsz;
#endif
    const int q = p0 + pp;
    float v = 0.0f;
    if (q < npix) {
      const int line = q / samples;
      const int x = q - line * samples;
      v = SPECTRAL_FETCH((ulong)line * ls + (ulong)x * ss, k0 + kk);
    }
    stage[kk * (lsz + 1) + pp] = v;
  }
}

/* SPECTRAL_BANDS_BEGIN ... SPECTRAL_BANDS_END run the statements between them (which see v and u) for
 * every used band u of this work-item's pixel (when `active`), through the stage. A begin/end pair rather
 * than one variadic macro: NVIDIA's OpenCL compiler rejects variadic macros. */
#define SPECTRAL_BANDS_BEGIN                                                                      \
  {                                                                                               \
    const int lid_ = (int)get_local_id(0), lsz_ = (int)get_local_size(0);                         \
    const int p0_ = (int)get_group_id(0) * lsz_;                                                  \
    for (int k0_ = 0; k0_ < n; k0_ += STAGE_TILE) {                                               \
      const int kt_ = min(STAGE_TILE, n - k0_);                                                   \
      barrier(CLK_LOCAL_MEM_FENCE);                                                               \
      spectral_stage_fill(stage, raw, ls, ss, bs, samples, npix, band_index, p0_, k0_, kt_);      \
      barrier(CLK_LOCAL_MEM_FENCE);                                                               \
      if (active)                                                                                 \
        for (int kk_ = 0; kk_ < kt_; ++kk_) {                                                     \
          const float v = stage[kk_ * (lsz_ + 1) + lid_];                                         \
          const int u = k0_ + kk_;
#define SPECTRAL_BANDS_END \
  }                        \
  }                        \
  }
#else
#define SPECTRAL_BANDS_BEGIN                                                                      \
  if (active) {                                                                                   \
    const int line_ = p / samples;                                                                \
    const int x_ = p - line_ * samples;                                                           \
    const ulong base_ = (ulong)line_ * ls + (ulong)x_ * ss;                                       \
    for (int u = 0; u < n; ++u) {                                                                 \
      const float v = SPECTRAL_FETCH(base_, u);
#define SPECTRAL_BANDS_END \
  }                        \
  }
#endif

/* spectral_one_ref — every pixel of a chunk against ONE reference, in one pass over the bands.
 * Launch: 1-D NDRange, global = npix rounded up to the work-group size, local = a multiple of the
 * kernel's preferred multiple chosen from CL_KERNEL_WORK_GROUP_SIZE (host: State::work_group_1d).
 * One work-item = one pixel: it loads the pixel's used bands, converts them, sums the pixel statistics
 * (double) and the pair accumulator, and writes the score (and for best/top-1/threshold the index).
 * The work-group first copies the reference (values, values2) into __local memory (ref_local, sized
 * 2 * n floats by the host) when REF_IN_LOCAL. With STAGE_TILE the work-group also stages its samples
 * through `stage` (STAGE_TILE * (local size + 1) floats); the per-pixel arithmetic is the same.
 * mode (a run-time argument, so that one program serves every reduction): 0 score only (Reduction::kAll),
 * 1 score and index (best, top-1), 3 threshold (index -1 and NaN for a score that fails `threshold`).
 * Outputs: out_s[p] (and out_i[p] unless mode == 0), p < npix; index 0 or -1 (no data/rejected). */
__kernel void spectral_one_ref(__global const raw_t* raw, ulong ls, ulong ss, ulong bs, int samples, int npix,
                               __global const int* band_index, int n, float scale, int has_ignore,
                               float ignore_value, __global const float* ref_values,
                               __global const float* ref_values2, double ref_constant, int mode,
                               float threshold, __local float* ref_local, __global float* out_s, __global int* out_i,
                               __local float* stage) {
#if REF_IN_LOCAL
  for (int u = (int)get_local_id(0); u < n; u += (int)get_local_size(0)) {
    ref_local[u] = ref_values[u];
#if METRIC == SPECTRAL_METRIC_SID
    ref_local[n + u] = ref_values2[u];
#endif
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  __local const float* r1 = ref_local;
  __local const float* r2 = ref_local + n;
#else
  __global const float* r1 = ref_values;
  __global const float* r2 = ref_values2;
#endif
  const int p = (int)get_global_id(0);
  const int active = p < npix;  /* no early return: the staged variant has barriers */
  SpectralPixelStats st;
  spectral_stats_init(&st);
  SpectralPairAcc acc;
  spectral_pair_init(&acc);
  int nodata = 0;
#if METRIC == SPECTRAL_METRIC_SID
#define SPECTRAL_R2(u) r2[u]
#else
#define SPECTRAL_R2(u) 0.0f
#endif
  SPECTRAL_BANDS_BEGIN
    nodata |= spectral_is_ignored(v, has_ignore, ignore_value);
    const float pv = v * scale;
    spectral_stats_add(&st, METRIC, pv);
    spectral_pair_add(&acc, METRIC, pv, r1[u], SPECTRAL_R2(u));
  SPECTRAL_BANDS_END
#undef SPECTRAL_R2
  if (!active) return;
  float s = nodata ? SPECTRASIFT_NAN_F : spectral_finalise(METRIC, &st, &acc, n, ref_constant);
  if (mode == 0) {
    out_s[p] = s;
  } else if (mode == 3) {
    const int pass = spectral_passes(s, threshold, spectral_higher_is_better(METRIC));
    out_s[p] = pass ? s : SPECTRASIFT_NAN_F;
    out_i[p] = pass ? 0 : -1;
  } else {
    out_s[p] = s;
    out_i[p] = (s != s) ? -1 : 0;
  }
}

/* spectral_prepare — the first stage of the many-reference path: converts a chunk to the float matrices
 * the tiled product reads, and sums the per-pixel statistics.
 * Launch: 1-D NDRange, global = npix rounded up to the work-group size, local from
 * State::work_group_1d. One work-item = one pixel (samples staged through `stage` with STAGE_TILE, as
 * spectral_one_ref).
 * Outputs (pitch = pixels of a full chunk, band-major so that the product's tile loads are coalesced):
 *   x1[u * pitch + p] = scaled value (sid: p' = max(p, eps)); x2[u * pitch + p] = log p' (sid only);
 *   stats[p], stats[pitch + p], stats[2 * pitch + p] = sum_p, sum_p2, sum_plp; nodata[p] = 0|1. */
__kernel void spectral_prepare(__global const raw_t* raw, ulong ls, ulong ss, ulong bs, int samples, int npix,
                               int pitch, __global const int* band_index, int n, float scale, int has_ignore,
                               float ignore_value, __global float* x1, __global float* x2,
                               __global double* stats, __global int* nodata_out, __local float* stage) {
  const int p = (int)get_global_id(0);
  const int active = p < npix;  /* no early return: the staged variant has barriers */
  SpectralPixelStats st;
  spectral_stats_init(&st);
  int nodata = 0;
#if METRIC == SPECTRAL_METRIC_SID
  /* the same clamp and log as spectral_pair_add's sid branch, hoisted out of the product */
#define SPECTRAL_STORE_X(at, pv)                 \
  {                                              \
    const float c_ = spectral_sid_clamp(pv);     \
    x1[at] = c_;                                 \
    x2[at] = spectral_sid_log(c_);               \
  }
#else
#define SPECTRAL_STORE_X(at, pv) \
  { x1[at] = (pv); }
#endif
  SPECTRAL_BANDS_BEGIN
    nodata |= spectral_is_ignored(v, has_ignore, ignore_value);
    const float pv = v * scale;
    spectral_stats_add(&st, METRIC, pv);
    SPECTRAL_STORE_X((size_t)u * (size_t)pitch + (size_t)p, pv);
  SPECTRAL_BANDS_END
#undef SPECTRAL_STORE_X
  if (!active) return;
  stats[p] = st.sum_p;
  stats[pitch + p] = st.sum_p2;
  stats[2 * pitch + p] = st.sum_plp;
  nodata_out[p] = nodata;
}

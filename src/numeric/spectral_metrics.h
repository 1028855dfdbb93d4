/* spectral_metrics.h — THE per-element formulas of spectral matching, shared by the CPU, CUDA and
 * OpenCL backends (the common subset of C++, CUDA C++ and OpenCL C 1.2; dialect.h maps qualifiers).
 *
 * ---------------------------------------------------------------------------------------------------
 * 1. Samples.  An element of the cube is stored in its ENVI type and byte order. A backend loads its
 *    bytes (spectral_load_sample, or its own typed load followed by spectral_sample_from_bits) and gets
 *    the value converted to float with round-to-nearest (exact for u8/i16/u16, and for i32/u32/i64/u64
 *    of magnitude < 2^24; f64 is rounded to float). The value is then multiplied by CubeView::scale
 *    (1 / "reflectance scale factor"; 1.0f when absent, which is exact).
 *
 * 2. No data.  A pixel is "no data" when ANY used band's converted value (before scaling) equals
 *    (float)ignore_value (CubeView::has_ignore). Every score of such a pixel is NaN and every index -1.
 *    A pixel whose score is not finite (zero-norm pixel in sam, constant pixel in scc, NaN/Inf in the
 *    data) also gives NaN for that score; a NaN score never wins a comparison and never passes a
 *    threshold, so a pixel whose every score is NaN gets index -1.
 *
 * 3. Metrics, over the n used bands (bbl == 1), pixel p, reference r. core prepares r in double and
 *    rounds to float (PreparedReferences, see src/core/spectral_backend.hpp):
 *      metric  refs.values (row)         refs.values2     refs.constant (double)   score (lower/higher better)
 *      ed      r                         -                sum r^2                  sqrt(sum (p-r)^2)      lower
 *      sam     r / |r|                   -                |r|                      acos(clamp(p.r^ / |p|)) lower
 *              (many references: ranked by that, reported by spectral_sam_exact_* from refs.raw = r)
 *      scc     (r - mean r)/|r - mean r| -                |r - mean r|             p.r~ / |p - mean p|    higher
 *      sid     b = r' / sum r'           log b            sum b log b              see below              lower
 *    where r' = max(r, 1e-12) (and p' = max(p, 1e-12) for the pixel). Zero-norm (sam) and constant
 *    (scc) references are rejected by core with Error(kInvalidArgument).
 *
 *    Accumulators.  Per pixel, the pixel statistics are summed in double (SpectralPixelStats);
 *    the pixel-reference dot products of sam/scc/sid are summed in float (a GEMM may be used: TF32 with
 *    exact float re-ranking on CUDA is allowed, see SpectralOptions::allow_tensor_cores); the final
 *    formula is evaluated in double and rounded once to float (spectral_finalise_*).
 *
 *    ed is special: the squared distance is summed in DOUBLE, either directly, sum ((double)p-(double)r)^2,
 *    or through the expansion |p|^2 - 2 p.r + |r|^2 with every product and sum in double. A product of two
 *    floats is exact in double, so for integer-valued cubes and integer-valued references whose sums stay
 *    below 2^53 every partial sum is an exact integer: the squared distance is EXACT, whatever the order
 *    of summation and whichever of the two forms a backend uses, and the score (float)sqrt(d2) is
 *    bit-identical on every backend (sqrt in double is correctly rounded in C++, CUDA and OpenCL).
 *
 *    sid without a second pass: with a = p'/P, P = sum p', lp = log p' and b, lb = log b from core,
 *      sum (a-b)(log a - log b) = (sum p' lp)/P - (p'.lb)/P - (b.lp) + sum b lb
 *    (the log P terms cancel because sum a = sum b = 1), so the pixel needs P and sum p' lp (double,
 *    SpectralPixelStats) and two dot products with the reference (p'.lb and b.lp; a GEMM each).
 *
 * 4. Ranking.  spectral_better(sa, ia, sb, ib, higher) is THE comparator: NaN is never better; a better
 *    score wins; equal scores are broken by the LOWER reference index, so every backend produces the same
 *    indices whatever its order of evaluation. spectral_topk_heap_push keeps the k best (score, index) pairs
 *    in a heap and spectral_topk_heap_sort orders them
 *    best first. Threshold: a score passes when score <= T (lower is better) or score >= T (scc).
 *
 * OpenCL: the device must support cl_khr_fp64 (PoCL and NVIDIA do); FP_CONTRACT is switched off so that
 * no multiply-add is fused (the host builds with -ffp-contract=off and CUDA with --fmad=false).
 */
#ifndef SPECTRASIFT_NUMERIC_SPECTRAL_METRICS_H
#define SPECTRASIFT_NUMERIC_SPECTRAL_METRICS_H

#include "dialect.h"

#if defined(__OPENCL_VERSION__)
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#pragma OPENCL FP_CONTRACT OFF
typedef ulong spectral_u64;
typedef long spectral_i64;
typedef uint spectral_u32;
typedef int spectral_i32;
typedef ushort spectral_u16;
typedef short spectral_i16;
typedef uchar spectral_u8;
#else
#include <cstring>
typedef unsigned long long spectral_u64;
typedef long long spectral_i64;
typedef unsigned int spectral_u32;
typedef int spectral_i32;
typedef unsigned short spectral_u16;
typedef short spectral_i16;
typedef unsigned char spectral_u8;
#endif

/* ENVI data type codes (same numbers as spectrasift::SampleType). */
#define SPECTRAL_TYPE_U8 1
#define SPECTRAL_TYPE_I16 2
#define SPECTRAL_TYPE_I32 3
#define SPECTRAL_TYPE_F32 4
#define SPECTRAL_TYPE_F64 5
#define SPECTRAL_TYPE_U16 12
#define SPECTRAL_TYPE_U32 13
#define SPECTRAL_TYPE_I64 14
#define SPECTRAL_TYPE_U64 15

/* Metric codes (same numbers as spectrasift::Metric). */
#define SPECTRAL_METRIC_ED 0
#define SPECTRAL_METRIC_SAM 1
#define SPECTRAL_METRIC_SCC 2
#define SPECTRAL_METRIC_SID 3

/* The clamp applied to sid inputs before normalisation (values <= 0 are not probabilities). */
#define SPECTRAL_SID_EPS 1e-12f

/* ---- 1. samples -------------------------------------------------------------------------------- */

/* Bytes of one element of an ENVI type (0 for an unknown code). */
SPECTRASIFT_FN int spectral_sample_size(int type) {
  switch (type) {
    case SPECTRAL_TYPE_U8: return 1;
    case SPECTRAL_TYPE_I16: case SPECTRAL_TYPE_U16: return 2;
    case SPECTRAL_TYPE_I32: case SPECTRAL_TYPE_U32: case SPECTRAL_TYPE_F32: return 4;
    case SPECTRAL_TYPE_F64: case SPECTRAL_TYPE_I64: case SPECTRAL_TYPE_U64: return 8;
    default: return 0;
  }
}

SPECTRASIFT_FN float spectral_bits_as_float(spectral_u32 u) {
#if defined(__OPENCL_VERSION__)
  return as_float(u);
#elif defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

SPECTRASIFT_FN double spectral_bits_as_double(spectral_u64 u) {
#if defined(__OPENCL_VERSION__)
  return as_double(u);
#elif defined(__CUDA_ARCH__)
  return __longlong_as_double((long long)u);
#else
  double d;
  std::memcpy(&d, &u, sizeof d);
  return d;
#endif
}

/* A quiet NaN, the "no data" score. */
SPECTRASIFT_FN float spectral_nan(void) { return spectral_bits_as_float(0x7fc00000u); }
#define SPECTRASIFT_NAN_F spectral_nan()

/* The value of an element whose `size` bytes, already in host (little-endian) order, are the low bits
 * of `bits`. Conversions round to nearest (C++ and CUDA casts; OpenCL's default for float conversions). */
SPECTRASIFT_FN float spectral_sample_from_bits(int type, spectral_u64 bits) {
  switch (type) {
    case SPECTRAL_TYPE_U8: return (float)(spectral_u8)bits;
    case SPECTRAL_TYPE_I16: return (float)(spectral_i16)(spectral_u16)bits;
    case SPECTRAL_TYPE_U16: return (float)(spectral_u16)bits;
    case SPECTRAL_TYPE_I32: return (float)(spectral_i32)(spectral_u32)bits;
    case SPECTRAL_TYPE_U32: return (float)(spectral_u32)bits;
    case SPECTRAL_TYPE_F32: return spectral_bits_as_float((spectral_u32)bits);
    case SPECTRAL_TYPE_F64: return (float)spectral_bits_as_double(bits);
    case SPECTRAL_TYPE_I64: return (float)(spectral_i64)bits;
    case SPECTRAL_TYPE_U64: return (float)bits;
    default: return SPECTRASIFT_NAN_F;
  }
}

/* Loads the element at `p` (any alignment) stored with `size` bytes in little-endian order
 * (big_endian == 0) or big-endian order (big_endian != 0), and converts it (see above). */
SPECTRASIFT_FN float spectral_load_sample(SPECTRASIFT_CONST_GLOBAL spectral_u8* p, int type, int big_endian) {
  const int size = spectral_sample_size(type);
  spectral_u64 bits = 0;
  for (int i = 0; i < size; ++i) {
    const int shift = big_endian ? 8 * (size - 1 - i) : 8 * i;
    bits |= (spectral_u64)p[i] << shift;
  }
  return spectral_sample_from_bits(type, bits);
}

/* ---- 2. no data ----------------------------------------------------------------------------------- */

/* True when a converted value (before scaling) marks its pixel as no data. */
SPECTRASIFT_FN int spectral_is_ignored(float value, int has_ignore, float ignore_value) {
  return has_ignore && value == ignore_value;
}

SPECTRASIFT_FN int spectral_is_finite(double x) { return x == x && x - x == 0.0; }

/* ---- 3. metrics: per-pixel statistics, dot products, final formulas -------------------------------- */

/* Per-pixel sums in double. sum_p2 = sum p^2 (ed, sam, scc); sum_p = sum p (scc);
 * sid: sum_p = P = sum p', sum_plp = sum p' log p'. */
typedef struct {
  double sum_p;
  double sum_p2;
  double sum_plp;
} SpectralPixelStats;

SPECTRASIFT_FN void spectral_stats_init(SpectralPixelStats* s) {
  s->sum_p = 0.0;
  s->sum_p2 = 0.0;
  s->sum_plp = 0.0;
}

/* sid's pixel input: p' = max(p, eps), and its logarithm lp = (float)log((double)p') (the log is taken
 * in double on every backend so that the float it is rounded to is the same almost always). */
SPECTRASIFT_FN float spectral_sid_clamp(float p) { return p > SPECTRAL_SID_EPS ? p : SPECTRAL_SID_EPS; }
SPECTRASIFT_FN float spectral_sid_log(float clamped) { return (float)log((double)clamped); }

/* Adds one scaled band value of the pixel to its statistics. */
SPECTRASIFT_FN void spectral_stats_add(SpectralPixelStats* s, int metric, float p) {
  if (metric == SPECTRAL_METRIC_SID) {
    const float c = spectral_sid_clamp(p);
    s->sum_p += (double)c;
    s->sum_plp += (double)c * log((double)c);
  } else {
    s->sum_p += (double)p;
    s->sum_p2 += (double)p * (double)p;
  }
}

/* Per pixel-reference accumulators of the single pass:
 *   ed:  d2   += ((double)p - (double)r)^2               (double; or use the expansion, see section 3)
 *   sam: dot  += p * r^                                  (float)
 *   scc: dot  += p * r~                                  (float)
 *   sid: dot  += p' * lb,  dot2 += b * lp                 (float) */
typedef struct {
  double d2;
  float dot;
  float dot2;
} SpectralPairAcc;

SPECTRASIFT_FN void spectral_pair_init(SpectralPairAcc* a) {
  a->d2 = 0.0;
  a->dot = 0.0f;
  a->dot2 = 0.0f;
}

/* One band: p = the pixel's scaled value; v1 = refs.values[j], v2 = refs.values2[j] (sid only). */
SPECTRASIFT_FN void spectral_pair_add(SpectralPairAcc* a, int metric, float p, float v1, float v2) {
  if (metric == SPECTRAL_METRIC_ED) {
    const double d = (double)p - (double)v1;
    a->d2 += d * d;
  } else if (metric == SPECTRAL_METRIC_SID) {
    const float c = spectral_sid_clamp(p);
    a->dot += c * v2;
    a->dot2 += v1 * spectral_sid_log(c);
  } else {
    a->dot += p * v1;
  }
}

/* Final formulas (double, rounded once to float). n = used bands; ref_constant = refs.constant[r].
 * ed_from_d2: the exact squared distance; ed_from_dot: the expansion with p.r summed in double. */
SPECTRASIFT_FN float spectral_finalise_ed(double d2) {
  if (!spectral_is_finite(d2)) return SPECTRASIFT_NAN_F;
  return (float)sqrt(d2 > 0.0 ? d2 : 0.0);
}
SPECTRASIFT_FN double spectral_ed_d2_from_dot(double sum_p2, double dot_pr, double ref_sum_r2) {
  return sum_p2 - 2.0 * dot_pr + ref_sum_r2;
}

/* ed on integer cubes, split form (GPU one-reference kernels). Each reference value is split into its
 * nearest integer and the rest, r = ri + rf (rf = r - ri is exact in float for |r| < 2^23), so that
 *   sum (p - r)^2 = sum q^2 - 2 sum q rf + sum rf^2,   q = p - ri (an integer),
 * with sum q^2 summed exactly as an integer, sum q rf in float (the caller's order) and sum rf^2 in double.
 * For an integer-valued reference rf = 0: the result is the exact squared distance, so the score is the
 * same bits as every other form (section 3). Otherwise the float term is small (|rf| <= 1/2) and the error
 * is ~2^-24 sum |q rf|, far inside the ed row of the tolerance table. spectral_ed_split_ok says whether a
 * reference value can be split so that every |q| stays below 2^22 for 16-bit samples (q is then exact as
 * float through the 1.5 * 2^23 trick). */
#define SPECTRAL_ED_SPLIT_MAX 2097152.0f /* 2^21 */
SPECTRASIFT_FN int spectral_ed_split_ok(float r) { return r >= -SPECTRAL_ED_SPLIT_MAX && r <= SPECTRAL_ED_SPLIT_MAX; }
SPECTRASIFT_FN double spectral_ed_d2_split(double sum_q2, float dot_qrf, double sum_rf2) {
  return sum_q2 - 2.0 * (double)dot_qrf + sum_rf2;
}

/* sam: dot = p . (r/|r|). The clamped cosine in double (NaN for a zero-norm pixel); the score is
 * (float)acos of it. Ranking code may compare cosines first and skip acos for a candidate whose cosine
 * is <= that of the current k-th entry: acos and the rounding to float are monotone, and a tie goes
 * to the lower index, which the earlier entry has. */
SPECTRASIFT_FN double spectral_sam_cos(const SpectralPixelStats* s, float dot) {
  if (!(s->sum_p2 > 0.0) || !spectral_is_finite(s->sum_p2)) return (double)SPECTRASIFT_NAN_F;
  double c = (double)dot / sqrt(s->sum_p2);
  if (!spectral_is_finite(c)) return (double)SPECTRASIFT_NAN_F;
  if (c > 1.0) c = 1.0;
  if (c < -1.0) c = -1.0;
  return c;
}
SPECTRASIFT_FN float spectral_finalise_sam(const SpectralPixelStats* s, float dot) {
  const double c = spectral_sam_cos(s, dot);
  if (c != c) return SPECTRASIFT_NAN_F;
  return (float)acos(c);
}

/* sam, exact rescoring (the reported score of the many-reference paths). The float dot product above
 * ranks the references, but a float cosine near 1 loses the angle: acos(1 - d) ~ sqrt(2 d), so its error
 * of ~n * 2^-24 becomes up to ~1e-3 rad near 0. The reported angle is recomputed from the pixel and the
 * reference as given (refs.raw, floats) in double, in a form accurate near 0:
 *   a = p / |p|,  b = r / |r|,  angle = 2 atan2(|a - b|, |a + b|),
 * |p| = sqrt(sum_p2) (SpectralPixelStats) and |r| = refs.constant (both summed in double in band order from
 * the same kind of floats), so a pixel identical to a reference gives a - b = 0 exactly and the angle 0.
 * The error is a few double ulps of the unit vectors: far below 1e-6 rad for every angle. Usage: init, one
 * add per used band in any order of bands (the sums are of positive terms in double), finalise. */
typedef struct {
  double diff2; /* sum (a - b)^2 */
  double sum2;  /* sum (a + b)^2 */
} SpectralSamExact;

SPECTRASIFT_FN void spectral_sam_exact_init(SpectralSamExact* e) {
  e->diff2 = 0.0;
  e->sum2 = 0.0;
}
/* p_norm = sqrt(sum_p2) of the pixel, r_norm = refs.constant[r]; p and r the band's pixel and raw values. */
SPECTRASIFT_FN void spectral_sam_exact_add(SpectralSamExact* e, float p, float r, double p_norm, double r_norm) {
  const double a = (double)p / p_norm;
  const double b = (double)r / r_norm;
  e->diff2 += (a - b) * (a - b);
  e->sum2 += (a + b) * (a + b);
}
/* The pixel norm the adds take; 0 (so NaN) for a zero-norm or non-finite pixel. */
SPECTRASIFT_FN double spectral_sam_exact_norm(const SpectralPixelStats* s) {
  if (!(s->sum_p2 > 0.0) || !spectral_is_finite(s->sum_p2)) return 0.0;
  return sqrt(s->sum_p2);
}
SPECTRASIFT_FN float spectral_sam_exact_finalise(const SpectralSamExact* e) {
  if (!spectral_is_finite(e->diff2) || !spectral_is_finite(e->sum2)) return SPECTRASIFT_NAN_F;
  return (float)(2.0 * atan2(sqrt(e->diff2), sqrt(e->sum2)));
}

/* scc: dot = p . r~ (equals (p - mean p) . r~ because r~ sums to zero). A constant pixel gives NaN. */
SPECTRASIFT_FN float spectral_finalise_scc(const SpectralPixelStats* s, int n, float dot) {
  const double var_n = s->sum_p2 - s->sum_p * s->sum_p / (double)n; /* n * variance */
  if (!(var_n > 0.0) || !spectral_is_finite(var_n)) return SPECTRASIFT_NAN_F;
  double c = (double)dot / sqrt(var_n);
  if (!spectral_is_finite(c)) return SPECTRASIFT_NAN_F;
  if (c > 1.0) c = 1.0;
  if (c < -1.0) c = -1.0;
  return (float)c;
}

/* sid: dot = p' . log b, dot2 = b . log p', ref_constant = sum b log b. Never negative in exact
 * arithmetic; tiny negative rounding results are clamped to 0. */
SPECTRASIFT_FN float spectral_finalise_sid(const SpectralPixelStats* s, float dot, float dot2, double ref_constant) {
  const double P = s->sum_p;
  if (!(P > 0.0) || !spectral_is_finite(P)) return SPECTRASIFT_NAN_F;
  double v = s->sum_plp / P - (double)dot / P - (double)dot2 + ref_constant;
  if (!spectral_is_finite(v)) return SPECTRASIFT_NAN_F;
  return (float)(v > 0.0 ? v : 0.0);
}

/* Any metric from the single-pass accumulators. */
SPECTRASIFT_FN float spectral_finalise(int metric, const SpectralPixelStats* s, const SpectralPairAcc* a, int n,
                                       double ref_constant) {
  switch (metric) {
    case SPECTRAL_METRIC_ED: return spectral_finalise_ed(a->d2);
    case SPECTRAL_METRIC_SAM: return spectral_finalise_sam(s, a->dot);
    case SPECTRAL_METRIC_SCC: return spectral_finalise_scc(s, n, a->dot);
    case SPECTRAL_METRIC_SID: return spectral_finalise_sid(s, a->dot, a->dot2, ref_constant);
    default: return SPECTRASIFT_NAN_F;
  }
}

/* ---- 4. ranking ------------------------------------------------------------------------------------ */

SPECTRASIFT_FN int spectral_higher_is_better(int metric) { return metric == SPECTRAL_METRIC_SCC; }

/* True when (sa, ia) ranks strictly before (sb, ib). NaN never ranks before anything; a non-NaN score
 * ranks before NaN; equal scores rank by the lower reference index. */
SPECTRASIFT_FN int spectral_better(float sa, int ia, float sb, int ib, int higher) {
  if (sa != sa) return 0;
  if (sb != sb) return 1;
  if (sa == sb) return ia < ib;
  return higher ? sa > sb : sa < sb;
}

/* True when a score passes the threshold of Reduction::kThreshold (NaN never passes). */
SPECTRASIFT_FN int spectral_passes(float score, float threshold, int higher) {
  if (score != score) return 0;
  return higher ? score >= threshold : score <= threshold;
}

/* Initialises a top-k list: k entries of (NaN, -1). */
SPECTRASIFT_FN void spectral_topk_init(float* scores, int* index, int k) {
  for (int i = 0; i < k; ++i) {
    scores[i] = SPECTRASIFT_NAN_F;
    index[i] = -1;
  }
}

/* Top-k selection as a binary heap (issue 21, item 6: the sorted insertion cost O(k) per accepted reference,
 * O(references x k) per pixel when better references keep arriving; the heap costs O(log k)). The k entries
 * (scores[i * stride], index[i * stride]), i < k, start as spectral_topk_init leaves them; entry 0 is the
 * WORST kept entry, so that a candidate is tested against it in O(1). An unfilled entry (index -1) is worse
 * than every filled one. `key`, when not null, is a double carried along with each entry (the CPU backend's
 * ranking key). spectral_topk_heap_sort then orders the list best first. spectral_better is a strict total
 * order on the filled entries (ties by index, NaN never inserted), so the kept set and its sorted order are
 * those of any other exact selection, whatever the insertion order: the same bits on every backend. */
SPECTRASIFT_FN int spectral_topk_worse(float sa, int ia, float sb, int ib, int higher) {
  if (ib < 0) return 0;
  if (ia < 0) return 1;
  return spectral_better(sb, ib, sa, ia, higher);
}

/* Moves entry i of a heap of n entries down to its place (its children are heaps). */
SPECTRASIFT_FN void spectral_topk_sift_down(float* scores, int* index, double* key, spectral_i64 stride, int n, int i,
                                            int higher) {
  const float vs = scores[i * stride];
  const int vi = index[i * stride];
  const double vk = key ? key[i * stride] : 0.0;
  for (;;) {
    int c = 2 * i + 1;
    if (c >= n) break;
    if (c + 1 < n &&
        spectral_topk_worse(scores[(c + 1) * stride], index[(c + 1) * stride], scores[c * stride], index[c * stride], higher))
      c = c + 1;  /* the worse child */
    if (!spectral_topk_worse(scores[c * stride], index[c * stride], vs, vi, higher)) break;
    scores[i * stride] = scores[c * stride];
    index[i * stride] = index[c * stride];
    if (key) key[i * stride] = key[c * stride];
    i = c;
  }
  scores[i * stride] = vs;
  index[i * stride] = vi;
  if (key) key[i * stride] = vk;
}

/* Offers (score, idx [, k_value]) to the heap of k entries: it replaces the worst kept entry when better. A NaN
 * score is never kept. Returns whether it was kept. */
SPECTRASIFT_FN int spectral_topk_heap_push(float* scores, int* index, double* key, spectral_i64 stride, int k,
                                           float score, int idx, double k_value, int higher) {
  if (score != score) return 0;
  if (index[0] >= 0 && !spectral_better(score, idx, scores[0], index[0], higher)) return 0;
  scores[0] = score;
  index[0] = idx;
  if (key) key[0] = k_value;
  spectral_topk_sift_down(scores, index, key, stride, k, 0, higher);
  return 1;
}

/* Turns the heap into the k-list best first (unfilled entries, (NaN, -1), last): heapsort, O(k log k). */
SPECTRASIFT_FN void spectral_topk_heap_sort(float* scores, int* index, double* key, spectral_i64 stride, int k,
                                            int higher) {
  for (int n = k - 1; n > 0; --n) {
    const float ts = scores[0];
    const int ti = index[0];
    scores[0] = scores[n * stride];
    index[0] = index[n * stride];
    scores[n * stride] = ts;
    index[n * stride] = ti;
    if (key) {
      const double tk = key[0];
      key[0] = key[n * stride];
      key[n * stride] = tk;
    }
    spectral_topk_sift_down(scores, index, key, stride, n, 0, higher);
  }
}

#endif /* SPECTRASIFT_NUMERIC_SPECTRAL_METRICS_H */

/* sift_extrema.h — the DoG extremum test of the candidate search (notes §4), per element.
 *
 * A DoG value v at (r, c) of layer l (1..S) is a candidate when |v| > thr (the prefilter threshold
 * floor(0.5 * contrast_threshold / S * 255)) and v is a maximum (v > 0) or minimum (v < 0) of its 26
 * neighbours, non-strictly as OpenCV: v >= (<=) each of them. The test has two parts so that a vectorised
 * host loop can run the first over a row and the second only where the first passed:
 *   sift_extremum_in_layer: |v| > thr and the 8 neighbours in layer l (rows above, row, below at column c);
 *   sift_extremum_across_layers: the 9 + 9 neighbours in layers l - 1 and l + 1 (pointers at (r, c)).
 * Both come in the address-space variants of dialect.h (NAME, NAME_local, NAME_global). */
#ifndef SPECTRASIFT_NUMERIC_SIFT_EXTREMA_H
#define SPECTRASIFT_NUMERIC_SIFT_EXTREMA_H

#include "sift_common.h"

/* 1 when v = row[c] passes |v| > thr and v >= (v > 0) or <= (v < 0) its 8 neighbours in its own layer:
 * the maximum and minimum of the neighbours taken with selects in a fixed order. */
#define SIFT_DEFINE_EXTREMUM_IN_LAYER(SUFFIX, AS)                                                         \
  SPECTRASIFT_FN int sift_extremum_in_layer##SUFFIX(AS const float* above, AS const float* row,          \
                                                    AS const float* below, int c, float thr) {           \
    const float v = row[c];                                                                              \
    const float n[8] = {row[c + 1], above[c - 1], above[c], above[c + 1], below[c - 1], below[c],        \
                        below[c + 1], row[c - 1]};                                                       \
    float mx = n[7], mn = n[7];                                                                          \
    for (int k = 0; k < 7; ++k) {                                                                        \
      mx = mx > n[k] ? mx : n[k];                                                                        \
      mn = mn < n[k] ? mn : n[k];                                                                        \
    }                                                                                                    \
    return ((v > thr) & (v >= mx)) | ((v < -thr) & (v <= mn));                                           \
  }
SPECTRASIFT_AS_VARIANTS(SIFT_DEFINE_EXTREMUM_IN_LAYER)
#undef SIFT_DEFINE_EXTREMUM_IN_LAYER

/* 1 when no value of the 3 x 3 neighbourhoods of layers l - 1 (prv) and l + 1 (nxt) is strictly above
 * (v > 0) or below (v < 0) v. prv and nxt point at (r, c) of their planes; stride = row pitch in floats. */
#define SIFT_DEFINE_EXTREMUM_ACROSS_LAYERS(SUFFIX, AS)                                                    \
  SPECTRASIFT_FN int sift_extremum_across_layers##SUFFIX(AS const float* prv, AS const float* nxt,       \
                                                         int stride, float v) {                         \
    for (int k = 0; k < 2; ++k) {                                                                        \
      AS const float* p = k == 0 ? prv : nxt;                                                            \
      for (int dy = -1; dy <= 1; ++dy) {                                                                 \
        for (int dx = -1; dx <= 1; ++dx) {                                                               \
          const float t = p[dy * stride + dx];                                                           \
          if (v > 0.0f ? v < t : v > t) return 0;                                                        \
        }                                                                                                \
      }                                                                                                  \
    }                                                                                                    \
    return 1;                                                                                            \
  }
SPECTRASIFT_AS_VARIANTS(SIFT_DEFINE_EXTREMUM_ACROSS_LAYERS)
#undef SIFT_DEFINE_EXTREMUM_ACROSS_LAYERS

/* The whole test for the value at cur (a pointer at (r, c) of layer l), prv and nxt at (r, c) of the
 * layers below and above, all with row pitch stride. */
#define SIFT_DEFINE_IS_EXTREMUM(SUFFIX, AS)                                                               \
  SPECTRASIFT_FN int sift_is_extremum##SUFFIX(AS const float* prv, AS const float* cur, AS const float* nxt, \
                                              int stride, float thr) {                                  \
    return sift_extremum_in_layer##SUFFIX(cur - stride, cur, cur + stride, 0, thr) &&                    \
           sift_extremum_across_layers##SUFFIX(prv, nxt, stride, cur[0]);                                \
  }
SPECTRASIFT_AS_VARIANTS(SIFT_DEFINE_IS_EXTREMUM)
#undef SIFT_DEFINE_IS_EXTREMUM

#endif /* SPECTRASIFT_NUMERIC_SIFT_EXTREMA_H */

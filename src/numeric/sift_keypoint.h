/* sift_keypoint.h — the keypoint record that the SIFT stages pass to each other, on the host and on a device.
 *
 * One plain struct of 4-byte fields (no padding, the same layout in C++, CUDA and OpenCL C), so that a
 * buffer of them can be copied between host and device as bytes. A record is written by the refinement
 * stage (angle still 0), copied once per orientation peak by the orientation stage, reordered by the
 * select stage and read by the descriptor stage. The public fields (x .. layer_offset) are OpenCV's final
 * ones (input pixels, octave -1 = the doubled image); r, c and sigma_octave are what the orientation stage
 * reads: the integer position of the refined extremum and the keypoint sigma in pixels of its octave. */
#ifndef SPECTRASIFT_NUMERIC_SIFT_KEYPOINT_H
#define SPECTRASIFT_NUMERIC_SIFT_KEYPOINT_H

#include "sift_common.h"

typedef struct SiftKeypoint {
  float x;             /* column, input pixels */
  float y;             /* row, input pixels */
  float size;          /* 2 sigma, input pixels */
  float angle;         /* degrees [0, 360), y down; 0 until the orientation stage */
  float response;      /* |interpolated DoG| in units of the grey range */
  float layer_offset;  /* sub-layer offset xi in [-0.5, 0.5] */
  float sigma_octave;  /* keypoint sigma in pixels of its octave: size / 2 / 2^(octave index) before the
                          octave -1 rescale (the orientation window's scale) */
  int octave;          /* octave -1 (doubled image), 0, 1, ... */
  int layer;           /* DoG layer 1..S of the refined extremum */
  int r;               /* integer row of the refined extremum, octave pixels */
  int c;               /* integer column of the refined extremum, octave pixels */
  int octave_index;    /* octave - first octave: the index into the pyramid (0 = the first octave) */
} SiftKeypoint;

#if defined(__cplusplus)
static_assert(sizeof(SiftKeypoint) == 48, "SiftKeypoint is 12 four-byte fields on every device");
#endif

#endif /* SPECTRASIFT_NUMERIC_SIFT_KEYPOINT_H */

/* sift_common.h — constants and math wrappers shared by the SIFT formulas of src/numeric (C++, CUDA, OpenCL C).
 * Everything here is per element; no memory layout is assumed. Values follow OpenCV 4.6 cv::SIFT conventions;
 * "notes §N" in these headers cites section N of the project's shared notes on OpenCV 4.6 SIFT (the
 * conventions note that the developers share; it is not part of this tree). */
#ifndef SPECTRASIFT_NUMERIC_SIFT_COMMON_H
#define SPECTRASIFT_NUMERIC_SIFT_COMMON_H

#include "dialect.h"

#if defined(__OPENCL_VERSION__)
#define SIFT_SQRTF(x) sqrt(x)
#define SIFT_RINTF(x) rint(x)
#define SIFT_FLOORF(x) floor(x)
#define SIFT_CEILF(x) ceil(x)
#define SIFT_FABSF(x) fabs(x)
#define SIFT_EXPF(x) exp(x)
#else
#define SIFT_SQRTF(x) sqrtf(x)
#define SIFT_RINTF(x) rintf(x)
#define SIFT_FLOORF(x) floorf(x)
#define SIFT_CEILF(x) ceilf(x)
#define SIFT_FABSF(x) fabsf(x)
#define SIFT_EXPF(x) expf(x)
#endif

/* Double precision: always in C++ and CUDA; in OpenCL C only with cl_khr_fp64. The few formulas that need it
 * (16-bit and float colour to grey, RootSIFT) are defined only where SIFT_HAVE_DOUBLE is. */
#if defined(__OPENCL_VERSION__)
#if defined(cl_khr_fp64)
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#define SIFT_HAVE_DOUBLE 1
#endif
#else
#define SIFT_HAVE_DOUBLE 1
#endif
#define SIFT_SQRT_DOUBLE(x) sqrt(x)

#define SIFT_IMG_BORDER 5             /* extrema are searched this many octave pixels away from the edges */
#define SIFT_MAX_INTERP_STEPS 5       /* Newton steps of the sub-pixel refinement */
#define SIFT_ORI_HIST_BINS 36         /* orientation histogram bins (10 degrees each) */
#define SIFT_ORI_SIG_FCTR 1.5f        /* orientation window sigma, in units of the keypoint sigma */
#define SIFT_ORI_RADIUS 4.5f          /* orientation window radius = 3 window sigmas */
#define SIFT_ORI_PEAK_RATIO 0.8f      /* secondary peaks >= this fraction of the maximum give keypoints */
#define SIFT_DESCR_WIDTH 4            /* d: the descriptor is a d x d grid of cells */
#define SIFT_DESCR_HIST_BINS 8        /* n: orientation bins per cell */
#define SIFT_DESCR_SCL_FCTR 3.0f      /* cell width in units of the keypoint sigma */
#define SIFT_DESCR_MAG_THR 0.2f       /* clamp of the normalised descriptor */
#define SIFT_INT_DESCR_FCTR 512.0f    /* scale before rounding to integers 0..255 */
#define SIFT_FLT_EPSILON 1.1920928955078125e-07f
#define SIFT_INT_MAX 2147483647       /* INT_MAX, which OpenCL C has built in and C++ in <climits> */
/* (float)DBL_EPSILON, the denominator guard of the polynomial atan2 */
#define SIFT_ATAN2_EPS 2.220446049250313e-16f

/* Rounds half to even, as cvRound does (the default floating-point rounding mode). */
SPECTRASIFT_FN int sift_round(float v) { return (int)SIFT_RINTF(v); }

/* Gradient direction in degrees [0, 360] of (dx, dy) from a degree-7 odd minimax polynomial of atan on
 * [0, 1] (maximum error about 0.01 degree), the approximation that OpenCV's fastAtan2 evaluates, so that
 * the 36-bin orientation histogram puts border cases in the same bin as cv::SIFT does. (0, 0) gives 0.
 * Branch-free (selects only) so that a compiler can vectorise a loop over it. */
SPECTRASIFT_FN float sift_atan2_deg(float y, float x) {
  const float p1 = 0.9997878412794807f * 57.29577951308232f;
  const float p3 = -0.3258083974640975f * 57.29577951308232f;
  const float p5 = 0.1555786518463281f * 57.29577951308232f;
  const float p7 = -0.04432655554792128f * 57.29577951308232f;
  const float ax = x < 0.0f ? -x : x;
  const float ay = y < 0.0f ? -y : y;
  const int x_major = ax >= ay;
  const float lo = x_major ? ay : ax;
  const float hi = x_major ? ax : ay;
  const float c = lo / (hi + SIFT_ATAN2_EPS);
  const float c2 = c * c;
  float a = (((p7 * c2 + p5) * c2 + p3) * c2 + p1) * c;
  a = x_major ? a : 90.0f - a;
  a = x < 0.0f ? 180.0f - a : a;
  a = y < 0.0f ? 360.0f - a : a;
  return a;
}

#endif /* SPECTRASIFT_NUMERIC_SIFT_COMMON_H */

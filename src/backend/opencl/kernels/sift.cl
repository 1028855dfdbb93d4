/* sift.cl — the program of the OpenCL SIFT pipeline (src/backend/opencl/sift*.cpp): one build for every
 * SIFT kernel, so that a device compiles it once (PoCL compiles on first use). Each kernel family lives in
 * its own file, named after it, included here.
 *
 * Strict numerics (DESIGN.md): no contraction of a * b + c into fma, so that every float operation is the
 * one the CPU backend performs; the host adds -cl-fp32-correctly-rounded-divide-sqrt where the device
 * supports it (divisions and square roots then round as the host's do). */
#pragma OPENCL FP_CONTRACT OFF

#include "sift_keypoint.h"
#include "sift_gray.h"
#include "sift_extrema.h"
#include "sift_refine.h"
#include "sift_orientation.h"
#include "sift_descriptor.h"
#include "sift_select.h"

/* exp, pow(2, x), cos and sin of a float as the host's libm gives them (glibc's expf, powf, cosf, sinf are
 * correctly rounded in all but rare cases): evaluated in double and rounded once, where the device has
 * doubles; otherwise OpenCL's own (a few ulp), which the SIFT tolerances of tests/tolerances.hpp cover. */
#if defined(SIFT_HAVE_DOUBLE)
inline float sift_dev_exp(float x) { return (float)exp((double)x); }
inline float sift_dev_exp2(float x) { return (float)pow(2.0, (double)x); }
inline float sift_dev_cos(float x) { return (float)cos((double)x); }
inline float sift_dev_sin(float x) { return (float)sin((double)x); }
#else
inline float sift_dev_exp(float x) { return exp(x); }
inline float sift_dev_exp2(float x) { return pow(2.0f, x); }
inline float sift_dev_cos(float x) { return cos(x); }
inline float sift_dev_sin(float x) { return sin(x); }
#endif

/* Per-octave geometry, one row of 4 longs per pyramid index: width, height, offset of its Gaussian level 0
 * in the level buffer, offset of its DoG plane 0 in the DoG buffer (floats). Levels and planes of an
 * octave are contiguous, width * height floats each. */
#define SIFT_OCT_W(info, o) ((int)(info)[4 * (o) + 0])
#define SIFT_OCT_H(info, o) ((int)(info)[4 * (o) + 1])
#define SIFT_OCT_GAUSS(info, o) ((info)[4 * (o) + 2])
#define SIFT_OCT_DOG(info, o) ((info)[4 * (o) + 3])

/* The Gaussian level of a keypoint record (its octave and layer). */
inline __global const float* sift_level_of(__global const float* gauss, __global const long* info, SiftKeypoint kp) {
  const int o = kp.octave_index;
  return gauss + SIFT_OCT_GAUSS(info, o) + (size_t)kp.layer * (size_t)SIFT_OCT_W(info, o) * (size_t)SIFT_OCT_H(info, o);
}

/* Slots of the counter buffer (uint). */
#define SIFT_COUNT_CANDIDATES 0
#define SIFT_COUNT_REFINED 1
#define SIFT_COUNT_ORIENTED 2
#define SIFT_COUNT_UNIQUE 3
#define SIFT_COUNT_KEPT 4

#include "sift_convert.cl"
#include "sift_blur.cl"
#include "sift_dog.cl"
#include "sift_extrema.cl"
#include "sift_refine.cl"
#include "sift_orientation.cl"
#include "sift_select.cl"
#include "sift_descriptor.cl"

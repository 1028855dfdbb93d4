/* sift_device.h — the buffer layout that the device SIFT pipelines (backend/cuda/sift*.cu and
 * backend/opencl/sift*.cpp) share, and the host-equal float functions their per-work-item bodies use: the
 * octave table, the counter slots, the Gaussian level of a record, exp / pow(2, x) / cos / sin. The stage
 * headers (sift_refine.h, sift_orientation.h, sift_descriptor.h, sift_select.h, sift_gray.h,
 * sift_upsample.h) build the per-work-item bodies of the device kernels on it; launch geometry, local
 * (shared) memory staging and barriers stay in each backend's kernel. */
#ifndef SPECTRASIFT_NUMERIC_SIFT_DEVICE_H
#define SPECTRASIFT_NUMERIC_SIFT_DEVICE_H

#include "sift_keypoint.h"

/* A 64-bit signed integer: OpenCL C's long, C++'s and CUDA's long long (the octave table's element). */
#if defined(__OPENCL_VERSION__)
typedef long sift_i64;
#else
typedef long long sift_i64;
#endif

/* exp, pow(2, x), cos and sin of a float as the host's libm gives them (glibc's expf, powf, cosf, sinf are
 * correctly rounded in all but rare cases): evaluated in double and rounded once, where the device has
 * doubles (CUDA always); otherwise OpenCL's own (a few ulp), which the SIFT tolerances of
 * tests/tolerances.hpp cover. */
#if defined(SIFT_HAVE_DOUBLE)
SPECTRASIFT_FN float sift_dev_exp(float x) { return (float)exp((double)x); }
SPECTRASIFT_FN float sift_dev_exp2(float x) { return (float)pow(2.0, (double)x); }
SPECTRASIFT_FN float sift_dev_cos(float x) { return (float)cos((double)x); }
SPECTRASIFT_FN float sift_dev_sin(float x) { return (float)sin((double)x); }
#else
SPECTRASIFT_FN float sift_dev_exp(float x) { return exp(x); }
SPECTRASIFT_FN float sift_dev_exp2(float x) { return pow(2.0f, x); }
SPECTRASIFT_FN float sift_dev_cos(float x) { return cos(x); }
SPECTRASIFT_FN float sift_dev_sin(float x) { return sin(x); }
#endif

/* Per-octave geometry, one row of 4 sift_i64 per pyramid index: width, height, offset of its Gaussian
 * level 0 in the level buffer, offset of its DoG plane 0 in the DoG buffer (floats). Levels and planes of
 * an octave are contiguous, width * height floats each. */
SPECTRASIFT_FN int sift_oct_w(SPECTRASIFT_CONST_GLOBAL sift_i64* info, int o) { return (int)info[4 * o + 0]; }
SPECTRASIFT_FN int sift_oct_h(SPECTRASIFT_CONST_GLOBAL sift_i64* info, int o) { return (int)info[4 * o + 1]; }
SPECTRASIFT_FN sift_i64 sift_oct_gauss(SPECTRASIFT_CONST_GLOBAL sift_i64* info, int o) { return info[4 * o + 2]; }
SPECTRASIFT_FN sift_i64 sift_oct_dog(SPECTRASIFT_CONST_GLOBAL sift_i64* info, int o) { return info[4 * o + 3]; }

/* The Gaussian level of a keypoint record (its octave and layer). */
SPECTRASIFT_FN SPECTRASIFT_CONST_GLOBAL float* sift_level_of(SPECTRASIFT_CONST_GLOBAL float* gauss,
                                                             SPECTRASIFT_CONST_GLOBAL sift_i64* info,
                                                             SiftKeypoint kp) {
  const int o = kp.octave_index;
  return gauss + sift_oct_gauss(info, o) +
         (size_t)kp.layer * (size_t)sift_oct_w(info, o) * (size_t)sift_oct_h(info, o);
}

/* Slots of the counter buffer (unsigned int): the candidates the extrema stage found, the refined points,
 * the oriented records, the unique ones and the kept ones (select); SIFT_COUNTERS slots in all. */
#define SIFT_COUNT_CANDIDATES 0
#define SIFT_COUNT_REFINED 1
#define SIFT_COUNT_ORIENTED 2
#define SIFT_COUNT_UNIQUE 3
#define SIFT_COUNT_KEPT 4
/* 1 when a small-count select path (the rank select, sift_select_rank.cuh / .cl, or the one-work-group
 * sift_select_small; CUDA's kCountSelectSmall in backend/cuda/kernels/sift_select.cuh is this slot) ran the whole
 * select stage: the multi-launch select kernels queued after it then return at once; 0 otherwise (every slot is
 * zeroed by the upload). */
#define SIFT_COUNT_SELECT_SMALL 5
#define SIFT_COUNTERS 8

/* The smaller and the larger of two ints (OpenCL C's and CUDA's min/max, which C++ spells std::min). */
SPECTRASIFT_FN int sift_min_i(int a, int b) { return a < b ? a : b; }
SPECTRASIFT_FN int sift_max_i(int a, int b) { return a > b ? a : b; }

#endif /* SPECTRASIFT_NUMERIC_SIFT_DEVICE_H */

// sift_common.cuh — what every CUDA SIFT kernel family shares (src/backend/cuda/sift*.cu): the numeric
// headers, the host-equal float functions, the octave table and the counter slots. The CUDA twin of
// backend/opencl/kernels/sift.cl; the kernels are the OpenCL ones' maths in the same order, so that the
// results are the CPU backend's bits.
//
// Strict numerics (DESIGN.md): the library compiles CUDA with --fmad=false (no a * b + c contracted into
// fma) and the default -prec-div=true -prec-sqrt=true (IEEE-rounded division and square root), no fast math.
#pragma once

#include <cuda_runtime.h>

#include "numeric/sift_descriptor.h"
#include "numeric/sift_extrema.h"
#include "numeric/sift_gray.h"
#include "numeric/sift_keypoint.h"
#include "numeric/sift_orientation.h"
#include "numeric/sift_refine.h"
#include "numeric/sift_select.h"

namespace spectrasift::cuda::kernels {

// exp, pow(2, x), cos and sin of a float as the host's libm gives them (glibc's expf, powf, cosf, sinf are
// correctly rounded in all but rare cases): evaluated in double and rounded once (the OpenCL kernels do the
// same).
__device__ inline float sift_dev_exp(float x) { return (float)exp((double)x); }
__device__ inline float sift_dev_exp2(float x) { return (float)pow(2.0, (double)x); }
__device__ inline float sift_dev_cos(float x) { return (float)cos((double)x); }
__device__ inline float sift_dev_sin(float x) { return (float)sin((double)x); }

// Per-octave geometry, one row of 4 long longs per pyramid index: width, height, offset of its Gaussian
// level 0 in the level buffer, offset of its DoG plane 0 in the DoG buffer (floats). Levels and planes of
// an octave are contiguous, width * height floats each.
__device__ inline int sift_oct_w(const long long* info, int o) { return (int)info[4 * o + 0]; }
__device__ inline int sift_oct_h(const long long* info, int o) { return (int)info[4 * o + 1]; }
__device__ inline long long sift_oct_gauss(const long long* info, int o) { return info[4 * o + 2]; }
__device__ inline long long sift_oct_dog(const long long* info, int o) { return info[4 * o + 3]; }

// The Gaussian level of a keypoint record (its octave and layer).
__device__ inline const float* sift_level_of(const float* gauss, const long long* info, const SiftKeypoint& kp) {
  const int o = kp.octave_index;
  return gauss + sift_oct_gauss(info, o) +
         (size_t)kp.layer * (size_t)sift_oct_w(info, o) * (size_t)sift_oct_h(info, o);
}

// Slots of the counter buffer (unsigned int).
constexpr int kCountCandidates = 0;
constexpr int kCountRefined = 1;
constexpr int kCountOriented = 2;
constexpr int kCountUnique = 3;
constexpr int kCountKept = 4;
constexpr int kCounters = 8;

}  // namespace spectrasift::cuda::kernels

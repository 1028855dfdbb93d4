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
#include "numeric/sift_device.h"
#include "numeric/sift_extrema.h"
#include "numeric/sift_gray.h"
#include "numeric/sift_keypoint.h"
#include "numeric/sift_orientation.h"
#include "numeric/sift_refine.h"
#include "numeric/sift_select.h"

namespace spectrasift::cuda::kernels {

// The host-equal exp / pow(2, x) / cos / sin (sift_dev_*), the octave table (sift_oct_*), the Gaussian
// level of a record (sift_level_of) and the counter slots are numeric/sift_device.h's, shared with OpenCL.

// Slots of the counter buffer (unsigned int).
constexpr int kCountCandidates = SIFT_COUNT_CANDIDATES;
constexpr int kCountRefined = SIFT_COUNT_REFINED;
constexpr int kCountOriented = SIFT_COUNT_ORIENTED;
constexpr int kCountUnique = SIFT_COUNT_UNIQUE;
constexpr int kCountKept = SIFT_COUNT_KEPT;
constexpr int kCounters = SIFT_COUNTERS;

}  // namespace spectrasift::cuda::kernels

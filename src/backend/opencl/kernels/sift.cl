/* sift.cl — the program of the OpenCL SIFT pipeline (src/backend/opencl/sift*.cpp): one build for every
 * SIFT kernel, so that a device compiles it once (PoCL compiles on first use). Each kernel family lives in
 * its own file, named after it, included here.
 *
 * Strict numerics (DESIGN.md): no contraction of a * b + c into fma, so that every float operation is the
 * one the CPU backend performs; the host adds -cl-fp32-correctly-rounded-divide-sqrt where the device
 * supports it (divisions and square roots then round as the host's do). */
#pragma OPENCL FP_CONTRACT OFF

#include "sift_keypoint.h"
#include "sift_device.h"
#include "sift_gray.h"
#include "sift_upsample.h"
#include "sift_extrema.h"
#include "sift_refine.h"
#include "sift_orientation.h"
#include "sift_descriptor.h"
#include "sift_select.h"

/* The host-equal exp / pow(2, x) / cos / sin (sift_dev_*), the octave table (sift_oct_*), the Gaussian
 * level of a record (sift_level_of) and the counter slots (SIFT_COUNT_*) are numeric/sift_device.h's,
 * shared with the CUDA kernels. */

#include "sift_convert.cl"
#include "sift_blur.cl"
#include "sift_extrema.cl"
#include "sift_refine.cl"
#include "sift_orientation.cl"
#include "sift_select.cl"
#include "sift_select_rank.cl"
#include "sift_select_buckets.cl"
#include "sift_descriptor.cl"
#include "sift_descriptor_staged.cl"
#include "sift_pack.cl"

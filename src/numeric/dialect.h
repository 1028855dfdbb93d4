/* dialect.h — lets one per-element formula compile as C++, CUDA and OpenCL C.
 * SPECTRASIFT_FN marks a function usable from host and device code; SPECTRASIFT_GLOBAL marks a pointer
 * to device (global) memory. Include this first in every file of src/numeric. */
#ifndef SPECTRASIFT_NUMERIC_DIALECT_H
#define SPECTRASIFT_NUMERIC_DIALECT_H

#if defined(__OPENCL_VERSION__)
#define SPECTRASIFT_FN inline
#define SPECTRASIFT_GLOBAL __global
#define SPECTRASIFT_CONST_GLOBAL __global const
#elif defined(__CUDACC__)
#define SPECTRASIFT_FN __host__ __device__ inline
#define SPECTRASIFT_GLOBAL
#define SPECTRASIFT_CONST_GLOBAL const
#else
#include <cmath>
#include <cstdint>
#define SPECTRASIFT_FN inline
#define SPECTRASIFT_GLOBAL
#define SPECTRASIFT_CONST_GLOBAL const
#endif

#endif /* SPECTRASIFT_NUMERIC_DIALECT_H */

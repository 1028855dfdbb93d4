/* dialect.h — lets one per-element formula compile as C++, CUDA and OpenCL C.
 * SPECTRASIFT_FN marks a function usable from host and device code; SPECTRASIFT_GLOBAL marks a pointer
 * to device (global) memory, SPECTRASIFT_LOCAL one to work-group local (CUDA: shared) memory.
 * Include this first in every file of src/numeric. */
#ifndef SPECTRASIFT_NUMERIC_DIALECT_H
#define SPECTRASIFT_NUMERIC_DIALECT_H

#if defined(__OPENCL_VERSION__)
#define SPECTRASIFT_FN inline
#define SPECTRASIFT_GLOBAL __global
#define SPECTRASIFT_CONST_GLOBAL __global const
#define SPECTRASIFT_LOCAL __local
#elif defined(__CUDACC__)
#define SPECTRASIFT_FN __host__ __device__ inline
#define SPECTRASIFT_GLOBAL
#define SPECTRASIFT_CONST_GLOBAL const
#define SPECTRASIFT_LOCAL
#else
#include <cmath>
#include <cstddef>
#include <cstdint>
#define SPECTRASIFT_FN inline
#define SPECTRASIFT_GLOBAL
#define SPECTRASIFT_CONST_GLOBAL const
#define SPECTRASIFT_LOCAL
#endif

/* Address-space variants of a function that takes arrays. OpenCL C 1.2 has no generic address space: an
 * unqualified pointer parameter points to private memory, so a function that must also accept a __local
 * or a __global array is a different function. A numeric header writes such a function once, as a macro
 * DEFINE(SUFFIX, AS) whose every array parameter is qualified by AS, and instantiates it with
 * SPECTRASIFT_AS_VARIANTS(DEFINE), which defines NAME (unqualified: private in OpenCL C), NAME_local and
 * NAME_global. In C++ and CUDA pointers are generic and the three are the same code; kernels use the
 * suffixed names on both devices so that one kernel text reads the same on CUDA and OpenCL. */
#define SPECTRASIFT_AS_VARIANTS(DEFINE) \
  DEFINE(, )                            \
  DEFINE(_local, SPECTRASIFT_LOCAL)     \
  DEFINE(_global, SPECTRASIFT_GLOBAL)

#endif /* SPECTRASIFT_NUMERIC_DIALECT_H */

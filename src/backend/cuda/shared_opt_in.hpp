// shared_opt_in.hpp — opting a kernel in to more than 48 KiB of dynamic shared memory, only ever upwards.
//
// cudaFuncAttributeMaxDynamicSharedMemorySize is one value per kernel and device for the whole process. Two
// stages objects with different plans (e.g. a sigma that widens the descriptor window, or an octave that
// changes the small-octave planes) would otherwise lower each other's value, and a launch, or a replay of a
// CUDA graph captured with the larger size, could then fail. So the attribute is raised when a launch needs
// more and never lowered.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "backend/cuda/check.hpp"

namespace spectrasift::cuda {

template <class Kernel> void raise_dynamic_shared(Kernel kernel, std::size_t bytes) {
  if (bytes <= 48 * 1024) return;  // the default needs no opt-in
  cudaFuncAttributes a{};
  SPECTRASIFT_CUDA_CHECK(cudaFuncGetAttributes(&a, kernel));
  if (std::size_t(a.maxDynamicSharedSizeBytes) >= bytes) return;
  SPECTRASIFT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
}

}  // namespace spectrasift::cuda

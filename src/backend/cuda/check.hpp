// Error checking for every CUDA runtime and cuBLAS call: file, line and the native status.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>

#include "spectrasift/error.hpp"

namespace spectrasift::cuda {

[[noreturn]] inline void throw_cuda(cudaError_t e, const char* expr, const char* file, int line) {
  const ErrorCode code = (e == cudaErrorMemoryAllocation) ? ErrorCode::kOutOfMemory : ErrorCode::kBackend;
  throw Error(code, std::string("CUDA error ") + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ") in " + expr +
                        " at " + file + ":" + std::to_string(line),
              "cuda", long(e));
}

[[noreturn]] inline void throw_cublas(cublasStatus_t s, const char* expr, const char* file, int line) {
  throw Error(ErrorCode::kBackend,
              std::string("cuBLAS error ") + std::to_string(int(s)) + " in " + expr + " at " + file + ":" + std::to_string(line),
              "cuda", long(s));
}

}  // namespace spectrasift::cuda

#define SPECTRASIFT_CUDA_CHECK(expr)                                                      \
  do {                                                                                    \
    const cudaError_t spectrasift_e_ = (expr);                                            \
    if (spectrasift_e_ != cudaSuccess)                                                    \
      ::spectrasift::cuda::throw_cuda(spectrasift_e_, #expr, __FILE__, __LINE__);         \
  } while (0)

#define SPECTRASIFT_CUBLAS_CHECK(expr)                                                    \
  do {                                                                                    \
    const cublasStatus_t spectrasift_s_ = (expr);                                         \
    if (spectrasift_s_ != CUBLAS_STATUS_SUCCESS)                                          \
      ::spectrasift::cuda::throw_cublas(spectrasift_s_, #expr, __FILE__, __LINE__);       \
  } while (0)

// After a kernel launch: catches launch-configuration errors at once.
#define SPECTRASIFT_CUDA_CHECK_LAUNCH() SPECTRASIFT_CUDA_CHECK(cudaGetLastError())

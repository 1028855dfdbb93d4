// Error checking for every OpenCL call: file, line and the native status.
#pragma once

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>

#include <string>

#include "spectrasift/error.hpp"

namespace spectrasift::opencl {

const char* status_name(cl_int status) noexcept;

[[noreturn]] inline void throw_cl(cl_int s, const char* expr, const char* file, int line) {
  const ErrorCode code = (s == CL_OUT_OF_RESOURCES || s == CL_OUT_OF_HOST_MEMORY || s == CL_MEM_OBJECT_ALLOCATION_FAILURE)
                             ? ErrorCode::kOutOfMemory
                             : ErrorCode::kBackend;
  throw Error(code, std::string("OpenCL error ") + status_name(s) + " (" + std::to_string(s) + ") in " + expr + " at " +
                        file + ":" + std::to_string(line),
              "opencl", long(s));
}

}  // namespace spectrasift::opencl

#define SPECTRASIFT_CL_CHECK(expr)                                                         \
  do {                                                                                     \
    const cl_int spectrasift_s_ = (expr);                                                  \
    if (spectrasift_s_ != CL_SUCCESS)                                                      \
      ::spectrasift::opencl::throw_cl(spectrasift_s_, #expr, __FILE__, __LINE__);          \
  } while (0)

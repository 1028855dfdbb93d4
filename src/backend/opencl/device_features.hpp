// The OpenCL backend's device-resident descriptors (backend/backend.hpp DeviceFeatures): a cl_mem of
// count x 128 floats that the SIFT download leaves on the device (sift.cpp) and matching reads in place
// of an upload (match.cpp). The buffer is its own (retained), so it stays valid when the Context that made
// it is gone (an OpenCL context lives until its last object is released).
#pragma once

#include "backend/backend.hpp"
#include "backend/opencl/check.hpp"

namespace spectrasift::opencl {

class DeviceDescriptors final : public detail::DeviceFeatures {
 public:
  /// Takes one reference to `mem` (the caller keeps its own). `host` / `values`: the host descriptors it mirrors.
  DeviceDescriptors(const detail::BackendImpl& owner, std::size_t count, const float* host, std::size_t values,
                    cl_mem mem) noexcept
      : DeviceDescriptors(owner, count, detail::descriptor_digest(host, values), DescriptorType::kF32, mem) {}
  /// The same with their digest already computed (descriptor_digest of the host descriptors) and their type
  /// (the device copy is floats either way).
  DeviceDescriptors(const detail::BackendImpl& owner, std::size_t count, std::uint64_t digest, DescriptorType type,
                    cl_mem mem) noexcept
      : DeviceFeatures(owner, count, digest, type), mem_(mem) {
    if (mem_) clRetainMemObject(mem_);
  }
  ~DeviceDescriptors() override {
    if (mem_) clReleaseMemObject(mem_);
  }
  cl_mem mem() const noexcept { return mem_; }

 private:
  cl_mem mem_;
};

}  // namespace spectrasift::opencl

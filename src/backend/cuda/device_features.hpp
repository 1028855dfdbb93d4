// Descriptors kept on a CUDA device after SIFT (backend/backend.hpp DeviceFeatures): a device copy of the
// Features' float descriptors (count x 128, row-major), owned by this object and valid on its own (the
// Features may outlive the Context, so it frees its memory on its device without the State).
#pragma once

#include <cstddef>

#include "backend/backend.hpp"

namespace spectrasift::cuda {

class CudaDeviceFeatures final : public detail::DeviceFeatures {
 public:
  /// Takes ownership of `device_descriptors` (cudaMalloc'ed on `device`, f.size() rows of 128 floats that
  /// hold f's descriptors once the stream that fills them has run).
  CudaDeviceFeatures(const detail::BackendImpl& owner, const Features& f, int device, float* device_descriptors) noexcept;
  ~CudaDeviceFeatures() override;  ///< frees the copy on its device

  const float* descriptors() const noexcept { return descriptors_; }
  int device() const noexcept { return device_; }

 private:
  int device_;
  float* descriptors_;
};

}  // namespace spectrasift::cuda

// Descriptors kept on a CUDA device after SIFT (backend/backend.hpp DeviceFeatures): a device copy of the
// Features' float descriptors (count x 128, row-major) in a block of a DeviceBlockPool, given back to the
// pool when this object dies (the Features may outlive the Context: the pool lives as long as a block holder).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "backend/backend.hpp"
#include "backend/cuda/device_block_pool.hpp"

namespace spectrasift::cuda {

class CudaDeviceFeatures final : public detail::DeviceFeatures {
 public:
  /// Holds `block` of `pool` (count rows of 128 floats that hold the values of the host descriptors of digest
  /// `digest`, floats or bytes by `type`, once the stream that fills them has run).
  CudaDeviceFeatures(const detail::BackendImpl& owner, std::size_t count, std::uint64_t digest, DescriptorType type,
                     std::shared_ptr<DeviceBlockPool> pool, DeviceBlockPool::Block block) noexcept;
  ~CudaDeviceFeatures() override;  ///< gives the block back to its pool

  const float* descriptors() const noexcept { return static_cast<const float*>(block_.ptr); }
  int device() const noexcept { return pool_->device(); }

 private:
  std::shared_ptr<DeviceBlockPool> pool_;
  DeviceBlockPool::Block block_;
};

}  // namespace spectrasift::cuda

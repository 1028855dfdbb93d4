// The recycled device blocks of device_block_pool.hpp.
#include "backend/cuda/device_block_pool.hpp"

#include <cuda_runtime.h>

#include <algorithm>

#include "backend/cuda/check.hpp"

namespace spectrasift::cuda {

namespace {

// Frees p on `device`, restoring the caller's current device (destructors run on any thread).
void free_on(int device, void* p) noexcept {
  int current = -1;
  const bool switch_device = cudaGetDevice(&current) == cudaSuccess && current != device;
  if (switch_device) cudaSetDevice(device);
  cudaFree(p);
  if (switch_device) cudaSetDevice(current);
}

}  // namespace

DeviceBlockPool::~DeviceBlockPool() {
  for (const Block& b : free_) free_on(device_, b.ptr);
}

DeviceBlockPool::Block DeviceBlockPool::take(std::size_t bytes) {
  bytes = std::max<std::size_t>(bytes, 256);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto best = free_.end();
    for (auto it = free_.begin(); it != free_.end(); ++it)
      if (it->bytes >= bytes && (best == free_.end() || it->bytes < best->bytes)) best = it;
    if (best != free_.end()) {
      const Block b = *best;
      free_.erase(best);
      return b;
    }
  }
  Block b;
  SPECTRASIFT_CUDA_CHECK(cudaMalloc(&b.ptr, bytes));
  b.bytes = bytes;
  return b;
}

void DeviceBlockPool::give(Block b) noexcept {
  if (!b.ptr) return;
  Block drop;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    free_.push_back(b);
    if (free_.size() > kMaxFree) {
      auto smallest = std::min_element(free_.begin(), free_.end(),
                                       [](const Block& x, const Block& y) { return x.bytes < y.bytes; });
      drop = *smallest;
      free_.erase(smallest);
    }
  }
  if (drop.ptr) free_on(device_, drop.ptr);
}

std::size_t DeviceBlockPool::kept() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return free_.size();
}

}  // namespace spectrasift::cuda

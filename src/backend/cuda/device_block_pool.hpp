// Device memory blocks that outlive the call that filled them (the descriptor copies that CUDA SIFT leaves
// in Features::device), recycled instead of freed: cudaMalloc costs tens to hundreds of microseconds and
// cudaFree synchronises the whole device, both on every image otherwise. A block given back is kept for the
// next take() (at most kMaxFree blocks; beyond that the smallest is freed). Thread-safe: a Features may be
// destroyed on any thread. The pool is held by shared_ptr by its owner and by every block's holder, so a
// block can be given back after the owning context is gone; the last holder frees the kept blocks.
//
// Ordering: a block is given back only when its holder is destroyed, i.e. when no call can still use it; the
// work that used it (matching on the State's compute stream) was synchronised before that call returned.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

namespace spectrasift::cuda {

class DeviceBlockPool {
 public:
  static constexpr std::size_t kMaxFree = 4;

  explicit DeviceBlockPool(int device) noexcept : device_(device) {}
  ~DeviceBlockPool();  ///< frees the kept blocks on the pool's device
  DeviceBlockPool(const DeviceBlockPool&) = delete;
  DeviceBlockPool& operator=(const DeviceBlockPool&) = delete;

  struct Block {
    void* ptr = nullptr;
    std::size_t bytes = 0;
  };
  /// A block of at least `bytes` bytes: the smallest kept block that is large enough, else a new one.
  /// Throws Error (kOutOfMemory) as cudaMalloc fails. Call with the pool's device current.
  Block take(std::size_t bytes);
  /// Keeps the block for a later take() (frees the smallest kept block when more than kMaxFree are kept).
  void give(Block b) noexcept;
  int device() const noexcept { return device_; }
  std::size_t kept() const;  ///< blocks kept now (tests)

 private:
  int device_;
  mutable std::mutex mutex_;
  std::vector<Block> free_;
};

}  // namespace spectrasift::cuda

// CUDA SIFT read-back 2's features (see sift.hpp; the counts and the regrowth before them are
// core/sift_device_stages.cpp's download sequence): the kept features in one copy of the packed layout
// (host/sift_unpack.hpp; packed on the device by descriptors(), kernels/sift_pack.cuh) into a pinned buffer
// of the State reused across calls, converted once into the Features (or copied, for u8 descriptors); and the
// device copy of the float descriptors that Features::device keeps, in a recycled block (device_block_pool.hpp).
#include <algorithm>

#include "backend/cuda/check.hpp"
#include "backend/cuda/device_block_pool.hpp"
#include "backend/cuda/device_features.hpp"
#include "backend/cuda/host/sift_unpack.hpp"
#include "backend/cuda/kernels/sift_pack.cuh"
#include "backend/cuda/sift.hpp"
#include "backend/cuda/state.hpp"

namespace spectrasift::cuda {

bool SiftStagesCuda::packs_bytes() const noexcept {
  return sift_descriptors_fit_bytes(plan_->root_sift);
}

// After the descriptor kernel (in descriptors(), so that it is queued before read-back 2's wait): the kept
// records and descriptor rows into "sift.packed", sized for the descriptor capacity.
void SiftStagesCuda::pack_features() {
  const std::size_t cap = std::min(keypoint_capacity_, descriptor_capacity_);
  const auto* kept = static_cast<const SiftKeypoint*>(buffer("sift.kept", keypoint_capacity_ * sizeof(SiftKeypoint)));
  const auto* desc = static_cast<const float*>(buffer("sift.desc", descriptor_capacity_ * 128 * sizeof(float)));
  auto* packed = static_cast<unsigned char*>(buffer("sift.packed", std::size_t(sift_packed_bytes(cap, packs_bytes()))));
  const std::size_t units = 35 * cap;  // 3 record units + 32 descriptor units per feature
  const unsigned grid =
      unsigned(std::max<std::size_t>(1, std::min<std::size_t>((units + 255) / 256, std::size_t(blocks_))));
  kernels::sift_pack_features<<<grid, 256, 0, st_.compute>>>(kept, desc, counters(), unsigned(cap),
                                                             packs_bytes() ? 1 : 0, packed);
  SPECTRASIFT_CUDA_CHECK_LAUNCH();
}

// Called by SiftDeviceStages::download() once the counts are final (after any regrowth, whose descriptors()
// packed again); finish_profile() follows. The host work is in pieces on the host pool (its threads woken
// first, so that the wake-up overlaps the copies): the output vectors sized while the copies run
// (size_sift_features: large ones' pages populated in parallel before their zero-fill), then the rows
// converted with the digest of mirrors() summed on the way (unpack_sift_features), so that no pass over the
// descriptors follows.
void SiftStagesCuda::read_features(Features& out, std::size_t kept) {
  mark(kDownload);
  if (kept == 0) return;
  const bool bytes_rows = packs_bytes();
  const DescriptorType type = plan_->u8_descriptors ? DescriptorType::kU8 : DescriptorType::kF32;
  const std::size_t packed_bytes = std::size_t(sift_packed_bytes(kept, bytes_rows));
  const std::size_t cap = std::min(keypoint_capacity_, descriptor_capacity_);
  // The host pool only when the work has more than one piece (its first use starts its threads).
  HostCopyPool* pool = kept > kSiftUnpackRowsPerPiece ? &st_.host_copy_pool(ctx_.cpu_threads()) : nullptr;
  if (pool) pool->wake();
  PinnedBuffer& host = st_.pinned_buffer("sift.features_host", packed_bytes);
  const void* packed = buffer("sift.packed", std::size_t(sift_packed_bytes(cap, bytes_rows)));
  SPECTRASIFT_CUDA_CHECK(cudaMemcpyAsync(host.ptr, packed, packed_bytes, cudaMemcpyDeviceToHost, st_.compute));
  // The device copy of the float descriptors (Features::device), behind the read-back on the same stream.
  const std::size_t desc_bytes = kept * Features::kDescriptorSize * sizeof(float);
  const float* desc = static_cast<const float*>(buffer("sift.desc", descriptor_capacity_ * 128 * sizeof(float)));
  DeviceBlockPool::Block block = feature_blocks_->take(desc_bytes);
  cudaError_t e = cudaMemcpyAsync(block.ptr, desc, desc_bytes, cudaMemcpyDeviceToDevice, st_.compute);
  try {
    size_sift_features(kept, type, out, pool);  // while the copies run
  } catch (...) {
    (void)cudaStreamSynchronize(st_.compute);  // the block may still be written
    feature_blocks_->give(block);
    throw;
  }
  if (e == cudaSuccess) e = cudaStreamSynchronize(st_.compute);
  if (e != cudaSuccess) {
    feature_blocks_->give(block);
    SPECTRASIFT_CUDA_CHECK(e);
  }
  try {
    const std::uint64_t digest = unpack_sift_features(host.as<const unsigned char>(), kept, bytes_rows, out, pool);
    out.device = std::make_shared<CudaDeviceFeatures>(st_, kept, digest, type, feature_blocks_, block);
  } catch (...) {
    feature_blocks_->give(block);
    throw;
  }
}

CudaDeviceFeatures::CudaDeviceFeatures(const detail::BackendImpl& owner, std::size_t count, std::uint64_t digest,
                                       DescriptorType type,
                                       std::shared_ptr<DeviceBlockPool> pool, DeviceBlockPool::Block block) noexcept
    : DeviceFeatures(owner, count, digest, type),
      pool_(std::move(pool)),
      block_(block) {}

CudaDeviceFeatures::~CudaDeviceFeatures() {
  pool_->give(block_);
}

}  // namespace spectrasift::cuda

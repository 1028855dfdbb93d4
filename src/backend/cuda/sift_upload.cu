// CUDA SIFT: the copy of the user's image to the device (see sift.hpp; upload() in sift_pyramid.cu then
// converts it to grey on the device, kernels/sift_convert.cuh). From page-locked memory
// (cudaPointerGetAttributes says so: cudaMallocHost or cudaHostRegister'ed) it is copied directly; from
// pageable memory it is staged through the State's pinned "sift.upload_host" (reused across calls) in chunks
// (host/upload_chunks.hpp): the host copy pool copies chunk c + 1 while the copy engine uploads chunk c,
// instead of the driver's serial pageable staging. Small images take one plain copy.
//
// The caller's memory is never read after upload() returns, even when a later stage throws: staged chunks
// are read by the host before it returns, and a direct copy is waited for (after the grey kernel is queued
// behind it, so the device does not idle).
#include <algorithm>

#include "backend/cuda/check.hpp"
#include "backend/cuda/host/upload_chunks.hpp"
#include "backend/cuda/sift.hpp"
#include "backend/cuda/state.hpp"

namespace spectrasift::cuda {

namespace {

bool page_locked(const void* p) {
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    (void)cudaGetLastError();  // older drivers flag unregistered memory as an error: not page-locked
    return false;
  }
  return a.type == cudaMemoryTypeHost;
}

}  // namespace

// Enqueues the copy of the caller's bytes to dst on the compute stream. Returns true when the copy reads
// the caller's memory asynchronously (page-locked): the caller then waits for copy_done() before returning.
bool SiftStagesCuda::upload_bytes(void* dst, const void* src, std::size_t bytes) {
  if (page_locked(src)) {
    SPECTRASIFT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, st_.compute));
    SPECTRASIFT_CUDA_CHECK(cudaEventRecord(copy_done(), st_.compute));
    return true;
  }
  if (bytes < kStagedUploadMin) {  // the driver stages it; returns once the caller's bytes are taken
    SPECTRASIFT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, st_.compute));
    return false;
  }
  // The staging buffer may still be read by the uploads of a run that threw before its read-backs.
  SPECTRASIFT_CUDA_CHECK(cudaStreamSynchronize(st_.compute));
  PinnedBuffer& staging = st_.pinned_buffer("sift.upload_host", bytes);
  HostCopyPool& pool = st_.host_copy_pool(ctx_.cpu_threads());
  pool.wake();
  split_upload(bytes, upload_chunks_);
  for (const ByteRange& c : upload_chunks_) {
    char* stage = staging.as<char>() + c.offset;
    copy_piece_.assign(1, CopyPiece{stage, static_cast<const char*>(src) + c.offset, c.bytes});
    // Lines demoted to the shared cache: the upload right after reads them without snooping the copiers.
    pool.copy(copy_piece_, std::size_t(64) << 10, CopyStores::kDemote);
    SPECTRASIFT_CUDA_CHECK(
        cudaMemcpyAsync(static_cast<char*>(dst) + c.offset, stage, c.bytes, cudaMemcpyHostToDevice, st_.compute));
  }
  return false;
}

cudaEvent_t SiftStagesCuda::copy_done() {
  return (*ordering_)[0];
}

}  // namespace spectrasift::cuda

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
//
// The batch call (core/sift.cpp) hands the next image to prefetch() once this run's pyramid is queued: it is
// copied the same way, but on the copy stream, into one of two device buffers (staged through one of two
// pinned buffers), so that its copy runs beside this run's compute; its upload() then only makes the compute
// stream wait for that copy. Two slots used in turn: image i + 1's copy fills one while image i's grey kernel
// may still read the other (and image i - 1's, the slot being refilled, finished with its run's read-backs).
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
  const bool direct = upload_bytes(dst, src, bytes, st_.compute, "sift.upload_host");
  if (direct) SPECTRASIFT_CUDA_CHECK(cudaEventRecord(copy_done(), st_.compute));
  return direct;
}

// The copy on `stream`: page-locked memory directly (returns true), small images through the driver, larger
// pageable ones in chunks through the pinned buffer `staging_name`.
bool SiftStagesCuda::upload_bytes(void* dst, const void* src, std::size_t bytes, cudaStream_t stream,
                                  const char* staging_name) {
  if (page_locked(src)) {
    SPECTRASIFT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream));
    return true;
  }
  if (bytes < kStagedUploadMin) {  // the driver stages it; returns once the caller's bytes are taken
    SPECTRASIFT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream));
    return false;
  }
  // The staging buffer may still be read by the uploads of a run that threw before its read-backs.
  SPECTRASIFT_CUDA_CHECK(cudaStreamSynchronize(stream));
  PinnedBuffer& staging = st_.pinned_buffer(staging_name, bytes);
  HostCopyPool& pool = st_.host_copy_pool(ctx_.cpu_threads());
  pool.wake();
  split_upload(bytes, upload_chunks_);
  for (const ByteRange& c : upload_chunks_) {
    char* stage = staging.as<char>() + c.offset;
    copy_piece_.assign(1, CopyPiece{stage, static_cast<const char*>(src) + c.offset, c.bytes});
    // Lines demoted to the shared cache: the upload right after reads them without snooping the copiers.
    pool.copy(copy_piece_, std::size_t(64) << 10, CopyStores::kDemote);
    SPECTRASIFT_CUDA_CHECK(
        cudaMemcpyAsync(static_cast<char*>(dst) + c.offset, stage, c.bytes, cudaMemcpyHostToDevice, stream));
  }
  return false;
}

void SiftStagesCuda::prefetch(const detail::SiftImageView& next) {
  drop_prefetch();
  if (next.grey_levels) return;  // uploaded as the grey image itself: not prefetched
  st_.activate();
  const std::size_t bytes =
      std::size_t(next.width) * std::size_t(next.height) * std::size_t(next.channels) * bytes_per_sample(next.type);
  // A batch keeps three raw images on the device for the Context's life: sift.input (its first image) and
  // both prefetch slots (each at least this image's bytes once filled). The memory check counts all three,
  // so that near the limit the batch stops with check_memory's clear kOutOfMemory error before allocating.
  const auto held = [&](const char* name) {
    const auto it = st_.buffers.find(name);
    return std::max(bytes, it == st_.buffers.end() ? std::size_t(0) : it->second.bytes);
  };
  check_memory(*plan_, held("sift.input") + held("sift.prefetch0") + held("sift.prefetch1"));
  const int slot = next_prefetch_slot_;
  void* dst = buffer(slot ? "sift.prefetch1" : "sift.prefetch0", bytes);
  const bool direct = upload_bytes(dst, next.data, bytes, st_.copy, slot ? "sift.prefetch_host1" : "sift.prefetch_host0");
  SPECTRASIFT_CUDA_CHECK(cudaEventRecord((*ordering_)[std::size_t(1 + slot)], st_.copy));
  prefetch_ = Prefetch{next.data, bytes, slot, direct, true};
  next_prefetch_slot_ = 1 - slot;
}

void SiftStagesCuda::drop_prefetch() noexcept {
  if (!prefetch_.pending) return;
  prefetch_.pending = false;
  (void)cudaStreamSynchronize(st_.copy);  // the copy may still read the caller's memory; an error shows later
}

const unsigned char* SiftStagesCuda::raw_input(const detail::SiftImageView& image, std::size_t bytes, bool& wait) {
  if (prefetch_.pending && prefetch_.data == image.data && prefetch_.bytes == bytes) {
    prefetch_.pending = false;
    const int slot = prefetch_.slot;
    SPECTRASIFT_CUDA_CHECK(cudaStreamWaitEvent(st_.compute, (*ordering_)[std::size_t(1 + slot)], 0));
    // A direct copy reads the caller's memory: upload() waits for copy_done(), recorded behind the copy.
    wait = prefetch_.page_locked;
    if (wait) SPECTRASIFT_CUDA_CHECK(cudaEventRecord(copy_done(), st_.compute));
    return static_cast<const unsigned char*>(buffer(slot ? "sift.prefetch1" : "sift.prefetch0", bytes));
  }
  drop_prefetch();
  auto* raw = static_cast<unsigned char*>(buffer("sift.input", bytes));
  wait = upload_bytes(raw, image.data, bytes);
  return raw;
}

cudaEvent_t SiftStagesCuda::copy_done() {
  return (*ordering_)[0];
}

}  // namespace spectrasift::cuda

// OpenCL SIFT: the upload / grey stage (see sift.hpp). The caller's image is written to the device in its
// own type and converted to grey there (kernels/sift_grey.cl); an image that is already grey levels is
// written as the grey image itself.
//
// From pageable memory a plain clEnqueueWriteBuffer is staged by the driver, one bounce copy after another
// on the calling thread (NVIDIA OpenCL: ~10 GB/s, 0.65 ms for a 1080p colour u8 image against CUDA's
// 0.27). On a GPU (State::host_staging) images of kStagedUploadMin bytes or more go through the State's
// pinned "sift.upload_host" instead: a CL_MEM_ALLOC_HOST_PTR buffer mapped once (State::pinned), which
// NVIDIA's OpenCL DMAs from without a bounce when its mapped pointer is the source of a write (the NVIDIA
// OpenCL best-practice for pinned transfers). The image is split into chunks (backend/upload_chunks.hpp);
// each is copied into the staging buffer in 64 KiB pieces on the context's WorkPool and then written
// non-blocking (and flushed, so the copy engine starts), so that the pool copies chunk c + 1 while chunk c
// is transferred. CPU devices keep the direct write: there a staging copy is only an extra memcpy.
//
// The caller's memory is never read after upload() returns, even when a later stage throws: the direct
// write is blocking, and the staged chunks are read by the host before it returns (the non-blocking writes
// read only the staging buffer, which the next staged upload waits for before refilling it).
#include <algorithm>
#include <cstring>

#include "backend/opencl/sift.hpp"
#include "backend/upload_chunks.hpp"
#include "core/thread_pool.hpp"
#include "numeric/sift_gray.h"

namespace spectrasift::opencl {

namespace {

int raw_type(PixelType t) {
  return t == PixelType::kU8 ? SIFT_RAW_U8 : t == PixelType::kU16 ? SIFT_RAW_U16 : SIFT_RAW_F32;
}

// Bytes of one piece of a chunk's host copy (a task of the pool).
constexpr std::size_t kCopyPiece = std::size_t(64) << 10;

}  // namespace

void SiftStagesOpenCL::upload(const detail::SiftPlan& plan, const detail::SiftImageView& image) {
  const std::size_t bytes = begin_run(plan, image);
  events_.clear();
  upload_first_.reset();
  check_memory(plan, bytes);
  prepare(plan, image);
  const cl_mem counters = counter_buffer();
  const cl_uint zero = 0;
  SPECTRASIFT_CL_CHECK(clEnqueueFillBuffer(st_.queue, counters, &zero, sizeof zero, 0, sizeof counters_, 0, nullptr, nullptr));
  const std::size_t pixels = std::size_t(image.width) * std::size_t(image.height);
  const cl_mem grey = st_.buffer("sift.grey", pixels * sizeof(float));
  if (image.grey_levels) {  // already grey levels: the upload is the grey image
    write_input(grey, image.data, bytes);
    return;
  }
  const cl_mem raw = st_.buffer("sift.input", bytes);
  write_input(raw, image.data, bytes);
  cl_kernel k = kernel("sift_grey");
  const int type = raw_type(image.type);
  set_args(k, raw, type, image.channels, image.width, image.height, grey);
  launch_2d(k, std::size_t(image.width), std::size_t(image.height), kUpload);
  flush();
}

void SiftStagesOpenCL::write_input(cl_mem dst, const void* src, std::size_t bytes) {
  const bool staged = forced_chunk_ > 0 || (st_.host_staging && bytes >= detail::kStagedUploadMin);
  if (!staged) {
    Event ev;
    SPECTRASIFT_CL_CHECK(
        clEnqueueWriteBuffer(st_.queue, dst, CL_TRUE, 0, bytes, src, 0, nullptr, profile_run_ ? &ev.ev : nullptr));
    if (profile_run_) events_.emplace_back(kUpload, std::move(ev));
    return;
  }
  // The staging buffer may still be read by the writes of a run that threw before its read-backs.
  if (staged_last_.ev) {
    SPECTRASIFT_CL_CHECK(clWaitForEvents(1, &staged_last_.ev));
    staged_last_.reset();
  }
  PinnedBuffer& staging = st_.pinned("sift.upload_host", bytes);
  WorkPool& pool = calling_thread_pool(ctx_.cpu_threads());
  if (forced_chunk_ > 0)
    detail::split_upload(bytes, forced_chunk_, upload_chunks_);
  else
    detail::split_upload(bytes, upload_chunks_);
  for (std::size_t i = 0; i < upload_chunks_.size(); ++i) {
    const detail::ByteRange c = upload_chunks_[i];
    char* stage = static_cast<char*>(staging.host) + c.offset;
    const char* from = static_cast<const char*>(src) + c.offset;
    const std::size_t pieces = (c.bytes + kCopyPiece - 1) / kCopyPiece;
    pool.run(int(pieces), 1, [&](int p0, int p1, int) {
      for (std::size_t p = std::size_t(p0); p < std::size_t(p1); ++p) {
        const std::size_t lo = p * kCopyPiece;
        std::memcpy(stage + lo, from + lo, std::min(kCopyPiece, c.bytes - lo));
      }
    });
    Event ev;
    SPECTRASIFT_CL_CHECK(clEnqueueWriteBuffer(st_.queue, dst, CL_FALSE, c.offset, c.bytes, stage, 0, nullptr, &ev.ev));
    SPECTRASIFT_CL_CHECK(clFlush(st_.queue));  // the copy engine starts on chunk c while the pool copies c + 1
    if (i == 0 && profile_run_) {  // the start of the upload's span (finish_profile)
      SPECTRASIFT_CL_CHECK(clRetainEvent(ev.ev));
      upload_first_.ev = ev.ev;
    }
    staged_last_ = std::move(ev);
  }
}

}  // namespace spectrasift::opencl

// OpenCL SIFT: the features' read-back (read-back 2, after the counters; see sift.hpp): the kept records
// into Features::keypoints, the descriptors into Features::descriptors (or, for u8 descriptors, converted to bytes
// on the device by sift_descriptors_to_u8 and read as such into Features::descriptor_bytes: a quarter of the
// bytes) with the digest of those host values, and the device copy of the descriptors (Features::device) that matching on this backend reads.
//
// On a GPU (State::host_staging) the reads land in the State's pinned "sift.download_host" (a
// CL_MEM_ALLOC_HOST_PTR buffer mapped once, which the device DMAs into without the driver's bounce through
// its own staging, the same pinned-buffer practice as the upload), the descriptors in a few chunks of rows,
// all non-blocking behind one flush; while they run the host sizes the output (resize_for_writes: its pages
// populated on the WorkPool, then std::vector's zero-fill) and converts the records; then each chunk, once
// its event completes, is copied into the output in pieces of kDigestPieceRows rows on the WorkPool, each
// piece's digest summed right after its copy (the rows still in cache): one host pass over the descriptors
// instead of the driver's copy plus a digest pass. A CPU device (PoCL) reads straight into the output: there
// a pinned buffer is only one more memcpy.
#include <algorithm>
#include <cstring>

#include "backend/descriptor_digest.hpp"
#include "backend/host_pages.hpp"
#include "backend/opencl/device_features.hpp"
#include "backend/opencl/sift.hpp"
#include "core/thread_pool.hpp"
#include "numeric/sift_keypoint.h"

namespace spectrasift::opencl {

namespace {

// Rows of one digest piece: pieces are summed apart (on the pool) and added, the digest being a sum.
constexpr std::size_t kDigestPieceRows = 256;
// The descriptors' staged read in about this many chunks (each a whole number of digest pieces).
constexpr std::size_t kReadChunks = 4;
constexpr const char* kDownloadHost = "sift.download_host";

// count descriptor values read back (floats, or bytes when the plan asks for u8 descriptors) into the output array
// of the same type at value offset lo (nothing to copy when they were read there); returns their digest sum.
template <class T> std::uint64_t store_piece(const T* src, T* out, std::size_t lo, std::size_t count) {
  T* dst = out + lo;
  if (dst != src) std::memcpy(dst, src, count * sizeof(T));
  return detail::descriptor_digest_sum(dst, lo, count);
}

// Sizes the output array of out.descriptor_type for `values` values (the other emptied).
template <class Run> void size_descriptors(Features& out, std::size_t values, const Run& run) {
  if (out.descriptor_type == DescriptorType::kU8) {
    out.descriptors.clear();
    detail::resize_for_writes(out.descriptor_bytes, values, run);
  } else {
    out.descriptor_bytes.clear();
    detail::resize_for_writes(out.descriptors, values, run);
  }
}

}  // namespace

void SiftStagesOpenCL::read_features(Features& out, std::size_t kept) {
  WorkPool& pool = calling_thread_pool(ctx_.cpu_threads());
  const auto run = [&pool](std::size_t pieces, const auto& fn) {
    pool.run(int(pieces), 1, [&](int p0, int p1, int) {
      for (int p = p0; p < p1; ++p) fn(std::size_t(p));
    });
  };
  constexpr std::size_t kRow = Features::kDescriptorSize;
  const std::size_t values = kept * kRow;
  const std::size_t pieces = (kept + kDigestPieceRows - 1) / kDigestPieceRows;
  digest_sums_.assign(pieces, 0);
  out.descriptor_type = plan_->u8_descriptors ? DescriptorType::kU8 : DescriptorType::kF32;
  const bool u8 = out.descriptor_type == DescriptorType::kU8;
  if (u8 && kept > 0) {
    // The rows as bytes on the device ("sift.desc_u8"), so that a quarter of the bytes are read back.
    cl_kernel k = kernel("sift_descriptors_to_u8");
    set_args(k, st_.buffer("sift.desc", values * sizeof(float)), st_.buffer("sift.desc_u8", values), cl_uint(values));
    launch_1d(k, (values + 3) / 4, 256, kDownload);
  }
  if (kept == 0) {
    out.descriptors.clear();
    out.descriptor_bytes.clear();
    keypoints_from_records(nullptr, 0, out);
  } else if (st_.host_staging) {
    read_staged(out, kept, run);
  } else {
    // Straight into the output: the records into a scratch vector reused across calls, the output sized while
    // their read runs.
    records_.resize(kept);
    Event e1, e2;
    SPECTRASIFT_CL_CHECK(clEnqueueReadBuffer(st_.queue, st_.buffer("sift.kept", kept * sizeof(SiftKeypoint)), CL_FALSE,
                                             0, kept * sizeof(SiftKeypoint), records_.data(), 0, nullptr,
                                             profile_run_ ? &e1.ev : nullptr));
    try {
      size_descriptors(out, values, run);
    } catch (...) {
      (void)clFinish(st_.queue);  // records_ may still be written
      throw;
    }
    if (u8)
      SPECTRASIFT_CL_CHECK(clEnqueueReadBuffer(st_.queue, st_.buffer("sift.desc_u8", values), CL_TRUE, 0, values,
                                               out.descriptor_bytes.data(), 0, nullptr, profile_run_ ? &e2.ev : nullptr));
    else
      SPECTRASIFT_CL_CHECK(clEnqueueReadBuffer(st_.queue, st_.buffer("sift.desc", values * sizeof(float)), CL_TRUE, 0,
                                               values * sizeof(float), out.descriptors.data(), 0, nullptr,
                                               profile_run_ ? &e2.ev : nullptr));
    if (profile_run_) {
      events_.emplace_back(kDownload, std::move(e1));
      events_.emplace_back(kDownload, std::move(e2));
    }
    keypoints_from_records(records_.data(), kept, out);
    run(pieces, [&](std::size_t p) {  // the digest of rows [p * kDigestPieceRows, ...)
      const std::size_t lo = p * kDigestPieceRows * kRow, count = std::min(values, lo + kDigestPieceRows * kRow) - lo;
      digest_sums_[p] = u8 ? store_piece(out.descriptor_bytes.data() + lo, out.descriptor_bytes.data(), lo, count)
                           : store_piece(out.descriptors.data() + lo, out.descriptors.data(), lo, count);
    });
  }
  std::uint64_t sum = 0;
  for (std::uint64_t v : digest_sums_) sum += v;
  attach_device_copy(out, kept, detail::descriptor_digest_finish(sum, values), out.descriptor_type);
}

// The GPU form of read_features (see the top of the file); digest_sums_ holds one sum per digest piece.
template <class Run> void SiftStagesOpenCL::read_staged(Features& out, std::size_t kept, const Run& run) {
  constexpr std::size_t kRow = Features::kDescriptorSize;
  const bool u8 = out.descriptor_type == DescriptorType::kU8;  // byte rows ("sift.desc_u8", read_features)
  const std::size_t row_bytes = kRow * (u8 ? 1 : sizeof(float));
  const std::size_t desc_bytes = kept * row_bytes;
  const std::size_t rec_bytes = kept * sizeof(SiftKeypoint);
  // Descriptors first (page-aligned rows), then the records; a quarter more than asked so that counts that
  // grow a little from image to image do not remap it (a growth waits for the queue).
  const std::size_t need = desc_bytes + rec_bytes;
  const auto held = st_.pinned_buffers.find(kDownloadHost);
  const bool fits = held != st_.pinned_buffers.end() && held->second.bytes >= need;
  PinnedBuffer& pin = st_.pinned(kDownloadHost, fits ? need : need + need / 4);
  char* const host = static_cast<char*>(pin.host);
  Event records;
  SPECTRASIFT_CL_CHECK(clEnqueueReadBuffer(st_.queue, st_.buffer("sift.kept", rec_bytes), CL_FALSE, 0, rec_bytes,
                                           host + desc_bytes, 0, nullptr, &records.ev));
  const std::size_t pieces = digest_sums_.size();
  const std::size_t chunk_pieces = std::max<std::size_t>(1, (pieces + kReadChunks - 1) / kReadChunks);
  const std::size_t chunk_rows = chunk_pieces * kDigestPieceRows;
  const cl_mem desc = u8 ? st_.buffer("sift.desc_u8", desc_bytes) : st_.buffer("sift.desc", desc_bytes);
  read_chunks_.clear();
  for (std::size_t row = 0; row < kept; row += chunk_rows) {
    const std::size_t off = row * row_bytes, bytes = std::min(chunk_rows, kept - row) * row_bytes;
    Event ev;
    SPECTRASIFT_CL_CHECK(clEnqueueReadBuffer(st_.queue, desc, CL_FALSE, off, bytes, host + off, 0, nullptr, &ev.ev));
    read_chunks_.push_back(std::move(ev));
  }
  SPECTRASIFT_CL_CHECK(clFlush(st_.queue));
  // The reads write only the pinned buffer: nothing to wait for if the output's allocation throws.
  size_descriptors(out, kept * kRow, run);
  SPECTRASIFT_CL_CHECK(clWaitForEvents(1, &records.ev));
  keypoints_from_records(reinterpret_cast<const SiftKeypoint*>(host + desc_bytes), kept, out);
  for (std::size_t c = 0; c < read_chunks_.size(); ++c) {
    SPECTRASIFT_CL_CHECK(clWaitForEvents(1, &read_chunks_[c].ev));
    const std::size_t p0 = c * chunk_pieces, n = std::min(chunk_pieces, pieces - p0);
    run(n, [&](std::size_t i) {
      const std::size_t lo = (p0 + i) * kDigestPieceRows * kRow;
      const std::size_t count = std::min(kept * kRow, lo + kDigestPieceRows * kRow) - lo;
      digest_sums_[p0 + i] =
          u8 ? store_piece(reinterpret_cast<const std::uint8_t*>(host) + lo, out.descriptor_bytes.data(), lo, count)
             : store_piece(reinterpret_cast<const float*>(host) + lo, out.descriptors.data(), lo, count);
    });
  }
  if (profile_run_) {
    events_.emplace_back(kDownload, std::move(records));
    for (Event& ev : read_chunks_) events_.emplace_back(kDownload, std::move(ev));
  }
  read_chunks_.clear();
}

// The descriptors stay on the device for matching on this backend (Features::device): a copy of the kept
// rows of "sift.desc" (which the next image overwrites) into a buffer of their own, device to device on the
// queue; no upload when they are matched here.
void SiftStagesOpenCL::attach_device_copy(Features& out, std::size_t kept, std::uint64_t digest,
                                          DescriptorType type) {
  out.device.reset();
  if (kept == 0) return;
  const std::size_t bytes = kept * Features::kDescriptorSize * sizeof(float);
  cl_int err = CL_SUCCESS;
  Buffer copy;
  copy.mem = clCreateBuffer(st_.context, CL_MEM_READ_ONLY, bytes, nullptr, &err);
  SPECTRASIFT_CL_CHECK(err);
  copy.bytes = bytes;
  SPECTRASIFT_CL_CHECK(clEnqueueCopyBuffer(st_.queue, st_.buffer("sift.desc", bytes), copy.mem, 0, 0, bytes, 0, nullptr,
                                           nullptr));
  out.device = std::make_shared<DeviceDescriptors>(st_, kept, digest, type, copy.mem);
}

}  // namespace spectrasift::opencl

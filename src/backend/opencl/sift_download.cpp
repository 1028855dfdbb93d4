// OpenCL SIFT: the features' read-back (read-back 2, after the counters; see sift.hpp): the kept records
// into Features::keypoints, the descriptors into Features::descriptors (or, converted on the way, into
// Features::descriptor_bytes for u8 descriptors) with the digest of those host values, and the device copy of the descriptors (Features::device) that matching on this backend reads.
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

// count descriptor values of the device (integers 0..255 when the plan asks for bytes) into the output of
// out.descriptor_type at value offset lo; returns their digest sum.
std::uint64_t store_piece(const float* src, Features& out, std::size_t lo, std::size_t count) {
  if (out.descriptor_type == DescriptorType::kU8) {
    std::uint8_t* dst = out.descriptor_bytes.data() + lo;
    for (std::size_t i = 0; i < count; ++i) dst[i] = static_cast<std::uint8_t>(src[i]);
    return detail::descriptor_digest_sum(dst, lo, count);
  }
  float* dst = out.descriptors.data() + lo;
  if (dst != src) std::memcpy(dst, src, count * sizeof(float));
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
  if (kept == 0) {
    out.descriptors.clear();
    out.descriptor_bytes.clear();
    keypoints_from_records(nullptr, 0, out);
  } else if (st_.host_staging) {
    read_staged(out, kept, run);
  } else {
    // Straight into the output (float descriptors; bytes through a scratch vector of floats): the records into
    // a scratch vector reused across calls, the output sized while their read runs.
    records_.resize(kept);
    const bool u8 = out.descriptor_type == DescriptorType::kU8;
    std::vector<float>& scratch = float_rows_;
    Event e1, e2;
    SPECTRASIFT_CL_CHECK(clEnqueueReadBuffer(st_.queue, st_.buffer("sift.kept", kept * sizeof(SiftKeypoint)), CL_FALSE,
                                             0, kept * sizeof(SiftKeypoint), records_.data(), 0, nullptr,
                                             profile_run_ ? &e1.ev : nullptr));
    try {
      size_descriptors(out, values, run);
      if (u8 && scratch.size() < values) scratch.resize(values);
    } catch (...) {
      (void)clFinish(st_.queue);  // records_ may still be written
      throw;
    }
    SPECTRASIFT_CL_CHECK(clEnqueueReadBuffer(st_.queue, st_.buffer("sift.desc", values * sizeof(float)), CL_TRUE, 0,
                                             values * sizeof(float), u8 ? scratch.data() : out.descriptors.data(), 0,
                                             nullptr, profile_run_ ? &e2.ev : nullptr));
    if (profile_run_) {
      events_.emplace_back(kDownload, std::move(e1));
      events_.emplace_back(kDownload, std::move(e2));
    }
    keypoints_from_records(records_.data(), kept, out);
    const float* src = u8 ? scratch.data() : out.descriptors.data();
    run(pieces, [&](std::size_t p) {  // the digest of rows [p * kDigestPieceRows, ...), bytes converted first
      const std::size_t lo = p * kDigestPieceRows * kRow;
      digest_sums_[p] = store_piece(src + lo, out, lo, std::min(values, lo + kDigestPieceRows * kRow) - lo);
    });
  }
  std::uint64_t sum = 0;
  for (std::uint64_t v : digest_sums_) sum += v;
  attach_device_copy(out, kept, detail::descriptor_digest_finish(sum, values), out.descriptor_type);
}

// The GPU form of read_features (see the top of the file); digest_sums_ holds one sum per digest piece.
template <class Run> void SiftStagesOpenCL::read_staged(Features& out, std::size_t kept, const Run& run) {
  constexpr std::size_t kRow = Features::kDescriptorSize;
  const std::size_t row_bytes = kRow * sizeof(float);
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
  const cl_mem desc = st_.buffer("sift.desc", desc_bytes);
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
  const float* const src = reinterpret_cast<const float*>(host);
  for (std::size_t c = 0; c < read_chunks_.size(); ++c) {
    SPECTRASIFT_CL_CHECK(clWaitForEvents(1, &read_chunks_[c].ev));
    const std::size_t p0 = c * chunk_pieces, n = std::min(chunk_pieces, pieces - p0);
    run(n, [&](std::size_t i) {
      const std::size_t lo = (p0 + i) * kDigestPieceRows * kRow;
      const std::size_t count = std::min(kept * kRow, lo + kDigestPieceRows * kRow) - lo;
      digest_sums_[p0 + i] = store_piece(src + lo, out, lo, count);
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

// Events of a streamed operation, owned by the operation's pipeline (one per operation and context, kept in
// State), so that two operations (spectral matching, a SIFT pipeline) never share an event. Events are
// created on first use and reused by every later call of the same pipeline; destroyed with it.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <vector>

namespace spectrasift::cuda {

/// A growing set of CUDA events of one kind: timing events, or ordering-only events (no timestamps, cheaper
/// to record and wait on).
class EventSet {
 public:
  enum Kind { kTiming, kOrdering };
  explicit EventSet(Kind kind) : kind_(kind) {}
  ~EventSet();
  EventSet(const EventSet&) = delete;
  EventSet& operator=(const EventSet&) = delete;
  /// Event i, created (with every event below it) on first use.
  cudaEvent_t operator[](std::size_t i);

 private:
  Kind kind_;
  std::vector<cudaEvent_t> events_;
};

/// The streaming pipeline of a chunked operation: chunk c is uploaded on one stream and computed on another,
/// with double-buffered device chunks and a ring of pinned staging buffers; its results may be downloaded on a
/// third stream. The pipeline names the events between them (per chunk: upload start and end, compute start
/// and end, results downloaded; per call: the timeline's zero, the last download's end, the join of the
/// compute stream into the upload stream before the last chunk). The loop that drives it belongs to the
/// operation (spectral.cu).
class StreamPipeline {
 public:
  /// Creates the events of a call of `chunks` chunks ahead of the loop (creating them costs microseconds).
  void reserve(int chunks);
  cudaEvent_t upload_start(int c) { return timing_[4 * std::size_t(c)]; }
  cudaEvent_t upload_end(int c) { return timing_[4 * std::size_t(c) + 1]; }
  cudaEvent_t compute_start(int c) { return timing_[4 * std::size_t(c) + 2]; }
  cudaEvent_t compute_end(int c) { return timing_[4 * std::size_t(c) + 3]; }
  /// The timeline's zero (recorded when a trace is asked for) and the last download's end, of a call of
  /// `chunks` chunks.
  cudaEvent_t timeline_zero(int chunks) { return timing_[4 * std::size_t(chunks)]; }
  cudaEvent_t last_download_end(int chunks) { return timing_[4 * std::size_t(chunks) + 1]; }
  /// Chunk c's results downloaded (ordering only).
  cudaEvent_t downloaded(int c) { return ordering_[std::size_t(c)]; }
  /// Everything enqueued on the compute stream before the last chunk (ordering only), of a call of `chunks`.
  cudaEvent_t compute_joined(int chunks) { return ordering_[std::size_t(chunks)]; }

 private:
  EventSet timing_{EventSet::kTiming};
  EventSet ordering_{EventSet::kOrdering};
};

/// Milliseconds between two recorded timing events.
double ms_between(cudaEvent_t a, cudaEvent_t b);

}  // namespace spectrasift::cuda

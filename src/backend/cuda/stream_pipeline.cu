// Events of the streaming pipelines (see stream_pipeline.hpp).
#include "backend/cuda/stream_pipeline.hpp"

#include "backend/cuda/check.hpp"

namespace spectrasift::cuda {

EventSet::~EventSet() {
  for (cudaEvent_t e : events_) cudaEventDestroy(e);
}

cudaEvent_t EventSet::operator[](std::size_t i) {
  while (events_.size() <= i) {
    cudaEvent_t e = nullptr;
    if (kind_ == kTiming) SPECTRASIFT_CUDA_CHECK(cudaEventCreate(&e));
    else SPECTRASIFT_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    events_.push_back(e);
  }
  return events_[i];
}

void StreamPipeline::reserve(int chunks) {
  (void)timing_[4 * std::size_t(chunks) + 1];
  (void)ordering_[std::size_t(chunks)];
}

double ms_between(cudaEvent_t a, cudaEvent_t b) {
  float ms = 0;
  SPECTRASIFT_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
  return ms;
}

}  // namespace spectrasift::cuda

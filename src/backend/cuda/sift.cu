// CUDA SIFT (see sift.hpp): construction, the per-plan preparation, memory checks, the counters and timing
// (the download sequence is core/sift_device_stages.cpp's). The upload is in sift_upload.cu; the pyramid, DoG,
// extrema and refinement in sift_pyramid.cu; orientations, select and descriptors in sift_features.cu; the
// read-back of the features and the device copy of the descriptors in sift_download.cu.
#include <algorithm>
#include <cstdio>
#include <string>

#include "backend/cuda/check.hpp"
#include "backend/cuda/device_block_pool.hpp"
#include "backend/cuda/kernels/sift_common.cuh"
#include "backend/cuda/sift.hpp"
#include "backend/cuda/state.hpp"
#include "backend/cuda/stream_pipeline.hpp"
#include "spectrasift/error.hpp"

namespace spectrasift::cuda {

namespace {

std::string mib(std::size_t bytes) { return std::to_string((bytes + (1u << 20) - 1) >> 20) + " MiB"; }

}  // namespace

SiftStagesCuda::SiftStagesCuda(detail::ContextImpl& ctx)
    : SiftDeviceStages(ctx),
      st_(state(ctx)),
      feature_blocks_(std::make_shared<DeviceBlockPool>(st_.device)),
      events_(std::make_unique<EventSet>(EventSet::kTiming)),
      ordering_(std::make_unique<EventSet>(EventSet::kOrdering)) {}

SiftStagesCuda::~SiftStagesCuda() {
  drop_prefetch();
  if (pyramid_graph_) cudaGraphExecDestroy(pyramid_graph_);
  if (side_) cudaStreamDestroy(side_);
}

cudaStream_t SiftStagesCuda::side_stream() {
  if (!side_) SPECTRASIFT_CUDA_CHECK(cudaStreamCreateWithFlags(&side_, cudaStreamNonBlocking));
  return side_;
}

void* SiftStagesCuda::buffer(const char* name, std::size_t bytes) {
  return st_.buffer(name, std::max<std::size_t>(bytes, 16)).ptr;
}
float* SiftStagesCuda::levels() { return static_cast<float*>(buffer("sift.gauss", plan_->gauss_floats * sizeof(float))); }
float* SiftStagesCuda::dog_planes() { return static_cast<float*>(buffer("sift.dog", plan_->dog_floats * sizeof(float))); }
const long long* SiftStagesCuda::octave_table() {
  return static_cast<const long long*>(buffer("sift.info", octave_info_.size() * sizeof(long long)));
}
unsigned int* SiftStagesCuda::counters() {
  return static_cast<unsigned int*>(buffer("sift.counters", kernels::kCounters * sizeof(unsigned int)));
}

void SiftStagesCuda::read_counters() {
  static_assert(sizeof counters_ == kernels::kCounters * sizeof(unsigned int));
  PinnedBuffer& host = st_.pinned_buffer("sift.counters_host", sizeof counters_);
  SPECTRASIFT_CUDA_CHECK(cudaMemcpyAsync(host.ptr, counters(), sizeof counters_, cudaMemcpyDeviceToHost, st_.compute));
  SPECTRASIFT_CUDA_CHECK(cudaStreamSynchronize(st_.compute));
  std::copy_n(host.as<unsigned int>(), counters_.size(), counters_.begin());
}

std::size_t SiftStagesCuda::shared_memory_per_block() const noexcept {
  return shared_limit_ ? shared_limit_ : std::size_t(st_.props.sharedMemPerBlockOptin);
}

void SiftStagesCuda::check_memory(const detail::SiftPlan& p, std::size_t input_bytes) const {
  const std::size_t in_plane = std::size_t(p.input_width) * std::size_t(p.input_height);
  const std::size_t cand = std::max<std::size_t>(p.candidate_capacity, 1);
  const std::size_t kp_cap = keypoint_estimate(p);
  const std::size_t total = input_bytes + in_plane * sizeof(float) + p.gauss_floats * sizeof(float) +
                            p.dog_floats * sizeof(float) + cand * (sizeof(int) * 4 + sizeof(SiftKeypoint)) +
                            kp_cap * (3 * sizeof(SiftKeypoint) + 3 * sizeof(int) + 128 * (sizeof(float) + 1));
  const std::size_t have = memory_limit_ ? memory_limit_ : std::size_t(st_.props.totalGlobalMem);
  if (total > have)
    throw Error(ErrorCode::kOutOfMemory,
                "sift: a " + std::to_string(p.input_width) + " x " + std::to_string(p.input_height) + " image needs " +
                    mib(total) + " of device memory on the CUDA device '" + st_.props.name + "', which has " +
                    mib(have) + (p.upsample ? "; upsample = false needs about a quarter of it" : ""),
                "cuda");
}

// Per-plan state: the octave table, the scales, the taps and the launch geometry (again only when the plan
// changes). Uploaded on the compute stream from pinned staging, so that no later copy overtakes them.
void SiftStagesCuda::prepare(const detail::SiftPlan& p) {
  if (prepared_for(p)) return;
  size_from_plan(p);
  const std::vector<float> scales = octave_scales(p);
  // One pinned staging area for the three tables (a synchronous copy would also do; this keeps the order
  // on the compute stream explicit). The stream is synchronised before the staging area is reused.
  const std::size_t info_bytes = octave_info_.size() * sizeof(long long);
  const std::size_t scale_bytes = scales.size() * sizeof(float);
  const std::size_t tap_bytes = std::max<std::size_t>(p.taps.size(), 1) * sizeof(float);
  SPECTRASIFT_CUDA_CHECK(cudaStreamSynchronize(st_.compute));
  PinnedBuffer& staging = st_.pinned_buffer("sift.tables_host", info_bytes + scale_bytes + tap_bytes);
  char* h = staging.as<char>();
  std::copy_n(reinterpret_cast<const char*>(octave_info_.data()), info_bytes, h);
  std::copy_n(reinterpret_cast<const char*>(scales.data()), scale_bytes, h + info_bytes);
  std::copy_n(reinterpret_cast<const char*>(p.taps.data()), p.taps.size() * sizeof(float), h + info_bytes + scale_bytes);
  SPECTRASIFT_CUDA_CHECK(cudaMemcpyAsync(buffer("sift.info", info_bytes), h, info_bytes, cudaMemcpyHostToDevice, st_.compute));
  SPECTRASIFT_CUDA_CHECK(cudaMemcpyAsync(buffer("sift.oscale", scale_bytes), h + info_bytes, scale_bytes,
                                         cudaMemcpyHostToDevice, st_.compute));
  SPECTRASIFT_CUDA_CHECK(cudaMemcpyAsync(buffer("sift.taps", tap_bytes), h + info_bytes + scale_bytes, tap_bytes,
                                         cudaMemcpyHostToDevice, st_.compute));
  SPECTRASIFT_CUDA_CHECK(cudaStreamSynchronize(st_.compute));  // the staging area may be reused at once
  size_blur_tiles();
  size_feature_kernels();
  mark_prepared(p);
  ++prepared_generation_;
}

void SiftStagesCuda::mark(Stage stage) {
  if (!profile_run_) return;
  SPECTRASIFT_CUDA_CHECK(cudaEventRecord((*events_)[marks_.size()], st_.compute));
  marks_.push_back(int(stage));
}

void SiftStagesCuda::finish_profile() {
  if (!profile_run_) return;
  mark(kStages);  // the end of the last stage
  SPECTRASIFT_CUDA_CHECK(cudaStreamSynchronize(st_.compute));
  for (std::size_t i = 0; i + 1 < marks_.size(); ++i)
    stage_ms_[std::size_t(marks_[i])] += ms_between((*events_)[i], (*events_)[i + 1]);
  marks_.clear();
  log_stage_times("cuda");
}

// The slots of orientations and select: oriented, unique, kept and the one-block select's flag.
void SiftStagesCuda::clear_feature_counters() {
  static_assert(SIFT_COUNT_SELECT_SMALL == kernels::kCountOriented + 3, "the four slots are consecutive");
  SPECTRASIFT_CUDA_CHECK(cudaMemsetAsync(counters() + kernels::kCountOriented, 0, 4 * sizeof(unsigned int), st_.compute));
}

std::unique_ptr<detail::SiftStages> make_sift_stages(detail::ContextImpl& ctx) {
  return std::make_unique<SiftStagesCuda>(ctx);
}

std::unique_ptr<detail::SiftStages> State::make_sift_stages(detail::ContextImpl& ctx) {
  return cuda::make_sift_stages(ctx);
}

}  // namespace spectrasift::cuda

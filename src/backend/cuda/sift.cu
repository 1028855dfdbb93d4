// CUDA SIFT (see sift.hpp): construction, the per-plan preparation, memory checks, the counters and timing.
// The upload is in sift_upload.cu; the pyramid, DoG, extrema and refinement in sift_pyramid.cu; orientations,
// select and descriptors in sift_features.cu; the download and the device copy of the descriptors in
// sift_download.cu.
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

const char* SiftStagesCuda::stage_name(int stage) noexcept {
  static const char* const names[kStages] = {"upload+grey",  "pyramid", "dog",         "extrema", "refine",
                                             "orientations", "select",  "descriptors", "download"};
  return stage >= 0 && stage < kStages ? names[stage] : "?";
}

SiftStagesCuda::SiftStagesCuda(detail::ContextImpl& ctx)
    : ctx_(ctx),
      st_(state(ctx)),
      feature_blocks_(std::make_shared<DeviceBlockPool>(st_.device)),
      events_(std::make_unique<EventSet>(EventSet::kTiming)),
      ordering_(std::make_unique<EventSet>(EventSet::kOrdering)) {}

SiftStagesCuda::~SiftStagesCuda() {
  if (pyramid_graph_) cudaGraphExecDestroy(pyramid_graph_);
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
  const std::size_t kp_cap = std::max<std::size_t>(1024, 2 * cand);  // an estimate: set from the count later
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
  if (prepared_ && p.matches(prepared_w_, prepared_h_, prepared_options_)) return;
  octave_info_.clear();
  std::size_t goff = 0, doff = 0;
  max_plane_ = 1;
  for (int o = 0; o < p.octaves; ++o) {
    const auto& s = p.octave_shape[std::size_t(o)];
    const std::size_t plane = std::size_t(s.width) * std::size_t(s.height);
    octave_info_.insert(octave_info_.end(), {s.width, s.height, (long long)goff, (long long)doff});
    goff += plane * std::size_t(p.levels);
    doff += plane * std::size_t(p.dog_levels);
    max_plane_ = std::max(max_plane_, plane);
  }
  if (octave_info_.empty()) octave_info_.assign(4, 0);
  std::vector<float> scales = p.octave_scale;
  if (scales.empty()) scales.push_back(1.0f);
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
  candidate_capacity_ = std::max<std::size_t>(p.candidate_capacity, 1);
  size_blur_tiles();
  size_feature_kernels();
  prepared_w_ = p.input_width;
  prepared_h_ = p.input_height;
  prepared_options_ = p.options;
  prepared_ = true;
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
  if (!ctx_.options.verbose) return;
  std::string line = "sift: cuda device time per stage (ms):";
  char b[64];
  for (int s = 0; s < kStages; ++s) {
    std::snprintf(b, sizeof b, " %s %.3f", stage_name(s), stage_ms_[std::size_t(s)]);
    line += b;
  }
  ctx_.log(line + "; " + std::to_string(candidates_) + " candidates, " + std::to_string(counters_[1]) + " refined, " +
           std::to_string(counters_[2]) + " oriented, " + std::to_string(counters_[4]) + " kept");
}

std::unique_ptr<detail::SiftStages> make_sift_stages(detail::ContextImpl& ctx) {
  return std::make_unique<SiftStagesCuda>(ctx);
}

std::unique_ptr<detail::SiftStages> State::make_sift_stages(detail::ContextImpl& ctx) {
  return cuda::make_sift_stages(ctx);
}

}  // namespace spectrasift::cuda

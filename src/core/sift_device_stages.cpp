// The host side that the device backends' SIFT stages share (see sift_device_stages.hpp).
#include "core/sift_device_stages.hpp"

#include <algorithm>
#include <cstdio>
#include <string>

namespace spectrasift::detail {

const char* SiftDeviceStages::stage_name(int stage) noexcept {
  static const char* const names[kStages] = {"upload+grey",  "pyramid", "dog",         "extrema", "refine",
                                             "orientations", "select",  "descriptors", "download"};
  return stage >= 0 && stage < kStages ? names[stage] : "?";
}

std::size_t SiftDeviceStages::begin_run(const SiftPlan& plan, const SiftImageView& image) {
  plan_ = &plan;
  profile_run_ = profiling_ || ctx_.options.verbose;  // the verbose log reports device time per stage
  stage_ms_ = {};
  counters_ = {};
  candidates_ = 0;
  mask_type_ = -1;
  const std::size_t pixels = std::size_t(image.width) * std::size_t(image.height);
  return pixels * std::size_t(image.channels) * bytes_per_sample(image.type);
}

void SiftDeviceStages::size_from_plan(const SiftPlan& p) {
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
  candidate_capacity_ = std::max<std::size_t>(p.candidate_capacity, 1);
}

std::vector<float> SiftDeviceStages::octave_scales(const SiftPlan& p) {
  std::vector<float> scales = p.octave_scale;
  if (scales.empty()) scales.push_back(1.0f);
  return scales;
}

void SiftDeviceStages::mark_prepared(const SiftPlan& p) {
  prepared_w_ = p.input_width;
  prepared_h_ = p.input_height;
  prepared_options_ = p.options;
  prepared_ = true;
}

std::size_t SiftDeviceStages::keypoint_estimate(const SiftPlan& p) {
  const std::size_t cand = std::max<std::size_t>(p.candidate_capacity, 1);
  return std::max<std::size_t>(1024, 2 * cand);
}

void SiftDeviceStages::download(Features& out, SiftCounts& counts) {
  const SiftPlan& p = *plan_;
  out.image_width = p.input_width;
  out.image_height = p.input_height;
  out.keypoints.clear();
  out.descriptors.clear();
  out.descriptor_bytes.clear();
  out.descriptor_type = p.u8_descriptors ? DescriptorType::kU8 : DescriptorType::kF32;
  out.device.reset();
  counts = {};
  if (p.octaves == 0 || candidates_ == 0) {
    counts.candidates = candidates_;
    finish_profile();
    return;
  }
  read_counters();  // read-back 2 starts: the counts, then the records and descriptors they size
  if (counters_[SIFT_COUNT_ORIENTED] > keypoint_capacity_ || counters_[SIFT_COUNT_KEPT] > descriptor_capacity_) {
    // More orientation peaks or kept keypoints than the buffers hold: grow them, run those stages again.
    keypoint_capacity_ = std::max<std::size_t>(keypoint_capacity_, counters_[SIFT_COUNT_ORIENTED]);
    descriptor_capacity_ = std::max<std::size_t>(descriptor_capacity_, counters_[SIFT_COUNT_ORIENTED]);
    ++regrowths_;
    clear_feature_counters();
    orientations();
    select(nullptr);  // the mask uploaded by the first select() stays in force until the next upload()
    descriptors();
    read_counters();
  }
  if (select_again()) {
    select(nullptr);  // as above: the mask stays in force
    descriptors();
    read_counters();
  }
  const std::size_t kept = counters_[SIFT_COUNT_KEPT];
  counts.candidates = candidates_;
  counts.refined = counters_[SIFT_COUNT_REFINED];
  counts.oriented = counters_[SIFT_COUNT_ORIENTED];
  counts.kept = kept;
  read_features(out, kept);
  finish_profile();
}

void SiftDeviceStages::log_stage_times(const char* backend) const {
  if (!ctx_.options.verbose) return;
  std::string line = std::string("sift: ") + backend + " device time per stage (ms):";
  char b[64];
  for (int s = 0; s < kStages; ++s) {
    std::snprintf(b, sizeof b, " %s %.3f", stage_name(s), stage_ms_[std::size_t(s)]);
    line += b;
  }
  ctx_.log(line + "; " + std::to_string(candidates_) + " candidates, " +
           std::to_string(counters_[SIFT_COUNT_REFINED]) + " refined, " +
           std::to_string(counters_[SIFT_COUNT_ORIENTED]) + " oriented, " +
           std::to_string(counters_[SIFT_COUNT_KEPT]) + " kept");
}

void SiftDeviceStages::keypoints_from_records(const SiftKeypoint* records, std::size_t n, Features& out) {
  out.keypoints.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    const SiftKeypoint& s = records[i];
    out.keypoints[i] = Keypoint{s.x, s.y, s.size, s.angle, s.response, s.octave, s.layer, s.layer_offset};
  }
}

}  // namespace spectrasift::detail

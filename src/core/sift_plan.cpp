// The SIFT plan (see sift_plan.hpp): the derivation that cpu::SiftPlan::detect made per call, now once per
// image shape and options, in core, for every backend.
#include "core/sift_plan.hpp"

#include <algorithm>
#include <any>
#include <cmath>
#include <memory>

#include "numeric/sift_common.h"

namespace spectrasift::detail {

std::vector<float> sift_gaussian_half_kernel(double sigma) {
  const int ksize = int(std::lround(sigma * 8.0 + 1.0)) | 1;
  const int r = ksize / 2;
  std::vector<float> full(static_cast<std::size_t>(ksize), 0.0f);
  const double scale2 = -0.5 / (sigma * sigma);
  double sum = 0;
  for (int i = 0; i < ksize; ++i) {
    const double x = i - r;
    full[std::size_t(i)] = float(std::exp(scale2 * x * x));
    sum += full[std::size_t(i)];
  }
  sum = 1.0 / sum;
  std::vector<float> half(static_cast<std::size_t>(r) + 1);
  for (int i = 0; i <= r; ++i) half[std::size_t(i)] = float(full[std::size_t(r + i)] * sum);
  return half;
}

bool SiftPlan::matches(int width, int height, const SiftOptions& o) const noexcept {
  return width == input_width && height == input_height && o.octave_layers == options.octave_layers &&
         o.sigma == options.sigma && o.contrast_threshold == options.contrast_threshold &&
         o.edge_threshold == options.edge_threshold && o.upsample == options.upsample &&
         o.max_features == options.max_features && o.root_sift == options.root_sift &&
         o.descriptor_type == options.descriptor_type;
}

SiftPlan make_sift_plan(int width, int height, const SiftOptions& options) {
  SiftPlan p;
  p.input_width = width;
  p.input_height = height;
  p.options = options;
  p.upsample = options.upsample;
  p.first_octave = options.upsample ? -1 : 0;
  p.layers = options.octave_layers;
  p.levels = p.layers + 3;
  p.dog_levels = p.layers + 2;
  p.border = SIFT_IMG_BORDER;
  p.output_scale = options.upsample ? 0.5f : 1.0f;
  p.max_features = options.max_features;
  p.root_sift = options.root_sift;
  p.u8_descriptors = options.descriptor_type == DescriptorType::kU8;
  const int s = p.layers;

  const int base_w = options.upsample ? 2 * width : width;
  const int base_h = options.upsample ? 2 * height : height;
  p.octaves = std::max(
      0, int(std::lround(std::log(double(std::min(base_w, base_h))) / std::log(2.0) - 2.0)) - p.first_octave);
  int w = base_w, h = base_h;
  for (int o = 0; o < p.octaves; ++o) {
    p.octave_shape.push_back({w, h});
    p.octave_scale.push_back(float(1 << o));
    const std::size_t plane = std::size_t(w) * std::size_t(h);
    p.gauss_floats += plane * std::size_t(p.levels);
    p.dog_floats += plane * std::size_t(p.dog_levels);
    if (w > 2 * p.border && h > 2 * p.border)
      p.candidate_bound += std::size_t(w - 2 * p.border) * std::size_t(h - 2 * p.border) * std::size_t(s);
    w /= 2;  // the next octave takes the even pixels of level S
    h /= 2;
  }
  // A generous first guess for a device buffer (natural images give well under one candidate in 500 pixels).
  p.candidate_capacity = std::min(p.candidate_bound, std::max<std::size_t>(4096, p.candidate_bound / 64));

  // Kernel 0: the base blur from the assumed input blur, computed in float as OpenCV does.
  const float sigma = float(options.sigma);
  const float init = options.upsample ? 0.5f * 0.5f * 4.0f : 0.5f * 0.5f;
  p.base_sigma_diff = std::sqrt(std::max(sigma * sigma - init, 0.01f));
  p.level_sigma.assign(std::size_t(s + 3), 0.0);
  p.level_sigma[0] = double(p.base_sigma_diff);
  // Kernels 1 .. S + 2: level i (total sigma * k^i) from level i - 1, in double.
  const double k = std::pow(2.0, 1.0 / s);
  for (int i = 1; i < s + 3; ++i) {
    const double prev = std::pow(k, double(i - 1)) * options.sigma;
    const double total = prev * k;
    p.level_sigma[std::size_t(i)] = std::sqrt(total * total - prev * prev);
  }
  for (int i = 0; i < s + 3; ++i) {
    const std::vector<float> half = sift_gaussian_half_kernel(p.level_sigma[std::size_t(i)]);
    p.tap_offset.push_back(int(p.taps.size()));
    p.tap_radius.push_back(int(half.size()) - 1);
    p.taps.insert(p.taps.end(), half.begin(), half.end());
  }

  p.prefilter_threshold = float(std::floor(0.5 * options.contrast_threshold / s * 255.0));
  p.contrast_threshold = float(options.contrast_threshold);
  p.edge_threshold = float(options.edge_threshold);
  p.sigma = sigma;
  return p;
}

const SiftPlan& sift_plan(ContextImpl& ctx, int width, int height, const SiftOptions& options) {
  auto& slot = ctx.plans["sift.plan"];
  if (slot.has_value()) {
    const auto& cached = std::any_cast<const std::shared_ptr<SiftPlan>&>(slot);
    if (cached->matches(width, height, options)) return *cached;
  }
  slot = std::make_shared<SiftPlan>(make_sift_plan(width, height, options));
  return *std::any_cast<const std::shared_ptr<SiftPlan>&>(slot);
}

}  // namespace spectrasift::detail

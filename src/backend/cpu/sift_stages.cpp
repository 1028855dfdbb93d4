// CPU SIFT stages that are not the scale space (sift_pyramid.cpp, sift_extrema.cpp) or the per-keypoint
// histograms (sift_orientation.cpp, sift_descriptor.cpp): the grey conversion, the select stage (duplicates,
// cap, mask, canonical order with the rules of numeric/sift_select.h) and the download into Features.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <type_traits>
#include <vector>

#include "backend/cpu/operations.hpp"
#include "backend/cpu/sift.hpp"
#include "numeric/sift_gray.h"
#include "numeric/sift_select.h"

namespace spectrasift::cpu {

namespace {

// The grey value of pixel i of a view that is not already grey (numeric/sift_gray.h).
template <typename T>
float grey_at(const T* p, int channels) {
  if constexpr (std::is_same_v<T, std::uint8_t>)
    return channels >= 3 ? sift_gray_u8_rgb(p[0], p[1], p[2]) : sift_gray_u8(p[0]);
  else if constexpr (std::is_same_v<T, std::uint16_t>)
    return channels >= 3 ? sift_gray_u16_rgb(p[0], p[1], p[2]) : sift_gray_u16(p[0]);
  else
    return channels >= 3 ? sift_gray_f32_rgb(p[0], p[1], p[2]) : sift_gray_f32(p[0]);
}

template <typename T>
void convert_rows(const detail::SiftImageView& im, float* out, int y0, int y1) {
  const std::size_t c = std::size_t(im.channels);
  for (int y = y0; y < y1; ++y) {
    const std::size_t first = std::size_t(y) * std::size_t(im.width);
    const T* p = static_cast<const T*>(im.data) + first * c;
    for (int x = 0; x < im.width; ++x, p += c) out[first + std::size_t(x)] = grey_at(p, im.channels);
  }
}

bool mask_set(const Image& m, int x, int y) {
  const std::size_t i = std::size_t(y) * std::size_t(m.width) + std::size_t(x);
  switch (m.type) {
    case PixelType::kU8: return m.as<std::uint8_t>()[i] != 0;
    case PixelType::kU16: return m.as<std::uint16_t>()[i] != 0;
    case PixelType::kF32: return m.as<float>()[i] != 0.0f;
  }
  return false;
}

}  // namespace

WorkPool& SiftStagesCpu::pool() { return calling_thread_pool(std::max(ctx_.cpu_threads(), 1)); }

void SiftStagesCpu::upload(const detail::SiftPlan& plan, const detail::SiftImageView& image) {
  plan_ = &plan;
  kernels_ = pick_sift_kernels();
  refined_.clear();
  keypoints_.clear();
  descriptors_.clear();
  counts_ = {};
  if (image.grey_levels) {  // read in place: the caller keeps it alive until download()
    grey_ = static_cast<const float*>(image.data);
    return;
  }
  converted_.resize(std::size_t(image.width) * std::size_t(image.height));
  WorkPool& workers = pool();
  const int chunk = std::max(1, image.height / (8 * workers.size()));
  workers.run(image.height, chunk, [&](int y0, int y1, int) {
    switch (image.type) {
      case PixelType::kU8: convert_rows<std::uint8_t>(image, converted_.data(), y0, y1); break;
      case PixelType::kU16: convert_rows<std::uint16_t>(image, converted_.data(), y0, y1); break;
      case PixelType::kF32: convert_rows<float>(image, converted_.data(), y0, y1); break;
    }
  });
  grey_ = converted_.data();
}

void select_records(std::vector<SiftKeypoint>& k, int max_features, const Image* mask) {
  // 1. duplicates (removeDuplicatedSorted)
  std::sort(k.begin(), k.end(),
            [](const SiftKeypoint& a, const SiftKeypoint& b) { return sift_duplicate_before(a, b) != 0; });
  k.erase(std::unique(k.begin(), k.end(), [](const SiftKeypoint& a, const SiftKeypoint& b) {
            return sift_is_duplicate(a, b) != 0;
          }),
          k.end());
  // 2. the cap (retainBest): the max_features-th largest response is the cut; ties at the cut are kept.
  const int n = max_features;
  if (n > 0 && k.size() > std::size_t(n)) {
    std::vector<float> r(k.size());
    for (std::size_t i = 0; i < k.size(); ++i) r[i] = k[i].response;
    std::nth_element(r.begin(), r.begin() + (n - 1), r.end(), std::greater<float>());
    const float cut = r[std::size_t(n - 1)];
    k.erase(std::remove_if(k.begin(), k.end(), [cut](const SiftKeypoint& p) { return !sift_response_kept(p.response, cut); }),
            k.end());
  }
  // 3. the mask (runByPixelsMask), at the rounded position
  if (mask) {
    k.erase(std::remove_if(k.begin(), k.end(),
                           [&](const SiftKeypoint& p) {
                             return !mask_set(*mask, sift_mask_coord(p.x, mask->width),
                                              sift_mask_coord(p.y, mask->height));
                           }),
            k.end());
  }
  // 4. the canonical order
  std::sort(k.begin(), k.end(),
            [](const SiftKeypoint& a, const SiftKeypoint& b) { return sift_canonical_before(a, b) != 0; });
}

void SiftStagesCpu::select(const Image* mask) {
  select_records(keypoints_, plan_->max_features, mask);
  counts_.kept = keypoints_.size();
}

void SiftStagesCpu::download(Features& out, detail::SiftCounts& counts) {
  out.image_width = plan_->input_width;
  out.image_height = plan_->input_height;
  out.keypoints.resize(keypoints_.size());
  for (std::size_t i = 0; i < keypoints_.size(); ++i) {
    const SiftKeypoint& s = keypoints_[i];
    out.keypoints[i] = Keypoint{s.x, s.y, s.size, s.angle, s.response, s.octave, s.layer, s.layer_offset};
  }
  out.descriptors = std::move(descriptors_);
  descriptors_ = {};
  counts = counts_;
  grey_ = nullptr;
}

std::unique_ptr<detail::SiftStages> make_sift_stages(detail::ContextImpl& ctx) {
  return std::make_unique<SiftStagesCpu>(ctx);
}

}  // namespace spectrasift::cpu

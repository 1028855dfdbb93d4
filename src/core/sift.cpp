// SIFT front end: option and argument checks, grey conversion, dispatch to a backend, and the
// backend-independent post-processing of OpenCV 4.6 (notes §9): duplicate removal, retainBest,
// mask, then the canonical order, descriptors and the optional RootSIFT mapping.
#include "spectrasift/sift.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "backend/cpu/sift.hpp"
#include "core/context_impl.hpp"
#include "core/dispatch.hpp"
#include "core/limits.hpp"
#include "spectrasift/error.hpp"
#include "spectrasift/io.hpp"

namespace spectrasift {

namespace {

[[noreturn]] void invalid(const std::string& what) { throw Error(ErrorCode::kInvalidArgument, "sift: " + what); }

std::string num(double v) {
  char b[64];
  std::snprintf(b, sizeof b, "%g", v);
  return b;
}

// OpenCV's packed octave field (octave & 255 | layer << 8 | round((xi + 0.5) * 255) << 16), used only as
// the tie-breaker of removeDuplicatedSorted's order.
int packed_octave(const Keypoint& k) {
  return (k.octave & 255) | (k.layer << 8) | (int(std::lrint((k.layer_offset + 0.5f) * 255.0f)) & 255) << 16;
}

// removeDuplicatedSorted: order by x, y ascending, size descending, angle ascending, response and
// packed octave descending; drop a keypoint equal in x, y, size and angle to the previous kept one.
void remove_duplicates(std::vector<Keypoint>& kps) {
  std::sort(kps.begin(), kps.end(), [](const Keypoint& a, const Keypoint& b) {
    if (a.x != b.x) return a.x < b.x;
    if (a.y != b.y) return a.y < b.y;
    if (a.size != b.size) return a.size > b.size;
    if (a.angle != b.angle) return a.angle < b.angle;
    if (a.response != b.response) return a.response > b.response;
    return packed_octave(a) > packed_octave(b);
  });
  auto last = std::unique(kps.begin(), kps.end(), [](const Keypoint& a, const Keypoint& b) {
    return a.x == b.x && a.y == b.y && a.size == b.size && a.angle == b.angle;
  });
  kps.erase(last, kps.end());
}

// retainBest: keep every keypoint whose response is >= the n-th largest (ties at the cut are all kept).
void retain_best(std::vector<Keypoint>& kps, int n) {
  if (n <= 0 || kps.size() <= std::size_t(n)) return;
  std::vector<float> r(kps.size());
  for (std::size_t i = 0; i < kps.size(); ++i) r[i] = kps[i].response;
  std::nth_element(r.begin(), r.begin() + (n - 1), r.end(), std::greater<float>());
  const float cut = r[std::size_t(n - 1)];
  kps.erase(std::remove_if(kps.begin(), kps.end(), [cut](const Keypoint& k) { return !(k.response >= cut); }),
            kps.end());
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

// Mask test at the rounded position int(pt + 0.5), as OpenCV's runByPixelsMask.
void apply_mask(std::vector<Keypoint>& kps, const Image& mask) {
  kps.erase(std::remove_if(kps.begin(), kps.end(),
                           [&](const Keypoint& k) {
                             const int x = std::clamp(int(k.x + 0.5f), 0, mask.width - 1);
                             const int y = std::clamp(int(k.y + 0.5f), 0, mask.height - 1);
                             return !mask_set(mask, x, y);
                           }),
            kps.end());
}

// The canonical order: octave, layer, y, x, angle; then the remaining fields so that the order is total.
void canonical_sort(std::vector<Keypoint>& kps) {
  std::sort(kps.begin(), kps.end(), [](const Keypoint& a, const Keypoint& b) {
    if (a.octave != b.octave) return a.octave < b.octave;
    if (a.layer != b.layer) return a.layer < b.layer;
    if (a.y != b.y) return a.y < b.y;
    if (a.x != b.x) return a.x < b.x;
    if (a.angle != b.angle) return a.angle < b.angle;
    if (a.size != b.size) return a.size < b.size;
    if (a.response != b.response) return a.response < b.response;
    return a.layer_offset < b.layer_offset;
  });
}

// RootSIFT: v / sum(v), square root, times 512 (each row then has L2 norm 512, like the default ones).
void root_sift(std::vector<float>& desc) {
  const std::size_t d = Features::kDescriptorSize;
  for (std::size_t r = 0; r * d < desc.size(); ++r) {
    float* v = desc.data() + r * d;
    double l1 = 0;
    for (std::size_t k = 0; k < d; ++k) l1 += v[k];
    if (l1 <= 0) continue;  // an all-zero descriptor stays zero
    for (std::size_t k = 0; k < d; ++k) v[k] = float(std::sqrt(double(v[k]) / l1) * 512.0);
  }
}

void check_image_size(const detail::ContextImpl& ctx, int width, int height) {
  if (width <= 0 || height <= 0)
    invalid("the image is empty (" + std::to_string(width) + " x " + std::to_string(height) + ")");
  detail::check_pixel_limit("sift: image of ", std::uint64_t(width), std::uint64_t(height), ctx.options.max_pixels);
}

}  // namespace

void SiftOptions::check() const {
  if (octave_layers < 1 || octave_layers > 10)
    invalid("octave_layers must be in 1..10 (got " + std::to_string(octave_layers) + ")");
  if (!(sigma > 0) || !std::isfinite(sigma)) invalid("sigma must be a finite value > 0 (got " + num(sigma) + ")");
  if (!(contrast_threshold >= 0) || !std::isfinite(contrast_threshold))
    invalid("contrast_threshold must be a finite value >= 0 (got " + num(contrast_threshold) + ")");
  if (!(edge_threshold > 0) || !std::isfinite(edge_threshold))
    invalid("edge_threshold must be a finite value > 0 (got " + num(edge_threshold) + ")");
  if (max_features < 0) invalid("max_features must be >= 0 (got " + std::to_string(max_features) + ")");
}

Features detect_and_compute(Context& ctx, const Image& image, const SiftOptions& options, const Image* mask) {
  const detail::ContextUse use(ctx.impl(), "detect_and_compute");
  options.check();
  if (image.width <= 0 || image.height <= 0 || image.channels <= 0 || image.data.empty())
    invalid("the image is empty (" + std::to_string(image.width) + " x " + std::to_string(image.height) + " x " +
            std::to_string(image.channels) + ")");
  if (image.channels > 4) invalid("images with " + std::to_string(image.channels) + " channels are not supported");
  if (image.data.size() != image.pixel_count() * std::size_t(image.channels) * bytes_per_sample(image.type))
    invalid("the image buffer has " + std::to_string(image.data.size()) + " bytes, its shape needs " +
            std::to_string(image.pixel_count() * std::size_t(image.channels) * bytes_per_sample(image.type)));
  check_image_size(ctx.impl(), image.width, image.height);
  return detect_and_compute(ctx, to_gray_float(image), options, mask);
}

Features detect_and_compute(Context& ctx, const ImageF& gray, const SiftOptions& options, const Image* mask) {
  const detail::ContextUse use(ctx.impl(), "detect_and_compute");
  options.check();
  auto& im = ctx.impl();
  check_image_size(im, gray.width, gray.height);
  if (gray.data.size() != std::size_t(gray.width) * std::size_t(gray.height))
    invalid("the grey image buffer has " + std::to_string(gray.data.size()) + " values, its shape needs " +
            std::to_string(std::size_t(gray.width) * std::size_t(gray.height)));
  if (mask) {
    if (mask->width != gray.width || mask->height != gray.height)
      invalid("the mask is " + std::to_string(mask->width) + " x " + std::to_string(mask->height) +
              ", the image " + std::to_string(gray.width) + " x " + std::to_string(gray.height));
    if (mask->channels != 1) invalid("the mask must have one channel (it has " + std::to_string(mask->channels) + ")");
    if (mask->data.size() != mask->pixel_count() * bytes_per_sample(mask->type))
      invalid("the mask buffer size does not match its shape");
  }
  detail::backend_for(im, detail::Operation::kSift);  // SIFT runs on the CPU plan below: an error or a log line

  const auto t0 = std::chrono::steady_clock::now();
  const int threads = im.cpu_threads();
  cpu::SiftPlan& plan = cpu::sift_plan(im);
  std::vector<Keypoint> kps = plan.detect(gray, options, threads);
  const auto t1 = std::chrono::steady_clock::now();
  const std::size_t found = kps.size();
  remove_duplicates(kps);
  retain_best(kps, options.max_features);
  if (mask) apply_mask(kps, *mask);
  canonical_sort(kps);

  Features f;
  f.image_width = gray.width;
  f.image_height = gray.height;
  f.descriptors.resize(kps.size() * Features::kDescriptorSize);
  const auto t2 = std::chrono::steady_clock::now();
  plan.describe(kps, f.descriptors.data(), threads);
  if (options.root_sift) root_sift(f.descriptors);
  f.keypoints = std::move(kps);
  const auto t3 = std::chrono::steady_clock::now();
  auto ms = [](auto a, auto b) { return num(std::chrono::duration<double, std::milli>(b - a).count()); };
  im.log("sift: cpu, " + std::to_string(gray.width) + "x" + std::to_string(gray.height) + ", " +
         std::to_string(threads) + " threads: scale space + extrema + orientations " + ms(t0, t1) +
         " ms, duplicates/max_features/mask/order " + ms(t1, t2) + " ms, descriptors " + ms(t2, t3) + " ms; " +
         std::to_string(found) + " found, " + std::to_string(f.keypoints.size()) + " kept");
  return f;
}

}  // namespace spectrasift

// SIFT front end: option and argument checks, the plan (core/sift_plan.hpp), and the stage sequence of
// core/sift_backend.hpp run on a backend. Core does not touch the data between stages: the grey
// conversion, duplicates / max_features / mask / canonical order (OpenCV 4.6, notes §9) and RootSIFT are
// backend stages, so that a device runs the whole sequence with two read-backs.
#include "spectrasift/sift.hpp"

#include <algorithm>
#include <any>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/context_impl.hpp"
#include "core/sift_backend.hpp"
#include "core/sift_plan.hpp"
#include "core/sift_prepare.hpp"
#include "core/dispatch.hpp"
#include "core/limits.hpp"
#include "spectrasift/error.hpp"

namespace spectrasift {

namespace {

[[noreturn]] void invalid(const std::string& what) { throw Error(ErrorCode::kInvalidArgument, "sift: " + what); }

std::string num(double v) {
  char b[64];
  std::snprintf(b, sizeof b, "%g", v);
  return b;
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
  if (int(descriptor_type) > int(DescriptorType::kU8))
    invalid("unknown descriptor type code " + std::to_string(int(descriptor_type)));
  if (descriptor_type == DescriptorType::kU8 && root_sift)
    invalid("RootSIFT descriptors are not integers 0..255: they need descriptor_type f32");
  if (max_features < 0) invalid("max_features must be >= 0 (got " + std::to_string(max_features) + ")");
  if (int(stretch) > int(Stretch::kPercentile)) invalid("unknown stretch code " + std::to_string(int(stretch)));
  if (!(stretch_low >= 0 && stretch_low < stretch_high && stretch_high <= 100))
    invalid("the stretch percentiles must satisfy 0 <= low < high <= 100 (got " + num(stretch_low) + ", " +
            num(stretch_high) + ")");
  if (nodata && std::isinf(*nodata)) invalid("nodata must be finite or NaN (got " + num(*nodata) + ")");
  if (nodata_margin < 0 || nodata_margin > 64)
    invalid("nodata_margin must be in 0..64 (got " + std::to_string(nodata_margin) + ")");
}

namespace {

// The SIFT stages of the backend that runs SIFT on this context (core/dispatch.hpp decides: the context's
// backend, or the CPU backend under `auto`), kept in the context so that buffers are reused across images.
detail::SiftStages& sift_stages(detail::ContextImpl& ctx, detail::BackendImpl& backend) {
  auto& slot = ctx.plans[std::string("sift.stages.") + to_string(backend.kind())];
  if (!slot.has_value()) slot = std::shared_ptr<detail::SiftStages>(backend.make_sift_stages(ctx));
  return *std::any_cast<std::shared_ptr<detail::SiftStages>&>(slot);
}

void check_mask(const Image* mask, int width, int height) {
  if (!mask) return;
  if (mask->width != width || mask->height != height)
    invalid("the mask is " + std::to_string(mask->width) + " x " + std::to_string(mask->height) + ", the image " +
            std::to_string(width) + " x " + std::to_string(height));
  if (mask->channels != 1) invalid("the mask must have one channel (it has " + std::to_string(mask->channels) + ")");
  if (mask->data.size() != mask->pixel_count() * bytes_per_sample(mask->type))
    invalid("the mask buffer size does not match its shape");
}

// The working memory of a run, from its plan (issue 21, item 2): every Gaussian level and DoG plane, the grey
// input, and the candidate and keypoint records; refused before the stages allocate when over the budget
// (host memory, or the device's for a GPU backend, where the Gaussian levels are one buffer).
void check_sift_memory(const detail::ContextImpl& im, const detail::SiftPlan& plan, const detail::BackendImpl& backend) {
  constexpr std::uint64_t kRecordBytes = 64;  // a candidate or keypoint record, rounded up
  const std::uint64_t need = 4 * (std::uint64_t(plan.gauss_floats) + plan.dog_floats) +
                             4 * std::uint64_t(plan.input_width) * std::uint64_t(plan.input_height) +
                             kRecordBytes * (plan.candidate_capacity +
                                             detail::SiftPlan::keypoint_capacity(plan.candidate_capacity / 8));
  const detail::DeviceMemory device = backend.device_memory();
  detail::check_memory_budget("sift: image of " + std::to_string(plan.input_width) + " x " +
                                  std::to_string(plan.input_height),
                              need, im.options.max_memory,
                              plan.upsample ? "lower it with --no-upsample (SiftOptions::upsample = false: a quarter) "
                                              "or by cutting the image into tiles"
                                            : "lower it by cutting the image into tiles",
                              &device, 4 * std::uint64_t(std::max(plan.gauss_floats, plan.dog_floats)));
}

// Runs the stages on a checked image and mask. `next` (the batch call): the image of the next run, same
// size, handed to the backend's prefetch() once this run's pyramid is queued; the caller then owes the
// stages an upload() of it or a drop_prefetch().
Features run_sift(detail::ContextImpl& im, const detail::SiftImageView& view, const SiftOptions& options,
                  const Image* mask, const detail::SiftImageView* next = nullptr) {
  detail::BackendImpl& backend = detail::backend_for(im, detail::Operation::kSift);
  const detail::SiftPlan& plan = detail::sift_plan(im, view.width, view.height, options);
  check_sift_memory(im, plan, backend);
  detail::SiftStages& st = sift_stages(im, backend);
  // Progress: each stage covers a share of [0, 1] that follows the CPU backend's times (the extrema stage
  // holds its fused pyramid, DoG and refinement and reports per octave itself).
  detail::OperationProgress progress(im);
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  progress.stage(0.0, 0.02);
  st.upload(plan, view);
  progress.stage(0.02, 0.1);
  st.pyramid();
  progress.stage(0.1, 0.15);
  st.dog();
  if (next) st.prefetch(*next);  // its copy overlaps the rest of this run
  progress.stage(0.15, 0.6);
  st.extrema();  // the candidate count: read-back 1 on a device
  progress.stage(0.6, 0.62);
  st.refine();
  progress.stage(0.62, 0.75);
  st.orientations();
  const auto t1 = clock::now();
  progress.stage(0.75, 0.77);
  st.select(mask);
  const auto t2 = clock::now();
  progress.stage(0.77, 0.98);
  st.descriptors();
  Features f;
  detail::SiftCounts counts;
  progress.stage(0.98, 1.0);
  st.download(f, counts);
  // u8 descriptors asked of a backend that made floats (the CPU backend's stages): converted here, exactly.
  if (options.descriptor_type == DescriptorType::kU8 && f.descriptor_type == DescriptorType::kF32) f = std::move(f).to_u8();
  progress.finish();
  const auto t3 = clock::now();
  auto ms = [](auto a, auto b) { return num(std::chrono::duration<double, std::milli>(b - a).count()); };
  im.log(std::string("sift: ") + to_string(backend.kind()) + ", " + std::to_string(view.width) + "x" +
         std::to_string(view.height) + ", " + std::to_string(im.cpu_threads()) + " threads: grey + scale space + extrema + orientations " + ms(t0, t1) +
         " ms, duplicates/max_features/mask/order " + ms(t1, t2) + " ms, descriptors " + ms(t2, t3) + " ms; " +
         std::to_string(counts.candidates) + " candidates, " + std::to_string(counts.oriented) + " found, " +
         std::to_string(counts.kept) + " kept");
  return f;
}

}  // namespace

namespace {

void check_image_shape(int width, int height, int channels, bool no_data) {
  if (width <= 0 || height <= 0 || channels <= 0 || no_data)
    invalid("the image is empty (" + std::to_string(width) + " x " + std::to_string(height) + " x " +
            std::to_string(channels) + ")");
  if (channels > 4) invalid("images with " + std::to_string(channels) + " channels are not supported");
}

// SIFT on a view whose shape was checked (the Image and ImageView overloads).
Features sift_checked_view(Context& ctx, const ImageView& image, const SiftOptions& options, const Image* mask,
                           const Image* owner = nullptr) {
  check_image_size(ctx.impl(), image.width, image.height);
  check_mask(mask, image.width, image.height);
  const detail::SiftImageView view{image.data, image.type, image.width, image.height, image.channels, false};
  if (options.stretch == SiftOptions::Stretch::kNone && !options.nodata)
    return run_sift(ctx.impl(), view, options, mask);  // the default: the caller's pixels as they are, no copy
  // The stretch and the nodata mask (core/sift_prepare.hpp) read an Image: the caller's, or a copy of the view.
  Image copy;
  if (!owner) {
    copy.width = image.width;
    copy.height = image.height;
    copy.channels = image.channels;
    copy.type = image.type;
    const auto* bytes = static_cast<const std::uint8_t*>(image.data);
    copy.data.assign(bytes, bytes + copy.pixel_count() * std::size_t(copy.channels) * bytes_per_sample(copy.type));
    owner = &copy;
  }
  const detail::PreparedSiftInput prep = detail::prepare_sift_input(*owner, options, mask);
  const Image* used_mask = prep.has_mask ? &prep.mask : mask;
  if (prep.stretched) {
    ctx.impl().log("sift: grey values " + num(prep.low) + ".." + num(prep.high) + " stretched to 0..255");
    const detail::SiftImageView grey{prep.grey.data.data(), PixelType::kF32, prep.grey.width, prep.grey.height, 1, true};
    return run_sift(ctx.impl(), grey, options, used_mask);
  }
  return run_sift(ctx.impl(), view, options, used_mask);
}

}  // namespace

namespace {

// An error of image i of a batch: the same error, its message prefixed "sift: images[i]: ".
Error image_error(std::size_t i, const Error& e) {
  std::string what = e.what();
  if (what.rfind("sift: ", 0) == 0) what.erase(0, 6);
  return Error(e.code(), "sift: images[" + std::to_string(i) + "]: " + what, e.backend(), e.native_status());
}

// The batch stopped with a prefetch outstanding: the backend lets go of the next image.
void drop_prefetch(detail::ContextImpl& im) noexcept {
  try {
    sift_stages(im, detail::backend_for(im, detail::Operation::kSift)).drop_prefetch();
  } catch (...) {  // no stages, so nothing was prefetched
  }
}

detail::SiftImageView as_sift_view(const ImageView& v) {
  return detail::SiftImageView{v.data, v.type, v.width, v.height, v.channels, false};
}

}  // namespace

void detect_and_compute(Context& ctx, std::span<const ImageView> images, const SiftOptions& options,
                        const Image* mask, const std::function<void(std::size_t, Features&&)>& on_features) {
  const detail::ContextUse use(ctx.impl(), "detect_and_compute");
  options.check();
  if (!on_features) invalid("the batch call needs an on_features callback");
  for (std::size_t i = 0; i < images.size(); ++i) {  // every image before any work
    const ImageView& v = images[i];
    try {
      check_image_shape(v.width, v.height, v.channels, v.data == nullptr);
      check_image_size(ctx.impl(), v.width, v.height);
      check_mask(mask, v.width, v.height);
    } catch (const Error& e) {
      throw image_error(i, e);
    }
  }
  detail::ContextImpl& im = ctx.impl();
  detail::OperationProgress progress(im);
  const double n = double(images.size());
  // Without a stretch or a nodata mask to prepare (kAuto never stretches u8 images) the backend reads the
  // caller's pixels as they are, and the next image can be prefetched; otherwise sift_checked_view prepares
  // each image on the host first, one after the other.
  const auto in_place = [&options](const ImageView& v) {
    return !options.nodata && (options.stretch == SiftOptions::Stretch::kNone ||
                               (options.stretch == SiftOptions::Stretch::kAuto && v.type == PixelType::kU8));
  };
  for (std::size_t i = 0; i < images.size(); ++i) {
    progress.stage(double(i) / n, double(i + 1) / n);
    const ImageView& v = images[i];
    const bool prefetch = in_place(v) && i + 1 < images.size() && in_place(images[i + 1]) &&
                          images[i + 1].width == v.width && images[i + 1].height == v.height;
    Features f;
    try {
      if (!in_place(v)) {
        f = sift_checked_view(ctx, v, options, mask);
      } else {
        const detail::SiftImageView next = prefetch ? as_sift_view(images[i + 1]) : detail::SiftImageView{};
        f = run_sift(im, as_sift_view(v), options, mask, prefetch ? &next : nullptr);
      }
    } catch (const Error& e) {
      drop_prefetch(im);
      throw image_error(i, e);
    } catch (...) {
      drop_prefetch(im);
      throw;
    }
    try {
      on_features(i, std::move(f));
    } catch (...) {
      if (prefetch) drop_prefetch(im);
      throw;
    }
  }
  progress.finish();
}

std::vector<Features> detect_and_compute(Context& ctx, std::span<const ImageView> images,
                                         const SiftOptions& options, const Image* mask) {
  std::vector<Features> out;
  out.reserve(images.size());
  detect_and_compute(ctx, images, options, mask, [&out](std::size_t, Features&& f) { out.push_back(std::move(f)); });
  return out;
}

Features detect_and_compute(Context& ctx, const Image& image, const SiftOptions& options, const Image* mask) {
  const detail::ContextUse use(ctx.impl(), "detect_and_compute");
  options.check();
  check_image_shape(image.width, image.height, image.channels, image.data.empty());
  if (image.data.size() != image.pixel_count() * std::size_t(image.channels) * bytes_per_sample(image.type))
    invalid("the image buffer has " + std::to_string(image.data.size()) + " bytes, its shape needs " +
            std::to_string(image.pixel_count() * std::size_t(image.channels) * bytes_per_sample(image.type)));
  return sift_checked_view(ctx, ImageView{image.data.data(), image.width, image.height, image.channels, image.type},
                           options, mask, &image);
}

Features detect_and_compute(Context& ctx, const ImageView& image, const SiftOptions& options, const Image* mask) {
  const detail::ContextUse use(ctx.impl(), "detect_and_compute");
  options.check();
  check_image_shape(image.width, image.height, image.channels, image.data == nullptr);
  return sift_checked_view(ctx, image, options, mask);
}

Features detect_and_compute(Context& ctx, const ImageF& gray, const SiftOptions& options, const Image* mask) {
  const detail::ContextUse use(ctx.impl(), "detect_and_compute");
  options.check();
  check_image_size(ctx.impl(), gray.width, gray.height);
  if (gray.data.size() != std::size_t(gray.width) * std::size_t(gray.height))
    invalid("the grey image buffer has " + std::to_string(gray.data.size()) + " values, its shape needs " +
            std::to_string(std::size_t(gray.width) * std::size_t(gray.height)));
  check_mask(mask, gray.width, gray.height);
  const detail::PreparedSiftInput prep = detail::prepare_sift_input(gray, options, mask);
  const ImageF& used = prep.stretched ? prep.grey : gray;
  const detail::SiftImageView view{used.data.data(), PixelType::kF32, used.width, used.height, 1, true};
  return run_sift(ctx.impl(), view, options, prep.has_mask ? &prep.mask : mask);
}

}  // namespace spectrasift

// Intensity stretch and nodata mask before SIFT (core/sift_prepare.hpp).
//
// Stretch: the percentiles lo, hi of the valid pixels' grey values (nearest rank below: the value of rank
// floor(p / 100 * (n - 1)) in ascending order) map to 0 and 255, g' = clamp((g - lo) / (hi - lo), 0, 1) * 255.
// kAuto stretches U16 and F32 images whose [lo, hi] is narrower than 128 grey levels or leaves [0, 255]
// (12-bit content in 16 bits reaches only grey 16; a float raster may hold reflectances or radiances).
// Nodata: a pixel is invalid when any channel equals the nodata value (NaN nodata: when it is NaN); invalid
// pixels and those within `nodata_margin` (a square) are masked out of detection.
#include "core/sift_prepare.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "spectrasift/io.hpp"

namespace spectrasift::detail {

namespace {

bool is_nodata(double v, double nodata) { return std::isnan(nodata) ? std::isnan(v) : v == nodata; }

/// 1 per valid pixel (no channel holds the nodata value).
std::vector<std::uint8_t> valid_pixels(const Image& im, double nodata) {
  std::vector<std::uint8_t> valid(im.pixel_count(), 1);
  const std::size_t n = im.pixel_count(), c = std::size_t(im.channels);
  // Compare in the image's own sample type: a float raster's nodata is a float.
  const float nodata_f = float(nodata);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t k = 0; k < c; ++k) {
      bool bad = false;
      switch (im.type) {
        case PixelType::kU8: bad = is_nodata(im.as<std::uint8_t>()[i * c + k], nodata); break;
        case PixelType::kU16: bad = is_nodata(im.as<std::uint16_t>()[i * c + k], nodata); break;
        case PixelType::kF32: bad = is_nodata(im.as<float>()[i * c + k], nodata_f); break;
      }
      if (bad) valid[i] = 0;
    }
  return valid;
}

std::vector<std::uint8_t> valid_pixels(const ImageF& g, double nodata) {
  std::vector<std::uint8_t> valid(g.data.size(), 1);
  for (std::size_t i = 0; i < g.data.size(); ++i) valid[i] = !is_nodata(g.data[i], nodata);
  return valid;
}

/// Marks invalid every pixel within `r` (Chebyshev distance) of an invalid one: a running window count per row,
/// then per column.
void grow_invalid(std::vector<std::uint8_t>& valid, int w, int h, int r) {
  if (r <= 0) return;
  std::vector<std::uint8_t> tmp(valid.size());
  std::vector<int> prefix(std::size_t(std::max(w, h)) + 1);
  const auto pass = [&](int lines, int len, auto index) {
    for (int l = 0; l < lines; ++l) {
      prefix[0] = 0;
      for (int i = 0; i < len; ++i) prefix[std::size_t(i) + 1] = prefix[std::size_t(i)] + (valid[index(l, i)] ? 0 : 1);
      for (int i = 0; i < len; ++i) {
        const int a = std::max(0, i - r), b = std::min(len, i + r + 1);
        tmp[index(l, i)] = prefix[std::size_t(b)] - prefix[std::size_t(a)] == 0;
      }
    }
    valid.swap(tmp);
  };
  pass(h, w, [w](int y, int x) { return std::size_t(y) * std::size_t(w) + std::size_t(x); });
  pass(w, h, [w](int x, int y) { return std::size_t(y) * std::size_t(w) + std::size_t(x); });
}

/// The percentile of the valid values (nearest rank below); NaN values are left out.
double percentile(std::vector<float>& values, double percent) {
  const std::size_t k = std::size_t(std::floor(percent / 100.0 * double(values.size() - 1)));
  std::nth_element(values.begin(), values.begin() + std::ptrdiff_t(k), values.end());
  return values[k];
}

/// Applies the stretch to `p.grey` when the options ask for it; `wide` is false for 8-bit images.
void stretch(PreparedSiftInput& p, const SiftOptions& o, const std::vector<std::uint8_t>* valid, bool wide) {
  std::vector<float> values;
  values.reserve(p.grey.data.size());
  for (std::size_t i = 0; i < p.grey.data.size(); ++i)
    if ((!valid || (*valid)[i]) && !std::isnan(p.grey.data[i])) values.push_back(p.grey.data[i]);
  if (values.empty()) return;
  const double lo = percentile(values, o.stretch_low), hi = percentile(values, o.stretch_high);
  if (!(hi > lo)) return;  // a flat image: nothing to stretch
  if (o.stretch == SiftOptions::Stretch::kAuto && !(wide && (hi - lo < 128.0 || lo < 0.0 || hi > 255.0))) return;
  const double scale = 255.0 / (hi - lo);
  for (float& g : p.grey.data) g = float(std::clamp((double(g) - lo) * scale, 0.0, 255.0));
  p.stretched = true;
  p.low = lo;
  p.high = hi;
}

/// The caller's mask (nonzero = detect) combined with the valid pixels.
void combine_masks(PreparedSiftInput& p, int w, int h, const Image* mask, const std::vector<std::uint8_t>& valid) {
  p.mask = Image::allocate(w, h, 1, PixelType::kU8);
  const std::size_t bps = mask ? bytes_per_sample(mask->type) : 0;
  for (std::size_t i = 0; i < valid.size(); ++i) {
    bool keep = valid[i] != 0;
    if (keep && mask) {
      const std::uint8_t* m = mask->data.data() + i * bps;
      if (mask->type == PixelType::kF32) {
        float v;
        std::memcpy(&v, m, sizeof v);
        keep = v != 0.0f;
      } else {
        keep = std::any_of(m, m + bps, [](std::uint8_t b) { return b != 0; });
      }
    }
    p.mask.data[i] = keep ? 255 : 0;
  }
  p.has_mask = true;
}

template <class Input>
PreparedSiftInput prepare(const Input& in, const SiftOptions& o, const Image* mask, bool wide,
                          ImageF (*to_grey)(const Input&)) {
  PreparedSiftInput p;
  const bool may_stretch = o.stretch == SiftOptions::Stretch::kPercentile ||
                           (o.stretch == SiftOptions::Stretch::kAuto && wide);
  if (!may_stretch && !o.nodata) return p;
  std::vector<std::uint8_t> valid;
  if (o.nodata) valid = valid_pixels(in, *o.nodata);
  if (may_stretch) {
    p.grey = to_grey(in);
    stretch(p, o, o.nodata ? &valid : nullptr, wide);
    if (!p.stretched) p.grey = {};
  }
  if (o.nodata) {
    grow_invalid(valid, in.width, in.height, o.nodata_margin);
    combine_masks(p, in.width, in.height, mask, valid);
  }
  return p;
}

ImageF grey_of_image(const Image& im) { return to_gray_float(im); }
ImageF grey_of_grey(const ImageF& g) { return g; }

}  // namespace

PreparedSiftInput prepare_sift_input(const Image& image, const SiftOptions& options, const Image* mask) {
  return prepare(image, options, mask, image.type != PixelType::kU8, &grey_of_image);
}

PreparedSiftInput prepare_sift_input(const ImageF& grey, const SiftOptions& options, const Image* mask) {
  return prepare(grey, options, mask, true, &grey_of_grey);
}

}  // namespace spectrasift::detail

// Pictures for judging a registration by eye: matches side by side, checkerboard and blend overlays.
// Lines and circles come from spectrasift/draw.hpp (anti-aliased).
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "spectrasift/draw.hpp"
#include "spectrasift/error.hpp"
#include "spectrasift/geometry.hpp"
#include "spectrasift/match.hpp"

namespace spectrasift {

namespace {

struct Px3 {
  std::uint8_t r, g, b;
};

void check_image(const Image& im, const char* what) {
  if (im.empty() || im.channels < 1 || im.channels > 4 ||
      im.data.size() != im.pixel_count() * std::size_t(im.channels) * bytes_per_sample(im.type))
    throw Error(ErrorCode::kInvalidArgument, std::string(what) + ": empty or inconsistent image");
}

/// Sample c of pixel i as 0..255 (U16 / 257, F32 * 255, clamped).
std::uint8_t sample8(const Image& im, std::size_t i, int c) {
  const std::size_t k = i * std::size_t(im.channels) + std::size_t(c);
  switch (im.type) {
    case PixelType::kU8: return im.data[k];
    case PixelType::kU16: return std::uint8_t((unsigned(im.as<std::uint16_t>()[k]) + 128u) / 257u);
    case PixelType::kF32: {
      const float v = im.as<float>()[k] * 255.0f;
      return std::uint8_t(std::clamp(std::nearbyint(std::isfinite(v) ? v : 0.0f), 0.0f, 255.0f));
    }
  }
  return 0;
}

/// Pixel i as RGB (grey replicated; alpha ignored).
Px3 rgb_at(const Image& im, std::size_t i) {
  if (im.channels >= 3) return {sample8(im, i, 0), sample8(im, i, 1), sample8(im, i, 2)};
  const std::uint8_t g = sample8(im, i, 0);
  return {g, g, g};
}

/// Grey 0..255 of pixel i (the luma weights of to_gray_float).
std::uint8_t grey_at(const Image& im, std::size_t i) {
  const Px3 p = rgb_at(im, i);
  return std::uint8_t((4899u * p.r + 9617u * p.g + 1868u * p.b + 8192u) >> 14);
}

void put(Image& c, int x, int y, Px3 col) {
  if (x < 0 || y < 0 || x >= c.width || y >= c.height) return;
  std::uint8_t* p = c.data.data() + (std::size_t(y) * c.width + x) * 3;
  p[0] = col.r;
  p[1] = col.g;
  p[2] = col.b;
}

}  // namespace

Image draw_matches(const Image& query_image, const Features& query, const Image& train_image, const Features& train,
                   const std::vector<Match>& matches, const std::vector<std::uint8_t>* inlier_mask) {
  check_image(query_image, "draw_matches: query image");
  check_image(train_image, "draw_matches: train image");
  if (inlier_mask && inlier_mask->size() != matches.size())
    throw Error(ErrorCode::kInvalidArgument, "draw_matches: the inlier mask has " +
                                                 std::to_string(inlier_mask->size()) + " entries for " +
                                                 std::to_string(matches.size()) + " matches");
  for (std::size_t i = 0; i < matches.size(); ++i) {
    const Match& m = matches[i];
    if (m.query < 0 || std::size_t(m.query) >= query.size() || m.train < 0 || std::size_t(m.train) >= train.size())
      throw Error(ErrorCode::kInvalidArgument, "draw_matches: match " + std::to_string(i) + " indexes a missing keypoint");
  }
  Image c = hconcat(make_rgb(query_image), make_rgb(train_image));
  // Lines scale with the picture so that they stay visible on large images.
  const double thick = std::max(1, std::min(c.width, c.height) / 600);
  const double radius = std::max(3, std::min(c.width, c.height) / 150);
  const Rgb green{0, 230, 0}, red{235, 30, 30};
  // Outliers first, inliers on top.
  for (int pass = 0; pass < 2; ++pass) {
    for (std::size_t i = 0; i < matches.size(); ++i) {
      const bool in = !inlier_mask || (*inlier_mask)[i] != 0;
      if (in != (pass == 1)) continue;
      const Keypoint& a = query.keypoints[std::size_t(matches[i].query)];
      const Keypoint& b = train.keypoints[std::size_t(matches[i].train)];
      const Point2 pa{a.x, a.y}, pb{double(b.x) + query_image.width, b.y};
      const Rgb col = in ? green : red;
      draw_circle(c, pa, radius, col);
      draw_circle(c, pb, radius, col);
      draw_line(c, pa, pb, col, thick);
    }
  }
  return c;
}

Image overlay_checkerboard(const Image& fixed, const Image& warped, int tile) {
  check_image(fixed, "overlay_checkerboard: fixed image");
  check_image(warped, "overlay_checkerboard: warped image");
  if (fixed.width != warped.width || fixed.height != warped.height)
    throw Error(ErrorCode::kInvalidArgument, "overlay_checkerboard: the warped image must have the fixed image's size");
  if (tile < 1) throw Error(ErrorCode::kInvalidArgument, "overlay_checkerboard: tile must be >= 1");
  Image c = Image::allocate(fixed.width, fixed.height, 3, PixelType::kU8);
  for (int y = 0; y < c.height; ++y)
    for (int x = 0; x < c.width; ++x) {
      const std::size_t i = std::size_t(y) * c.width + x;
      const bool use_fixed = ((x / tile) + (y / tile)) % 2 == 0;
      put(c, x, y, rgb_at(use_fixed ? fixed : warped, i));
    }
  return c;
}

Image overlay_blend(const Image& fixed, const Image& warped) {
  check_image(fixed, "overlay_blend: fixed image");
  check_image(warped, "overlay_blend: warped image");
  if (fixed.width != warped.width || fixed.height != warped.height)
    throw Error(ErrorCode::kInvalidArgument, "overlay_blend: the warped image must have the fixed image's size");
  Image c = Image::allocate(fixed.width, fixed.height, 3, PixelType::kU8);
  for (std::size_t i = 0; i < c.pixel_count(); ++i) {
    const std::uint8_t f = grey_at(fixed, i), m = grey_at(warped, i);
    c.data[i * 3 + 0] = f;
    c.data[i * 3 + 1] = m;
    c.data[i * 3 + 2] = f;
  }
  return c;
}

}  // namespace spectrasift

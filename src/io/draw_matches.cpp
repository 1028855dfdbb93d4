// Pictures for judging a registration by eye: matches side by side, checkerboard and blend overlays.
// Drawing is done with a few local primitives (anti-aliasing is not needed for these diagnostics).
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "spectrasift/error.hpp"
#include "spectrasift/geometry.hpp"
#include "spectrasift/match.hpp"

namespace spectrasift {

namespace {

struct Rgb {
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
Rgb rgb_at(const Image& im, std::size_t i) {
  if (im.channels >= 3) return {sample8(im, i, 0), sample8(im, i, 1), sample8(im, i, 2)};
  const std::uint8_t g = sample8(im, i, 0);
  return {g, g, g};
}

/// Grey 0..255 of pixel i (the luma weights of to_gray_float).
std::uint8_t grey_at(const Image& im, std::size_t i) {
  const Rgb p = rgb_at(im, i);
  return std::uint8_t((4899u * p.r + 9617u * p.g + 1868u * p.b + 8192u) >> 14);
}

void put(Image& c, int x, int y, Rgb col) {
  if (x < 0 || y < 0 || x >= c.width || y >= c.height) return;
  std::uint8_t* p = c.data.data() + (std::size_t(y) * c.width + x) * 3;
  p[0] = col.r;
  p[1] = col.g;
  p[2] = col.b;
}

/// Bresenham line, `thick` pixels wide (a square brush).
void line(Image& c, int x0, int y0, int x1, int y1, Rgb col, int thick = 1) {
  const int dx = std::abs(x1 - x0), sx = x0 < x1 ? 1 : -1;
  const int dy = -std::abs(y1 - y0), sy = y0 < y1 ? 1 : -1;
  int err = dx + dy;
  const int r0 = -(thick - 1) / 2, r1 = thick / 2;
  for (;;) {
    for (int oy = r0; oy <= r1; ++oy)
      for (int ox = r0; ox <= r1; ++ox) put(c, x0 + ox, y0 + oy, col);
    if (x0 == x1 && y0 == y1) break;
    const int e2 = 2 * err;
    if (e2 >= dy) {
      err += dy;
      x0 += sx;
    }
    if (e2 <= dx) {
      err += dx;
      y0 += sy;
    }
  }
}

/// Circle outline (midpoint algorithm).
void circle(Image& c, int cx, int cy, int r, Rgb col) {
  int x = r, y = 0, err = 1 - r;
  while (x >= y) {
    const int pts[8][2] = {{x, y}, {y, x}, {-y, x}, {-x, y}, {-x, -y}, {-y, -x}, {y, -x}, {x, -y}};
    for (const auto& p : pts) put(c, cx + p[0], cy + p[1], col);
    ++y;
    if (err < 0) {
      err += 2 * y + 1;
    } else {
      --x;
      err += 2 * (y - x) + 1;
    }
  }
}

int iround(double v) { return int(std::lround(v)); }

}  // namespace

Image draw_matches(const Image& query_image, const Features& query, const Image& train_image, const Features& train,
                   const std::vector<Match>& matches, const std::vector<std::uint8_t>* inlier_mask) {
  check_image(query_image, "draw_matches: query image");
  check_image(train_image, "draw_matches: train image");
  if (inlier_mask && inlier_mask->size() != matches.size())
    throw Error(ErrorCode::kInvalidArgument, "draw_matches: the inlier mask has " +
                                                 std::to_string(inlier_mask->size()) + " entries for " +
                                                 std::to_string(matches.size()) + " matches");
  const int w = query_image.width + train_image.width;
  const int h = std::max(query_image.height, train_image.height);
  Image c = Image::allocate(w, h, 3, PixelType::kU8);
  auto blit = [&c](const Image& im, int ox) {
    for (int y = 0; y < im.height; ++y)
      for (int x = 0; x < im.width; ++x) put(c, ox + x, y, rgb_at(im, std::size_t(y) * im.width + x));
  };
  blit(query_image, 0);
  blit(train_image, query_image.width);
  // Lines scale with the picture so that they stay visible on large images.
  const int thick = std::max(1, std::min(w, h) / 600);
  const int radius = std::max(3, std::min(w, h) / 150);
  const Rgb green{0, 230, 0}, red{235, 30, 30};
  // Outliers first, inliers on top.
  for (int pass = 0; pass < 2; ++pass) {
    for (std::size_t i = 0; i < matches.size(); ++i) {
      const bool in = !inlier_mask || (*inlier_mask)[i] != 0;
      if (in != (pass == 1)) continue;
      const Match& m = matches[i];
      if (m.query < 0 || std::size_t(m.query) >= query.size() || m.train < 0 || std::size_t(m.train) >= train.size())
        throw Error(ErrorCode::kInvalidArgument, "draw_matches: match " + std::to_string(i) + " indexes a missing keypoint");
      const Keypoint& a = query.keypoints[std::size_t(m.query)];
      const Keypoint& b = train.keypoints[std::size_t(m.train)];
      const int ax = iround(a.x), ay = iround(a.y), bx = iround(b.x) + query_image.width, by = iround(b.y);
      const Rgb col = in ? green : red;
      circle(c, ax, ay, radius, col);
      circle(c, bx, by, radius, col);
      line(c, ax, ay, bx, by, col, thick);
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

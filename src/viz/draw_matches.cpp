// Pictures for judging a registration by eye: matches side by side, checkerboard and blend overlays.
// Lines and circles come from spectrasift/draw.hpp (anti-aliased).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

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
    case PixelType::kU8:
      return im.data[k];
    case PixelType::kU16:
      return std::uint8_t((unsigned(im.as<std::uint16_t>()[k]) + 128u) / 257u);
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

std::vector<std::size_t> select_matches_to_draw(const Features& query, int query_width, int query_height,
                                                const std::vector<Match>& matches,
                                                const std::vector<std::uint8_t>* inlier_mask, std::size_t max_matches) {
  std::vector<std::size_t> in, out;
  for (std::size_t i = 0; i < matches.size(); ++i) ((!inlier_mask || (*inlier_mask)[i]) ? in : out).push_back(i);
  if (max_matches == 0 || matches.size() <= max_matches) {
    std::vector<std::size_t> all(matches.size());
    for (std::size_t i = 0; i < all.size(); ++i) all[i] = i;
    return all;
  }
  // Shares in proportion to the group sizes, each non-empty group at least one.
  std::size_t share_in = std::size_t(double(max_matches) * double(in.size()) / double(matches.size()) + 0.5);
  if (!in.empty()) share_in = std::max<std::size_t>(share_in, 1);
  if (!out.empty()) share_in = std::min(share_in, max_matches - 1);
  // Outliers tell most about a doubtful model: they keep at least a tenth of the budget when there are enough.
  const std::size_t min_out = std::min(out.size(), max_matches / 10);
  if (max_matches - share_in < min_out) share_in = max_matches - min_out;
  const std::size_t share_out = std::min(out.size(), max_matches - share_in);
  constexpr int kGrid = 8;
  auto cell_of = [&](std::size_t m) {
    const Keypoint& k = query.keypoints[std::size_t(matches[m].query)];
    const int cx = std::clamp(int(double(k.x) * kGrid / std::max(1, query_width)), 0, kGrid - 1);
    const int cy = std::clamp(int(double(k.y) * kGrid / std::max(1, query_height)), 0, kGrid - 1);
    return cy * kGrid + cx;
  };
  std::vector<std::size_t> chosen;
  auto take = [&](std::vector<std::size_t>& group, std::size_t share) {
    std::stable_sort(group.begin(), group.end(),
                     [&](std::size_t a, std::size_t b) { return matches[a].distance < matches[b].distance; });
    std::vector<std::vector<std::size_t>> cells(kGrid * kGrid);
    for (std::size_t m : group) cells[std::size_t(cell_of(m))].push_back(m);  // best first within a cell
    for (std::size_t round = 0, taken = 0; taken < share; ++round)
      for (const auto& c : cells)
        if (round < c.size() && taken < share) {
          chosen.push_back(c[round]);
          ++taken;
        }
  };
  take(in, std::min(share_in, in.size()));
  take(out, share_out);
  std::sort(chosen.begin(), chosen.end());
  return chosen;
}

Image draw_matches(const Image& query_image, const Features& query, const Image& train_image, const Features& train,
                   const std::vector<Match>& matches, const std::vector<std::uint8_t>* inlier_mask,
                   const DrawMatchesOptions& options) {
  check_image(query_image, "draw_matches: query image");
  check_image(train_image, "draw_matches: train image");
  if (inlier_mask && inlier_mask->size() != matches.size())
    throw Error(ErrorCode::kInvalidArgument, "draw_matches: the inlier mask has " +
                                                 std::to_string(inlier_mask->size()) + " entries for " +
                                                 std::to_string(matches.size()) + " matches");
  for (std::size_t i = 0; i < matches.size(); ++i) {
    const Match& m = matches[i];
    if (m.query < 0 || std::size_t(m.query) >= query.size() || m.train < 0 || std::size_t(m.train) >= train.size())
      throw Error(ErrorCode::kInvalidArgument,
                  "draw_matches: match " + std::to_string(i) + " indexes a missing keypoint");
  }
  const Image images = hconcat(make_rgb(query_image), make_rgb(train_image));
  // Lines and text scale with the picture so that they stay visible on large images.
  const int side = std::min(images.width, images.height);
  const double thick = std::max(1, side / 600);
  const double radius = std::max(3, side / 150);
  const int text_scale = std::max(1, side / 500);
  const int strip = options.legend ? kGlyphHeight * text_scale + 6 * text_scale : 0;
  Image c = images;
  if (strip > 0) {
    c = blank_rgb(images.width, images.height + strip, Rgb{24, 24, 24});
    std::copy(images.data.begin(), images.data.end(), c.data.begin());
  }
  // Yellow and magenta: bright, and far in hue from the greens and browns of vegetation; a dark outline
  // under every shape keeps them visible on bright ground and sky too.
  const Rgb inlier_colour{255, 225, 0}, outlier_colour{255, 40, 220}, outline{0, 0, 0};
  const std::vector<std::size_t> drawn =
      select_matches_to_draw(query, query_image.width, query_image.height, matches, inlier_mask, options.max_matches);
  std::size_t inliers = 0, drawn_in = 0;
  for (std::size_t i = 0; i < matches.size(); ++i) inliers += !inlier_mask || (*inlier_mask)[i];
  for (std::size_t i : drawn) drawn_in += !inlier_mask || (*inlier_mask)[i];
  // Outliers first, inliers on top; outlines of a group before its colours.
  for (int pass = 0; pass < 4; ++pass) {
    const bool want_in = pass >= 2, outline_pass = pass % 2 == 0;
    for (std::size_t i : drawn) {
      const bool in = !inlier_mask || (*inlier_mask)[i] != 0;
      if (in != want_in) continue;
      const Keypoint& a = query.keypoints[std::size_t(matches[i].query)];
      const Keypoint& b = train.keypoints[std::size_t(matches[i].train)];
      const Point2 pa{a.x, a.y}, pb{double(b.x) + query_image.width, b.y};
      const Rgb col = outline_pass ? outline : in ? inlier_colour : outlier_colour;
      const double t = outline_pass ? thick + 2 : thick;
      draw_circle(c, pa, radius, col, t);
      draw_circle(c, pb, radius, col, t);
      draw_line(c, pa, pb, col, t);
    }
  }
  if (strip > 0) {
    // Legend: a swatch and a count per colour.
    const int y = images.height + 3 * text_scale, sw = kGlyphHeight * text_scale;
    int x = 4 * text_scale;
    auto item = [&](const std::string& text, const Rgb* swatch) {
      if (swatch) {
        fill_rect(c, x, y, sw, sw, *swatch);
        x += sw + 3 * text_scale;
      }
      draw_text(c, x, y, text, colors::kWhite, text_scale);
      x += text_width(text, text_scale) + 4 * kGlyphWidth * text_scale / 2;
    };
    const std::size_t outliers = matches.size() - inliers, drawn_out = drawn.size() - drawn_in;
    item(std::to_string(matches.size()) + " matches:", nullptr);
    item(std::to_string(inliers) + " inliers (drawn " + std::to_string(drawn_in) + ")", &inlier_colour);
    if (inlier_mask)
      item(std::to_string(outliers) + " outliers (drawn " + std::to_string(drawn_out) + ")", &outlier_colour);
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

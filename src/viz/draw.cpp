// Drawing on RGB U8 images (draw.hpp): canvases, anti-aliased lines and circles, a built-in 5x7
// bitmap font, colour maps and rich keypoints.
#include "spectrasift/draw.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <string>

#include "spectrasift/error.hpp"

namespace spectrasift {
namespace {

void require_canvas(const Image& c, const char* fn) {
  if (c.channels != 3 || c.type != PixelType::kU8 || c.width <= 0 || c.height <= 0 ||
      c.data.size() != c.pixel_count() * 3)
    throw Error(ErrorCode::kInvalidArgument,
                std::string(fn) + ": the canvas must be a non-empty 3-channel U8 image (use make_rgb)");
}

inline void blend(std::uint8_t* p, Rgb c, float a) {
  if (a >= 1.0f) {
    p[0] = c.r;
    p[1] = c.g;
    p[2] = c.b;
    return;
  }
  if (!(a > 0.0f)) return;
  p[0] = std::uint8_t(std::lround(p[0] + (float(c.r) - p[0]) * a));
  p[1] = std::uint8_t(std::lround(p[1] + (float(c.g) - p[1]) * a));
  p[2] = std::uint8_t(std::lround(p[2] + (float(c.b) - p[2]) * a));
}

inline void put(Image& im, int x, int y, Rgb c, float a) {
  if (x < 0 || y < 0 || x >= im.width || y >= im.height) return;
  blend(im.data.data() + (std::size_t(y) * std::size_t(im.width) + std::size_t(x)) * 3, c, a);
}

/// Coverage of a pixel whose centre is at distance d from the ideal shape edge region of half-width h.
inline float coverage(double d, double h, bool antialias) {
  if (!antialias) return d <= h ? 1.0f : 0.0f;
  return float(std::clamp(h + 0.5 - d, 0.0, 1.0));
}

// ---- the 5x7 font: 7 rows of 5 columns per glyph, '#' = ink, and an 8th row (the line spacing row) for
// the descenders of g j p q y. Drawn for this project. Capitals and digits stand on row 6; lower case has
// its x-height on rows 2..6, ascenders from row 0, and descender letters raise their bowl by one row. ----

struct Glyph {
  char c;
  const char* rows[8];  ///< rows[7] may be left out (null): no descender
};

constexpr Glyph kGlyphs[] = {
    {'0', {".###.", "#...#", "#..##", "#.#.#", "##..#", "#...#", ".###."}},
    {'1', {"..#..", ".##..", "..#..", "..#..", "..#..", "..#..", ".###."}},
    {'2', {".###.", "#...#", "....#", "...#.", "..#..", ".#...", "#####"}},
    {'3', {"#####", "...#.", "..#..", "...#.", "....#", "#...#", ".###."}},
    {'4', {"...#.", "..##.", ".#.#.", "#..#.", "#####", "...#.", "...#."}},
    {'5', {"#####", "#....", "####.", "....#", "....#", "#...#", ".###."}},
    {'6', {"..##.", ".#...", "#....", "####.", "#...#", "#...#", ".###."}},
    {'7', {"#####", "....#", "...#.", "..#..", ".#...", ".#...", ".#..."}},
    {'8', {".###.", "#...#", "#...#", ".###.", "#...#", "#...#", ".###."}},
    {'9', {".###.", "#...#", "#...#", ".####", "....#", "...#.", ".##.."}},
    {'A', {".###.", "#...#", "#...#", "#####", "#...#", "#...#", "#...#"}},
    {'B', {"####.", "#...#", "#...#", "####.", "#...#", "#...#", "####."}},
    {'C', {".###.", "#...#", "#....", "#....", "#....", "#...#", ".###."}},
    {'D', {"###..", "#..#.", "#...#", "#...#", "#...#", "#..#.", "###.."}},
    {'E', {"#####", "#....", "#....", "####.", "#....", "#....", "#####"}},
    {'F', {"#####", "#....", "#....", "####.", "#....", "#....", "#...."}},
    {'G', {".###.", "#...#", "#....", "#.###", "#...#", "#...#", ".####"}},
    {'H', {"#...#", "#...#", "#...#", "#####", "#...#", "#...#", "#...#"}},
    {'I', {".###.", "..#..", "..#..", "..#..", "..#..", "..#..", ".###."}},
    {'J', {"..###", "...#.", "...#.", "...#.", "...#.", "#..#.", ".##.."}},
    {'K', {"#...#", "#..#.", "#.#..", "##...", "#.#..", "#..#.", "#...#"}},
    {'L', {"#....", "#....", "#....", "#....", "#....", "#....", "#####"}},
    {'M', {"#...#", "##.##", "#.#.#", "#.#.#", "#...#", "#...#", "#...#"}},
    {'N', {"#...#", "#...#", "##..#", "#.#.#", "#..##", "#...#", "#...#"}},
    {'O', {".###.", "#...#", "#...#", "#...#", "#...#", "#...#", ".###."}},
    {'P', {"####.", "#...#", "#...#", "####.", "#....", "#....", "#...."}},
    {'Q', {".###.", "#...#", "#...#", "#...#", "#.#.#", "#..#.", ".##.#"}},
    {'R', {"####.", "#...#", "#...#", "####.", "#.#..", "#..#.", "#...#"}},
    {'S', {".####", "#....", "#....", ".###.", "....#", "....#", "####."}},
    {'T', {"#####", "..#..", "..#..", "..#..", "..#..", "..#..", "..#.."}},
    {'U', {"#...#", "#...#", "#...#", "#...#", "#...#", "#...#", ".###."}},
    {'V', {"#...#", "#...#", "#...#", "#...#", "#...#", ".#.#.", "..#.."}},
    {'W', {"#...#", "#...#", "#...#", "#.#.#", "#.#.#", "#.#.#", ".#.#."}},
    {'X', {"#...#", "#...#", ".#.#.", "..#..", ".#.#.", "#...#", "#...#"}},
    {'Y', {"#...#", "#...#", ".#.#.", "..#..", "..#..", "..#..", "..#.."}},
    {'Z', {"#####", "....#", "...#.", "..#..", ".#...", "#....", "#####"}},
    {'a', {".....", ".....", ".###.", "....#", ".####", "#...#", ".####"}},
    {'b', {"#....", "#....", "####.", "#...#", "#...#", "#...#", "####."}},
    {'c', {".....", ".....", ".###.", "#....", "#....", "#...#", ".###."}},
    {'d', {"....#", "....#", ".####", "#...#", "#...#", "#...#", ".####"}},
    {'e', {".....", ".....", ".###.", "#...#", "#####", "#....", ".###."}},
    {'f', {"..##.", ".#..#", ".#...", "###..", ".#...", ".#...", ".#..."}},
    {'g', {".....", ".....", ".####", "#...#", "#...#", ".####", "....#", ".###."}},
    {'h', {"#....", "#....", "#.##.", "##..#", "#...#", "#...#", "#...#"}},
    {'i', {"..#..", ".....", ".##..", "..#..", "..#..", "..#..", ".###."}},
    {'j', {"...#.", ".....", "..##.", "...#.", "...#.", "...#.", "#..#.", ".##.."}},
    {'k', {"#....", "#....", "#..#.", "#.#..", "##...", "#.#..", "#..#."}},
    {'l', {".##..", "..#..", "..#..", "..#..", "..#..", "..#..", ".###."}},
    {'m', {".....", ".....", "##.#.", "#.#.#", "#.#.#", "#...#", "#...#"}},
    {'n', {".....", ".....", "#.##.", "##..#", "#...#", "#...#", "#...#"}},
    {'o', {".....", ".....", ".###.", "#...#", "#...#", "#...#", ".###."}},
    {'p', {".....", ".....", "####.", "#...#", "#...#", "####.", "#....", "#...."}},
    {'q', {".....", ".....", ".####", "#...#", "#...#", ".####", "....#", "....#"}},
    {'r', {".....", ".....", "#.##.", "##..#", "#....", "#....", "#...."}},
    {'s', {".....", ".....", ".####", "#....", ".###.", "....#", "####."}},
    {'t', {".#...", ".#...", "###..", ".#...", ".#...", ".#..#", "..##."}},
    {'u', {".....", ".....", "#...#", "#...#", "#...#", "#..##", ".##.#"}},
    {'v', {".....", ".....", "#...#", "#...#", "#...#", ".#.#.", "..#.."}},
    {'w', {".....", ".....", "#...#", "#...#", "#.#.#", "#.#.#", ".#.#."}},
    {'x', {".....", ".....", "#...#", ".#.#.", "..#..", ".#.#.", "#...#"}},
    {'y', {".....", ".....", "#...#", "#...#", "#...#", ".####", "....#", ".###."}},
    {'z', {".....", ".....", "#####", "...#.", "..#..", ".#...", "#####"}},
    {' ', {".....", ".....", ".....", ".....", ".....", ".....", "....."}},
    {'.', {".....", ".....", ".....", ".....", ".....", ".##..", ".##.."}},
    {',', {".....", ".....", ".....", ".....", ".##..", "..#..", ".#..."}},
    {':', {".....", ".##..", ".##..", ".....", ".##..", ".##..", "....."}},
    {';', {".....", ".##..", ".##..", ".....", ".##..", "..#..", ".#..."}},
    {'-', {".....", ".....", ".....", "#####", ".....", ".....", "....."}},
    {'+', {".....", "..#..", "..#..", "#####", "..#..", "..#..", "....."}},
    {'/', {".....", "....#", "...#.", "..#..", ".#...", "#....", "....."}},
    {'%', {"##...", "##..#", "...#.", "..#..", ".#...", "#..##", "...##"}},
    {'(', {"...#.", "..#..", ".#...", ".#...", ".#...", "..#..", "...#."}},
    {')', {".#...", "..#..", "...#.", "...#.", "...#.", "..#..", ".#..."}},
    {'[', {".###.", ".#...", ".#...", ".#...", ".#...", ".#...", ".###."}},
    {']', {".###.", "...#.", "...#.", "...#.", "...#.", "...#.", ".###."}},
    {'=', {".....", ".....", "#####", ".....", "#####", ".....", "....."}},
    {'_', {".....", ".....", ".....", ".....", ".....", ".....", "#####"}},
    {'#', {".#.#.", ".#.#.", "#####", ".#.#.", "#####", ".#.#.", ".#.#."}},
    {'*', {".....", "..#..", "#.#.#", ".###.", "#.#.#", "..#..", "....."}},
    {'<', {"...#.", "..#..", ".#...", "#....", ".#...", "..#..", "...#."}},
    {'>', {".#...", "..#..", "...#.", "....#", "...#.", "..#..", ".#..."}},
    {'\'', {"..#..", "..#..", ".#...", ".....", ".....", ".....", "....."}},
    {'"', {".#.#.", ".#.#.", ".....", ".....", ".....", ".....", "....."}},
    {'!', {"..#..", "..#..", "..#..", "..#..", "..#..", ".....", "..#.."}},
    {'?', {".###.", "#...#", "....#", "...#.", "..#..", ".....", "..#.."}},
    {'~', {".##..", "#..#.", "#..#.", ".##..", ".....", ".....", "....."}},  // degree sign
};

constexpr Glyph kUnknownGlyph = {'\0', {"#####", "#...#", "#...#", "#...#", "#...#", "#...#", "#####"}};

constexpr int kGlyphRows = 8;

/// Bit masks per ASCII code (bit 4 = leftmost column); index 128 holds the unknown-character box.
const std::array<std::array<std::uint8_t, kGlyphRows>, 129>& font_table() {
  static const auto table = [] {
    std::array<std::array<std::uint8_t, kGlyphRows>, 129> t{};
    auto encode = [](const Glyph& g) {
      std::array<std::uint8_t, kGlyphRows> rows{};
      for (int r = 0; r < kGlyphRows; ++r)
        for (int c = 0; c < 5 && g.rows[r]; ++c)
          if (g.rows[r][c] == '#') rows[std::size_t(r)] |= std::uint8_t(1u << (4 - c));
      return rows;
    };
    const auto unknown = encode(kUnknownGlyph);
    for (auto& row : t) row = unknown;
    for (const Glyph& g : kGlyphs) t[std::size_t(static_cast<unsigned char>(g.c))] = encode(g);
    return t;
  }();
  return table;
}

const std::array<std::uint8_t, kGlyphRows>& glyph_rows(char ch) {
  const unsigned char c = static_cast<unsigned char>(ch);
  return font_table()[c < 128 ? c : 128];
}

// ---- colour maps: 17 anchors each, sampled at t = i/16 from the published maps (data, not code),
// linearly interpolated to 256 entries. ----

using Anchors = std::array<Rgb, 17>;
constexpr Anchors kViridisAnchors = {{{68, 1, 84},    {72, 24, 106},  {71, 45, 123},  {66, 64, 134},  {59, 82, 139},
                                      {51, 99, 141},  {44, 114, 142}, {38, 130, 142}, {33, 145, 140}, {31, 160, 136},
                                      {40, 174, 128}, {63, 188, 115}, {94, 201, 98},  {132, 212, 75}, {173, 220, 48},
                                      {216, 226, 25}, {253, 231, 37}}};
constexpr Anchors kTurboAnchors = {{{48, 18, 59},    {64, 64, 162},   {70, 107, 227}, {66, 148, 255}, {40, 188, 235},
                                    {24, 221, 194},  {50, 242, 152},  {109, 254, 98}, {164, 252, 60}, {205, 236, 52},
                                    {238, 207, 58},  {253, 172, 52},  {251, 126, 33}, {235, 80, 14},  {208, 47, 5},
                                    {169, 22, 1},    {122, 4, 3}}};
constexpr Anchors kInfernoAnchors = {{{0, 0, 4},       {11, 7, 36},    {33, 12, 74},   {61, 9, 101},   {87, 16, 110},
                                      {113, 25, 110},  {138, 34, 106}, {163, 44, 97},  {188, 55, 84},  {210, 70, 68},
                                      {228, 90, 49},   {241, 115, 29}, {249, 142, 9},  {252, 172, 17}, {249, 203, 53},
                                      {242, 234, 105}, {252, 255, 164}}};

using Table = std::array<Rgb, 256>;

Table build_table(const Anchors& a) {
  Table t{};
  for (int i = 0; i < 256; ++i) {
    const double pos = i * 16.0 / 255.0;
    const int k = std::min(int(pos), 15);
    const double f = pos - k;
    auto mix = [&](std::uint8_t p, std::uint8_t q) { return std::uint8_t(std::lround(p + (double(q) - p) * f)); };
    t[std::size_t(i)] = {mix(a[std::size_t(k)].r, a[std::size_t(k) + 1].r), mix(a[std::size_t(k)].g, a[std::size_t(k) + 1].g),
                         mix(a[std::size_t(k)].b, a[std::size_t(k) + 1].b)};
  }
  return t;
}

const Table& table_of(Colormap map) {
  static const Table gray = [] {
    Table t{};
    for (int i = 0; i < 256; ++i) t[std::size_t(i)] = {std::uint8_t(i), std::uint8_t(i), std::uint8_t(i)};
    return t;
  }();
  static const Table viridis = build_table(kViridisAnchors);
  static const Table turbo = build_table(kTurboAnchors);
  static const Table inferno = build_table(kInfernoAnchors);
  switch (map) {
    case Colormap::kGray: return gray;
    case Colormap::kViridis: return viridis;
    case Colormap::kTurbo: return turbo;
    case Colormap::kInferno: return inferno;
  }
  return gray;
}

}  // namespace

Rgb distinct_color(std::size_t i) noexcept {
  // A 20-colour qualitative palette ordered so that neighbours differ strongly.
  static constexpr Rgb kPalette[20] = {
      {230, 25, 75},   {60, 180, 75},  {255, 225, 25}, {0, 130, 200},  {245, 130, 48},
      {145, 30, 180},  {70, 240, 240}, {240, 50, 230}, {210, 245, 60}, {250, 190, 212},
      {0, 128, 128},   {220, 190, 255}, {170, 110, 40}, {255, 250, 200}, {128, 0, 0},
      {170, 255, 195}, {128, 128, 0},  {255, 215, 180}, {0, 0, 128},    {255, 255, 255}};
  return kPalette[i % 20];
}

// ---- canvases ----

Image make_rgb(const Image& image) {
  if (image.width <= 0 || image.height <= 0 || image.channels < 1 || image.channels > 4 ||
      image.data.size() != image.pixel_count() * std::size_t(image.channels) * bytes_per_sample(image.type))
    throw Error(ErrorCode::kInvalidArgument, "make_rgb: not a valid image (size, channels or data length)");
  Image out = Image::allocate(image.width, image.height, 3, PixelType::kU8);
  const std::size_t n = image.pixel_count(), c = std::size_t(image.channels);
  auto sample = [&](std::size_t i) -> std::uint8_t {
    switch (image.type) {
      case PixelType::kU8: return image.data[i];
      case PixelType::kU16: return std::uint8_t((unsigned(image.as<std::uint16_t>()[i]) * 255u + 32767u) / 65535u);
      case PixelType::kF32: {
        const float v = image.as<float>()[i];
        return std::uint8_t(std::lround(v > 0.0f ? (v < 1.0f ? v * 255.0f : 255.0f) : 0.0f));
      }
    }
    return 0;
  };
  for (std::size_t p = 0; p < n; ++p) {
    std::uint8_t* d = out.data.data() + p * 3;
    if (c >= 3) {
      d[0] = sample(p * c);
      d[1] = sample(p * c + 1);
      d[2] = sample(p * c + 2);
    } else {
      d[0] = d[1] = d[2] = sample(p * c);
    }
  }
  return out;
}

Image make_rgb(const ImageF& gray, float lo, float hi) {
  if (gray.width <= 0 || gray.height <= 0 || gray.data.size() != std::size_t(gray.width) * std::size_t(gray.height))
    throw Error(ErrorCode::kInvalidArgument, "make_rgb: not a valid float image");
  Image out = Image::allocate(gray.width, gray.height, 3, PixelType::kU8);
  const float span = hi - lo;
  for (std::size_t p = 0; p < gray.data.size(); ++p) {
    float t = span != 0.0f ? (gray.data[p] - lo) / span : 0.0f;
    t = t > 0.0f ? (t < 1.0f ? t : 1.0f) : 0.0f;  // NaN -> 0
    const auto v = std::uint8_t(std::lround(t * 255.0f));
    out.data[p * 3] = out.data[p * 3 + 1] = out.data[p * 3 + 2] = v;
  }
  return out;
}

Image blank_rgb(int width, int height, Rgb fill) {
  Image out = Image::allocate(width, height, 3, PixelType::kU8);
  for (std::size_t p = 0; p < out.pixel_count(); ++p) {
    out.data[p * 3] = fill.r;
    out.data[p * 3 + 1] = fill.g;
    out.data[p * 3 + 2] = fill.b;
  }
  return out;
}

Image hconcat(const Image& a, const Image& b, Rgb fill) {
  require_canvas(a, "hconcat");
  require_canvas(b, "hconcat");
  Image out = blank_rgb(a.width + b.width, std::max(a.height, b.height), fill);
  for (int y = 0; y < a.height; ++y)
    std::copy_n(a.data.data() + std::size_t(y) * a.row_bytes(), a.row_bytes(),
                out.data.data() + std::size_t(y) * out.row_bytes());
  for (int y = 0; y < b.height; ++y)
    std::copy_n(b.data.data() + std::size_t(y) * b.row_bytes(), b.row_bytes(),
                out.data.data() + std::size_t(y) * out.row_bytes() + a.row_bytes());
  return out;
}

// ---- primitives ----

void blend_pixel(Image& canvas, int x, int y, Rgb color, float alpha) {
  require_canvas(canvas, "blend_pixel");
  put(canvas, x, y, color, alpha);
}

void draw_line(Image& canvas, Point2 a, Point2 b, Rgb color, double thickness, bool antialias) {
  require_canvas(canvas, "draw_line");
  if (!std::isfinite(a.x) || !std::isfinite(a.y) || !std::isfinite(b.x) || !std::isfinite(b.y)) return;
  const double h = std::max(thickness, 1.0) / 2.0;
  const double dx = b.x - a.x, dy = b.y - a.y;
  const double len2 = dx * dx + dy * dy;
  // Distance from a pixel centre to the segment (round caps).
  auto dist = [&](double px, double py) {
    double t = len2 > 0 ? ((px - a.x) * dx + (py - a.y) * dy) / len2 : 0.0;
    t = std::clamp(t, 0.0, 1.0);
    return std::hypot(px - (a.x + t * dx), py - (a.y + t * dy));
  };
  // Walk the major axis; for each step, visit the few minor-axis pixels near the line, each once.
  const bool steep = std::fabs(dy) > std::fabs(dx);
  const double reach = h + 1.5;
  const double band = reach * 1.5;  // minor-axis extent of the band at one major coordinate, >= reach / cos(45°)
  const double major0 = steep ? std::min(a.y, b.y) : std::min(a.x, b.x);
  const double major1 = steep ? std::max(a.y, b.y) : std::max(a.x, b.x);
  const int limit_major = steep ? canvas.height - 1 : canvas.width - 1;
  const int limit_minor = steep ? canvas.width - 1 : canvas.height - 1;
  const int m0 = std::max(0, int(std::floor(major0 - reach)));
  const int m1 = std::min(limit_major, int(std::ceil(major1 + reach)));
  const double d_major = steep ? dy : dx, d_minor = steep ? dx : dy;
  const double start_major = steep ? a.y : a.x, start_minor = steep ? a.x : a.y;
  for (int m = m0; m <= m1; ++m) {
    double t = d_major != 0 ? (m - start_major) / d_major : 0.0;
    t = std::clamp(t, 0.0, 1.0);
    const double centre = start_minor + t * d_minor;
    const int n0 = std::max(0, int(std::floor(centre - band)));
    const int n1 = std::min(limit_minor, int(std::ceil(centre + band)));
    for (int n = n0; n <= n1; ++n) {
      const int x = steep ? n : m, y = steep ? m : n;
      const float cov = coverage(dist(x, y), h, antialias);
      if (cov > 0.0f) put(canvas, x, y, color, cov);
    }
  }
}

void draw_circle(Image& canvas, Point2 centre, double radius, Rgb color, double thickness, bool antialias) {
  require_canvas(canvas, "draw_circle");
  if (!std::isfinite(centre.x) || !std::isfinite(centre.y) || !std::isfinite(radius) || radius < 0) return;
  const double h = std::max(thickness, 1.0) / 2.0;
  const double outer = radius + h + 1.0, inner = radius - h - 1.0;
  const int y0 = std::max(0, int(std::floor(centre.y - outer))), y1 = std::min(canvas.height - 1, int(std::ceil(centre.y + outer)));
  for (int y = y0; y <= y1; ++y) {
    const double ry = y - centre.y;
    const double xo = std::sqrt(std::max(0.0, outer * outer - ry * ry));
    const double xi = inner > 0 && inner * inner > ry * ry ? std::sqrt(inner * inner - ry * ry) : -1.0;
    // Pixels from xa to xb (inclusive, clipped); returns xb so that the next span starts after it.
    auto span = [&](int xa, int xb) {
      xa = std::max(0, xa);
      xb = std::min(canvas.width - 1, xb);
      for (int x = xa; x <= xb; ++x) {
        const double d = std::fabs(std::hypot(x - centre.x, ry) - radius);
        const float cov = coverage(d, h, antialias);
        if (cov > 0.0f) put(canvas, x, y, color, cov);
      }
    };
    const int left = int(std::floor(centre.x - xo)), right = int(std::ceil(centre.x + xo));
    if (xi < 0) {
      span(left, right);
    } else {
      // Left and right of the hole (pixels inside the inner radius get no ink); never overlapping.
      const int left_end = int(std::floor(centre.x - xi));
      span(left, left_end);
      span(std::max(left_end + 1, int(std::ceil(centre.x + xi))), right);
    }
  }
}

void fill_circle(Image& canvas, Point2 centre, double radius, Rgb color, bool antialias) {
  require_canvas(canvas, "fill_circle");
  if (!std::isfinite(centre.x) || !std::isfinite(centre.y) || !std::isfinite(radius) || radius < 0) return;
  const double outer = radius + 1.0;
  const int y0 = std::max(0, int(std::floor(centre.y - outer))), y1 = std::min(canvas.height - 1, int(std::ceil(centre.y + outer)));
  const int x0 = std::max(0, int(std::floor(centre.x - outer))), x1 = std::min(canvas.width - 1, int(std::ceil(centre.x + outer)));
  for (int y = y0; y <= y1; ++y)
    for (int x = x0; x <= x1; ++x) {
      const double d = std::hypot(x - centre.x, y - centre.y);
      const float cov = antialias ? float(std::clamp(radius + 0.5 - d, 0.0, 1.0)) : (d <= radius ? 1.0f : 0.0f);
      if (cov > 0.0f) put(canvas, x, y, color, cov);
    }
}

void fill_rect(Image& canvas, int x0, int y0, int width, int height, Rgb color, float alpha) {
  require_canvas(canvas, "fill_rect");
  const int xa = std::max(0, x0), ya = std::max(0, y0);
  const long xb = std::min<long>(canvas.width, long(x0) + width), yb = std::min<long>(canvas.height, long(y0) + height);
  for (int y = ya; y < yb; ++y)
    for (int x = xa; x < xb; ++x) put(canvas, x, y, color, alpha);
}

void draw_rect(Image& canvas, int x0, int y0, int width, int height, Rgb color, int thickness) {
  require_canvas(canvas, "draw_rect");
  if (width <= 0 || height <= 0) return;
  const int t = std::max(1, std::min({thickness, (width + 1) / 2, (height + 1) / 2}));
  fill_rect(canvas, x0, y0, width, t, color);
  fill_rect(canvas, x0, y0 + height - t, width, t, color);
  fill_rect(canvas, x0, y0 + t, t, height - 2 * t, color);
  fill_rect(canvas, x0 + width - t, y0 + t, t, height - 2 * t, color);
}

void draw_polygon(Image& canvas, const Point2* points, std::size_t count, Rgb color, double thickness) {
  require_canvas(canvas, "draw_polygon");
  for (std::size_t i = 0; i < count; ++i) draw_line(canvas, points[i], points[(i + 1) % count], color, thickness);
}

// ---- text ----

void draw_text(Image& canvas, int x, int y, std::string_view text, Rgb color, int scale) {
  require_canvas(canvas, "draw_text");
  scale = std::max(1, scale);
  int cx = x, cy = y;
  for (char ch : text) {
    if (ch == '\n') {
      cx = x;
      cy += kGlyphHeight * scale;
      continue;
    }
    const auto& rows = glyph_rows(ch);
    for (int r = 0; r < kGlyphRows; ++r)
      for (int c = 0; c < 5; ++c)
        if (rows[std::size_t(r)] & (1u << (4 - c))) fill_rect(canvas, cx + c * scale, cy + r * scale, scale, scale, color);
    cx += kGlyphWidth * scale;
  }
}

int text_width(std::string_view text, int scale) noexcept {
  scale = std::max(1, scale);
  int best = 0, cur = 0;
  for (char ch : text) {
    if (ch == '\n') {
      cur = 0;
      continue;
    }
    ++cur;
    best = std::max(best, cur);
  }
  // The last glyph's spacing column is not part of the ink.
  return best > 0 ? (best * kGlyphWidth - 1) * scale : 0;
}

int text_height(std::string_view text, int scale) noexcept {
  scale = std::max(1, scale);
  if (text.empty()) return 0;
  const int lines = 1 + int(std::count(text.begin(), text.end(), '\n'));
  return lines * kGlyphHeight * scale;  // the last row holds descenders (g j p q y)
}

void draw_label(Image& canvas, int x, int y, std::string_view text, Rgb color, Rgb background, int scale) {
  require_canvas(canvas, "draw_label");
  scale = std::max(1, scale);
  fill_rect(canvas, x, y, text_width(text, scale) + 2 * scale, text_height(text, scale) + 2 * scale, background);
  draw_text(canvas, x + scale, y + scale, text, color, scale);
}

Image add_title(const Image& image, std::string_view title, int scale) {
  scale = std::max(1, scale);
  const Image rgb = make_rgb(image);
  // Lines cut to the image's width.
  const int max_chars = std::max(4, (rgb.width - 4 * scale) / (kGlyphWidth * scale));
  std::string text;
  std::size_t start = 0;
  while (start <= title.size()) {
    const std::size_t end = std::min(title.find('\n', start), title.size());
    std::string line(title.substr(start, end - start));
    if (int(line.size()) > max_chars) line = line.substr(0, std::size_t(max_chars - 3)) + "...";
    text += (text.empty() && start == 0 ? "" : "\n") + line;
    start = end + 1;
  }
  const int strip = text_height(text, scale) + 4 * scale;
  Image out = blank_rgb(rgb.width, rgb.height + strip, Rgb{24, 24, 24});
  std::copy(rgb.data.begin(), rgb.data.end(), out.data.begin() + std::ptrdiff_t(std::size_t(strip) * out.row_bytes()));
  draw_text(out, 2 * scale, 2 * scale, text, colors::kWhite, scale);
  return out;
}

// ---- colour maps ----

Colormap parse_colormap(std::string_view name) {
  std::string s(name);
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  if (s == "gray" || s == "grey") return Colormap::kGray;
  if (s == "viridis") return Colormap::kViridis;
  if (s == "turbo") return Colormap::kTurbo;
  if (s == "inferno") return Colormap::kInferno;
  throw Error(ErrorCode::kInvalidArgument,
              "unknown colour map '" + std::string(name) + "' (expected gray, viridis, turbo or inferno)");
}

Rgb colormap_color(Colormap map, double t) noexcept {
  if (std::isnan(t)) return colors::kBlack;
  t = std::clamp(t, 0.0, 1.0);
  return table_of(map)[std::size_t(std::lround(t * 255.0))];
}

Image apply_colormap(const ImageF& values, float lo, float hi, Colormap map, Rgb nan_color) {
  if (values.width <= 0 || values.height <= 0 ||
      values.data.size() != std::size_t(values.width) * std::size_t(values.height))
    throw Error(ErrorCode::kInvalidArgument, "apply_colormap: not a valid float image");
  Image out = Image::allocate(values.width, values.height, 3, PixelType::kU8);
  const double span = double(hi) - double(lo);
  for (std::size_t p = 0; p < values.data.size(); ++p) {
    const float v = values.data[p];
    const Rgb c = std::isnan(v) ? nan_color : colormap_color(map, span != 0 ? (double(v) - lo) / span : 0.0);
    out.data[p * 3] = c.r;
    out.data[p * 3 + 1] = c.g;
    out.data[p * 3 + 2] = c.b;
  }
  return out;
}

int draw_colorbar(Image& canvas, int x0, int y0, int width, int height, Colormap map, double lo, double hi,
                  std::string_view title, int ticks, Rgb text_color, int scale) {
  require_canvas(canvas, "draw_colorbar");
  if (width <= 0 || height <= 1) return 0;
  scale = std::max(1, scale);
  ticks = std::max(2, ticks);
  for (int r = 0; r < height; ++r) {
    const double t = 1.0 - double(r) / double(height - 1);  // hi at the top
    fill_rect(canvas, x0, y0 + r, width, 1, colormap_color(map, t));
  }
  draw_rect(canvas, x0 - 1, y0 - 1, width + 2, height + 2, text_color, 1);
  int used = width + 1;
  const int tick_len = 3 * scale;
  for (int i = 0; i < ticks; ++i) {
    const double f = double(i) / double(ticks - 1);
    const int ty = y0 + int(std::lround((1.0 - f) * (height - 1)));
    fill_rect(canvas, x0 + width + 1, ty, tick_len, std::max(1, scale / 2), text_color);
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3g", lo + f * (hi - lo));
    const int th = text_height(buf, scale);
    draw_text(canvas, x0 + width + 2 + tick_len + scale, ty - th / 2, buf, text_color, scale);
    used = std::max(used, width + 2 + tick_len + scale + text_width(buf, scale));
  }
  if (!title.empty()) draw_text(canvas, x0, y0 - 3 * scale - text_height(title, scale), title, text_color, scale);
  return used;
}

// ---- keypoints ----

namespace {
Image draw_keypoints_impl(const Image& image, const Features& features, const Rgb* one_color) {
  Image out = make_rgb(image);
  for (std::size_t i = 0; i < features.keypoints.size(); ++i) {
    const Keypoint& k = features.keypoints[i];
    const Rgb c = one_color ? *one_color : distinct_color(i);
    const double r = std::max(double(k.size) / 2.0, 1.5);
    const Point2 p{k.x, k.y};
    draw_circle(out, p, r, c, 1.0, true);
    if (k.angle >= 0.0f) {  // OpenCV marks "no orientation" with -1
      const double a = double(k.angle) * 3.14159265358979323846 / 180.0;
      draw_line(out, p, {p.x + r * std::cos(a), p.y + r * std::sin(a)}, c, 1.0, true);
    }
  }
  return out;
}
}  // namespace

Image draw_keypoints(const Image& image, const Features& features) {
  return draw_keypoints_impl(image, features, nullptr);
}

Image draw_keypoints(const Image& image, const Features& features, Rgb color) {
  return draw_keypoints_impl(image, features, &color);
}

}  // namespace spectrasift

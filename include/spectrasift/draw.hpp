// spectrasift/draw.hpp — drawing on RGB images for pictures of results: keypoints, matches, warped
// overlays, spectral heat maps with legends. Everything draws on a 3-channel U8 image (Image with
// channels == 3, type kU8, R G B order); calls on any other image throw Error(kInvalidArgument).
// Coordinates follow the library (DESIGN.md): (0, 0) is the centre of the top-left pixel, x right,
// y down. Shapes are clipped at the image border, so any coordinates are safe.
#pragma once

#include <cstdint>
#include <string_view>

#include "spectrasift/types.hpp"

namespace spectrasift {

struct Rgb {
  std::uint8_t r = 0, g = 0, b = 0;
};

namespace colors {
inline constexpr Rgb kBlack{0, 0, 0};
inline constexpr Rgb kWhite{255, 255, 255};
inline constexpr Rgb kRed{230, 25, 75};
inline constexpr Rgb kGreen{60, 180, 75};
inline constexpr Rgb kBlue{0, 130, 200};
inline constexpr Rgb kYellow{255, 225, 25};
inline constexpr Rgb kCyan{70, 240, 240};
inline constexpr Rgb kMagenta{240, 50, 230};
inline constexpr Rgb kOrange{245, 130, 48};
}  // namespace colors

/// One of 20 well-separated colours, cycling with i (for match lines, classes, keypoints).
Rgb distinct_color(std::size_t i) noexcept;

// ---- making canvases --------------------------------------------------------------------------------

/// An RGB U8 copy of any image: grey is replicated, alpha is dropped (not blended), U16 is scaled by
/// 1/257 and F32 (nominally 0..1) by 255, both rounded and clamped.
Image make_rgb(const Image& image);
/// An RGB U8 image from a float grey image, mapping [lo, hi] linearly to 0..255 (clamped; NaN -> 0).
Image make_rgb(const ImageF& gray, float lo = 0.0f, float hi = 255.0f);
/// A width x height RGB image filled with one colour.
Image blank_rgb(int width, int height, Rgb fill = colors::kBlack);
/// a and b side by side (a on the left), tops aligned, the shorter one padded with `fill`. Both RGB U8.
/// A point (x, y) of b is at (x + a.width, y) in the result.
Image hconcat(const Image& a, const Image& b, Rgb fill = colors::kBlack);

// ---- primitives -------------------------------------------------------------------------------------

/// Sets one pixel, blended: result = (1 - alpha) * old + alpha * colour. Ignores pixels outside.
void blend_pixel(Image& canvas, int x, int y, Rgb color, float alpha = 1.0f);
/// A straight segment from a to b, `thickness` pixels wide (>= 1). With antialias, pixel coverage is
/// estimated from the distance of the pixel centre to the segment (a 1-pixel ramp at the edges).
void draw_line(Image& canvas, Point2 a, Point2 b, Rgb color, double thickness = 1.0, bool antialias = true);
/// A circle outline of the given radius (pixels) and line thickness around centre.
void draw_circle(Image& canvas, Point2 centre, double radius, Rgb color, double thickness = 1.0,
                 bool antialias = true);
/// A filled disc.
void fill_circle(Image& canvas, Point2 centre, double radius, Rgb color, bool antialias = true);
/// The pixels x0..x0+width-1, y0..y0+height-1 filled (blended with alpha).
void fill_rect(Image& canvas, int x0, int y0, int width, int height, Rgb color, float alpha = 1.0f);
/// The outline of the same rectangle, `thickness` pixels wide, drawn inside it.
void draw_rect(Image& canvas, int x0, int y0, int width, int height, Rgb color, int thickness = 1);
/// A closed polygon through the points (e.g. the outline of a warped image: its four corners).
void draw_polygon(Image& canvas, const Point2* points, std::size_t count, Rgb color, double thickness = 1.0);

// ---- text -------------------------------------------------------------------------------------------

/// Pixel size of a glyph cell of the built-in 5x7 font at scale 1: one column of spacing, and an 8th row that
/// separates lines and holds the descenders of g j p q y.
inline constexpr int kGlyphWidth = 6;
inline constexpr int kGlyphHeight = 8;
/// Draws `text` with its top-left corner at (x, y), each font pixel a scale x scale block. The font has
/// digits, A-Z, a-z, space and . , : ; - + / % ( ) [ ] = _ # * < > ' " ! ?
/// and the degree sign written as '~'; other characters draw as a hollow box. '\n' starts a new line.
void draw_text(Image& canvas, int x, int y, std::string_view text, Rgb color, int scale = 1);
/// The same on a filled background box with a 1*scale pixel margin (readable on any image).
void draw_label(Image& canvas, int x, int y, std::string_view text, Rgb color, Rgb background, int scale = 1);
/// `image` (any type, shown as make_rgb does) with a strip above it holding `title`, one line per '\n', in
/// white on a dark background; a line wider than the image is cut and ends with "...".
Image add_title(const Image& image, std::string_view title, int scale = 1);
/// Width and height in pixels that draw_text will use (widest line; number of lines x kGlyphHeight, the
/// descender row of the last line included).
int text_width(std::string_view text, int scale = 1) noexcept;
int text_height(std::string_view text, int scale = 1) noexcept;

// ---- colour maps ------------------------------------------------------------------------------------

enum class Colormap {
  kGray,     ///< black to white
  kViridis,  ///< perceptually uniform, dark blue -> green -> yellow (matplotlib's default, sampled)
  kTurbo,    ///< rainbow-like, dark blue -> green -> red (Google's Turbo, sampled)
  kInferno,  ///< black -> red -> pale yellow
};

/// Parses "gray", "viridis", "turbo" or "inferno"; throws Error(kInvalidArgument) otherwise.
Colormap parse_colormap(std::string_view name);
/// The colour at t in [0, 1] (clamped), from a 256-entry table; NaN gives black.
Rgb colormap_color(Colormap map, double t) noexcept;
/// A heat map: value v maps to colormap_color((v - lo) / (hi - lo)); NaN pixels get `nan_color`.
/// When lo == hi the whole image takes the colour of t = 0.
Image apply_colormap(const ImageF& values, float lo, float hi, Colormap map, Rgb nan_color = colors::kBlack);
/// A vertical colour bar legend in the rectangle (x0, y0, width, height): hi at the top, lo at the
/// bottom, with `ticks` (>= 2) labelled tick marks on its right side (values printed with %.3g) and an
/// optional title above it. Returns the width actually used including the labels.
int draw_colorbar(Image& canvas, int x0, int y0, int width, int height, Colormap map, double lo, double hi,
                  std::string_view title = {}, int ticks = 5, Rgb text_color = colors::kWhite, int scale = 1);

// ---- features ---------------------------------------------------------------------------------------

/// OpenCV's DRAW_RICH_KEYPOINTS: per keypoint a circle of radius size/2 around (x, y) and a line
/// from the centre to the circle in the direction of `angle` (degrees, y down, so clockwise on
/// screen). Colours cycle through distinct_color. The input may be any image (make_rgb is applied).
Image draw_keypoints(const Image& image, const Features& features);
/// The same with one colour for every keypoint.
Image draw_keypoints(const Image& image, const Features& features, Rgb color);

}  // namespace spectrasift

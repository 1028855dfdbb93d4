// In-memory cube views (spectrasift/cube.hpp): the view of an opened ENVI cube, and the checks that turn
// a CubeRef into the backends' detail::CubeView.
#include "spectrasift/cube.hpp"

#include <cmath>
#include <cstdint>
#include <string>

#include "core/spectral_backend.hpp"
#include "spectrasift/error.hpp"

namespace spectrasift {

CubeRef cube_ref(const EnviCube& cube) {
  const EnviHeader& h = cube.header();
  CubeRef r;
  r.data = cube.data();
  r.size_bytes = cube.data_bytes();
  r.type = h.data_type;
  r.samples = h.samples;
  r.lines = h.lines;
  r.bands = h.bands;
  r.interleave = h.interleave;
  r.line_stride = cube.line_stride();
  r.sample_stride = cube.sample_stride();
  r.band_stride = cube.band_stride();
  r.big_endian = h.big_endian;
  r.wavelength = h.wavelength;
  r.bbl = h.bbl;
  r.data_ignore_value = h.data_ignore_value;
  r.reflectance_scale_factor = h.reflectance_scale_factor;
  r.name = cube.header_path().string();
  return r;
}

namespace detail {

namespace {

struct Strides {
  std::size_t line, sample, band;
};

/// The dense strides of an interleave.
Strides dense(Interleave il, std::size_t s, std::size_t l, std::size_t b) {
  switch (il) {
    case Interleave::kBsq: return {s, 1, s * l};
    case Interleave::kBil: return {s * b, 1, s};
    case Interleave::kBip: return {s * b, b, 1};
  }
  return {0, 0, 0};
}

/// True when `given` equals the dense strides of `il`; a dimension of extent 1 matches any stride.
bool matches(const Strides& given, Interleave il, std::size_t s, std::size_t l, std::size_t b) {
  const Strides d = dense(il, s, l, b);
  return (l == 1 || given.line == d.line) && (s == 1 || given.sample == d.sample) && (b == 1 || given.band == d.band);
}

[[noreturn]] void bad(const CubeRef& c, const std::string& what) {
  throw Error(ErrorCode::kInvalidArgument, "spectral_match: " + c.name + ": " + what);
}

}  // namespace

CubeView make_cube_view(const CubeRef& c) {
  if (!c.data) bad(c, "the data pointer is null");
  if (c.samples <= 0 || c.lines <= 0 || c.bands <= 0)
    bad(c, "the shape must be positive, got " + std::to_string(c.samples) + " samples x " + std::to_string(c.lines) +
               " lines x " + std::to_string(c.bands) + " bands");
  const std::size_t es = sample_size(c.type);
  if (es == 0) bad(c, "unknown sample type code " + std::to_string(int(c.type)));
  if (int(c.interleave) > int(Interleave::kBip)) bad(c, "unknown interleave code " + std::to_string(int(c.interleave)));
  const std::size_t s = std::size_t(c.samples), l = std::size_t(c.lines), b = std::size_t(c.bands);
  std::size_t elements = 0, bytes = 0;
  if (__builtin_mul_overflow(s, l, &elements) || __builtin_mul_overflow(elements, b, &elements) ||
      __builtin_mul_overflow(elements, es, &bytes))
    bad(c, "the shape overflows the address space");

  CubeView v;
  v.data = static_cast<const std::uint8_t*>(c.data);
  v.type = c.type;
  v.big_endian = c.big_endian;
  v.samples = c.samples;
  v.lines = c.lines;
  v.bands = c.bands;
  const bool no_strides = c.line_stride == 0 && c.sample_stride == 0 && c.band_stride == 0;
  if (no_strides) {
    v.interleave = c.interleave;
  } else {
    if (c.line_stride == 0 || c.sample_stride == 0 || c.band_stride == 0)
      bad(c, "give all three strides or none (a zero stride makes elements overlap)");
    const Strides given{c.line_stride, c.sample_stride, c.band_stride};
    bool found = false;
    for (Interleave il : {Interleave::kBsq, Interleave::kBil, Interleave::kBip})
      if (!found && matches(given, il, s, l, b)) v.interleave = il, found = true;
    if (!found) {
      // Tell overlapping strides (two elements at one address) from padded or reordered ones.
      const std::string shown = " (line " + std::to_string(c.line_stride) + ", sample " + std::to_string(c.sample_stride) +
                                ", band " + std::to_string(c.band_stride) + " elements)";
      std::size_t span[3][2] = {{c.line_stride, l}, {c.sample_stride, s}, {c.band_stride, b}};
      for (int i = 0; i < 3; ++i)  // sort by stride
        for (int j = i + 1; j < 3; ++j)
          if (span[j][0] < span[i][0]) std::swap(span[i], span[j]);
      for (int i = 0; i + 1 < 3; ++i)
        if (span[i][1] > 1 && span[i + 1][1] > 1 && span[i + 1][0] < span[i][0] * span[i][1])
          bad(c, "the strides overlap: two elements share memory" + shown);
      bad(c, "the strides" + shown + " are not a dense BSQ, BIL or BIP layout; copy the cube into a dense array first");
    }
  }
  const Strides d = dense(v.interleave, s, l, b);
  v.line_stride = d.line;
  v.sample_stride = d.sample;
  v.band_stride = d.band;
  if (c.size_bytes < bytes)
    bad(c, "the layout reaches " + std::to_string(bytes) + " bytes but the buffer holds " + std::to_string(c.size_bytes));
  if (!c.bbl.empty() && c.bbl.size() != b)
    bad(c, "the bad band list has " + std::to_string(c.bbl.size()) + " entries for " + std::to_string(b) + " bands");
  if (!c.wavelength.empty() && c.wavelength.size() != b)
    bad(c, "the wavelength list has " + std::to_string(c.wavelength.size()) + " entries for " + std::to_string(b) +
               " bands");
  if (c.reflectance_scale_factor && !(std::isfinite(*c.reflectance_scale_factor) && *c.reflectance_scale_factor != 0))
    bad(c, "the reflectance scale factor must be finite and non-zero");
  v.scale = c.reflectance_scale_factor ? float(1.0 / *c.reflectance_scale_factor) : 1.0f;
  v.has_ignore = c.data_ignore_value.has_value();
  v.ignore_value = c.data_ignore_value.value_or(0.0);
  return v;
}

}  // namespace detail

double cube_value(const CubeRef& c, int line, int sample, int band) noexcept {
  std::size_t ls = c.line_stride, ss = c.sample_stride, bs = c.band_stride;
  if (ls == 0 && ss == 0 && bs == 0) {
    const auto d = detail::dense(c.interleave, std::size_t(c.samples), std::size_t(c.lines), std::size_t(c.bands));
    ls = d.line;
    ss = d.sample;
    bs = d.band;
  }
  const std::size_t e = std::size_t(line) * ls + std::size_t(sample) * ss + std::size_t(band) * bs;
  return sample_value(static_cast<const std::uint8_t*>(c.data) + e * sample_size(c.type), c.type, c.big_endian);
}

}  // namespace spectrasift

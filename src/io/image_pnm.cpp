// Netpbm PGM/PPM: P2/P5 (grey) and P3/P6 (RGB), ASCII or binary, maxval 1..65535, '#' comments in
// the header. maxval <= 255 gives U8, larger gives U16 (binary samples are 2 bytes, big-endian).
// Samples are rescaled to the full range of the type when maxval is not 255 / 65535, so that an
// image with maxval 15 or 1023 looks the same as the file's viewer shows it.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "io/image_codecs.hpp"
#include "io/temp_files.hpp"
#include "spectrasift/error.hpp"
#include "spectrasift/io.hpp"

namespace spectrasift::io_detail {
namespace {

class PnmParser {
 public:
  PnmParser(const std::filesystem::path& path, const std::vector<std::uint8_t>& bytes) : path_(path), b_(bytes) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw Error(ErrorCode::kBadFormat, path_.string() + ": " + what + " (line " + std::to_string(line_) + ")");
  }

  /// Skips whitespace and comments.
  void skip_space() {
    while (pos_ < b_.size()) {
      const char c = char(b_[pos_]);
      if (c == '#') {
        while (pos_ < b_.size() && b_[pos_] != '\n') ++pos_;
      } else if (c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f') {
        if (c == '\n') ++line_;
        ++pos_;
      } else {
        return;
      }
    }
  }

  /// Reads a non-negative decimal number (the header fields and ASCII samples).
  std::uint64_t number(const char* what) {
    skip_space();
    if (pos_ >= b_.size()) fail(std::string("file ends before the ") + what);
    if (b_[pos_] < '0' || b_[pos_] > '9') fail(std::string("expected a number for the ") + what);
    std::uint64_t v = 0;
    while (pos_ < b_.size() && b_[pos_] >= '0' && b_[pos_] <= '9') {
      v = v * 10 + unsigned(b_[pos_] - '0');
      if (v > 0xFFFFFFFFull) fail(std::string("the ") + what + " is too large");
      ++pos_;
    }
    if (pos_ < b_.size() && !is_space(b_[pos_]) && b_[pos_] != '#')
      fail(std::string("unexpected character after the ") + what);
    return v;
  }

  static bool is_space(std::uint8_t c) {
    return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f';
  }

  std::size_t pos_ = 2;
  int line_ = 1;

 private:
  const std::filesystem::path& path_;
  const std::vector<std::uint8_t>& b_;
};

}  // namespace

Image decode_pnm(const std::filesystem::path& path, const std::vector<std::uint8_t>& bytes,
                 const ImageLimits& limits) {
  const char kind = char(bytes[1]);
  if (kind == '1' || kind == '4')
    throw Error(ErrorCode::kUnsupported, path.string() + ": PBM bitmaps (P1/P4) are not supported");
  if (kind == '7') throw Error(ErrorCode::kUnsupported, path.string() + ": PAM (P7) images are not supported");
  const bool ascii = kind == '2' || kind == '3';
  const int channels = (kind == '3' || kind == '6') ? 3 : 1;
  PnmParser p(path, bytes);
  if (bytes.size() > 2 && !PnmParser::is_space(bytes[2]) && bytes[2] != '#') p.fail("bad magic number");
  const std::uint64_t width = p.number("width");
  const std::uint64_t height = p.number("height");
  const std::uint64_t maxval = p.number("maxval");
  if (maxval < 1 || maxval > 65535) p.fail("maxval " + std::to_string(maxval) + " is outside 1..65535");
  const PixelType type = maxval > 255 ? PixelType::kU16 : PixelType::kU8;
  const std::size_t nbytes = check_image_shape(path, std::int64_t(width), std::int64_t(height), channels, type, limits);
  const std::size_t nsamples = std::size_t(width) * std::size_t(height) * std::size_t(channels);
  const int bps = maxval > 255 ? 2 : 1;

  if (ascii) {
    // Each ASCII sample takes at least one digit and one separator (the last one no separator).
    const std::size_t available = bytes.size() - std::min(bytes.size(), p.pos_);
    if (available + 1 < 2 * nsamples)
      throw Error(ErrorCode::kBadFormat, path.string() + ": truncated: the header promises " +
                                             std::to_string(nsamples) + " samples, the file has " +
                                             std::to_string(available) + " bytes left");
  } else {
    // Exactly one whitespace character separates maxval from the binary samples.
    if (p.pos_ >= bytes.size()) p.fail("file ends after the header");
    ++p.pos_;
    const std::size_t available = bytes.size() - p.pos_;
    if (available < nsamples * std::size_t(bps))  // checked before allocating
      throw Error(ErrorCode::kBadFormat, path.string() + ": truncated: the header promises " +
                                             std::to_string(nsamples * std::size_t(bps)) + " bytes of samples, the file has " +
                                             std::to_string(available));
  }
  Image im = make_image(int(width), int(height), channels, type, nbytes);
  const std::uint32_t full = type == PixelType::kU8 ? 255u : 65535u;
  auto scale = [&](std::uint32_t v) -> std::uint32_t {
    if (v > maxval)
      throw Error(ErrorCode::kBadFormat, path.string() + ": sample value " + std::to_string(v) + " exceeds maxval " +
                                             std::to_string(maxval));
    return maxval == full ? v : std::uint32_t((std::uint64_t(v) * full + maxval / 2) / maxval);
  };
  if (ascii) {
    for (std::size_t i = 0; i < nsamples; ++i) {
      const std::uint32_t v = scale(std::uint32_t(p.number("sample")));
      if (bps == 1) im.data[i] = std::uint8_t(v);
      else im.as<std::uint16_t>()[i] = std::uint16_t(v);
    }
  } else {
    const std::uint8_t* s = bytes.data() + p.pos_;
    if (bps == 1) {
      for (std::size_t i = 0; i < nsamples; ++i) im.data[i] = std::uint8_t(scale(s[i]));
    } else {
      std::uint16_t* d = im.as<std::uint16_t>();
      for (std::size_t i = 0; i < nsamples; ++i) d[i] = std::uint16_t(scale((unsigned(s[2 * i]) << 8) | s[2 * i + 1]));
    }
  }
  return im;
}

void write_pnm(const std::filesystem::path& path, const Image& image_in) {
  if (image_in.channels != 1 && image_in.channels != 3)
    throw Error(ErrorCode::kUnsupported, display_name(path) + ": PGM/PPM holds 1 or 3 channels, the image has " +
                                             std::to_string(image_in.channels));
  Image converted;
  const Image* im = &image_in;
  if (image_in.type == PixelType::kF32) {
    converted = f32_to_u16(image_in);
    im = &converted;
  }
  const bool wide = im->type == PixelType::kU16;
  const std::string header = std::string(im->channels == 1 ? "P5" : "P6") + "\n" + std::to_string(im->width) +
                             " " + std::to_string(im->height) + "\n" + (wide ? "65535" : "255") + "\n";
  std::vector<std::uint8_t> body;
  if (wide) {
    body.resize(im->data.size());
    const std::uint16_t* s = im->as<std::uint16_t>();
    for (std::size_t i = 0; i < body.size() / 2; ++i) {
      body[2 * i] = std::uint8_t(s[i] >> 8);
      body[2 * i + 1] = std::uint8_t(s[i] & 0xFF);
    }
  }
  const std::vector<std::uint8_t>& data = wide ? body : im->data;
  std::vector<std::uint8_t> file(header.begin(), header.end());
  file.insert(file.end(), data.begin(), data.end());
  write_file_atomically(path, file.data(), file.size());
}

}  // namespace spectrasift::io_detail

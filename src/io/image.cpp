// read_image / write_image dispatch, shape checks shared by every codec, and the grey conversion
// that feeds SIFT.
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <memory>

#include "core/limits.hpp"
#include "io/image_codecs.hpp"
#include "io/temp_files.hpp"
#include "numeric/sift_gray.h"
#include "spectrasift/error.hpp"
#include "spectrasift/io.hpp"

namespace spectrasift {
namespace io_detail {

std::vector<std::uint8_t> read_file_bytes(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw Error(ErrorCode::kIo, path.string() + ": no such file");
  if (std::filesystem::is_directory(path, ec)) throw Error(ErrorCode::kIo, path.string() + ": is a directory");
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) throw Error(ErrorCode::kIo, path.string() + ": cannot open (" + std::strerror(errno) + ")");
  std::vector<std::uint8_t> bytes;
  std::uint8_t chunk[1 << 16];
  for (;;) {
    const std::size_t n = std::fread(chunk, 1, sizeof chunk, f.get());
    bytes.insert(bytes.end(), chunk, chunk + n);
    if (n < sizeof chunk) break;
  }
  if (std::ferror(f.get())) throw Error(ErrorCode::kIo, path.string() + ": read error");
  return bytes;
}

std::size_t check_image_shape(const std::filesystem::path& path, std::int64_t width, std::int64_t height,
                              int channels, PixelType type, const ImageLimits& limits) {
  if (width <= 0 || height <= 0)
    throw Error(ErrorCode::kBadFormat, path.string() + ": image has zero size (" + std::to_string(width) + "x" +
                                           std::to_string(height) + ")");
  if (channels < 1 || channels > 4)
    throw Error(ErrorCode::kUnsupported, path.string() + ": " + std::to_string(channels) +
                                             " channels (1 to 4 are supported)");
  // Image stores int width/height; every product below is checked before it is formed.
  if (width > std::numeric_limits<int>::max() || height > std::numeric_limits<int>::max())
    throw Error(ErrorCode::kOutOfMemory, path.string() + ": image dimensions " + std::to_string(width) + "x" +
                                             std::to_string(height) + " are too large");
  const auto w = std::uint64_t(width), h = std::uint64_t(height);
  const std::uint64_t pixels = w * h;  // < 2^62, cannot overflow
  detail::check_pixel_limit(path.string() + ": image of ", w, h, limits.max_pixels);
  const std::uint64_t per_pixel = std::uint64_t(channels) * bytes_per_sample(type);
  if (pixels > std::numeric_limits<std::size_t>::max() / per_pixel ||
      pixels * per_pixel > std::uint64_t(std::numeric_limits<std::ptrdiff_t>::max()))
    throw Error(ErrorCode::kOutOfMemory, path.string() + ": image of " + std::to_string(width) + "x" +
                                             std::to_string(height) + " pixels is too large to hold in memory");
  return std::size_t(pixels * per_pixel);
}

Image make_image(int width, int height, int channels, PixelType type, std::size_t bytes) {
  Image im;
  im.width = width;
  im.height = height;
  im.channels = channels;
  im.type = type;
  im.data.resize(bytes);
  return im;
}

Image f32_to_u16(const Image& image) {
  Image out = make_image(image.width, image.height, image.channels, PixelType::kU16,
                         image.pixel_count() * std::size_t(image.channels) * 2);
  const float* src = image.as<float>();
  std::uint16_t* dst = out.as<std::uint16_t>();
  const std::size_t n = image.pixel_count() * std::size_t(image.channels);
  for (std::size_t i = 0; i < n; ++i) {
    const float v = src[i];
    // NaN fails both comparisons and ends as 0.
    const float c = v > 0.0f ? (v < 1.0f ? v : 1.0f) : 0.0f;
    dst[i] = std::uint16_t(std::lround(double(c) * 65535.0));
  }
  return out;
}

}  // namespace io_detail

namespace {

std::string lower_extension(const std::filesystem::path& path) {
  std::string ext = path.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return ext;
}

void check_writable(const std::filesystem::path& path, const Image& image) {
  if (image.width <= 0 || image.height <= 0 || image.channels < 1 || image.channels > 4)
    throw Error(ErrorCode::kInvalidArgument, io_detail::display_name(path) + ": cannot write an image of " +
                                                 std::to_string(image.width) + "x" + std::to_string(image.height) +
                                                 " pixels with " + std::to_string(image.channels) + " channels");
  const std::size_t expected = image.pixel_count() * std::size_t(image.channels) * bytes_per_sample(image.type);
  if (image.data.size() != expected)
    throw Error(ErrorCode::kInvalidArgument, io_detail::display_name(path) + ": image data has " + std::to_string(image.data.size()) +
                                                 " bytes, its shape needs " + std::to_string(expected));
}

}  // namespace

namespace {

/// Decodes any supported format; `png` tells the caller whether the file was a PNG.
Image read_any(const std::filesystem::path& path, const ImageLimits& limits, bool gray_jpeg, bool& png) {
  png = false;
  // TIFF is read by libtiff from the file itself (it seeks); look at the first bytes before loading
  // everything, so that a large TIFF is not held in memory twice.
  {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) throw Error(ErrorCode::kIo, path.string() + ": no such file");
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
    std::uint8_t head[4] = {};
    if (f && !std::filesystem::is_directory(path, ec) && std::fread(head, 1, 4, f.get()) == 4 &&
        ((head[0] == 'I' && head[1] == 'I' && (head[2] == 42 || head[2] == 43) && head[3] == 0) ||
         (head[0] == 'M' && head[1] == 'M' && head[2] == 0 && (head[3] == 42 || head[3] == 43)))) {
#ifdef SPECTRASIFT_HAVE_TIFF
      return io_detail::decode_tiff(path, limits);
#else
      throw Error(ErrorCode::kUnsupported, path.string() + ": TIFF image, but this build has no libtiff");
#endif
    }
  }
  const std::vector<std::uint8_t> bytes = io_detail::read_file_bytes(path);
  auto starts_with = [&](std::initializer_list<int> magic) {
    if (bytes.size() < magic.size()) return false;
    std::size_t i = 0;
    for (int m : magic)
      if (bytes[i++] != std::uint8_t(m)) return false;
    return true;
  };
  if (starts_with({0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A})) {
    png = true;
    return io_detail::decode_png(path, bytes, limits);
  }
  if (starts_with({0xFF, 0xD8, 0xFF})) return io_detail::decode_jpeg(path, bytes, limits, gray_jpeg);
  if (bytes.size() >= 2 && bytes[0] == 'P' && bytes[1] >= '1' && bytes[1] <= '7')
    return io_detail::decode_pnm(path, bytes, limits);
  if (bytes.empty()) throw Error(ErrorCode::kBadFormat, path.string() + ": empty file");
  throw Error(ErrorCode::kUnsupported, path.string() + ": unknown image format");
}

}  // namespace

Image read_image(const std::filesystem::path& path, const ImageLimits& limits) {
  bool png = false;
  return read_any(path, limits, false, png);
}

Image read_image(const std::filesystem::path& path, ReadMode mode, const ImageLimits& limits) {
  bool png = false;
  Image im = read_any(path, limits, mode == ReadMode::kGray, png);  // a colour JPEG comes back as its luma
  if (mode == ReadMode::kAsStored || im.channels == 1 || im.type != PixelType::kU8) return im;
  return io_detail::gray_u8_like_opencv(im, png ? io_detail::GrayRule::kLibpng : io_detail::GrayRule::kOpenCv14);
}

bool tiff_supported() noexcept {
#ifdef SPECTRASIFT_HAVE_TIFF
  return true;
#else
  return false;
#endif
}

#ifndef SPECTRASIFT_HAVE_TIFF
void write_tiff(const std::filesystem::path& path, const Image&) {
  throw Error(ErrorCode::kUnsupported, path.string() + ": cannot write TIFF, this build has no libtiff");
}
#endif

void write_image(const std::filesystem::path& path, const Image& image) {
  check_writable(path, image);
  const std::string ext = lower_extension(path);
  if (ext == ".png") return write_png(path, image);
  if (ext == ".tif" || ext == ".tiff") return write_tiff(path, image);
  if (ext == ".pgm" || ext == ".ppm" || ext == ".pnm") return io_detail::write_pnm(path, image);
  throw Error(ErrorCode::kUnsupported,
              io_detail::display_name(path) + ": cannot tell the image format from the extension '" + ext +
                  "' (use .png, .tif, .tiff, .pgm or .ppm)");
}

ImageF to_gray_float(const Image& image) {
  if (image.width <= 0 || image.height <= 0 || image.channels < 1 || image.channels > 4)
    throw Error(ErrorCode::kInvalidArgument, "to_gray_float: image of " + std::to_string(image.width) + "x" +
                                                 std::to_string(image.height) + " with " +
                                                 std::to_string(image.channels) + " channels");
  const std::size_t n = image.pixel_count();
  const std::size_t c = std::size_t(image.channels);
  if (image.data.size() != n * c * bytes_per_sample(image.type))
    throw Error(ErrorCode::kInvalidArgument, "to_gray_float: image data size does not match its shape");
  ImageF out;
  out.width = image.width;
  out.height = image.height;
  out.data.resize(n);
  const bool colour = c >= 3;  // 1 = grey, 2 = grey + alpha, 3 = RGB, 4 = RGBA
  // The per-pixel formulas are numeric/sift_gray.h's (OpenCV 4.6's BGR2GRAY for 8 bits), which the SIFT
  // backends use on their devices too.
  switch (image.type) {
    case PixelType::kU8: {
      const std::uint8_t* p = image.as<std::uint8_t>();
      for (std::size_t i = 0; i < n; ++i, p += c) out.data[i] = colour ? sift_gray_u8_rgb(p[0], p[1], p[2]) : sift_gray_u8(p[0]);
      break;
    }
    case PixelType::kU16: {
      const std::uint16_t* p = image.as<std::uint16_t>();
      for (std::size_t i = 0; i < n; ++i, p += c) out.data[i] = colour ? sift_gray_u16_rgb(p[0], p[1], p[2]) : sift_gray_u16(p[0]);
      break;
    }
    case PixelType::kF32: {
      const float* p = image.as<float>();
      for (std::size_t i = 0; i < n; ++i, p += c) out.data[i] = colour ? sift_gray_f32_rgb(p[0], p[1], p[2]) : sift_gray_f32(p[0]);
      break;
    }
  }
  return out;
}

Image to_u8(const ImageF& image) {
  if (image.width <= 0 || image.height <= 0 || image.data.size() != std::size_t(image.width) * std::size_t(image.height))
    throw Error(ErrorCode::kInvalidArgument, "to_u8: float image shape does not match its data");
  Image out = Image::allocate(image.width, image.height, 1, PixelType::kU8);
  for (std::size_t i = 0; i < image.data.size(); ++i) {
    const float v = image.data[i];
    const float c = v > 0.0f ? (v < 255.0f ? v : 255.0f) : 0.0f;  // NaN -> 0
    out.data[i] = std::uint8_t(std::lround(c));
  }
  return out;
}

}  // namespace spectrasift

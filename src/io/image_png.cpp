// PNG through libpng. libpng reports errors by longjmp: every libpng call sits in a function whose
// only automatic objects are trivially destructible, the error text is kept in a plain buffer, and
// the C++ exception is thrown after setjmp has returned, never across the longjmp.
#include <png.h>
#include <zlib.h>

#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "io/image_codecs.hpp"
#include "io/temp_files.hpp"
#include "spectrasift/error.hpp"
#include "spectrasift/io.hpp"

namespace spectrasift {
namespace io_detail {
namespace {

struct PngErrorState {
  char message[256] = {};
};

[[noreturn]] void png_error_fn(png_structp png, png_const_charp msg) {
  auto* st = static_cast<PngErrorState*>(png_get_error_ptr(png));
  if (st) std::snprintf(st->message, sizeof st->message, "%s", msg ? msg : "unknown libpng error");
  png_longjmp(png, 1);
}

void png_warning_fn(png_structp, png_const_charp) {}  // warnings (e.g. colour-profile remarks) are harmless

struct MemoryReader {
  const std::uint8_t* data;
  std::size_t size;
  std::size_t pos;
};

void png_read_fn(png_structp png, png_bytep out, png_size_t n) {
  auto* r = static_cast<MemoryReader*>(png_get_io_ptr(png));
  if (n > r->size - r->pos) png_error(png, "file is truncated");
  std::memcpy(out, r->data + r->pos, n);
  r->pos += n;
}

// Header of a PNG, after the expanding transformations are set.
struct PngShape {
  png_uint_32 width = 0, height = 0;
  int channels = 0;
  int bit_depth = 0;
  std::uint64_t raw_bytes = 0;  ///< size of the image data as stored (before expansion), with filter bytes
};

/// Reads the header chunks (stage 1a): nothing of the image's size is allocated yet. Returns false when
/// libpng raised an error (message in st).
bool png_read_header(png_structp png, png_infop info, PngShape& shape) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_read_info(png, info);
  const int colour = png_get_color_type(png, info);
  const int depth = png_get_bit_depth(png, info);
  const int stored_channels = colour == PNG_COLOR_TYPE_GRAY_ALPHA ? 2
                              : colour == PNG_COLOR_TYPE_RGB      ? 3
                              : colour == PNG_COLOR_TYPE_RGB_ALPHA ? 4
                                                                   : 1;  // grey, palette
  shape.width = png_get_image_width(png, info);
  shape.height = png_get_image_height(png, info);
  const std::uint64_t w = shape.width, h = shape.height;
  shape.raw_bytes = h * ((w * std::uint64_t(stored_channels) * std::uint64_t(depth) + 7) / 8 + 1);
  // The channels and depth the expansions below give (palette -> RGB, tRNS -> alpha, grey < 8 bits -> 8).
  const bool alpha = (colour & PNG_COLOR_MASK_ALPHA) || png_get_valid(png, info, PNG_INFO_tRNS);
  shape.channels = (colour == PNG_COLOR_TYPE_PALETTE || (colour & PNG_COLOR_MASK_COLOR) ? 3 : 1) + (alpha ? 1 : 0);
  shape.bit_depth = depth == 16 ? 16 : 8;
  return true;
}

/// Sets the expanding transformations (stage 1b); png_read_update_info allocates libpng's row buffers,
/// which is why it runs only after the shape was checked. Returns false on a libpng error.
bool png_expand(png_structp png, png_infop info) {
  if (setjmp(png_jmpbuf(png))) return false;
  const int colour = png_get_color_type(png, info);
  const int depth = png_get_bit_depth(png, info);
  if (colour == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (colour == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
  if (png_get_valid(png, info, PNG_INFO_tRNS)) png_set_tRNS_to_alpha(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  return true;
}

/// Reads the pixels (stage 2) into rows; false on a libpng error.
bool png_read_pixels(png_structp png, png_infop info, png_bytepp rows) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_read_image(png, rows);
  png_read_end(png, info);  // reads to IEND, so a file cut after the pixel data is caught too
  return true;
}

struct PngReadGuard {
  png_structp png = nullptr;
  png_infop info = nullptr;
  ~PngReadGuard() { png_destroy_read_struct(&png, info ? &info : nullptr, nullptr); }
};

struct PngWriteGuard {
  png_structp png = nullptr;
  png_infop info = nullptr;
  ~PngWriteGuard() { png_destroy_write_struct(&png, info ? &info : nullptr); }
};

bool png_write_all(png_structp png, png_infop info, std::FILE* f, const Image& im, png_bytepp rows, int level) {
  if (setjmp(png_jmpbuf(png))) return false;
  static const int kColour[5] = {0, PNG_COLOR_TYPE_GRAY, PNG_COLOR_TYPE_GRAY_ALPHA, PNG_COLOR_TYPE_RGB,
                                 PNG_COLOR_TYPE_RGB_ALPHA};
  png_init_io(png, f);
  png_set_IHDR(png, info, png_uint_32(im.width), png_uint_32(im.height), im.type == PixelType::kU8 ? 8 : 16,
               kColour[im.channels], PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_set_compression_level(png, level);
  if (level <= 1) {
    // Fast: one cheap filter for every row (Up: the byte above; good on photographs and on flat pictures)
    // and run-length matching, which is what costs least in deflate. Level 0 stores the rows unfiltered.
    png_set_filter(png, PNG_FILTER_TYPE_BASE, level == 0 ? PNG_FILTER_NONE : PNG_FILTER_UP);
    png_set_compression_strategy(png, level == 0 ? Z_DEFAULT_STRATEGY : Z_RLE);
  } else {
    png_set_filter(png, PNG_FILTER_TYPE_BASE, PNG_ALL_FILTERS);  // libpng picks a filter per row
    png_set_compression_strategy(png, Z_FILTERED);
  }
  png_write_info(png, info);
  png_write_image(png, rows);
  png_write_end(png, nullptr);
  return true;
}

}  // namespace

Image decode_png(const std::filesystem::path& path, const std::vector<std::uint8_t>& bytes,
                 const ImageLimits& limits) {
  PngErrorState st;
  PngReadGuard g;
  g.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &st, png_error_fn, png_warning_fn);
  if (!g.png) throw Error(ErrorCode::kOutOfMemory, path.string() + ": cannot create a PNG decoder");
  g.info = png_create_info_struct(g.png);
  if (!g.info) throw Error(ErrorCode::kOutOfMemory, path.string() + ": cannot create a PNG decoder");
  // libpng's own dimension limit (1e6) would refuse images our ImageLimits accept; ours is checked below.
  png_set_user_limits(g.png, 0x7fffffff, 0x7fffffff);
  MemoryReader reader{bytes.data(), bytes.size(), 0};
  png_set_read_fn(g.png, &reader, png_read_fn);

  PngShape shape;
  if (!png_read_header(g.png, g.info, shape))
    throw Error(ErrorCode::kBadFormat, path.string() + ": corrupt or truncated PNG (" + st.message + ")");
  const PixelType type = shape.bit_depth == 16 ? PixelType::kU16 : PixelType::kU8;
  const std::size_t nbytes =
      check_image_shape(path, shape.width, shape.height, shape.channels, type, limits);
  // Deflate cannot compress better than 1032:1, so a header that promises more pixel data than that
  // is a corrupt or truncated file: reject it before allocating (the margin covers interlacing).
  if (shape.raw_bytes > 1100 * std::uint64_t(bytes.size()) + 65536)
    throw Error(ErrorCode::kBadFormat, path.string() + ": corrupt or truncated PNG (the header promises " +
                                           std::to_string(shape.width) + "x" + std::to_string(shape.height) +
                                           " pixels, more than " + std::to_string(bytes.size()) +
                                           " bytes can hold)");
  if (!png_expand(g.png, g.info))
    throw Error(ErrorCode::kBadFormat, path.string() + ": corrupt or truncated PNG (" + st.message + ")");
  if (png_get_image_width(g.png, g.info) != shape.width || png_get_channels(g.png, g.info) != shape.channels ||
      png_get_bit_depth(g.png, g.info) != shape.bit_depth)
    throw Error(ErrorCode::kInternal, path.string() + ": unexpected PNG shape after expansion");
  Image im = make_image(int(shape.width), int(shape.height), shape.channels, type, nbytes);
  if (png_get_rowbytes(g.png, g.info) != im.row_bytes())
    throw Error(ErrorCode::kInternal, path.string() + ": unexpected PNG row size");
  std::vector<png_bytep> rows(std::size_t(im.height));
  for (int y = 0; y < im.height; ++y) rows[std::size_t(y)] = im.data.data() + std::size_t(y) * im.row_bytes();
  if (!png_read_pixels(g.png, g.info, rows.data()))
    throw Error(ErrorCode::kBadFormat, path.string() + ": corrupt or truncated PNG (" + st.message + ")");
  if (type == PixelType::kU16) {
    // PNG stores 16-bit samples big-endian; make them native.
    std::uint8_t* p = im.data.data();
    std::uint16_t* q = im.as<std::uint16_t>();
    const std::size_t n = im.data.size() / 2;
    for (std::size_t i = 0; i < n; ++i) q[i] = std::uint16_t((p[2 * i] << 8) | p[2 * i + 1]);
  }
  return im;
}

}  // namespace io_detail

void write_png(const std::filesystem::path& path, const Image& image_in, const PngOptions& options) {
  const std::string name = io_detail::display_name(path);  // the user's file, also when path is a temporary
  if (options.level < 0 || options.level > 9)
    throw Error(ErrorCode::kInvalidArgument,
                name + ": PNG compression level " + std::to_string(options.level) + " (use 0..9)");
  if (image_in.width <= 0 || image_in.height <= 0 || image_in.channels < 1 || image_in.channels > 4 ||
      image_in.data.size() != image_in.pixel_count() * std::size_t(image_in.channels) * bytes_per_sample(image_in.type))
    throw Error(ErrorCode::kInvalidArgument,
                name + ": cannot write a PNG of " + std::to_string(image_in.width) + "x" +
                    std::to_string(image_in.height) + " with " + std::to_string(image_in.channels) +
                    " channels (or data size does not match)");
  Image converted;
  const Image* im = &image_in;
  if (image_in.type == PixelType::kF32) {
    converted = io_detail::f32_to_u16(image_in);
    im = &converted;
  }
  // Rows in file order: 16-bit samples are made big-endian in a copy.
  std::vector<std::uint8_t> be;
  const std::uint8_t* base = im->data.data();
  if (im->type == PixelType::kU16) {
    be.resize(im->data.size());
    const std::uint16_t* s = im->as<std::uint16_t>();
    for (std::size_t i = 0; i < be.size() / 2; ++i) {
      be[2 * i] = std::uint8_t(s[i] >> 8);
      be[2 * i + 1] = std::uint8_t(s[i] & 0xFF);
    }
    base = be.data();
  }
  std::vector<png_bytep> rows(std::size_t(im->height));
  for (int y = 0; y < im->height; ++y)
    rows[std::size_t(y)] = const_cast<png_bytep>(base + std::size_t(y) * im->row_bytes());

  AtomicOutput out(path);
  io_detail::PngErrorState st;
  {
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(io_detail::open_file_for_write(out.temp_path()), &std::fclose);
    if (!f) throw Error(ErrorCode::kIo, name + ": cannot create (" + std::strerror(errno) + ")");
    io_detail::PngWriteGuard g;
    g.png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &st, io_detail::png_error_fn, io_detail::png_warning_fn);
    if (!g.png) throw Error(ErrorCode::kOutOfMemory, name + ": cannot create a PNG encoder");
    g.info = png_create_info_struct(g.png);
    if (!g.info) throw Error(ErrorCode::kOutOfMemory, name + ": cannot create a PNG encoder");
    if (!io_detail::png_write_all(g.png, g.info, f.get(), *im, rows.data(), options.level))
      throw Error(ErrorCode::kIo, name + ": cannot write PNG (" + st.message + ")");
    if (std::fflush(f.get()) != 0 || std::ferror(f.get()))
      throw Error(ErrorCode::kIo, name + ": write error (" + std::strerror(errno) + ")");
    if (std::fclose(f.release()) != 0)
      throw Error(ErrorCode::kIo, name + ": write error (" + std::strerror(errno) + ")");
  }
  out.commit();
}

}  // namespace spectrasift

// TIFF through libtiff (only compiled into the library when libtiff was found).
// Reads 8/16-bit unsigned and 32-bit float samples, 1..4 samples per pixel, strips or tiles,
// contiguous or separate planes, MinIsBlack/MinIsWhite/RGB. libtiff's default handlers print to
// stderr; they are replaced once, process-wide, by handlers that keep the last message per thread
// so that it can be put into the Error.
#ifdef SPECTRASIFT_HAVE_TIFF
#include <tiffio.h>

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>

#include "io/image_codecs.hpp"
#include "io/temp_files.hpp"
#include "spectrasift/error.hpp"
#include "spectrasift/io.hpp"

namespace spectrasift {
namespace io_detail {
namespace {

thread_local std::string t_tiff_message;

void tiff_error_handler(const char* module, const char* fmt, va_list ap) {
  char buf[512];
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  t_tiff_message = buf;
  (void)module;
}

void tiff_warning_handler(const char*, const char*, va_list) {}  // e.g. unknown private tags

void install_tiff_handlers() {
  static std::once_flag once;
  std::call_once(once, [] {
    TIFFSetErrorHandler(tiff_error_handler);
    TIFFSetWarningHandler(tiff_warning_handler);
  });
}

std::string last_tiff_message() {
  return t_tiff_message.empty() ? std::string("libtiff error") : t_tiff_message;
}

struct TiffCloser {
  TIFF* t;
  ~TiffCloser() {
    if (t) TIFFClose(t);
  }
};

/// Copies `count` samples of `bytes_per` bytes from a decoded strip/tile row into the interleaved image.
void place(std::uint8_t* dst_row, const std::uint8_t* src, std::uint32_t x0, std::uint32_t count, int channels,
           int plane, bool separate, std::size_t bytes_per) {
  if (!separate) {
    std::memcpy(dst_row + std::size_t(x0) * channels * bytes_per, src, std::size_t(count) * channels * bytes_per);
    return;
  }
  for (std::uint32_t i = 0; i < count; ++i)
    std::memcpy(dst_row + ((std::size_t(x0) + i) * channels + std::size_t(plane)) * bytes_per, src + i * bytes_per,
                bytes_per);
}

/// A TIFF's pixel data is stored in the file: uncompressed, it needs as many bytes as the image; the
/// codecs libtiff offers compress at most about 1400:1 (LZW; deflate 1032:1, PackBits 128:1, JPEG as
/// for JPEG files), ZSTD/LZMA/WebP more: a header that promises more is corrupt. Checked before the image
/// is allocated (a 656-byte TIFF declaring 32000 x 32000 float RGBA took 14 GB).
void check_against_file_size(const std::filesystem::path& path, TIFF* t, std::size_t nbytes) {
  std::error_code ec;
  const std::uint64_t file_size = std::filesystem::file_size(path, ec);
  if (ec) return;  // it was opened: a size we cannot read leaves libtiff's own checks
  std::uint16_t compression = COMPRESSION_NONE;
  TIFFGetFieldDefaulted(t, TIFFTAG_COMPRESSION, &compression);
  std::uint64_t ratio = 1u << 15;
  switch (compression) {
    case COMPRESSION_NONE: ratio = 1; break;
    case COMPRESSION_LZW:
    case COMPRESSION_ADOBE_DEFLATE:
    case COMPRESSION_DEFLATE:
    case COMPRESSION_PACKBITS:
    case COMPRESSION_JPEG: ratio = 2048; break;
    default: break;
  }
  if (std::uint64_t(nbytes) > ratio * file_size + 65536)
    throw Error(ErrorCode::kBadFormat, path.string() + ": corrupt or truncated TIFF (the header promises " +
                                           std::to_string(nbytes) + " bytes of pixels, more than the " +
                                           std::to_string(file_size) + "-byte file can hold)");
}

}  // namespace

Image decode_tiff(const std::filesystem::path& path, const ImageLimits& limits) {
  install_tiff_handlers();
  t_tiff_message.clear();
  TiffCloser tc{TIFFOpen(path.c_str(), "r")};
  if (!tc.t) throw Error(ErrorCode::kBadFormat, path.string() + ": cannot read TIFF (" + last_tiff_message() + ")");
  TIFF* t = tc.t;
  std::uint32_t width = 0, height = 0;
  std::uint16_t spp = 1, bps = 1, format = SAMPLEFORMAT_UINT, planar = PLANARCONFIG_CONTIG, photometric = 0;
  TIFFGetField(t, TIFFTAG_IMAGEWIDTH, &width);
  TIFFGetField(t, TIFFTAG_IMAGELENGTH, &height);
  TIFFGetFieldDefaulted(t, TIFFTAG_SAMPLESPERPIXEL, &spp);
  TIFFGetFieldDefaulted(t, TIFFTAG_BITSPERSAMPLE, &bps);
  TIFFGetFieldDefaulted(t, TIFFTAG_SAMPLEFORMAT, &format);
  TIFFGetFieldDefaulted(t, TIFFTAG_PLANARCONFIG, &planar);
  if (!TIFFGetField(t, TIFFTAG_PHOTOMETRIC, &photometric)) photometric = spp >= 3 ? PHOTOMETRIC_RGB : PHOTOMETRIC_MINISBLACK;

  PixelType type;
  if (bps == 8 && format == SAMPLEFORMAT_UINT) type = PixelType::kU8;
  else if (bps == 16 && format == SAMPLEFORMAT_UINT) type = PixelType::kU16;
  else if (bps == 32 && format == SAMPLEFORMAT_IEEEFP) type = PixelType::kF32;
  else
    throw Error(ErrorCode::kUnsupported, path.string() + ": TIFF with " + std::to_string(bps) + "-bit " +
                                             (format == SAMPLEFORMAT_IEEEFP ? "float" : format == SAMPLEFORMAT_INT ? "signed" : "unsigned") +
                                             " samples (8/16-bit unsigned and 32-bit float are supported)");
  if (photometric != PHOTOMETRIC_MINISBLACK && photometric != PHOTOMETRIC_MINISWHITE && photometric != PHOTOMETRIC_RGB)
    throw Error(ErrorCode::kUnsupported, path.string() + ": TIFF photometric interpretation " +
                                             std::to_string(photometric) + " (grey and RGB are supported)");
  if (spp < 1 || spp > 4)
    throw Error(ErrorCode::kUnsupported, path.string() + ": TIFF with " + std::to_string(spp) + " samples per pixel");
  const int channels = spp;
  const std::size_t nbytes = check_image_shape(path, width, height, channels, type, limits);
  check_against_file_size(path, t, nbytes);
  Image im = make_image(int(width), int(height), channels, type, nbytes);
  const std::size_t bytes_per = bytes_per_sample(type);
  const bool separate = planar == PLANARCONFIG_SEPARATE && channels > 1;
  const int planes = separate ? channels : 1;
  const std::size_t row_bytes = im.row_bytes();

  if (TIFFIsTiled(t)) {
    std::uint32_t tw = 0, th = 0;
    TIFFGetField(t, TIFFTAG_TILEWIDTH, &tw);
    TIFFGetField(t, TIFFTAG_TILELENGTH, &th);
    const tmsize_t tile_size = TIFFTileSize(t);
    // Tiles may overhang the image, but one far larger than the whole image is a corrupt header:
    // refuse it before allocating the tile buffer.
    if (tw == 0 || th == 0 || tile_size <= 0 || std::uint64_t(tile_size) > 4 * std::uint64_t(nbytes) + (1u << 24))
      throw Error(ErrorCode::kBadFormat, path.string() + ": bad TIFF tile size (" + std::to_string(tw) + "x" +
                                             std::to_string(th) + ")");
    std::vector<std::uint8_t> tile(static_cast<std::size_t>(tile_size));
    const std::size_t tile_row = std::size_t(tw) * (separate ? 1 : std::size_t(channels)) * bytes_per;
    for (int plane = 0; plane < planes; ++plane)
      for (std::uint32_t y0 = 0; y0 < height; y0 += th)
        for (std::uint32_t x0 = 0; x0 < width; x0 += tw) {
          if (TIFFReadTile(t, tile.data(), x0, y0, 0, std::uint16_t(plane)) < 0)
            throw Error(ErrorCode::kBadFormat, path.string() + ": cannot read TIFF tile (" + last_tiff_message() + ")");
          const std::uint32_t rows = std::min(th, height - y0), cols = std::min(tw, width - x0);
          for (std::uint32_t r = 0; r < rows; ++r)
            place(im.data.data() + (std::size_t(y0) + r) * row_bytes, tile.data() + r * tile_row, x0, cols, channels,
                  plane, separate, bytes_per);
        }
  } else {
    const tmsize_t line_size = TIFFScanlineSize(t);
    const std::size_t expected = std::size_t(width) * (separate ? 1 : std::size_t(channels)) * bytes_per;
    if (line_size <= 0 || std::size_t(line_size) < expected)
      throw Error(ErrorCode::kBadFormat, path.string() + ": bad TIFF scanline size");
    std::vector<std::uint8_t> line(static_cast<std::size_t>(line_size));
    for (int plane = 0; plane < planes; ++plane)
      for (std::uint32_t y = 0; y < height; ++y) {
        if (TIFFReadScanline(t, line.data(), y, std::uint16_t(plane)) < 0)
          throw Error(ErrorCode::kBadFormat, path.string() + ": cannot read TIFF row " + std::to_string(y) + " (" +
                                                 last_tiff_message() + ")");
        place(im.data.data() + std::size_t(y) * row_bytes, line.data(), 0, width, channels, plane, separate, bytes_per);
      }
  }
  if (photometric == PHOTOMETRIC_MINISWHITE) {
    // 0 is white: invert the grey channel(s) so that larger means brighter, as everywhere else.
    const std::size_t n = im.pixel_count() * std::size_t(channels);
    if (type == PixelType::kU8)
      for (std::size_t i = 0; i < n; ++i) im.data[i] = std::uint8_t(255 - im.data[i]);
    else if (type == PixelType::kU16)
      for (std::size_t i = 0; i < n; ++i) im.as<std::uint16_t>()[i] = std::uint16_t(65535 - im.as<std::uint16_t>()[i]);
    else
      for (std::size_t i = 0; i < n; ++i) im.as<float>()[i] = 1.0f - im.as<float>()[i];
  }
  return im;
}

}  // namespace io_detail

void write_tiff(const std::filesystem::path& path, const Image& im) {
  if (im.width <= 0 || im.height <= 0 || im.channels < 1 || im.channels > 4 ||
      im.data.size() != im.pixel_count() * std::size_t(im.channels) * bytes_per_sample(im.type))
    throw Error(ErrorCode::kInvalidArgument, io_detail::display_name(path) + ": cannot write a TIFF of " + std::to_string(im.width) +
                                                 "x" + std::to_string(im.height) + " with " +
                                                 std::to_string(im.channels) + " channels (or data size does not match)");
  io_detail::install_tiff_handlers();
  io_detail::t_tiff_message.clear();
  AtomicOutput out(path);
  const std::string name = io_detail::display_name(path);
  {
    // Opened without following a link at the temporary's name; libtiff closes the descriptor.
    const int fd = io_detail::open_for_write(out.temp_path());
    if (fd < 0) io_detail::throw_io(name, "cannot create", errno);
    io_detail::TiffCloser tc{TIFFFdOpen(fd, name.c_str(), "w")};
    if (!tc.t) {
      ::close(fd);
      throw Error(ErrorCode::kIo, name + ": cannot create (" + io_detail::last_tiff_message() + ")");
    }
    TIFF* t = tc.t;
    const std::size_t bytes_per = bytes_per_sample(im.type);
    TIFFSetField(t, TIFFTAG_IMAGEWIDTH, std::uint32_t(im.width));
    TIFFSetField(t, TIFFTAG_IMAGELENGTH, std::uint32_t(im.height));
    TIFFSetField(t, TIFFTAG_SAMPLESPERPIXEL, std::uint16_t(im.channels));
    TIFFSetField(t, TIFFTAG_BITSPERSAMPLE, std::uint16_t(bytes_per * 8));
    TIFFSetField(t, TIFFTAG_SAMPLEFORMAT, im.type == PixelType::kF32 ? SAMPLEFORMAT_IEEEFP : SAMPLEFORMAT_UINT);
    TIFFSetField(t, TIFFTAG_PLANARCONFIG, PLANARCONFIG_CONTIG);
    TIFFSetField(t, TIFFTAG_PHOTOMETRIC, im.channels >= 3 ? PHOTOMETRIC_RGB : PHOTOMETRIC_MINISBLACK);
    if (im.channels == 2 || im.channels == 4) {
      const std::uint16_t extra[1] = {EXTRASAMPLE_UNASSALPHA};
      TIFFSetField(t, TIFFTAG_EXTRASAMPLES, std::uint16_t(1), extra);
    }
    TIFFSetField(t, TIFFTAG_COMPRESSION,
                 TIFFIsCODECConfigured(COMPRESSION_ADOBE_DEFLATE) ? COMPRESSION_ADOBE_DEFLATE : COMPRESSION_NONE);
    TIFFSetField(t, TIFFTAG_ROWSPERSTRIP, TIFFDefaultStripSize(t, 0));
    std::vector<std::uint8_t> row(im.row_bytes());
    for (int y = 0; y < im.height; ++y) {
      // TIFFWriteScanline may modify its buffer (encoders work in place): give it a copy.
      std::memcpy(row.data(), im.data.data() + std::size_t(y) * im.row_bytes(), row.size());
      if (TIFFWriteScanline(t, row.data(), std::uint32_t(y), 0) < 0)
        throw Error(ErrorCode::kIo, name + ": cannot write TIFF (" + io_detail::last_tiff_message() + ")");
    }
    if (!TIFFFlush(t))
      throw Error(ErrorCode::kIo, name + ": cannot write TIFF (" + io_detail::last_tiff_message() + ")");
  }
  out.commit();
}

}  // namespace spectrasift
#endif  // SPECTRASIFT_HAVE_TIFF

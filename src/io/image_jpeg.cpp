// JPEG through libjpeg(-turbo). As for PNG, libjpeg's fatal errors longjmp back into a function
// without non-trivial automatic objects and become an Error after setjmp has returned.
// A file that ends early is only a *warning* for libjpeg (it inserts a fake EOI and the rest of the
// image comes out grey); here that warning, and the "premature end of data segment" one, are errors.
#include <cstddef>
#include <cstdio>
// jpeglib.h needs size_t and FILE declared first.
#include <jerror.h>
#include <jpeglib.h>

#include <csetjmp>
#include <cstring>
#include <string>

#include "io/image_codecs.hpp"
#include "spectrasift/error.hpp"

namespace spectrasift::io_detail {
namespace {

struct JpegError {
  jpeg_error_mgr mgr;  // first member: libjpeg hands us a pointer to it
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

[[noreturn]] void jpeg_error_exit(j_common_ptr cinfo) {
  auto* e = reinterpret_cast<JpegError*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, e->message);
  std::longjmp(e->jump, 1);
}

void jpeg_emit_message(j_common_ptr cinfo, int level) {
  if (level >= 0) return;  // trace messages
  // Warnings that mean the data stopped early: the decoded image would be partly made up.
  const int code = cinfo->err->msg_code;
  if (code == JWRN_JPEG_EOF || code == JWRN_HIT_MARKER) jpeg_error_exit(cinfo);
  cinfo->err->num_warnings++;
}

struct JpegShape {
  JDIMENSION width = 0, height = 0;
  int channels = 0;
  bool arithmetic = false;  ///< arithmetic-coded (can go far below a bit per block)
  bool cmyk = false;
  bool inverted_cmyk = false;
};

bool jpeg_header(jpeg_decompress_struct* cinfo, JpegError* err, const std::uint8_t* data, std::size_t size,
                 bool gray, JpegShape& shape) {
  if (setjmp(err->jump)) return false;
  jpeg_create_decompress(cinfo);
  jpeg_mem_src(cinfo, data, static_cast<unsigned long>(size));
  jpeg_read_header(cinfo, TRUE);
  switch (cinfo->jpeg_color_space) {
    case JCS_GRAYSCALE: cinfo->out_color_space = JCS_GRAYSCALE; break;
    case JCS_CMYK:
    case JCS_YCCK:
      cinfo->out_color_space = JCS_CMYK;
      shape.cmyk = true;
      // Adobe writes CMYK inverted (0 = full ink); this is what nearly every CMYK JPEG is.
      shape.inverted_cmyk = cinfo->saw_Adobe_marker != 0;
      break;
    // Grey asked for: libjpeg's own luma (the Y plane of YCbCr, as cv2.imread(IMREAD_GRAYSCALE) asks for it).
    default: cinfo->out_color_space = gray ? JCS_GRAYSCALE : JCS_RGB; break;
  }
  jpeg_calc_output_dimensions(cinfo);
  shape.width = cinfo->output_width;
  shape.height = cinfo->output_height;
  shape.channels = cinfo->output_components;
  shape.arithmetic = cinfo->arith_code != 0;
  return true;
}

bool jpeg_pixels(jpeg_decompress_struct* cinfo, JpegError* err, std::uint8_t* out, std::size_t row_bytes) {
  if (setjmp(err->jump)) return false;
  jpeg_start_decompress(cinfo);
  while (cinfo->output_scanline < cinfo->output_height) {
    JSAMPROW row = out + std::size_t(cinfo->output_scanline) * row_bytes;
    jpeg_read_scanlines(cinfo, &row, 1);
  }
  jpeg_finish_decompress(cinfo);
  return true;
}

struct JpegGuard {
  jpeg_decompress_struct* cinfo;
  ~JpegGuard() { jpeg_destroy_decompress(cinfo); }
};

}  // namespace

Image decode_jpeg(const std::filesystem::path& path, const std::vector<std::uint8_t>& bytes,
                  const ImageLimits& limits, bool gray) {
  jpeg_decompress_struct cinfo;
  std::memset(&cinfo, 0, sizeof cinfo);
  JpegError err;
  std::memset(&err, 0, sizeof err);
  cinfo.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = jpeg_error_exit;
  err.mgr.emit_message = jpeg_emit_message;
  JpegGuard guard{&cinfo};  // jpeg_destroy on a zeroed or created struct is safe

  JpegShape shape;
  if (!jpeg_header(&cinfo, &err, bytes.data(), bytes.size(), gray, shape))
    throw Error(ErrorCode::kBadFormat, path.string() + ": corrupt or truncated JPEG (" + err.message + ")");
  const int file_channels = shape.cmyk ? 3 : shape.channels;
  check_image_shape(path, shape.width, shape.height, shape.channels, PixelType::kU8, limits);
  // Huffman coding spends at least one bit on every 8x8 block of the first component (its DC code), so a
  // file holds at most 512 pixels per byte; arithmetic coding can do better, allow 64 times that. A header
  // that promises more is corrupt or truncated: refuse it before allocating (a 489-byte file declaring
  // 65000 x 16000 took 1.15 GB).
  const std::uint64_t per_byte = shape.arithmetic ? 512u * 64u : 512u;
  if (std::uint64_t(shape.width) * shape.height > per_byte * std::uint64_t(bytes.size()) + 65536)
    throw Error(ErrorCode::kBadFormat, path.string() + ": corrupt or truncated JPEG (the header promises " +
                                           std::to_string(shape.width) + "x" + std::to_string(shape.height) +
                                           " pixels, more than " + std::to_string(bytes.size()) +
                                           " bytes can hold)");
  const std::size_t decoded_bytes = std::size_t(shape.width) * shape.height * std::size_t(shape.channels);
  Image im = make_image(int(shape.width), int(shape.height), shape.channels, PixelType::kU8, decoded_bytes);
  if (!jpeg_pixels(&cinfo, &err, im.data.data(), im.row_bytes()))
    throw Error(ErrorCode::kBadFormat, path.string() + ": corrupt or truncated JPEG (" + err.message + ")");
  if (!shape.cmyk) return im;

  // CMYK -> RGB: R = (1 - C)(1 - K) with ink values; inverted (Adobe) files store 255 - ink.
  Image rgb = make_image(im.width, im.height, file_channels, PixelType::kU8, im.pixel_count() * 3);
  const std::uint8_t* s = im.data.data();
  std::uint8_t* d = rgb.data.data();
  for (std::size_t i = 0; i < im.pixel_count(); ++i, s += 4, d += 3) {
    const unsigned k = shape.inverted_cmyk ? s[3] : 255u - s[3];
    for (int ch = 0; ch < 3; ++ch) {
      const unsigned c = shape.inverted_cmyk ? s[ch] : 255u - s[ch];
      d[ch] = std::uint8_t((c * k + 127u) / 255u);
    }
  }
  return rgb;
}

}  // namespace spectrasift::io_detail

// Private interface between read_image/write_image (image.cpp) and the codecs (image_png.cpp,
// image_jpeg.cpp, image_pnm.cpp, image_tiff.cpp). Not part of the public API.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "spectrasift/io.hpp"
#include "spectrasift/types.hpp"

namespace spectrasift::io_detail {

/// The whole file in memory; throws Error(kIo) "<file>: no such file" / "<file>: cannot read (...)".
std::vector<std::uint8_t> read_file_bytes(const std::filesystem::path& path);

/// Checks a decoded header before anything is allocated: zero or negative size -> Error(kBadFormat);
/// width * height over limits.max_pixels, or a byte count that overflows size_t -> Error(kOutOfMemory).
/// Returns the number of bytes the image will take.
std::size_t check_image_shape(const std::filesystem::path& path, std::int64_t width, std::int64_t height,
                              int channels, PixelType type, const ImageLimits& limits);

/// The image with its fields set and its data sized by check_image_shape's answer.
Image make_image(int width, int height, int channels, PixelType type, std::size_t bytes);

// Decoders, given the file's bytes (already checked to start with the codec's magic).
Image decode_png(const std::filesystem::path& path, const std::vector<std::uint8_t>& bytes,
                 const ImageLimits& limits);
/// gray: a colour (YCbCr or RGB) file is decoded to libjpeg's luma plane (ReadMode::kGray).
Image decode_jpeg(const std::filesystem::path& path, const std::vector<std::uint8_t>& bytes,
                  const ImageLimits& limits, bool gray = false);
Image decode_pnm(const std::filesystem::path& path, const std::vector<std::uint8_t>& bytes,
                 const ImageLimits& limits);
/// TIFF reads from the path (libtiff seeks); only defined when built with libtiff.
Image decode_tiff(const std::filesystem::path& path, const ImageLimits& limits);

/// PGM (1 channel) or PPM (3 channels), binary, maxval 255 (U8) or 65535 (U16; F32 is clamped to
/// [0, 1] and written as U16). Other channel counts -> Error(kUnsupported).
void write_pnm(const std::filesystem::path& path, const Image& image);

/// How cv2.imread(IMREAD_GRAYSCALE) turns 8-bit colour into grey outside JPEG (image_gray.cpp):
/// kLibpng (PNG): (9797 R + 19234 G + 3737 B) >> 15; kOpenCv14 (PNM, TIFF): (4899 R + 9617 G + 1868 B + 8192) >> 14.
enum class GrayRule { kLibpng, kOpenCv14 };
/// A U8 image of 1..4 channels (grey, grey + alpha, RGB, RGBA; alpha ignored) as one U8 grey channel.
Image gray_u8_like_opencv(const Image& image, GrayRule rule);

/// F32 (nominally 0..1) to U16 after clamping to [0, 1], rounding to nearest; NaN becomes 0.
Image f32_to_u16(const Image& image);

}  // namespace spectrasift::io_detail

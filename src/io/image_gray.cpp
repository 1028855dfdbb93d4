// 8-bit colour to grey the way cv2.imread(path, IMREAD_GRAYSCALE) does it for each format (ReadMode::kGray).
// OpenCV 4.6 does not use one rule: its PNG decoder asks libpng for grey (png_set_rgb_to_gray with the
// weights 0.299 and 0.587, which libpng truncates to 15-bit integers and applies without rounding), its PNM
// and TIFF decoders convert with 14-bit rounded weights, and its JPEG decoder asks libjpeg for the luma plane
// (image_jpeg.cpp, not here). Each rule below was checked against cv2.imread on every pixel of a photograph.
#include "io/image_codecs.hpp"

namespace spectrasift::io_detail {

Image gray_u8_like_opencv(const Image& im, GrayRule rule) {
  Image out = Image::allocate(im.width, im.height, 1, PixelType::kU8);
  const std::size_t n = im.pixel_count(), c = std::size_t(im.channels);
  const std::uint8_t* p = im.data.data();
  for (std::size_t i = 0; i < n; ++i, p += c) {
    if (c < 3) {  // grey, grey + alpha: the grey channel
      out.data[i] = p[0];
      continue;
    }
    const unsigned r = p[0], g = p[1], b = p[2];
    out.data[i] = rule == GrayRule::kLibpng ? std::uint8_t((9797u * r + 19234u * g + 3737u * b) >> 15)
                                            : std::uint8_t((4899u * r + 9617u * g + 1868u * b + 8192u) >> 14);
  }
  return out;
}

}  // namespace spectrasift::io_detail

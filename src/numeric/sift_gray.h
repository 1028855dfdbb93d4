/* sift_gray.h — the grey value (0..255 nominal) of one pixel of the user's image, per pixel type and
 * channel count, as to_gray_float computes it; a device converts the uploaded image with the same functions.
 * Channels: 1 = grey, 2 = grey + alpha, 3 = RGB, 4 = RGBA (alpha ignored).
 *
 * 8-bit colour is OpenCV 4.6's cvtColor(BGR2GRAY) for 8 bits: 15-bit fixed-point weights that sum to 32768,
 * rounded, (9798 R + 19235 G + 3735 B + 16384) >> 15 (checked against cv::cvtColor on all 2^24 colours; the
 * 14-bit 4899/9617/1868 variant differs in 0.26 % of colours). 16-bit and float colour use the weights
 * 0.299, 0.587, 0.114 in double, rounded once to float: a device needs double precision for these two
 * (OpenCL: cl_khr_fp64, see SIFT_HAVE_DOUBLE in sift_common.h; CUDA always). 16-bit grey v / 257 and float
 * grey v * 255 are exact in float (one correctly rounded operation, equal to the double form: tested on every
 * 16-bit value). */
#ifndef SPECTRASIFT_NUMERIC_SIFT_GRAY_H
#define SPECTRASIFT_NUMERIC_SIFT_GRAY_H

#include "sift_common.h"

SPECTRASIFT_FN float sift_gray_u8(unsigned int v) { return (float)v; }

SPECTRASIFT_FN float sift_gray_u8_rgb(unsigned int r, unsigned int g, unsigned int b) {
  return (float)((9798u * r + 19235u * g + 3735u * b + 16384u) >> 15);
}

SPECTRASIFT_FN float sift_gray_u16(unsigned int v) { return (float)v / 257.0f; }

SPECTRASIFT_FN float sift_gray_f32(float v) { return v * 255.0f; }

#if defined(SIFT_HAVE_DOUBLE)
SPECTRASIFT_FN float sift_gray_u16_rgb(unsigned int r, unsigned int g, unsigned int b) {
  return (float)((0.299 * (double)r + 0.587 * (double)g + 0.114 * (double)b) / 257.0);
}

SPECTRASIFT_FN float sift_gray_f32_rgb(float r, float g, float b) {
  return (float)((0.299 * (double)r + 0.587 * (double)g + 0.114 * (double)b) * 255.0);
}
#endif

/* Pixel types of a device's raw upload of the user's image (the host maps PixelType to these). */
#define SIFT_RAW_U8 0
#define SIFT_RAW_U16 1
#define SIFT_RAW_F32 2

/* The grey value of the pixel whose first sample is sample i of an interleaved raw image of `channels`
 * samples per pixel and pixel type `type`: channels 1-2 take the first sample, 3-4 the RGB formula (u16 and
 * f32 colour need doubles: an OpenCL host refuses them first on a device without cl_khr_fp64). */
SPECTRASIFT_FN float sift_gray_raw(SPECTRASIFT_CONST_GLOBAL unsigned char* raw, int type, int channels, size_t i) {
  if (type == SIFT_RAW_U8) {
    return channels >= 3 ? sift_gray_u8_rgb(raw[i], raw[i + 1], raw[i + 2]) : sift_gray_u8(raw[i]);
  } else if (type == SIFT_RAW_U16) {
    SPECTRASIFT_CONST_GLOBAL unsigned short* s = (SPECTRASIFT_CONST_GLOBAL unsigned short*)raw;
#if defined(SIFT_HAVE_DOUBLE)
    return channels >= 3 ? sift_gray_u16_rgb(s[i], s[i + 1], s[i + 2]) : sift_gray_u16(s[i]);
#else
    return sift_gray_u16(s[i]);
#endif
  } else {
    SPECTRASIFT_CONST_GLOBAL float* s = (SPECTRASIFT_CONST_GLOBAL float*)raw;
#if defined(SIFT_HAVE_DOUBLE)
    return channels >= 3 ? sift_gray_f32_rgb(s[i], s[i + 1], s[i + 2]) : sift_gray_f32(s[i]);
#else
    return sift_gray_f32(s[i]);
#endif
  }
}

#endif /* SPECTRASIFT_NUMERIC_SIFT_GRAY_H */

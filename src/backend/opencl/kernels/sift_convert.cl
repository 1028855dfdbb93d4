/* sift_convert.cl — the user's image to grey levels on the device, and the doubled first octave.
 * (Part of the sift.cl program.) */

/* Pixel types of the raw upload (the host maps PixelType to these). */
#define SIFT_RAW_U8 0
#define SIFT_RAW_U16 1
#define SIFT_RAW_F32 2

/* sift_grey: global (width, height), any work-group shape; one work-item per pixel. The grey value of pixel
 * (x, y) of an interleaved image of `channels` samples per pixel (numeric/sift_gray.h): channels 1-2 take
 * the first sample, 3-4 the RGB formula (u16 and f32 colour need doubles: the host refuses them first on a
 * device without cl_khr_fp64). */
__kernel void sift_grey(__global const uchar* raw, int type, int channels, int width, int height,
                        __global float* grey) {
  const int x = get_global_id(0), y = get_global_id(1);
  if (x >= width || y >= height) return;
  const size_t p = (size_t)y * (size_t)width + (size_t)x;
  const size_t i = p * (size_t)channels;
  float v = 0.0f;
  if (type == SIFT_RAW_U8) {
    v = channels >= 3 ? sift_gray_u8_rgb(raw[i], raw[i + 1], raw[i + 2]) : sift_gray_u8(raw[i]);
  } else if (type == SIFT_RAW_U16) {
    __global const ushort* s = (__global const ushort*)raw;
#if defined(SIFT_HAVE_DOUBLE)
    v = channels >= 3 ? sift_gray_u16_rgb(s[i], s[i + 1], s[i + 2]) : sift_gray_u16(s[i]);
#else
    v = sift_gray_u16(s[i]);
#endif
  } else {
    __global const float* s = (__global const float*)raw;
#if defined(SIFT_HAVE_DOUBLE)
    v = channels >= 3 ? sift_gray_f32_rgb(s[i], s[i + 1], s[i + 2]) : sift_gray_f32(s[i]);
#else
    v = sift_gray_f32(s[i]);
#endif
  }
  grey[p] = v;
}

/* Column X of an input row doubled with half-pixel bilinear weights, edges replicated (the CPU backend's
 * upsample_row, same float operations). */
inline float sift_upsampled_at(__global const float* row, int w, int x) {
  if (x == 0) return row[0];
  if (x == 2 * w - 1) return row[w - 1];
  const int k = x / 2;
  if ((x & 1) == 0) return row[k - 1] * 0.25f + row[k] * 0.75f;
  return row[k] * 0.75f + row[k + 1] * 0.25f;
}

/* sift_upsample: global (2w, 2h), any work-group shape; one work-item per output pixel. Output pixel
 * (X, Y) samples input ((X + 0.5) / 2 - 0.5, (Y + 0.5) / 2 - 0.5) (OpenCV's INTER_LINEAR), rows blended
 * after the columns as the CPU backend does, so the values are the same bits. */
__kernel void sift_upsample(__global const float* in, int w, int h, __global float* out) {
  const int x = get_global_id(0), y = get_global_id(1);
  const int w2 = 2 * w, h2 = 2 * h;
  if (x >= w2 || y >= h2) return;
  const int k = y / 2;
  float v;
  if (y == 0 || y == h2 - 1) {
    v = sift_upsampled_at(in + (size_t)k * (size_t)w, w, x);
  } else {
    const int ya = (y % 2 == 0) ? k - 1 : k;
    const float wa = (y % 2 == 0) ? 0.25f : 0.75f;
    const float a = sift_upsampled_at(in + (size_t)ya * (size_t)w, w, x);
    const float b = sift_upsampled_at(in + (size_t)(ya + 1) * (size_t)w, w, x);
    v = a * wa + b * (1.0f - wa);
  }
  out[(size_t)y * (size_t)w2 + (size_t)x] = v;
}

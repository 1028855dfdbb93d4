/* sift_convert.cl — the user's image to grey levels on the device, and the doubled first octave.
 * (Part of the sift.cl program.) */

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
  grey[p] = sift_gray_raw(raw, type, channels, i);
}

/* sift_upsample: global (2w, 2h), any work-group shape; one work-item per output pixel: numeric/
 * sift_upsample.h's sift_upsampled_pixel (OpenCV's INTER_LINEAR, the CPU backend's float operations). */
__kernel void sift_upsample(__global const float* in, int w, int h, __global float* out) {
  const int x = get_global_id(0), y = get_global_id(1);
  const int w2 = 2 * w, h2 = 2 * h;
  if (x >= w2 || y >= h2) return;
  out[(size_t)y * (size_t)w2 + (size_t)x] = sift_upsampled_pixel(in, w, h, x, y);
}

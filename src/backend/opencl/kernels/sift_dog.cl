/* sift_dog.cl — the difference of Gaussians of a whole octave in one launch. (Part of the sift.cl program.) */

/* sift_dog: global ceil(n / 4) with n = (S + 2) * plane, any work-group size; one work-item per 4 floats.
 * DoG plane i = level i + 1 - level i; the levels and the planes of an octave are contiguous, so plane
 * value k is gauss[k + plane] - gauss[k]. */
__kernel void sift_dog(__global const float* gauss, __global float* dog, long gauss_off, long dog_off, long plane,
                       long n) {
  const long i = 4 * (long)get_global_id(0);
  if (i >= n) return;
  __global const float* g = gauss + gauss_off;
  __global float* d = dog + dog_off;
  if (i + 4 <= n) {
    vstore4(vload4(0, g + i + plane) - vload4(0, g + i), 0, d + i);
  } else {
    for (long k = i; k < n; ++k) d[k] = g[k + plane] - g[k];
  }
}

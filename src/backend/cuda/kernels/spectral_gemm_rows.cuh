// The GEMM operand X of the many-reference path, one row per pixel (kernel spectral_gemm_rows).
#pragma once

#include "backend/cuda/kernels/spectral_convert.cuh"

namespace spectrasift::cuda::kernels {

/* spectral_gemm_rows: the GEMM operand X, one row of kpad floats per pixel (pixel-major, so that the
 * product is a "TN" GEMM with the pixels' rows contiguous): ed/sam/scc: the pixel's values; sid:
 * [p'_j / P (j < n), log p'_j] (see numeric/spectral_metrics.h, sid without a second pass); zeros up
 * to kpad. Launch: grid (ceil(npix / 32), ceil(kpad / 32)), block (32, 8): a 32 x 32 tile goes through
 * shared memory so that both the plane reads and the row writes are coalesced. */
__global__ void __launch_bounds__(kBlock) spectral_gemm_rows(PixelPlanes planes, int npix, int n, int kdim, int kpad,
                                                             int sid, float* __restrict__ x) {
  __shared__ float tile[32][33];
  const int p0 = blockIdx.x * 32, c0 = blockIdx.y * 32;
  for (int i = threadIdx.y; i < 32; i += 8) {
    const int c = c0 + i, p = p0 + threadIdx.x;
    float v = 0.0f;
    if (p < npix && c < kdim) {
      if (!sid) {
        v = planes.f[(long long)c * planes.pitch + p];
      } else if (c < n) {
        v = (float)((double)spectral_sid_clamp(planes.f[(long long)c * planes.pitch + p]) / planes.sum_p[p]);
      } else {
        v = spectral_sid_log(spectral_sid_clamp(planes.f[(long long)(c - n) * planes.pitch + p]));
      }
    }
    tile[i][threadIdx.x] = v;
  }
  __syncthreads();
  for (int i = threadIdx.y; i < 32; i += 8) {
    const int p = p0 + i, c = c0 + threadIdx.x;
    if (p < npix && c < kpad) x[(long long)p * kpad + c] = tile[threadIdx.x][i];
  }
}

}  // namespace spectrasift::cuda::kernels

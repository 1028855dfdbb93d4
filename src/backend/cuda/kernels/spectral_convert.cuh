// Native chunk -> float planes, statistics and no-data flags for the multi-reference paths (kernel family
// spectral_convert: spectral_convert and its vector-load form spectral_convert_rows).
#pragma once

#include "backend/cuda/kernels/spectral_common.cuh"

namespace spectrasift::cuda::kernels {

/// V consecutive stored samples, loaded with one vector instruction (V * sizeof(Raw) = 2..16 bytes).
template <class Raw, int V> struct alignas(V * sizeof(Raw)) SampleVec {
  Raw v[V];
};

/// Per-pixel products of spectral_convert, for the multi-reference paths.
struct PixelPlanes {
  float* f = nullptr;            ///< F[j * pitch + p]: scaled value of used band j
  long long pitch = 0;           ///< elements between planes (>= npix, a multiple of 32 for aligned GEMM rows)
  double* sum_p = nullptr;       ///< SpectralPixelStats per pixel
  double* sum_p2 = nullptr;
  double* sum_plp = nullptr;
  unsigned char* valid = nullptr;  ///< 0 = no data (ignore value in a used band)
};

/* spectral_convert<kType>: native chunk -> float planes, statistics and no-data flags; with `absmax`
 * (not null) also the largest finite |value| of the chunk, as float bits through atomicMax (the maximum
 * does not depend on the order). Launch: grid ceil(npix / 256), block 256, one thread per pixel; no
 * shared memory. Writes are coalesced (plane j is contiguous in p). */
template <int kType>
__global__ void __launch_bounds__(kBlock) spectral_convert(const typename Storage<kType>::type* __restrict__ chunk,
                                                           ChunkLayout layout, CubeConst cube,
                                                           const int* __restrict__ band_index, int n, int metric,
                                                           PixelPlanes planes, unsigned* absmax) {
  const int p = blockIdx.x * blockDim.x + threadIdx.x;
  if (p >= cube.npix) return;
  const int yl = p / cube.samples, x = p - yl * cube.samples;
  const long long base = (long long)yl * layout.ls + (long long)x * layout.ss;
  SpectralPixelStats st;
  spectral_stats_init(&st);
  int ignored = 0;
  float amax = 0.0f;
#pragma unroll 4
  for (int j = 0; j < n; ++j) {
    const float v = load_sample<kType>(chunk, base + (long long)__ldg(band_index + j) * layout.bs, cube.big_endian);
    ignored |= spectral_is_ignored(v, cube.has_ignore, cube.ignore);
    const float pv = v * cube.scale;
    planes.f[(long long)j * planes.pitch + p] = pv;
    spectral_stats_add(&st, metric, pv);
    const float a = fabsf(pv);
    if (a <= 3.402823466e38f) amax = fmaxf(amax, a);  // finite values only
  }
  if (absmax && amax > 0.0f) atomicMax(absmax, __float_as_uint(amax));
  planes.sum_p[p] = st.sum_p;
  planes.sum_p2[p] = st.sum_p2;
  planes.sum_plp[p] = st.sum_plp;
  planes.valid[p] = ignored ? 0 : 1;
}

/* spectral_convert_rows<kType, V, kIgnore>: spectral_convert for BSQ/BIL chunks of small-integer cubes
 * without a scale factor, for ed/sam/scc (the caller checks; sid needs logarithms). Same outputs, bit for
 * bit: the float of an integer sample is exact, and sum p / sum p^2 are exact integers (summed as such).
 * Launch: grid ceil(npix / (256 V)), block 256, V consecutive pixels per thread (alignment as in
 * spectral_one_ref_rows: layout.bs % V == 0, BIL samples % V == 0), one vector load per band and one
 * V-float store per plane (planes.pitch is a multiple of 32). */
template <int kType, int V, bool kIgnore>
__global__ void __launch_bounds__(kBlock) spectral_convert_rows(const typename Storage<kType>::type* __restrict__ chunk,
                                                                ChunkLayout layout, CubeConst cube,
                                                                const int* __restrict__ band_index, int n,
                                                                PixelPlanes planes, unsigned* absmax) {
  using Raw = typename Storage<kType>::type;
  using Vec = SampleVec<Raw, V>;
  const int p0 = (blockIdx.x * blockDim.x + threadIdx.x) * V;
  if (p0 >= cube.npix) return;
  const int yl = p0 / cube.samples, x = p0 - yl * cube.samples;
  const Raw* px = chunk + (long long)yl * layout.ls + (long long)x * layout.ss;
  long long s1[V];
  unsigned long long s2[V];
  int ignored = 0, amax = 0;
  int ign_int = 0;
  bool ign_is_int = false;
  if (kIgnore && fabsf(cube.ignore) < 2147483648.0f) {
    ign_int = (int)cube.ignore;
    ign_is_int = (float)ign_int == cube.ignore;
  }
#pragma unroll
  for (int v = 0; v < V; ++v) {
    s1[v] = 0;
    s2[v] = 0;
  }
#pragma unroll 4
  for (int j = 0; j < n; ++j) {
    const Vec raw = *reinterpret_cast<const Vec*>(px + (long long)__ldg(band_index + j) * layout.bs);
    float f[V];
#pragma unroll
    for (int v = 0; v < V; ++v) {
      Raw rv = raw.v[v];
      if (cube.big_endian) rv = byte_swap(rv);
      const int iv = kType == SPECTRAL_TYPE_I16 ? (int)(short)rv : (int)rv;
      f[v] = __int_as_float(0x4B400000 + iv) - 12582912.0f;  // (float)iv, exactly
      if constexpr (kIgnore) ignored |= (ign_is_int && iv == ign_int) << v;
      s1[v] += iv;
      s2[v] += (unsigned long long)((unsigned)iv * (unsigned)iv);
      amax = max(amax, abs(iv));
    }
    float* dst = planes.f + (long long)j * planes.pitch + p0;
    if constexpr (V == 4) *reinterpret_cast<float4*>(dst) = make_float4(f[0], f[1], f[2], f[3]);
    else if constexpr (V == 2) *reinterpret_cast<float2*>(dst) = make_float2(f[0], f[1]);
    else dst[0] = f[0];
  }
#pragma unroll
  for (int v = 0; v < V; ++v) {
    const int p = p0 + v;
    if (p >= cube.npix) break;
    planes.sum_p[p] = (double)s1[v];
    planes.sum_p2[p] = (double)s2[v];
    planes.sum_plp[p] = 0.0;
    planes.valid[p] = ((ignored >> v) & 1) ? 0 : 1;
  }
  if (absmax && amax > 0) atomicMax(absmax, __float_as_uint((float)amax));
}

}  // namespace spectrasift::cuda::kernels

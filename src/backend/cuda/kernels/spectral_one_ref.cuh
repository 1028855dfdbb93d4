// Spectral matching against one reference, reading the chunk in its native type (kernel family
// spectral_one_ref; layouts and shared types: spectral_common.cuh).
#pragma once

#include "backend/cuda/kernels/spectral_common.cuh"

namespace spectrasift::cuda::kernels {

template <int kType, int kMetric>
__global__ void __launch_bounds__(kBlock) spectral_one_ref(const typename Storage<kType>::type* __restrict__ chunk,
                                                           ChunkLayout layout, CubeConst cube, OneRef ref,
                                                           OutView out) {
  extern __shared__ double smem_d[];
  __shared__ Partial part[kOneRefGroups][kOneRefPixels];
  double* r1d = smem_d;  // the reference row in double (ed's integer fast path)
  float* r1 = reinterpret_cast<float*>(smem_d + ref.n);
  float* r2 = r1 + ref.n;
  int* bidx = reinterpret_cast<int*>(r2 + ref.n);
  constexpr bool kSmallInt = kOneRefIntegerPath<kType, kMetric>;
  // ed's split form (small integers, no scale): ri in the double row's place, rf in the second row's.
  const bool split = kSmallInt && kMetric == SPECTRAL_METRIC_ED && ref.ed_split && cube.scale == 1.0f;
  int* rint = reinterpret_cast<int*>(r1d);
  for (int j = threadIdx.x; j < ref.n; j += blockDim.x) {
    r1[j] = ref.v1[j];
    if (split) {
      rint[j] = ref.ri[j];
      r2[j] = ref.rf[j];
    } else {
      r1d[j] = (double)ref.v1[j];
      r2[j] = ref.v2 ? ref.v2[j] : 0.0f;
    }
    bidx[j] = ref.band_index[j];
  }
  __syncthreads();
  // Group g sums bands g, g+8, g+16, ... in order: the same partition, hence the same float sums, for
  // every layout, so that BSQ, BIL and BIP give identical bits.
  int slot, group;
  if (layout.ss == 1) {
    slot = threadIdx.x & 31;
    group = threadIdx.x >> 5;
  } else {
    slot = threadIdx.x / kOneRefGroups;
    group = threadIdx.x % kOneRefGroups;
  }
  const int p = blockIdx.x * kOneRefPixels + slot;
  Partial pt;
  spectral_stats_init(&pt.st);
  spectral_pair_init(&pt.acc);
  pt.ignored = 0;
  if (p < cube.npix) {
    const int yl = p / cube.samples, x = p - yl * cube.samples;
    const long long base = (long long)yl * layout.ls + (long long)x * layout.ss;
    bool done = false;
    if constexpr (kSmallInt) {
      if (cube.scale == 1.0f) {
        // Small integers, no scale: the same numbers as the generic loop, with fewer conversions (the
        // conversion units, not the memory, bound the generic loop). v = (float)iv exactly through the
        // 1.5 * 2^23 trick; sum p and sum p^2 are exact integers, so summing them as integers and
        // converting once gives the double the shared formula would; ed's (double)p - (double)r is the
        // same subtraction with (double)r precomputed.
        long long s1 = 0;
        unsigned long long s2 = 0;
#pragma unroll 4
        for (int j = group; j < ref.n; j += kOneRefGroups) {
          typename Storage<kType>::type raw = __ldg(chunk + base + (long long)bidx[j] * layout.bs);
          if (cube.big_endian) raw = byte_swap(raw);
          const int iv = kType == SPECTRAL_TYPE_I16 ? (int)(short)raw : (int)raw;
          const float v = __int_as_float(0x4B400000 + iv) - 12582912.0f;
          pt.ignored |= spectral_is_ignored(v, cube.has_ignore, cube.ignore);
          if constexpr (kMetric == SPECTRAL_METRIC_ED) {
            if (split) {  // sum q^2 exactly, q . rf in float (spectral_ed_d2_split), as spectral_one_ref_rows
              const int q = iv - rint[j];
              s2 += (unsigned long long)((long long)q * q);
              pt.acc.dot = __fmaf_rn(__int_as_float(0x4B400000 + q) - 12582912.0f, r2[j], pt.acc.dot);
            } else {
              const double d = (double)iv - r1d[j];
              pt.acc.d2 += d * d;
            }
          } else {
            s1 += iv;
            s2 += (unsigned long long)((unsigned)iv * (unsigned)iv);  // < 2^32, also for negative i16
            pt.acc.dot += v * r1[j];
          }
        }
        pt.st.sum_p = (double)s1;
        pt.st.sum_p2 = (double)s2;
        done = true;
      }
    }
    if (!done) {
#pragma unroll 4
      for (int j = group; j < ref.n; j += kOneRefGroups) {
        const float v = load_sample<kType>(chunk, base + (long long)bidx[j] * layout.bs, cube.big_endian);
        pt.ignored |= spectral_is_ignored(v, cube.has_ignore, cube.ignore);
        const float pv = v * cube.scale;
        spectral_stats_add(&pt.st, kMetric, pv);
        spectral_pair_add(&pt.acc, kMetric, pv, r1[j], r2[j]);
      }
    }
  }
  part[group][slot] = pt;
  __syncthreads();
  if (threadIdx.x >= kOneRefPixels) return;
  const int q = blockIdx.x * kOneRefPixels + threadIdx.x;
  if (q >= cube.npix) return;
  Partial t = part[0][threadIdx.x];
  for (int g = 1; g < kOneRefGroups; ++g) {
    const Partial& o = part[g][threadIdx.x];
    t.st.sum_p += o.st.sum_p;
    t.st.sum_p2 += o.st.sum_p2;
    t.st.sum_plp += o.st.sum_plp;
    t.acc.d2 += o.acc.d2;
    t.acc.dot += o.acc.dot;
    t.acc.dot2 += o.acc.dot2;
    t.ignored |= o.ignored;
  }
  float score;
  if (t.ignored)
    score = SPECTRASIFT_NAN_F;
  else if (split)
    score = spectral_finalise_ed(spectral_ed_d2_split(t.st.sum_p2, t.acc.dot, ref.rf2));
  else
    score = spectral_finalise(kMetric, &t.st, &t.acc, ref.n, ref.constant);
  if (out.mode == kOutThreshold && !spectral_passes(score, out.threshold, spectral_higher_is_better(kMetric)))
    score = SPECTRASIFT_NAN_F;
  write_single(out, q, score);
}

}  // namespace spectrasift::cuda::kernels

// sift_pack.cuh — the kept features packed for the one read-back of download() (host/sift_unpack.hpp reads
// the layout): n records (SiftKeypoint, 48 bytes each) followed by n descriptor rows of 128 values, as bytes
// when the descriptors are integers 0..255 (default options: numeric/sift_descriptor.h's finalize rounds and
// saturates, so a byte holds the value exactly; OpenCV's CV_8U export) or as floats (RootSIFT).
// n is the live kept count, read on the device, so the host copies exactly sift_packed_bytes(n) bytes once it
// has read the count back.
#pragma once

#include "backend/cuda/host/sift_unpack.hpp"
#include "backend/cuda/kernels/sift_common.cuh"

namespace spectrasift::cuda::kernels {

// sift_pack_features: grid G (the host's cap; the threads stride), block 256; one thread per 16-byte unit:
// units 0 .. 3n - 1 copy the records (3 int4 each), the next 32n units each convert 4 descriptor values
// (float4 -> 4 bytes, or float4 -> float4). The byte rows start at 48 n bytes, a multiple of 16, so every
// store is aligned. `capacity` bounds n (the smaller of the record and descriptor buffers).
__global__ void sift_pack_features(const SiftKeypoint* kept, const float* descriptors, const unsigned int* counters,
                                   unsigned int capacity, int bytes_rows, unsigned char* packed) {
  const unsigned long long n = min(counters[kCountKept], capacity);
  const unsigned long long record_units = 3ull * n;  // 48-byte records in 16-byte units
  const unsigned long long desc_units = 32ull * n;   // 128 values per row, 4 per unit
  const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  const int4* rec = reinterpret_cast<const int4*>(kept);
  const float4* d = reinterpret_cast<const float4*>(descriptors);
  unsigned char* rows = packed + sift_packed_descriptor_offset(n);
  for (unsigned long long u = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; u < record_units + desc_units;
       u += stride) {
    if (u < record_units) {
      reinterpret_cast<int4*>(packed)[u] = rec[u];
      continue;
    }
    const unsigned long long v = u - record_units;
    const float4 f = d[v];
    if (bytes_rows) {
      // Exact for the integer values 0..255 that finalize writes (the host takes this path only then).
      uchar4 b;
      b.x = (unsigned char)f.x;
      b.y = (unsigned char)f.y;
      b.z = (unsigned char)f.z;
      b.w = (unsigned char)f.w;
      reinterpret_cast<uchar4*>(rows)[v] = b;
    } else {
      reinterpret_cast<float4*>(rows)[v] = f;
    }
  }
}

}  // namespace spectrasift::cuda::kernels

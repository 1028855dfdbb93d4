// sift_dog.cuh — the difference of Gaussians of a whole octave in one launch.
#pragma once

#include "backend/cuda/kernels/sift_common.cuh"

namespace spectrasift::cuda::kernels {

// sift_dog: grid ceil(n / 256) (at most the host's cap; the threads stride over the rest), block 256; one
// thread per value at a time, n = (S + 2) * plane. DoG plane i = level i + 1 - level i; the levels and the
// planes of an octave are contiguous, so plane value k is gauss[k + plane] - gauss[k].
__global__ void sift_dog(const float* gauss, float* dog, long long plane, long long n) {
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    dog[i] = gauss[i + plane] - gauss[i];
}

}  // namespace spectrasift::cuda::kernels

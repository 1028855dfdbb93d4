// Probe (not part of the build): can a kernel read a file mapping (the page cache) in place, with no host copy
// and no registration? Only where the device reports cudaDevAttrPageableMemoryAccess (HMM or ATS); then it times
// a kernel summing a fresh mapping of FILE, 4 times (docs/performance/spectral.md, 'In-place uploads'). On the GPU machine:
//   nvcc -O2 -arch=sm_90 bench/probes/cuda_pageable_access_probe.cu -o /tmp/hp &&
//   head -c 140800000 /dev/urandom > /tmp/cube.bin && /tmp/hp /tmp/cube.bin
#include <cuda_runtime.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <chrono>
#include <cstdio>
// Grid-stride sum of 16-byte words; launch: 132 x 8 blocks of 256 threads (8 blocks per H200 SM).
__global__ void sum_kernel(const uint4* p, size_t n, unsigned long long* out) {
  unsigned long long s = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint4 v = p[i]; s += v.x + v.y + v.z + v.w;
  }
  atomicAdd(out, s);
}
int main(int argc, char** argv) {
  int a = 0, b = 0, c = 0, d = 0;
  cudaDeviceGetAttribute(&a, cudaDevAttrPageableMemoryAccess, 0);
  cudaDeviceGetAttribute(&b, cudaDevAttrPageableMemoryAccessUsesHostPageTables, 0);
  cudaDeviceGetAttribute(&c, cudaDevAttrConcurrentManagedAccess, 0);
  cudaDeviceGetAttribute(&d, cudaDevAttrHostRegisterSupported, 0);
  printf("pageableMemoryAccess %d usesHostPageTables %d concurrentManaged %d hostRegister %d\n", a, b, c, d);
  if (!a || argc < 2) return 0;
  int fd = open(argv[1], O_RDONLY); struct stat st; fstat(fd, &st);
  unsigned long long* out; cudaMalloc(&out, 8);
  for (int r = 0; r < 4; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    void* m = mmap(nullptr, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    cudaMemset(out, 0, 8);
    sum_kernel<<<132 * 8, 256>>>((const uint4*)m, st.st_size / 16, out);
    cudaError_t e = cudaDeviceSynchronize();
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    printf("run %d: %s, %.3f ms (%.1f GB/s)\n", r, cudaGetErrorString(e), ms, st.st_size / ms / 1e6);
    munmap(m, st.st_size);
    if (e != cudaSuccess) return 1;
  }
}

// Probe (not part of the build): how fast the CUDA driver uploads straight from a file mapping (pageable), and
// whether cudaHostRegister works on anonymous memory and on a populated MAP_PRIVATE file mapping
// (docs/performance/spectral.md, 'In-place uploads'). Build and run on the GPU machine:
//   nvcc -O2 -arch=sm_90 bench/probes/cuda_host_register_probe.cu -o /tmp/probe && /tmp/probe FILE
// FILE: any file in the page cache (the measurement used 134 MiB of /dev/urandom).
#include <cuda_runtime.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
static double now_ms() { return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
int main(int argc, char** argv) {
  int fd = open(argv[1], O_RDONLY); struct stat sb; fstat(fd, &sb); size_t n = sb.st_size;
  void* d; cudaMalloc(&d, n); cudaFree(0);
  for (int rep = 0; rep < 3; ++rep) {
    double t0 = now_ms();
    void* m = mmap(nullptr, n, PROT_READ, MAP_PRIVATE, fd, 0);
    cudaMemcpy(d, m, n, cudaMemcpyHostToDevice);
    double t1 = now_ms();
    cudaMemcpy(d, m, n, cudaMemcpyHostToDevice);  // mapping now populated
    double t2 = now_ms();
    const size_t chunk = 16u << 20; cudaStream_t s; cudaStreamCreate(&s);
    for (size_t off = 0; off < n; off += chunk) cudaMemcpyAsync((char*)d + off, (char*)m + off, off + chunk < n ? chunk : n - off, cudaMemcpyHostToDevice, s);
    cudaStreamSynchronize(s);
    double t3 = now_ms();
    munmap(m, n);
    printf("pageable upload of %.1f MB: fresh mapping %.3f ms, warm %.3f ms, warm in 16 MiB async pieces %.3f ms\n", n / 1e6, t1 - t0, t2 - t1, t3 - t2);
  }
  void* a = aligned_alloc(4096, (n + 4095) / 4096 * 4096); memset(a, 1, n);
  double t0 = now_ms();
  cudaError_t e = cudaHostRegister(a, (n + 4095) / 4096 * 4096, cudaHostRegisterDefault);
  double t1 = now_ms();
  printf("cudaHostRegister of %.1f MB of anonymous memory: %s in %.3f ms\n", n / 1e6, cudaGetErrorName(e), t1 - t0); fflush(stdout);
  if (e == cudaSuccess) {
    cudaMemcpy(d, a, n, cudaMemcpyHostToDevice); double t2 = now_ms(); cudaMemcpy(d, a, n, cudaMemcpyHostToDevice); double t3 = now_ms();
    cudaHostUnregister(a); double t4 = now_ms();
    printf("upload from it %.3f ms; unregister %.3f ms\n", t3 - t2, t4 - t3);
  }
  void* m = mmap(nullptr, n, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
  printf("now cudaHostRegister(ReadOnly) of a populated MAP_PRIVATE file mapping (may hang)...\n"); fflush(stdout);
  t0 = now_ms(); e = cudaHostRegister(m, n / 4096 * 4096, cudaHostRegisterReadOnly); t1 = now_ms();
  printf("file mapping register: %s in %.3f ms\n", cudaGetErrorName(e), t1 - t0);
  return 0;
}

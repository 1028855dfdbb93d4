// Probe (not part of the build): where the CUDA pyramid's time goes, octave by octave (docs/performance/sift.md,
// "Where the pyramid's time goes"). For every octave of a 1920 x 1080 image upsampled (3840 x 2160 down to 15 x 8)
// it captures the octave's five blur levels (kernels::sift_blur_tiles<R> with OpenCV's radii for 3 layers and sigma
// 1.6: 5, 6, 8, 10, 13), each writing its DoG plane as the library's levels do, twenty times over in one graph, and
// times the graph's launch (CUDA events, median of 30 after 5): plain launches, programmatic dependent launches
// (the library's default since session 7), and kernels::sift_blur_small<R> (32 x 16 tiles) as programmatic
// dependents. Per level: that time / 100, against the level's DRAM floor (read the
// source, write the level and the DoG plane: 12 bytes a pixel at 4.0 TB/s). Build and run on the GPU machine:
//   nvcc -std=c++20 -O3 --fmad=false -arch=sm_90a -I src -I include -I <build>/generated -I <build>/include \
//        bench/probes/pyramid_octave_probe.cu -o /tmp/pyramid_probe && /tmp/pyramid_probe
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "backend/cuda/kernels/sift_blur.cuh"

namespace k = spectrasift::cuda::kernels;

#define CHECK(x)                                                                        \
  do {                                                                                  \
    cudaError_t e_ = (x);                                                               \
    if (e_ != cudaSuccess) {                                                            \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      return 1;                                                                         \
    }                                                                                   \
  } while (0)

using Kernel = void (*)(k::SiftBlurSource, int, int, const float*, float*, float*, float*);

Kernel kernel_for(int r, bool small) {
  switch (r) {
    case 5: return small ? k::sift_blur_small<5> : k::sift_blur_tiles<5>;
    case 6: return small ? k::sift_blur_small<6> : k::sift_blur_tiles<6>;
    case 8: return small ? k::sift_blur_small<8> : k::sift_blur_tiles<8>;
    case 10: return small ? k::sift_blur_small<10> : k::sift_blur_tiles<10>;
    default: return small ? k::sift_blur_small<13> : k::sift_blur_tiles<13>;
  }
}

int main() {
  const int radii[5] = {5, 6, 8, 10, 13};
  const int repeats = 20, runs = 30, warmup = 5;
  const std::size_t max_plane = 3840u * 2160u;
  float *planes = nullptr, *taps = nullptr;
  CHECK(cudaMalloc(&planes, 12 * max_plane * sizeof(float)));  // 6 levels + 5 DoG planes (+1)
  CHECK(cudaMemset(planes, 0, 12 * max_plane * sizeof(float)));
  std::vector<float> host_taps(14, 0.05f);
  CHECK(cudaMalloc(&taps, host_taps.size() * sizeof(float)));
  CHECK(cudaMemcpy(taps, host_taps.data(), host_taps.size() * sizeof(float), cudaMemcpyHostToDevice));
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  std::printf("| octave | plane | blocks a level | plain us/level | PDL us/level | sift_blur_small, PDL us/level | DRAM floor us/level |\n");
  std::printf("|---:|---|---:|---:|---:|---:|---:|\n");
  double total[3] = {0, 0, 0};
  for (int o = 0; o < 9; ++o) {
    const int w = 3840 >> o, h = 2160 >> o;
    const std::size_t plane = std::size_t(w) * std::size_t(h);
    double us[3] = {0, 0, 0};
    for (int variant = 0; variant < 3; ++variant) {
      const int pdl = variant > 0 ? 1 : 0;
      const bool small = variant == 2;
      cudaGraph_t g;
      cudaGraphExec_t ge;
      CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
      for (int rep = 0; rep < repeats; ++rep)
        for (int i = 1; i <= 5; ++i) {
          cudaLaunchAttribute attr{};
          attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
          attr.val.programmaticStreamSerializationAllowed = 1;
          cudaLaunchConfig_t cfg{};
          const int tw = small ? k::kBlurSmallTileW : k::kBlurTileW, th = small ? k::kBlurSmallTileH : k::kBlurTileH;
          cfg.gridDim = dim3(unsigned((w + tw - 1) / tw), unsigned((h + th - 1) / th));
          cfg.blockDim = dim3(32, 8);
          cfg.stream = s;
          cfg.attrs = &attr;
          cfg.numAttrs = pdl;
          const k::SiftBlurSource src{planes + std::size_t(i - 1) * plane, w, 1};
          CHECK(cudaLaunchKernelEx(&cfg, kernel_for(radii[i - 1], small), src, w, h, (const float*)taps,
                                   planes + std::size_t(i) * plane, planes + std::size_t(6 + i - 1) * plane,
                                   (float*)nullptr));
        }
      CHECK(cudaStreamEndCapture(s, &g));
      CHECK(cudaGraphInstantiate(&ge, g, 0));
      std::vector<float> t;
      for (int r = 0; r < warmup + runs; ++r) {
        CHECK(cudaEventRecord(a, s));
        CHECK(cudaGraphLaunch(ge, s));
        CHECK(cudaEventRecord(b, s));
        CHECK(cudaEventSynchronize(b));
        float ms = 0;
        CHECK(cudaEventElapsedTime(&ms, a, b));
        if (r >= warmup) t.push_back(ms);
      }
      std::nth_element(t.begin(), t.begin() + t.size() / 2, t.end());
      us[variant] = 1000.0 * t[t.size() / 2] / (repeats * 5);
      total[variant] += 5 * us[variant];
      CHECK(cudaGraphExecDestroy(ge));
      CHECK(cudaGraphDestroy(g));
    }
    const unsigned blocks = unsigned((w + 63) / 64) * unsigned((h + 31) / 32);
    std::printf("| %d | %d x %d | %u | %.2f | %.2f | %.2f | %.2f |\n", o, w, h, blocks, us[0], us[1], us[2],
                12.0 * double(plane) / 4.0e6);
  }
  std::printf("\nfive levels of every octave: plain %.1f us, PDL %.1f us, sift_blur_small (PDL) %.1f us\n", total[0],
              total[1], total[2]);
  return 0;
}

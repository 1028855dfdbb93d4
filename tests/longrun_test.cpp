// Long-running use (issue 5, item 4): many SIFT extractions, registrations (match + RANSAC + warp) and
// spectral runs (a cube opened and matched each time) in one process, on one reused Context, keep the
// resident memory flat. Two image sizes alternate, so that a plan cache keyed by shape that never
// releases anything would show up too.
//
// CI runs a small count (SPECTRASIFT_LONGRUN_N, default 12). The full run quoted in the issue note:
//   SPECTRASIFT_LONGRUN_N=1000 ./build/bin/longrun_test
// (SPECTRASIFT_LONGRUN_BACKEND=opencl runs it on the first OpenCL device instead of the CPU.)
// The RSS is read from /proc/self/statm after malloc_trim(0), once after a warm-up of max(3, N/10)
// iterations and once at the end; growth must stay under 8 MiB. Under AddressSanitizer the RSS
// check is skipped (its quarantine keeps freed memory on purpose) and LeakSanitizer does the job.
#include <gtest/gtest.h>
#include <malloc.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#ifdef SPECTRASIFT_HAVE_CUDA
#include "hooks/cuda_hooks.hpp"
#endif
#include "image_test_util.hpp"
#include "spectrasift/context.hpp"
#include "spectrasift/envi.hpp"
#include "spectrasift/error.hpp"
#include "spectrasift/geometry.hpp"
#include "spectrasift/io.hpp"
#include "spectrasift/match.hpp"
#include "spectrasift/sift.hpp"
#include "spectrasift/spectral.hpp"

#if defined(__SANITIZE_ADDRESS__)
#define SPECTRASIFT_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SPECTRASIFT_ASAN 1
#endif
#endif

using spectrasift::test::crop;

namespace {

using namespace spectrasift;

const std::string kData = SPECTRASIFT_TEST_DATA;

double rss_mib() {
  ::malloc_trim(0);
  std::ifstream in("/proc/self/statm");
  long pages_total = 0, pages_resident = 0;
  in >> pages_total >> pages_resident;
  return double(pages_resident) * double(::sysconf(_SC_PAGESIZE)) / (1024.0 * 1024.0);
}

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

/// Device memory in use (MiB) when ctx is a CUDA Context, else -1.
double gpu_used_mib([[maybe_unused]] Context& ctx) {
#ifdef SPECTRASIFT_HAVE_CUDA
  if (ctx.backend() == Backend::kCuda) return double(cuda::bench::device_memory_used_bytes(ctx)) / (1 << 20);
#endif
  return -1;
}

TEST(LongRun, ExtractionsRegistrationsAndSpectralRunsKeepMemoryFlat) {
  const int n = env_int("SPECTRASIFT_LONGRUN_N", 12);
  ASSERT_GE(n, 4);
  ContextOptions co;
  co.backend = Backend::kCpu;
  if (const char* b = std::getenv("SPECTRASIFT_LONGRUN_BACKEND")) co.backend = parse_backend(b);
  Context ctx(co);
  // Stages the chosen backend does not implement yet (Error kUnsupported) run on a CPU Context instead.
  Context cpu(ContextOptions{.backend = Backend::kCpu});
  std::string fell_back;
  auto on = [&](const char* what, auto&& f) {
    try {
      return f(ctx);
    } catch (const Error& e) {
      if (e.code() != ErrorCode::kUnsupported || ctx.backend() == Backend::kCpu) throw;
      if (fell_back.find(what) == std::string::npos) fell_back += std::string(" ") + what;
      return f(cpu);
    }
  };

  // Two sizes of fixed image, each with a moving image under a known similarity.
  const Image camera = read_image(kData + "/camera.png");
  const std::array<int, 2> sizes{128, 192};
  std::array<Image, 2> fixed, moving;
  const double a = 0.3, s = 0.9;
  const std::array<double, 9> truth{s * std::cos(a), -s * std::sin(a), 9, s * std::sin(a), s * std::cos(a), 4, 0, 0, 1};
  for (int i = 0; i < 2; ++i) {
    fixed[std::size_t(i)] = crop(camera, 150, 100, sizes[std::size_t(i)], sizes[std::size_t(i)]);
    moving[std::size_t(i)] = warp_image(fixed[std::size_t(i)], invert_model(truth), sizes[std::size_t(i)],
                                        sizes[std::size_t(i)]);
  }
  const std::string cube_hdr = kData + "/hydice_data.hdr";

  std::vector<std::pair<int, int>> pixels;
  for (int k = 0; k < 120; ++k) pixels.push_back({(k * 7) % 80, (k * 13) % 80});
  const SpectralLibrary many_refs = [&] {
    const EnviCube cube = open_envi(cube_hdr);
    return reference_from_pixels(cube, pixels);
  }();

  const int warmup = std::max(3, n / 10);
  double rss_warm = 0, gpu_warm = 0;
  std::size_t total_features = 0;
  int models = 0;
  for (int it = 0; it < n; ++it) {
    const int i = it % 2;
    SiftOptions sift;  // float and byte descriptors in turn (their read-backs and device copies differ)
    sift.descriptor_type = (it / 2) % 2 ? DescriptorType::kU8 : DescriptorType::kF32;
    const Features f = on("sift", [&](Context& c) { return detect_and_compute(c, fixed[std::size_t(i)], sift); });
    const Features m = on("sift", [&](Context& c) { return detect_and_compute(c, moving[std::size_t(i)], sift); });
    total_features += f.size() + m.size();
    const auto matches = on("match", [&](Context& c) { return match_features(c, m, f); });
    std::vector<Point2> mv, fx;
    for (const auto& x : matches) {
      mv.push_back({double(m.keypoints[std::size_t(x.query)].x), double(m.keypoints[std::size_t(x.query)].y)});
      fx.push_back({double(f.keypoints[std::size_t(x.train)].x), double(f.keypoints[std::size_t(x.train)].y)});
    }
    RansacOptions ro;
    ro.model = GeometryModel::kSimilarity;
    ro.seed = std::uint64_t(it);
    const ModelEstimate est = on("ransac", [&](Context& c) { return estimate_model(c, mv, fx, ro); });
    models += est.found;
    const Image warped = on("warp", [&](Context& c) {
      return warp_image(c, moving[std::size_t(i)], est.matrix, fixed[std::size_t(i)].width,
                        fixed[std::size_t(i)].height);
    });
    ASSERT_EQ(warped.width, fixed[std::size_t(i)].width);

    // A spectral run over a freshly opened cube, alternating reductions (different output shapes).
    const EnviCube cube = open_envi(cube_hdr);
    SpectralOptions so;
    so.metric = it % 3 == 0 ? Metric::kEuclidean : Metric::kSpectralAngle;
    so.reduction = i == 0 ? Reduction::kBest : Reduction::kAll;
    const SpectralResult sr = on("spectral", [&](Context& c) {
      return spectral_match(c, cube, reference_from_pixels(cube, {{3, 4}, {50, 60}}), so);
    });
    ASSERT_EQ(sr.samples, 80);
    // And the best of many references (the GEMM / fused tensor-core path on a GPU).
    SpectralOptions mo;
    mo.metric = it % 2 == 0 ? Metric::kSpectralAngle : Metric::kEuclidean;
    mo.reduction = Reduction::kBest;
    const SpectralResult mr = on("spectral", [&](Context& c) { return spectral_match(c, cube, many_refs, mo); });
    ASSERT_EQ(mr.index.size(), std::size_t(mr.samples) * mr.lines);

    if (it + 1 == warmup) {
      rss_warm = rss_mib();
      gpu_warm = gpu_used_mib(ctx);
    }
  }
  const double rss_end = rss_mib();
  const double gpu_end = gpu_used_mib(ctx);
  if (gpu_end >= 0) {
    // Device memory in use on the whole GPU (cudaMemGetInfo): the Context's buffer pools must not grow.
    std::printf("[longrun] GPU memory in use after %d: %.1f MiB, after %d: %.1f MiB (growth %.2f MiB)\n", warmup,
                gpu_warm, n, gpu_end, gpu_end - gpu_warm);
    EXPECT_LT(gpu_end - gpu_warm, 16.0) << "device memory grew from " << gpu_warm << " to " << gpu_end << " MiB";
  }
  std::printf("[longrun] %s: %d iterations (2 extractions + match + RANSAC + warp + spectral each), "
              "%zu features, %d models; RSS after %d: %.1f MiB, after %d: %.1f MiB (growth %.2f MiB); "
              "run on the CPU (not implemented here):%s\n",
              ctx.describe().c_str(), n, total_features, models, warmup, rss_warm, n, rss_end, rss_end - rss_warm,
              fell_back.empty() ? " nothing" : fell_back.c_str());
  // The work itself must have happened (otherwise flat memory proves nothing).
  EXPECT_EQ(models, n);
  EXPECT_GT(total_features, std::size_t(n) * 40);
#ifdef SPECTRASIFT_ASAN
  std::printf("[longrun] AddressSanitizer build: RSS check skipped (LeakSanitizer checks leaks at exit)\n");
#else
  EXPECT_LT(rss_end - rss_warm, 8.0) << "resident memory grew from " << rss_warm << " to " << rss_end << " MiB";
#endif
}

}  // namespace

// Geometry on every backend of the machine: RANSAC homography over 10,000 planted matches with outliers
// (issue 19's target: <= 0.3 ms on the H200), one scoring batch alone, and the bilinear warp of a 4K image,
// each as the median of --runs runs after one warm-up, per backend (cpu, opencl, cuda: those present), with
// OpenCV's findHomography(RANSAC) and warpPerspective on the same input in the same process when OpenCV is
// there. Checks that every backend returns the CPU backend's model and pixels (bits) and says so.
//
//   geometry_bench [--runs N] [--threads T] [--opencl-device I] [--backends cpu,opencl,cuda] [--only ransac|warp]
//                  [--verbose]   (the contexts log; estimate_model's line gives the time spent scoring)
//                  [--msac | --no-msac]  (RANSAC ranked by MSAC, the default, or by the inlier count)
// The backend list may also name opencl/host-sums and opencl/device-sums: an OpenCL context whose RANSAC refits'
// sums are forced onto the host or the device (State::refit_variant; plain opencl keeps them on the host), so
// that both can be timed in one run.
//
// RANSAC cases: 10,000 pairs in a 1920 x 1080 frame, 50 % and 30 % outliers (uniform), inliers with 1 px
// Gaussian noise, default RansacOptions (threshold 3 px, confidence 0.999, local optimisation and the final
// refinement on): "end to end" is estimate_model; "no final refinement" the same with RansacOptions::refine off
// (RANSAC + local optimisation); "score 128 x 10k" is one score_models batch of 128 models on the run's
// device-resident pairs (the driver's largest batch), i.e. the launch + read-back floor.
// Warp: 3840 x 2160 u8 RGB and grey, a planted homography, output of the same size (upload, kernel and
// read-back included: the operation as warp_image(Context&, ...) runs it).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "bench_timing.hpp"
#ifdef SPECTRASIFT_HAVE_OPENCL
#include "hooks/opencl_hooks.hpp"
#endif
#include "core/context_impl.hpp"
#include "core/dispatch.hpp"
#include "spectrasift/context.hpp"
#include "spectrasift/geometry.hpp"

#ifdef SPECTRASIFT_HAVE_OPENCV
#include <opencv2/calib3d.hpp>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>
#endif

using namespace spectrasift;
using Mat3 = std::array<double, 9>;

using spectrasift::bench::median_ms;

namespace {

const Mat3 kPlanted{0.92, 0.11, 35.0, -0.07, 1.03, -18.0, 2.1e-5, -1.4e-5, 1.0};

void planted(int n, double outliers, std::uint64_t seed, std::vector<Point2>& moving, std::vector<Point2>& fixed) {
  std::mt19937_64 g(seed);
  std::uniform_real_distribution<double> ux(0, 1920), uy(0, 1080);
  std::normal_distribution<double> noise(0, 1.0);
  moving.resize(std::size_t(n));
  fixed.resize(std::size_t(n));
  const int inliers = int(std::lround((1.0 - outliers) * n));
  for (int i = 0; i < n; ++i) {
    const Point2 m{ux(g), uy(g)};
    moving[std::size_t(i)] = m;
    if (i < inliers) {
      const Point2 f = apply_model(kPlanted, m);
      fixed[std::size_t(i)] = {f.x + noise(g), f.y + noise(g)};
    } else {
      fixed[std::size_t(i)] = {ux(g), uy(g)};
    }
  }
  for (int i = n - 1; i > 0; --i) {
    const int j = int(g() % std::uint64_t(i + 1));
    std::swap(moving[std::size_t(i)], moving[std::size_t(j)]);
    std::swap(fixed[std::size_t(i)], fixed[std::size_t(j)]);
  }
}

bool same_estimate(const ModelEstimate& a, const ModelEstimate& b) {
  return a.found == b.found && a.inliers == b.inliers && a.iterations == b.iterations &&
         a.inlier_mask == b.inlier_mask && std::memcmp(a.matrix.data(), b.matrix.data(), sizeof(double) * 9) == 0 &&
         std::memcmp(&a.rms_px, &b.rms_px, sizeof(double)) == 0;
}

struct BenchBackend {
  std::string name;
  std::unique_ptr<Context> ctx;
};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) out.push_back(item);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 100, threads = 0, opencl_device = -1;
  bool verbose = false, msac = RansacOptions{}.msac;
  std::string wanted = "cpu,opencl,cuda", only;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--runs" && i + 1 < argc)
      runs = std::atoi(argv[++i]);
    else if (a == "--threads" && i + 1 < argc)
      threads = std::atoi(argv[++i]);
    else if (a == "--opencl-device" && i + 1 < argc)
      opencl_device = std::atoi(argv[++i]);
    else if (a == "--backends" && i + 1 < argc)
      wanted = argv[++i];
    else if (a == "--only" && i + 1 < argc)
      only = argv[++i];
    else if (a == "--verbose")
      verbose = true;
    else if (a == "--msac")
      msac = true;
    else if (a == "--no-msac")
      msac = false;
    else {
      std::fprintf(stderr,
                   "usage: geometry_bench [--runs N] [--threads T] [--opencl-device I] [--backends LIST] [--only "
                   "ransac|warp] [--verbose] [--msac | --no-msac]\n");
      return 2;
    }
  }
  // The contexts: one per backend asked for and present.
  std::vector<BenchBackend> backends;
  for (const std::string& name : split(wanted)) {
    ContextOptions o;
    o.threads = threads;
    o.verbose = verbose;
    const int refit_variant = name == "opencl/host-sums" ? 0 : name == "opencl/device-sums" ? 1 : -1;
    if (name == "cpu")
      o.backend = Backend::kCpu;
    else if (name == "opencl" || refit_variant >= 0)
      o.backend = Backend::kOpenCL, o.device = std::max(opencl_device, 0);
    else if (name == "cuda")
      o.backend = Backend::kCuda;
    else
      continue;
    try {
      auto ctx = std::make_unique<Context>(o);
      std::string label = ctx->describe();
#ifdef SPECTRASIFT_HAVE_OPENCL
      if (refit_variant >= 0 && opencl::bench::set_refit_variant(ctx->impl(), refit_variant))
        label += refit_variant ? " [refit sums on the device]" : " [refit sums on the host]";
#endif
      backends.push_back({label, std::move(ctx)});
    } catch (const std::exception& e) {
      std::printf("(%s: not available: %s)\n", name.c_str(), e.what());
    }
  }
  if (backends.empty() || backends.front().ctx->backend() != Backend::kCpu) {
    std::fprintf(stderr, "geometry_bench: the cpu backend must come first (it is the reference)\n");
    return 2;
  }

  if (only != "warp") {
    std::printf("\n## RANSAC homography, 10,000 planted pairs (median of %d runs, ms%s)\n\n", runs,
                msac ? ", ranked by MSAC" : ", ranked by the inlier count");
    std::printf(
        "| backend | outliers | end to end | no final refinement | score 128 x 10k | iterations | inliers | same as "
        "cpu |\n");
    std::printf("|---|---|---|---|---|---|---|---|\n");
    for (double outliers : {0.5, 0.3}) {
      std::vector<Point2> moving, fixed;
      planted(10000, outliers, 1, moving, fixed);
      RansacOptions ro;
      ro.msac = msac;
      RansacOptions no_refine = ro;
      no_refine.refine = false;
      const ModelEstimate reference = estimate_model(*backends.front().ctx, moving, fixed, ro);
      const ModelEstimate reference_nr = estimate_model(*backends.front().ctx, moving, fixed, no_refine);
      // One batch of 128 models (perturbations of the planted one) for the scoring floor.
      std::vector<double> models;
      std::mt19937_64 g(2);
      std::normal_distribution<double> eps(0, 1e-3);
      for (int k = 0; k < 128; ++k)
        for (int j = 0; j < 9; ++j) models.push_back(kPlanted[std::size_t(j)] + (j < 6 ? eps(g) : 0.0));
      const std::vector<std::uint8_t> valid(128, 1);
      std::vector<int> counts(128);
      std::vector<double> sums(128);
      for (auto& b : backends) {
        ModelEstimate r, rn;
        const double e2e = median_ms(runs, [&] { r = estimate_model(*b.ctx, moving, fixed, ro); });
        const double e2e_nr = median_ms(runs, [&] { rn = estimate_model(*b.ctx, moving, fixed, no_refine); });
        detail::BackendImpl& scorer = detail::backend_for(b.ctx->impl(), detail::Operation::kRansac);
        const detail::PointPairs pairs{moving.data(), fixed.data(), int(moving.size()), 0xBE7C4ull};
        const double score = median_ms(runs, [&] {
          scorer.score_models(models.data(), valid.data(), 128, pairs, ro.threshold_px * ro.threshold_px,
                              b.ctx->impl().cpu_threads(), counts.data(), sums.data());
        });
        std::printf("| %s | %.0f %% | %.3f | %.3f | %.3f | %d | %d | %s |\n", b.name.c_str(), outliers * 100, e2e,
                    e2e_nr, score, r.iterations, r.inliers,
                    same_estimate(reference, r) && same_estimate(reference_nr, rn) ? "yes" : "NO");
      }
#ifdef SPECTRASIFT_HAVE_OPENCV
      std::vector<cv::Point2d> cm, cf;
      for (std::size_t i = 0; i < moving.size(); ++i) {
        cm.emplace_back(moving[i].x, moving[i].y);
        cf.emplace_back(fixed[i].x, fixed[i].y);
      }
      cv::Mat mask;
      int cv_inliers = 0;
      const double cv_ms = median_ms(runs, [&] {
        cv::findHomography(cm, cf, cv::RANSAC, 3.0, mask, 10000, 0.999);
        cv_inliers = cv::countNonZero(mask);
      });
      std::printf("| OpenCV %s findHomography (%d threads) | %.0f %% | %.3f | | | | %d | |\n", CV_VERSION,
                  cv::getNumThreads(), outliers * 100, cv_ms, cv_inliers);
#endif
    }
  }
  if (only == "ransac") return 0;
  std::printf("\n## Bilinear warp, 3840 x 2160 u8, planted homography (median of %d runs, ms)\n\n", runs);
  std::printf("| backend | channels | warp_image | same as cpu |\n|---|---|---|---|\n");
  for (int channels : {3, 1}) {
    Image im = Image::allocate(3840, 2160, channels, PixelType::kU8);
    std::mt19937_64 g(5);
    for (auto& v : im.data) v = std::uint8_t(g() & 0xFF);
    Image reference;
    for (auto& b : backends) {
      Image out;
      const double ms = median_ms(std::max(runs / 4, 5), [&] { out = warp_image(*b.ctx, im, kPlanted, 3840, 2160); });
      if (reference.empty()) reference = out;
      std::printf("| %s | %d | %.3f | %s |\n", b.name.c_str(), channels, ms, out.data == reference.data ? "yes" : "NO");
    }
#ifdef SPECTRASIFT_HAVE_OPENCV
    const cv::Mat src(2160, 3840, channels == 3 ? CV_8UC3 : CV_8UC1, im.data.data());
    const cv::Mat h(3, 3, CV_64F, const_cast<double*>(kPlanted.data()));
    cv::Mat dst;
    const double cv_ms = median_ms(std::max(runs / 4, 5), [&] {
      cv::warpPerspective(src, dst, h, src.size(), cv::INTER_LINEAR, cv::BORDER_CONSTANT);
    });
    std::printf("| OpenCV %s warpPerspective (%d threads) | %d | %.3f | |\n", CV_VERSION, cv::getNumThreads(), channels,
                cv_ms);
#endif
  }
  return 0;
}

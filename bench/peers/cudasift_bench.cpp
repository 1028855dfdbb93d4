// cudasift_bench — CudaSift (github.com/Celebrandil/CudaSift, the fastest public GPU SIFT) on the four photos of
// issue 19 (kleiber and elephants, 1920x1080 and 3840x2160), so that its figures come from the same run as
// ours. Built only when CMake is given -DSPECTRASIFT_CUDASIFT_DIR=<an unpacked CudaSift tree>
// (bench/peers/CMakeLists.txt): CudaSift's sources are compiled from that folder, none of them is in this tree.
//
//   cudasift_bench [--photos DIR] [--runs N (100)] [--warmup N (20)] [--octaves N (5)] [--thresh T (3.0)]
//                  [--init-blur B (1.0)] [--max-points N (500000)] [--device N (0)] [--no-match] [--verbose]
//
// The photos are read with spectrasift's reader (read_image(path, ReadMode::kGray): cv2.imread's grey pixels).
// Settings: 5 octaves, DoG threshold 3.0, initial blur 1.0, lowest scale 0 (CudaSift's mainSift.cpp), with and
// without CudaSift's upsampled first octave. The temporary memory is allocated once (AllocSiftTempMemory), as
// mainSift.cpp does.
//   image on the GPU: ExtractSift on the float image already in device memory; the features stay on the
//                     device (a SiftData without a host buffer).
//   end to end:       the 8-bit grey image copied from pageable host memory (cudaMemcpy), converted to float on
//                     the device (u8_to_float.cu), ExtractSift, and the features copied back to pageable host
//                     memory (ExtractSift copies its 576-byte SiftPoint records when the SiftData has a host buffer).
// Steady clock around each call and a cudaDeviceSynchronize; median of --runs after --warmup runs.
// Matching (elephants 4K, no upsampling): the photo's features against those of a perspective-warped copy
// (spectrasift::warp_image with kWarp below; bench/peers/cvcuda_bench.py warps with the same matrix):
// MatchSiftData (brute force, best and second best per feature; its score, ambiguity and match position are
// copied back to the host), then FindHomography with 10,000 hypotheses, minimum score 0, maximum ambiguity 0.80
// and 5 px (mainSift.cpp's settings). CudaSift's ImproveHomography (geomFuncs.cpp) needs OpenCV and is left out.
// CudaSift prints a line per call on stdout: those lines go to /dev/null unless --verbose; the tables are
// written to the original stdout.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "cudaImage.h"
#include "cudaSift.h"
#include "spectrasift/error.hpp"
#include "spectrasift/geometry.hpp"
#include "spectrasift/io.hpp"
#include "u8_to_float.hpp"

namespace ss = spectrasift;

namespace {

/// The perspective warp of the matching test: a point (x, y) of the photo lands at kWarp (x, y, 1) in the
/// warped copy (row-major). A mild view change: rotation of about 3 degrees, scale 0.93, perspective terms that
/// shrink the right-hand side; the copy keeps about two thirds of the photo's features.
constexpr std::array<double, 9> kWarp{0.93, 0.05, 140.0, -0.04, 0.94, 110.0, 1.5e-5, -1.0e-5, 1.0};

struct Config {
  std::string photos = default_photos();
  int runs = 100;
  int warmup = 20;
  int octaves = 5;
  float thresh = 3.0f;
  float init_blur = 1.0f;
  int max_points = 500000;
  int device = 0;
  bool match = true;
  bool verbose = false;

  /// .photos/ in the repository (the device machine's copy), else ../shared/data/photos beside it.
  static std::string default_photos() {
    const std::string inside = std::string(SPECTRASIFT_SOURCE_DIR) + "/.photos";
    const std::string beside = std::string(SPECTRASIFT_SOURCE_DIR) + "/../shared/data/photos";
    return std::filesystem::exists(inside) ? inside : beside;
  }
};

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "cudasift_bench: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

/// Median milliseconds of f() over `runs` calls after `warmup` calls, each call closed by a device synchronise.
template <class F>
double time_ms(const Config& cfg, F&& f) {
  for (int i = 0; i < cfg.warmup; ++i) {
    f();
    check(cudaDeviceSynchronize(), "warm-up");
  }
  std::vector<double> t;
  t.reserve(std::size_t(cfg.runs));
  for (int i = 0; i < cfg.runs; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    check(cudaDeviceSynchronize(), "timed run");
    t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  return median(std::move(t));
}

/// Where the tables go: the original stdout, with file descriptor 1 sent to /dev/null so that CudaSift's own
/// printouts (a line per ExtractSift call) stay out of them; stdout itself when verbose.
FILE* table_stream(bool verbose) {
  if (verbose) return stdout;
  std::fflush(stdout);
  const int keep = dup(STDOUT_FILENO);
  const int null_fd = open("/dev/null", O_WRONLY);
  if (keep < 0 || null_fd < 0 || dup2(null_fd, STDOUT_FILENO) < 0) return stdout;
  close(null_fd);
  FILE* out = fdopen(keep, "w");
  return out ? out : stdout;
}

/// A SiftData that frees itself; `host` gives it the pageable host buffer that ExtractSift copies features into.
struct Features {
  SiftData data{};
  Features(int max_points, bool host) { InitSiftData(data, max_points, host, true); }
  ~Features() { FreeSiftData(data); }
  Features(const Features&) = delete;
  Features& operator=(const Features&) = delete;
};

/// One photo on the device: the 8-bit upload buffer and CudaSift's float image.
struct DeviceImage {
  const ss::Image& host;
  std::uint8_t* u8 = nullptr;
  CudaImage image;

  explicit DeviceImage(const ss::Image& im) : host(im) {
    check(cudaMalloc(reinterpret_cast<void**>(&u8), host.data.size()), "cudaMalloc (8-bit image)");
    image.Allocate(host.width, host.height, iAlignUp(host.width, 128), false);
  }
  ~DeviceImage() { cudaFree(u8); }
  DeviceImage(const DeviceImage&) = delete;
  DeviceImage& operator=(const DeviceImage&) = delete;

  /// The pageable upload and the conversion to float, enqueued on the default stream.
  void upload() {
    check(cudaMemcpy(u8, host.data.data(), host.data.size(), cudaMemcpyHostToDevice), "upload");
    check(ss::peers::u8_to_float(u8, host.width, host.height, image.d_data, image.pitch, nullptr), "u8_to_float");
  }
};

void extract(Features& f, DeviceImage& im, const Config& cfg, bool up, float* temp) {
  ExtractSift(f.data, im.image, cfg.octaves, cfg.init_blur, cfg.thresh, 0.0f, up, temp);
}

/// The photo's image-on-GPU and end-to-end rows, with and without upsampling.
void bench_photo(FILE* out, const std::string& name, const ss::Image& gray, const Config& cfg) {
  DeviceImage im(gray);
  float* temp = AllocSiftTempMemory(gray.width, gray.height, cfg.octaves, true);  // large enough for both
  Features on_device(cfg.max_points, false), to_host(cfg.max_points, true);
  im.upload();
  check(cudaDeviceSynchronize(), "first upload");
  for (bool up : {false, true}) {
    const double gpu = time_ms(cfg, [&] { extract(on_device, im, cfg, up, temp); });
    const double e2e = time_ms(cfg, [&] {
      im.upload();
      extract(to_host, im, cfg, up, temp);
    });
    const int n = to_host.data.numPts;
    std::fprintf(out, "| %s | %dx%d | %s | %d%s | %.3f | %.3f |\n", name.c_str(), gray.width, gray.height,
                 up ? "yes" : "no", n, n >= cfg.max_points ? " (capped)" : "", gpu, e2e);
    std::fflush(out);
  }
  FreeSiftTempMemory(temp);
}

/// kWarp applied to (x, y).
std::array<double, 2> apply(const std::array<double, 9>& h, double x, double y) {
  const double w = h[6] * x + h[7] * y + h[8];
  return {(h[0] * x + h[1] * y + h[2]) / w, (h[3] * x + h[4] * y + h[5]) / w};
}

/// MatchSiftData and FindHomography on elephants 4K against its warped copy, no upsampling.
void bench_matching(FILE* out, const ss::Image& gray, const Config& cfg) {
  const ss::Image warped = ss::warp_image(gray, kWarp, gray.width, gray.height);
  DeviceImage a_im(gray), b_im(warped);
  float* temp = AllocSiftTempMemory(gray.width, gray.height, cfg.octaves, false);
  Features a(cfg.max_points, true), b(cfg.max_points, true);
  a_im.upload();
  b_im.upload();
  extract(a, a_im, cfg, false, temp);
  extract(b, b_im, cfg, false, temp);
  FreeSiftTempMemory(temp);

  const double match_ms = time_ms(cfg, [&] { MatchSiftData(a.data, b.data); });
  int candidates = 0, correct = 0;  // matches FindHomography may draw (ambiguity < 0.80), and those within 5 px
  for (int i = 0; i < a.data.numPts; ++i) {
    const SiftPoint& p = a.data.h_data[i];
    if (p.ambiguity >= 0.80f) continue;
    ++candidates;
    const auto t = apply(kWarp, p.xpos, p.ypos);
    if (std::hypot(t[0] - p.match_xpos, t[1] - p.match_ypos) <= 5.0) ++correct;
  }

  std::srand(1);
  float h[9] = {};
  int inliers = 0;
  const double ransac_ms = time_ms(cfg, [&] { FindHomography(a.data, h, &inliers, 10000, 0.00f, 0.80f, 5.0f); });
  // Largest distance, over the photo's four corners, between CudaSift's homography and kWarp.
  std::array<double, 9> found{};
  for (int i = 0; i < 8; ++i) found[std::size_t(i)] = h[i];
  found[8] = 1.0;
  const double right = gray.width - 1, bottom = gray.height - 1;
  const std::array<std::array<double, 2>, 4> corners{{{0, 0}, {right, 0}, {0, bottom}, {right, bottom}}};
  double corner_px = 0;
  for (const auto& [x, y] : corners) {
    const auto f = apply(found, x, y), t = apply(kWarp, x, y);
    corner_px = std::max(corner_px, std::hypot(f[0] - t[0], f[1] - t[1]));
  }

  std::fprintf(out,
               "\nCudaSift matching, elephants %dx%d without upsampling against its perspective-warped copy "
               "(kWarp in bench/peers/cudasift_bench.cpp); median of %d runs after %d warm-up runs\n\n",
               gray.width, gray.height, cfg.runs, cfg.warmup);
  std::fprintf(out, "| job | descriptors | CudaSift ms | result |\n|---|---|---:|---|\n");
  std::fprintf(out,
               "| MatchSiftData (brute force, best two per feature, match fields back to the host) | %d x %d | %.3f | "
               "%d matches with ambiguity < 0.80, %d of them within 5 px of the true position |\n",
               a.data.numPts, b.data.numPts, match_ms, candidates, correct);
  std::fprintf(out,
               "| FindHomography (10,000 hypotheses, 5 px, its RANSAC on the GPU) | %d candidate matches | %.3f | "
               "%d inliers; corners within %.2f px of the true homography |\n",
               candidates, ransac_ms, inliers, corner_px);
  std::fflush(out);
}

int usage(FILE* f, int rc) {
  std::fprintf(f,
               "usage: cudasift_bench [--photos DIR] [--runs N (100)] [--warmup N (20)] [--octaves N (5)] "
               "[--thresh T (3.0)]\n                      [--init-blur B (1.0)] [--max-points N (500000)] "
               "[--device N (0)] [--no-match] [--verbose]\n");
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  Config cfg;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "cudasift_bench: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--photos") cfg.photos = next();
    else if (a == "--runs") cfg.runs = std::max(1, std::atoi(next().c_str()));
    else if (a == "--warmup") cfg.warmup = std::max(0, std::atoi(next().c_str()));
    else if (a == "--octaves") cfg.octaves = std::clamp(std::atoi(next().c_str()), 1, 8);
    else if (a == "--thresh") cfg.thresh = float(std::atof(next().c_str()));
    else if (a == "--init-blur") cfg.init_blur = float(std::atof(next().c_str()));
    else if (a == "--max-points") cfg.max_points = std::max(1024, std::atoi(next().c_str()));
    else if (a == "--device") cfg.device = std::atoi(next().c_str());
    else if (a == "--no-match") cfg.match = false;
    else if (a == "--verbose") cfg.verbose = true;
    else if (a == "-h" || a == "--help") return usage(stdout, 0);
    else {
      std::fprintf(stderr, "cudasift_bench: unknown argument %s\n", a.c_str());
      return usage(stderr, 2);
    }
  }

  const char* names[][2] = {{"kleiber_1920x1080.jpg", "kleiber 1080p"},
                            {"elephants_1920x1080.jpg", "elephants 1080p"},
                            {"kleiber_3840x2160.jpg", "kleiber 4K"},
                            {"elephants_3840x2160.jpg", "elephants 4K"}};
  std::vector<std::pair<std::string, ss::Image>> photos;
  try {
    for (const auto& [file, label] : names) {
      const std::string path = cfg.photos + "/" + file;
      if (!std::filesystem::exists(path)) {
        std::printf("PHOTO MISSING: %s (pass --photos DIR) -- not timed\n", path.c_str());
        continue;
      }
      photos.emplace_back(label, ss::read_image(path, ss::ReadMode::kGray));
    }
  } catch (const ss::Error& e) {
    std::fprintf(stderr, "cudasift_bench: %s\n", e.what());
    return 1;
  }
  if (photos.empty()) {
    std::printf("NO PHOTOS FOUND in %s: nothing timed\n", cfg.photos.c_str());
    return 1;
  }

  check(cudaSetDevice(cfg.device), "cudaSetDevice");
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, cfg.device), "cudaGetDeviceProperties");
  int runtime = 0;
  cudaRuntimeGetVersion(&runtime);
  FILE* out = table_stream(cfg.verbose);

  std::fprintf(out,
               "CudaSift on %s (CUDA runtime %d.%d): %d octaves, threshold %.2f, initial blur %.2f; median of %d runs "
               "after %d warm-up runs. Image on the GPU: ExtractSift on the float image in device memory, features "
               "left there. End to end: pageable 8-bit upload, conversion to float, ExtractSift, features (576-byte "
               "records) back to pageable host memory.\n\n",
               prop.name, runtime / 1000, (runtime % 1000) / 10, cfg.octaves, double(cfg.thresh),
               double(cfg.init_blur), cfg.runs, cfg.warmup);
  std::fprintf(out, "| image | size | upsample | features | image on GPU ms | end to end ms |\n");
  std::fprintf(out, "|---|---|---|---:|---:|---:|\n");
  std::fflush(out);
  const ss::Image* elephants_4k = nullptr;
  for (const auto& [label, gray] : photos) {
    bench_photo(out, label, gray, cfg);
    if (label == "elephants 4K") elephants_4k = &gray;
  }
  if (cfg.match) {
    if (elephants_4k) bench_matching(out, *elephants_4k, cfg);
    else std::fprintf(out, "\nCudaSift matching not timed: elephants_3840x2160.jpg missing\n");
  }
  std::fflush(out);
  return 0;
}

// sift_bench — CPU SIFT of spectrasift against OpenCV's cv::SIFT at equal settings, in one run.
//
//   sift_bench [--threads N] [--runs N] [--warmup N] [--large FILE] [IMAGE...]
//
// Default images: box.png and graf1.png from opencv-doc, and a 1920x1080 image made from aloeL.jpg
// (opencv-doc): its central 16:9 crop resized with INTER_AREA/LINEAR. Each (library, image) pair runs in
// its own forked child process: its peak RSS (getrusage ru_maxrss) is then that library's alone, and the
// two libraries' thread pools never compete for the cores. Both get the same 8-bit grey input (ours
// through the Image overload, so the u8 -> float conversion is timed as OpenCV's is). Times are the
// median of --runs runs after --warmup runs, with a steady clock around detect-and-compute.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "spectrasift/context.hpp"
#include "spectrasift/error.hpp"
#include "spectrasift/io.hpp"
#include "spectrasift/sift.hpp"

#ifdef SPECTRASIFT_HAVE_OPENCV
#include <opencv2/core.hpp>
#include <opencv2/features2d.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#endif

namespace {

const char* kOpenCVData = "/usr/share/doc/opencv-doc/examples/data";

struct Result {
  double median_ms = 0;
  double min_ms = 0;
  long keypoints = 0;
  long peak_rss_kb = 0;
  int width = 0;
  int height = 0;
  int ok = 0;
};

struct Config {
  int threads = 2;
  int runs = 7;
  int warmup = 2;
  std::string large = std::string(kOpenCVData) + "/aloeL.jpg";
};

// The 8-bit grey image a benchmark entry stands for ("@large" = the 1920x1080 image).
spectrasift::Image load_gray_u8(const std::string& name, const Config& cfg) {
#ifdef SPECTRASIFT_HAVE_OPENCV
  cv::Mat g;
  if (name == "@large") {
    cv::Mat src = cv::imread(cfg.large, cv::IMREAD_GRAYSCALE);
    if (src.empty()) throw spectrasift::Error(spectrasift::ErrorCode::kIo, cfg.large + ": cannot read");
    const int ch = std::min(src.rows, src.cols * 9 / 16), cw = ch * 16 / 9;
    cv::Mat crop = src(cv::Rect((src.cols - cw) / 2, (src.rows - ch) / 2, cw, ch));
    cv::resize(crop, g, cv::Size(1920, 1080), 0, 0, cw > 1920 ? cv::INTER_AREA : cv::INTER_LINEAR);
  } else {
    g = cv::imread(name, cv::IMREAD_GRAYSCALE);
    if (g.empty()) throw spectrasift::Error(spectrasift::ErrorCode::kIo, name + ": cannot read");
  }
  auto im = spectrasift::Image::allocate(g.cols, g.rows, 1, spectrasift::PixelType::kU8);
  for (int y = 0; y < g.rows; ++y) std::memcpy(im.data.data() + std::size_t(y) * g.cols, g.ptr(y), std::size_t(g.cols));
  return im;
#else
  const std::string file = name == "@large" ? cfg.large : name;
  const spectrasift::ImageF f = spectrasift::to_gray_float(spectrasift::read_image(file));
  return spectrasift::to_u8(f);
#endif
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

template <class F>
void time_runs(const Config& cfg, Result& r, F&& once) {
  for (int i = 0; i < cfg.warmup; ++i) once();
  std::vector<double> t;
  for (int i = 0; i < cfg.runs; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    r.keypoints = once();
    t.push_back(ms_since(t0));
  }
  std::sort(t.begin(), t.end());
  r.median_ms = t[t.size() / 2];
  r.min_ms = t.front();
}

Result run_ours(const std::string& name, const Config& cfg) {
  Result r;
  const spectrasift::Image im = load_gray_u8(name, cfg);
  r.width = im.width;
  r.height = im.height;
  spectrasift::ContextOptions co;
  co.backend = spectrasift::Backend::kCpu;
  co.threads = cfg.threads;
  spectrasift::Context ctx(co);
  time_runs(cfg, r, [&] { return long(spectrasift::detect_and_compute(ctx, im).size()); });
  r.ok = 1;
  return r;
}

Result run_opencv(const std::string& name, const Config& cfg) {
  Result r;
#ifdef SPECTRASIFT_HAVE_OPENCV
  const spectrasift::Image im = load_gray_u8(name, cfg);
  r.width = im.width;
  r.height = im.height;
  cv::Mat g(im.height, im.width, CV_8UC1, const_cast<std::uint8_t*>(im.data.data()));
  cv::setNumThreads(cfg.threads);
  auto sift = cv::SIFT::create();
  time_runs(cfg, r, [&] {
    std::vector<cv::KeyPoint> k;
    cv::Mat d;
    sift->detectAndCompute(g, cv::noArray(), k, d);
    return long(k.size());
  });
  r.ok = 1;
#else
  (void)name;
  (void)cfg;
#endif
  return r;
}

// Runs f in a child process and returns its Result (with the child's peak RSS).
template <class F>
Result in_child(F&& f) {
  int fd[2];
  if (pipe(fd) != 0) return {};
  const pid_t pid = fork();
  if (pid == 0) {
    close(fd[0]);
    Result r;
    try {
      r = f();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "sift_bench: %s\n", e.what());
      r.ok = 0;
    }
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    r.peak_rss_kb = ru.ru_maxrss;
    const ssize_t n = write(fd[1], &r, sizeof r);
    _exit(n == ssize_t(sizeof r) ? 0 : 1);
  }
  close(fd[1]);
  Result r;
  const ssize_t n = read(fd[0], &r, sizeof r);
  close(fd[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (n != ssize_t(sizeof r)) r = Result{};
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  Config cfg;
  std::vector<std::string> images;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "sift_bench: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--threads") cfg.threads = std::atoi(next().c_str());
    else if (a == "--runs") cfg.runs = std::max(1, std::atoi(next().c_str()));
    else if (a == "--warmup") cfg.warmup = std::max(0, std::atoi(next().c_str()));
    else if (a == "--large") cfg.large = next();
    else if (a == "-h" || a == "--help") {
      std::printf("usage: sift_bench [--threads N (2)] [--runs N (7)] [--warmup N (2)] [--large FILE] [IMAGE...]\n");
      return 0;
    } else images.push_back(a);
  }
  if (images.empty()) {
    if (std::filesystem::exists(std::string(kOpenCVData) + "/graf1.png")) {
      images = {std::string(kOpenCVData) + "/box.png", std::string(kOpenCVData) + "/graf1.png", "@large"};
    } else {
      // Machines without opencv-doc (the GPU machine): the copies bundled in the repository.
      images = {std::string(SPECTRASIFT_DATA_DIR) + "/box.png", std::string(SPECTRASIFT_TEST_DATA) + "/graf1_gray.png"};
      std::printf("opencv-doc not found: timing the bundled box.png and graf1_gray.png (no 1920x1080 image)\n");
    }
  }
#ifndef SPECTRASIFT_HAVE_OPENCV
  std::printf("OpenCV C++ not found: timing spectrasift only\n");
#endif
  std::printf("threads %d, median of %d runs after %d warm-up runs, one child process per library and image\n\n",
              cfg.threads, cfg.runs, cfg.warmup);
  std::printf("| image | size | spectrasift ms | OpenCV ms | ratio | spectrasift kps | OpenCV kps | "
              "spectrasift peak RSS MB | OpenCV peak RSS MB |\n");
  std::printf("|---|---|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const auto& name : images) {
    const Result ours = in_child([&] { return run_ours(name, cfg); });
    const Result cv = in_child([&] { return run_opencv(name, cfg); });
    std::string shown = name == "@large" ? "aloeL.jpg crop 1920x1080" : name.substr(name.find_last_of('/') + 1);
    if (!ours.ok) {
      std::printf("| %s | failed | | | | | | | |\n", shown.c_str());
      continue;
    }
    char cvms[32] = "-", ratio[32] = "-", cvk[32] = "-", cvrss[32] = "-";
    if (cv.ok) {
      std::snprintf(cvms, sizeof cvms, "%.1f", cv.median_ms);
      std::snprintf(ratio, sizeof ratio, "%.2f", ours.median_ms / cv.median_ms);
      std::snprintf(cvk, sizeof cvk, "%ld", cv.keypoints);
      std::snprintf(cvrss, sizeof cvrss, "%.0f", cv.peak_rss_kb / 1024.0);
    }
    std::printf("| %s | %dx%d | %.1f | %s | %s | %ld | %s | %.0f | %s |\n", shown.c_str(), ours.width, ours.height,
                ours.median_ms, cvms, ratio, ours.keypoints, cvk, ours.peak_rss_kb / 1024.0, cvrss);
    std::fflush(stdout);
  }
  return 0;
}

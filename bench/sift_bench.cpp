// sift_bench — SIFT of spectrasift's backends, per stage and end to end, on the four photos of
// ../shared/data/photos (kleiber and elephants, 1920x1080 and 3840x2160), with and without the upsampled
// first octave; then matching 16384 x 16384 descriptors on each backend. bench/sift_peers.py prints silx and
// OpenCV's cv2.SIFT on the same images in the same table format.
//
//   sift_bench [--backend cpu|opencl|cuda|all] [--device N] [--opencl-device N] [--runs N] [--warmup N] [--threads N]
//              [--photos DIR] [--match-size N or QxT] [--descriptor-type f32|u8|both] [--match-only] [--quick]
//              [--batch N] [--vs-opencv [IMAGE...]]
//
// End to end = detect_and_compute on an 8-bit grey host image (upload, the whole pipeline, the features
// back on the host), steady clock, median of --runs after --warmup runs; on GPU backends once with float
// descriptors (OpenCV's default CV_32F) and once with u8 (CV_8U: the bytes read back as they are). Per stage (OpenCL): the device
// time of each stage from the stages' profiling events (a separate set of runs, so that the events' cost
// stays out of the end-to-end figure), medians per stage. Matching: nearest_two (distance + best two),
// match_features (ratio 0.8) and match_features with the mutual check on 16384 query and 16384 train descriptors
// (--match-size N: N x N, QxT: Q x T; the GPU rows' matches compared bit for bit with the CPU row's when it ran
// first): elephants 4K's features (query: the first 16384, train: the same image without upsampling), topped up
// with random integer descriptors when fewer. --match-only: the matching table alone. --quick: 3 runs, 1 warm-up, 4096 descriptors. --vs-opencv: the former table, our CPU
// backend against OpenCV C++ cv::SIFT in child processes with their peak RSS (bench/sift_bench_vs_opencv.inc).
// --batch N: the batch table alone (issue 19's "batch of 100 kleiber 1080p images" row): N copies of kleiber
// 1080p's grey image, each in its own buffer, through one batch call (detect_and_compute over the list) against
// N single calls in the same run, per image (total / N), median of --runs after --warmup; upsampled (OpenCV's
// default) and without upsampling. On CUDA also (upsampled) from page-locked copies (the batch copies image i + 1 beside image i's compute either
// way; page-locked memory skips the host staging copy).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/context_impl.hpp"
#include "spectrasift/context.hpp"
#include "spectrasift/error.hpp"
#include "spectrasift/io.hpp"
#include "spectrasift/match.hpp"
#include "spectrasift/sift.hpp"

#ifdef SPECTRASIFT_HAVE_OPENCL
#include "hooks/opencl_hooks.hpp"
#endif
#ifdef SPECTRASIFT_HAVE_CUDA
#include "hooks/cuda_hooks.hpp"
#endif
#ifdef SPECTRASIFT_HAVE_OPENCV
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#endif

namespace ss = spectrasift;

namespace {

struct Config {
  std::vector<ss::Backend> backends{ss::Backend::kCpu, ss::Backend::kOpenCL, ss::Backend::kCuda};
  int device = 0;
  int opencl_device = -1;  ///< --opencl-device: the OpenCL device when it differs from --device (-1: --device)
  int runs = 7;
  int warmup = 2;
  int threads = 0;
  int match_size = 16384;       // query descriptors
  int match_train_size = 16384; // train descriptors (--match-size Q or QxT)
  bool verbose = false;
  /// --descriptor-type: the descriptor types timed on GPU backends (f32 and u8 by default; the CPU backend
  /// makes floats, so its u8 row would only add the conversion).
  std::vector<ss::DescriptorType> descriptor_types{ss::DescriptorType::kF32, ss::DescriptorType::kU8};
  std::string photos = default_photos();

  /// ../shared/data/photos beside the repository root, else shared/data/photos inside it (the device
  /// machine's copy of the working tree carries shared/ there).
  static std::string default_photos() {
    const std::string beside = std::string(SPECTRASIFT_DATA_DIR) + "/../../shared/data/photos";
    const std::string inside = std::string(SPECTRASIFT_DATA_DIR) + "/../shared/data/photos";
    return std::filesystem::exists(beside) || !std::filesystem::exists(inside) ? beside : inside;
  }
};

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

/// The 8-bit grey image of a photo (OpenCV's imread when built with it, as sift_peers.py reads them).
ss::Image load_gray_u8(const std::string& file) {
#ifdef SPECTRASIFT_HAVE_OPENCV
  cv::Mat g = cv::imread(file, cv::IMREAD_GRAYSCALE);
  if (g.empty()) throw ss::Error(ss::ErrorCode::kIo, file + ": cannot read");
  auto im = ss::Image::allocate(g.cols, g.rows, 1, ss::PixelType::kU8);
  for (int y = 0; y < g.rows; ++y) std::memcpy(im.data.data() + std::size_t(y) * g.cols, g.ptr(y), std::size_t(g.cols));
  return im;
#else
  return ss::to_u8(ss::to_gray_float(ss::read_image(file)));
#endif
}

ss::ContextOptions context_options(ss::Backend b, const Config& cfg) {
  ss::ContextOptions o;
  o.backend = b;
  o.device = b == ss::Backend::kCpu ? 0 : b == ss::Backend::kOpenCL && cfg.opencl_device >= 0 ? cfg.opencl_device : cfg.device;
  o.threads = cfg.threads;
  o.verbose = cfg.verbose;  // --verbose: the backends' own lines (matching: the parts of each call)
  return o;
}

/// One table row (the format sift_peers.py prints too).
void row(const std::string& image, int w, int h, bool up, const std::string& impl, const std::string& device,
         double ms, long kps, const std::string& stages) {
  std::printf("| %s | %dx%d | %s | %s | %s | %.2f | %ld | %s |\n", image.c_str(), w, h, up ? "yes" : "no", impl.c_str(),
              device.c_str(), ms, kps, stages.c_str());
  std::fflush(stdout);
}

std::string stage_text(const std::vector<std::vector<std::pair<std::string, double>>>& runs) {
  if (runs.empty() || runs.front().empty()) return "-";
  std::string out;
  for (std::size_t s = 0; s < runs.front().size(); ++s) {
    std::vector<double> v;
    for (const auto& r : runs) v.push_back(r[s].second);
    char b[64];
    std::snprintf(b, sizeof b, "%s%s %.2f", out.empty() ? "" : ", ", runs.front()[s].first.c_str(), median(v));
    out += b;
  }
  return out;
}

/// End to end and (OpenCL) per stage for one backend, image and upsample setting.
void bench_sift(ss::Context& ctx, ss::Backend b, const std::string& name, const ss::Image& im, bool up,
                ss::DescriptorType type, const Config& cfg) {
  ss::SiftOptions o;
  o.upsample = up;
  o.descriptor_type = type;
  long kps = 0;
  for (int i = 0; i < cfg.warmup; ++i) kps = long(ss::detect_and_compute(ctx, im, o).size());
  std::vector<double> t;
  for (int i = 0; i < cfg.runs; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    kps = long(ss::detect_and_compute(ctx, im, o).size());
    t.push_back(ms_since(t0));
  }
  std::vector<std::vector<std::pair<std::string, double>>> stages;
#ifdef SPECTRASIFT_HAVE_OPENCL
  if (b == ss::Backend::kOpenCL && ss::opencl::bench::set_sift_profiling(ctx.impl(), true)) {
    for (int i = 0; i < cfg.runs; ++i) {
      ss::detect_and_compute(ctx, im, o);
      stages.push_back(ss::opencl::bench::sift_stage_ms(ctx.impl()));
    }
    ss::opencl::bench::set_sift_profiling(ctx.impl(), false);
  }
#endif
  row(name, im.width, im.height, up,
      std::string("spectrasift ") + ss::to_string(b) + (type == ss::DescriptorType::kU8 ? ", u8 descriptors" : ""),
      ctx.describe(), median(t), kps, stage_text(stages));
}

/// The batch row of one backend: `copies` (N images, views of separate buffers) through the batch call and N
/// single calls, per image, in the same run; the batch's features checked equal to the single calls' counts.
void bench_batch_views(ss::Context& ctx, ss::Backend b, const std::string& name, const std::vector<ss::ImageView>& views,
                       const std::string& memory, bool up, const Config& cfg,
                       ss::DescriptorType type = ss::DescriptorType::kF32) {
  ss::SiftOptions o;  // upsampled (OpenCV's default) or not
  o.upsample = up;
  o.descriptor_type = type;
  const double n = double(views.size());
  std::vector<double> single, batch;
  long kps_single = 0, kps_batch = 0;
  for (int i = 0; i < cfg.warmup + cfg.runs; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    kps_single = 0;
    for (const ss::ImageView& v : views) kps_single += long(ss::detect_and_compute(ctx, v, o).size());
    const double single_ms = ms_since(t0) / n;
    t0 = std::chrono::steady_clock::now();
    kps_batch = 0;
    ss::detect_and_compute(ctx, views, o, nullptr, [&](std::size_t, ss::Features&& f) { kps_batch += long(f.size()); });
    const double batch_ms = ms_since(t0) / n;
    if (i < cfg.warmup) continue;
    single.push_back(single_ms);
    batch.push_back(batch_ms);
  }
  std::printf("| %s x %zu | %s | %s | spectrasift %s | %s | %.3f | %.3f | %.2f | %ld | %s |\n", name.c_str(), views.size(),
              up ? "yes" : "no", memory.c_str(),
              (std::string(ss::to_string(b)) + (type == ss::DescriptorType::kU8 ? ", u8 descriptors" : "")).c_str(),
              ctx.describe().c_str(), median(single), median(batch),
              median(single) / std::max(median(batch), 1e-9), kps_batch / long(views.size()),
              kps_batch == kps_single ? "same" : "DIFFERENT");
  std::fflush(stdout);
}

void bench_batch(const std::vector<ss::Backend>& backends, const Config& cfg, const std::string& name,
                 const ss::Image& im, int count) {
  std::printf("SIFT batch: %d copies of %s (8-bit grey, %dx%d; upsampled from pageable and page-locked memory, and "
              "without upsampling from pageable memory), one batch call against %d single calls in the same run; per "
              "image = total / %d, median of %d runs after %d warm-up runs\n\n",
              count, name.c_str(), im.width, im.height, count, count, cfg.runs, cfg.warmup);
  std::printf("| images | upsample | host memory | implementation | device | single calls ms/image | batch ms/image | "
              "speed-up | keypoints/image | batch features |\n|---|---|---|---|---|---:|---:|---:|---:|---|\n");
  const std::vector<ss::Image> copies(std::size_t(count), im);  // separate buffers, as N decoded photos
  std::vector<ss::ImageView> views;
  for (const ss::Image& c : copies) views.push_back(ss::ImageView{c.data.data(), c.width, c.height, 1, c.type});
  for (ss::Backend b : backends) {
    try {
      ss::Context ctx(context_options(b, cfg));
      for (ss::DescriptorType type : cfg.descriptor_types) {  // as the end-to-end table (--descriptor-type)
        if (b == ss::Backend::kCpu && type == ss::DescriptorType::kU8 && cfg.descriptor_types.size() > 1) continue;
        bench_batch_views(ctx, b, name, views, "pageable", true, cfg, type);
        bench_batch_views(ctx, b, name, views, "pageable", false, cfg, type);
      }
#ifdef SPECTRASIFT_HAVE_CUDA
      if (b == ss::Backend::kCuda) {
        std::vector<void*> pinned;
        std::vector<ss::ImageView> pinned_views = views;
        for (ss::ImageView& v : pinned_views) {
          pinned.push_back(ss::cuda::bench::pinned_host_alloc(ctx, im.data.size()));
          std::memcpy(pinned.back(), im.data.data(), im.data.size());
          v.data = pinned.back();
        }
        bench_batch_views(ctx, b, name, pinned_views, "page-locked", true, cfg);
        for (void* p : pinned) ss::cuda::bench::pinned_host_free(p);
      }
#endif
    } catch (const ss::Error& e) {
      std::printf("| - | - | - | spectrasift %s | - | - | - | - | - | %s |\n", ss::to_string(b), e.what());
    }
  }
}

/// n descriptors: those of `f` first, then random integer ones (0..255, as SIFT's).
ss::Features descriptors_of(const ss::Features& f, int n, std::uint64_t seed) {
  ss::Features out;
  out.keypoints.resize(std::size_t(n));
  out.descriptors.resize(std::size_t(n) * ss::Features::kDescriptorSize);
  const std::size_t have = std::min(f.descriptors.size(), out.descriptors.size());
  std::copy(f.descriptors.begin(), f.descriptors.begin() + std::ptrdiff_t(have), out.descriptors.begin());
  std::mt19937_64 g(seed);
  for (std::size_t i = have; i < out.descriptors.size(); ++i) out.descriptors[i] = float(g() % 256);
  return out;
}

void bench_matching(const std::vector<ss::Backend>& backends, const Config& cfg, const ss::Image* elephants) {
  ss::Features fq, ft;
  std::string source = "random integer descriptors";
  if (elephants) {
    ss::Context cpu(context_options(ss::Backend::kCpu, cfg));
    ss::SiftOptions o;
    fq = ss::detect_and_compute(cpu, *elephants, o);
    o.upsample = false;
    ft = ss::detect_and_compute(cpu, *elephants, o);
    source = "elephants 4K features (" + std::to_string(fq.size()) + " / " + std::to_string(ft.size()) +
             "), random integer descriptors beyond";
  }
  const ss::Features q = descriptors_of(fq, cfg.match_size, 1), t = descriptors_of(ft, cfg.match_train_size, 2);
  std::printf("\nMatching %d x %d descriptors (%s); median of %d runs after %d warm-up runs, host to host\n\n",
              cfg.match_size, cfg.match_train_size, source.c_str(), cfg.runs, cfg.warmup);
  std::printf("| implementation | device | nearest_two ms | match_features ms | matches | mutual ms | mutual matches | "
              "same matches as cpu |\n|---|---|---:|---:|---:|---:|---:|---|\n");
  // The CPU backend's matches (when its row ran first): every other row's are compared with them, bit for bit.
  std::vector<ss::Match> cpu_plain, cpu_mutual;
  bool have_cpu = false;
  const auto same = [](const std::vector<ss::Match>& a, const std::vector<ss::Match>& b) {
    return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(ss::Match)) == 0);
  };
  for (ss::Backend b : backends) {
    try {
      ss::Context ctx(context_options(b, cfg));
      auto time = [&](auto&& f) {
        for (int i = 0; i < std::max(1, cfg.warmup); ++i) f();
        std::vector<double> v;
        for (int i = 0; i < cfg.runs; ++i) {
          const auto t0 = std::chrono::steady_clock::now();
          f();
          v.push_back(ms_since(t0));
        }
        return median(v);
      };
      std::vector<ss::Match> plain, mutual;
      ss::MatchOptions mo;
      mo.mutual = true;
      const double top2 = time([&] { ss::nearest_two(ctx, q, t); });
      const double full = time([&] { plain = ss::match_features(ctx, q, t); });
      const double both = time([&] { mutual = ss::match_features(ctx, q, t, mo); });
      std::string agree = "-";
      if (b == ss::Backend::kCpu) {
        cpu_plain = plain;
        cpu_mutual = mutual;
        have_cpu = true;
      } else if (have_cpu) {
        agree = same(plain, cpu_plain) && same(mutual, cpu_mutual) ? "yes" : "NO";
      }
      std::printf("| spectrasift %s | %s | %.2f | %.2f | %zu | %.2f | %zu | %s |\n", ss::to_string(b),
                  ctx.describe().c_str(), top2, full, plain.size(), both, mutual.size(), agree.c_str());
    } catch (const ss::Error& e) {
      std::printf("| spectrasift %s | - | - | - | %s | | | |\n", ss::to_string(b), e.what());
    }
    std::fflush(stdout);
  }
}

int vs_opencv(int argc, char** argv);  // bench/sift_bench_vs_opencv.inc

}  // namespace

#include "sift_bench_vs_opencv.inc"

int main(int argc, char** argv) {
  Config cfg;
  bool quick = false, match_only = false;
  int batch = 0;  // --batch N: the batch table alone
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--vs-opencv") return vs_opencv(argc - i - 1, argv + i + 1);
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "sift_bench: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--backend") {
      const std::string v = next();
      if (v == "all") cfg.backends = {ss::Backend::kCpu, ss::Backend::kOpenCL, ss::Backend::kCuda};
      else if (v == "cpu") cfg.backends = {ss::Backend::kCpu};
      else if (v == "opencl") cfg.backends = {ss::Backend::kOpenCL};
      else if (v == "cuda") cfg.backends = {ss::Backend::kCuda};
      else {
        std::fprintf(stderr, "sift_bench: --backend cpu|opencl|cuda|all, not %s\n", v.c_str());
        return 2;
      }
    } else if (a == "--device") cfg.device = std::atoi(next().c_str());
    else if (a == "--opencl-device") cfg.opencl_device = std::atoi(next().c_str());
    else if (a == "--runs") cfg.runs = std::max(1, std::atoi(next().c_str()));
    else if (a == "--warmup") cfg.warmup = std::max(0, std::atoi(next().c_str()));
    else if (a == "--threads") cfg.threads = std::max(0, std::atoi(next().c_str()));
    else if (a == "--photos") cfg.photos = next();
    else if (a == "--match-size") {  // Q (Q x Q) or QxT (issue 19's CUDA target is 23626x16327)
      const std::string v = next();
      cfg.match_size = std::max(1, std::atoi(v.c_str()));
      const std::size_t x = v.find('x');
      cfg.match_train_size = x == std::string::npos ? cfg.match_size : std::max(1, std::atoi(v.c_str() + x + 1));
    }
    else if (a == "--quick") quick = true;
    else if (a == "--batch") batch = std::max(1, std::atoi(next().c_str()));
    else if (a == "--match-only") match_only = true;
    else if (a == "--verbose") cfg.verbose = true;
    else if (a == "--descriptor-type") {
      const std::string v = next();
      if (v == "both") cfg.descriptor_types = {ss::DescriptorType::kF32, ss::DescriptorType::kU8};
      else cfg.descriptor_types = {ss::parse_descriptor_type(v)};
    }
    else if (a == "-h" || a == "--help") {
      std::printf("usage: sift_bench [--backend cpu|opencl|cuda|all (all)] [--device N (0)] [--opencl-device N (--device)]\n"
                  "                  [--runs N (7)] [--warmup N (2)]\n"
                  "                  [--threads N (0 = all)] [--photos DIR (../shared/data/photos, else ./shared/...)] [--match-size N|QxT (16384)]\n"
                  "                  [--descriptor-type f32|u8|both (both; the CPU backend f32 unless one is named)]\n"
                  "                  [--match-only] [--quick] [--verbose] [--batch N] | --vs-opencv [--threads N] [--runs N] [--warmup N] [--large FILE] [IMAGE...]\n");
      return 0;
    } else {
      std::fprintf(stderr, "sift_bench: unknown argument %s (--help)\n", a.c_str());
      return 2;
    }
  }
  if (quick) {
    cfg.runs = std::min(cfg.runs, 3);
    cfg.warmup = std::min(cfg.warmup, 1);
    cfg.match_size = std::min(cfg.match_size, 4096);
    cfg.match_train_size = std::min(cfg.match_train_size, 4096);
  }
  const char* names[] = {"kleiber_1920x1080.jpg", "elephants_1920x1080.jpg", "kleiber_3840x2160.jpg",
                         "elephants_3840x2160.jpg"};
  std::vector<std::pair<std::string, ss::Image>> photos;
  for (const char* n : names) {
    const std::string file = cfg.photos + "/" + n;
    if (!std::filesystem::exists(file)) {
      std::printf("PHOTO MISSING: %s (pass --photos DIR; the photos live in ../shared/data/photos) -- not timed\n",
                  file.c_str());
      continue;
    }
    photos.emplace_back(n, load_gray_u8(file));
  }
  if (photos.empty()) std::printf("NO PHOTOS FOUND in %s: SIFT not timed, matching on random descriptors only\n",
                                  cfg.photos.c_str());
  const ss::Image* elephants = nullptr;
  for (const auto& [name, im] : photos)
    if (name == "elephants_3840x2160.jpg") elephants = &im;
  if (match_only) {
    bench_matching(cfg.backends, cfg, elephants);
    return 0;
  }
  if (batch > 0) {
    if (photos.empty() || photos.front().first != "kleiber_1920x1080.jpg") {
      std::printf("--batch needs kleiber_1920x1080.jpg in %s -- not timed\n", cfg.photos.c_str());
      return 1;
    }
    bench_batch(cfg.backends, cfg, photos.front().first, photos.front().second, batch);
    return 0;
  }
  std::printf("SIFT end to end (8-bit grey host image -> features on the host), median of %d runs after %d warm-up "
              "runs; stages: device time per stage (OpenCL profiling events, medians)\n\n",
              cfg.runs, cfg.warmup);
  std::printf("| image | size | upsample | implementation | device | end-to-end ms | keypoints | stages (ms) |\n");
  std::printf("|---|---|---|---|---|---:|---:|---|\n");
  std::vector<ss::Backend> usable;
  for (ss::Backend b : cfg.backends) {
    try {
      ss::Context ctx(context_options(b, cfg));
      usable.push_back(b);
      for (const auto& [name, im] : photos)
        for (bool up : {true, false})
          for (ss::DescriptorType type : cfg.descriptor_types)
            if (b != ss::Backend::kCpu || type == ss::DescriptorType::kF32 || cfg.descriptor_types.size() == 1)
              bench_sift(ctx, b, name, im, up, type, cfg);
    } catch (const ss::Error& e) {
      std::printf("| - | - | - | spectrasift %s | - | - | - | %s |\n", ss::to_string(b), e.what());
    }
  }
  bench_matching(usable, cfg, elephants);
  return 0;
}

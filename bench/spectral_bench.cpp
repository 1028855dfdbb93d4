// spectral_bench — spectral matching on an AVIRIS-sized cube (614 samples x 512 lines x 224 bands, int16),
// SYNTHETIC: a mosaic of the real spectra of the project's two scenes (data/sandiego_plane_60: AVIRIS,
// tests/data/hydice_data: HYDICE x 15), each spectrum linearly interpolated onto 224 bands, plus a small
// deterministic perturbation. The cube is written to a temporary ENVI file (BIP, little-endian) and read
// back through the memory map, as the CLI does.
//
// Timed per backend (median of --repeat runs after one warm-up): SAM with one reference, and the best
// match among --refs references (default 3000). Stage times: read (open_envi), upload, compute,
// download (from the backend), total (spectral_match). Spectral Python's spectral_angles runs on the
// same file in the same run (bench/spy_bench.py) and the ratio is printed.
//
// usage: spectral_bench [--backend cpu|opencl|cuda|all] [--refs N] [--repeat R] [--no-spy] [--keep DIR] [--no-sync]
//                       [--chunk-lines N]
#include <omp.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include <unistd.h>

#include "harness_util.hpp"
#include "spectrasift/envi.hpp"
#include "spectrasift/error.hpp"
#include "spectrasift/spectral.hpp"

namespace fs = std::filesystem;
using namespace spectrasift;

namespace {

constexpr int kSamples = 614, kLines = 512, kBands = 224;

/// Spectra of a real scene interpolated onto kBands bands: rows of kBands values.
std::vector<float> source_spectra(const fs::path& hdr, double gain, int& count) {
  const EnviCube c = open_envi(hdr);
  const auto& h = c.header();
  count = h.samples * h.lines;
  std::vector<float> out(std::size_t(count) * kBands);
  for (int y = 0; y < h.lines; ++y)
    for (int x = 0; x < h.samples; ++x)
      for (int b = 0; b < kBands; ++b) {
        const double pos = double(b) * (h.bands - 1) / (kBands - 1);
        const int i = std::min(int(pos), h.bands - 2);
        const double t = pos - i;
        const double v = (1 - t) * c.value(y, x, i) + t * c.value(y, x, i + 1);
        out[(std::size_t(y) * h.samples + x) * kBands + b] = float(v * gain);
      }
  return out;
}

/// A hash of (x, y, b) for the deterministic perturbation (splitmix64).
std::uint64_t mix(std::uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

fs::path make_cube(const fs::path& dir) {
  int n_sd = 0, n_hy = 0;
  const auto sd = source_spectra(fs::path(SPECTRASIFT_DATA_DIR) / "sandiego_plane_60.hdr", 1.0, n_sd);
  const auto hy = source_spectra(fs::path(SPECTRASIFT_TEST_DATA) / "hydice_data.hdr", 15.0, n_hy);
  std::vector<std::int16_t> cube(std::size_t(kSamples) * kLines * kBands);
  for (int y = 0; y < kLines; ++y)
    for (int x = 0; x < kSamples; ++x) {
      // 60 x 60 San Diego tiles alternate with 80 x 100 HYDICE tiles.
      const bool use_sd = ((x / 70) + (y / 70)) % 2 == 0;
      const float* s = use_sd ? &sd[(std::size_t(y % 60) * 60 + x % 60) * kBands]
                              : &hy[(std::size_t(y % 100) * 80 + x % 80) * kBands];
      std::int16_t* px = &cube[(std::size_t(y) * kSamples + x) * kBands];
      for (int b = 0; b < kBands; ++b) {
        const double noise = double(mix((std::uint64_t(y) * kSamples + x) * kBands + b) % 41) - 20.0;
        px[b] = std::int16_t(std::clamp(std::lround(s[b] + noise), -32768L, 32767L));
      }
    }
  EnviHeader h;
  h.samples = kSamples;
  h.lines = kLines;
  h.bands = kBands;
  h.data_type = SampleType::kI16;
  h.interleave = Interleave::kBip;
  h.description = "SYNTHETIC AVIRIS-sized cube for spectral_bench: mosaic of real AVIRIS (San Diego) and HYDICE spectra";
  const fs::path hdr = dir / "aviris_synthetic.hdr";
  write_envi_raw(hdr, h, cube.data(), cube.size() * sizeof(std::int16_t));
  return hdr;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

struct Row {
  std::string backend, job;
  double read = 0, upload = 0, compute = 0, download = 0, total = 0;
};

}  // namespace

using spectrasift::test::run_capture;

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // one line at a time, also into a file (long runs)
  std::string backend_arg = "all";
  int refs = 3000, repeat = 5;
  bool spy = true;
  bool do_sync = true;  // --no-sync: leave dirty pages to the kernel's writeback (docs/performance/spectral.md, 'Open')
  int chunk_lines = 0;  // --chunk-lines N: SpectralOptions::chunk_lines (0: the backend's choice)
  std::string keep;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error(a + " needs a value");
      return argv[++i];
    };
    if (a == "--backend") backend_arg = next();
    else if (a == "--refs") refs = std::stoi(next());
    else if (a == "--repeat") repeat = std::max(1, std::stoi(next()));
    else if (a == "--no-spy") spy = false;
    else if (a == "--keep") keep = next();
    else if (a == "--no-sync") do_sync = false;
    else if (a == "--chunk-lines") chunk_lines = std::stoi(next());
    else {
      std::cerr << "usage: spectral_bench [--backend cpu|opencl|cuda|all] [--refs N] [--repeat R] [--no-spy] [--keep DIR] "
                   "[--no-sync] [--chunk-lines N]\n";
      return 2;
    }
  }
  try {
    const fs::path dir = keep.empty() ? fs::temp_directory_path() / ("spectral-bench-" + std::to_string(::getpid())) : fs::path(keep);
    fs::create_directories(dir);
    const auto t_gen = std::chrono::steady_clock::now();
    const fs::path hdr = make_cube(dir);
    // Write back every dirty page (this cube's and earlier benchmarks' files) before anything is timed, so that
    // no disk writeback runs during the timed passes. On the H200 VM the CPU backend took 3 ms on a fresh
    // machine and 14-29 ms after the GPU benchmarks had written ~1 GB of cubes (docs/performance/spectral.md, 'Open'); writeback
    // competing for the VM's CPUs is one suspect, not confirmed.
    if (do_sync) ::sync();
    std::printf("cube: %s, %d samples x %d lines x %d bands int16 BIP (SYNTHETIC from real spectra), %.1f MB, generated in %.0f ms\n",
                hdr.c_str(), kSamples, kLines, kBands, double(kSamples) * kLines * kBands * 2 / 1e6,
                std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_gen).count());
    std::printf("host: %d OpenMP threads\n", omp_get_max_threads());

    std::vector<Backend> backends;
    if (backend_arg == "all") {
      for (Backend b : compiled_backends()) {
        bool dev = false;
        for (const auto& d : list_devices()) dev = dev || d.backend == b;
        if (dev) backends.push_back(b);
      }
    } else {
      backends.push_back(parse_backend(backend_arg));
    }

    // References: one pixel spectrum; and `refs` pixel spectra spread over the cube.
    EnviCube probe = open_envi(hdr);
    const SpectralLibrary one = reference_from_pixels(probe, {{100, 100}});
    std::vector<std::pair<int, int>> xy;
    for (int i = 0; i < refs; ++i) xy.push_back({int(mix(2 * i) % kSamples), int(mix(2 * i + 1) % kLines)});
    const SpectralLibrary many = reference_from_pixels(probe, xy);

    // Spectral Python first, right before the CPU backend's one-reference job, so that both run under the
    // same load on a shared machine (see RESULTS.md).
    nlohmann::json js;
    double spy_ms = 0;
    if (spy) {
      int status = 0;
      // Debian's python3-spectral lives with /usr/bin/python3; SPECTRASIFT_PYTHON picks another interpreter
      // (the GPU machine's python3 with Spectral Python carried as a wheel).
      const char* py = std::getenv("SPECTRASIFT_PYTHON");
      std::string cmd = std::string(py && *py ? py : "/usr/bin/python3") + " ";
      cmd += (fs::path(SPECTRASIFT_DATA_DIR).parent_path() / "bench" / "spy_bench.py").string();
      cmd += ' ';
      cmd += hdr.string();
      cmd += " --x 100 --y 100 --repeat ";
      cmd += std::to_string(repeat);
      const std::string out = run_capture(cmd + " 2>&1", status);
      if (status != 0) {
        std::printf("\nSpectral Python: not run (%s)\n", out.c_str());
      } else {
        const auto j = nlohmann::json::parse(out);
        js["spy"] = j;
        spy_ms = j["spectral_angles_ms"].get<double>();
        std::printf("\nSpectral Python %s spectral_angles, 1 reference, on the loaded float32 array: %.1f ms (median of %d; "
                    "loading the file: %.1f ms; NumPy einsum formulation: %.1f ms)\n",
                    j["version"].get<std::string>().c_str(), spy_ms, repeat, j["load_ms"].get<double>(),
                    j["numpy_ms"].get<double>());
      }
    }
    std::vector<Row> rows;
    for (Backend b : backends) {
      ContextOptions co;
      co.backend = b;
      Context ctx(co);
      std::printf("\n%s: %s\n", to_string(b), ctx.describe().c_str());
      struct Job {
        std::string name;
        const SpectralLibrary* lib;
        Reduction red;
      };
      const std::vector<Job> jobs = {{"sam, 1 reference", &one, Reduction::kAll},
                                     {"sam, best of " + std::to_string(refs), &many, Reduction::kBest}};
      for (const auto& job : jobs) {
        SpectralOptions o;
        o.metric = Metric::kSpectralAngle;
        o.reduction = job.red;
        o.chunk_lines = chunk_lines;
        std::vector<double> rd, up, cp, dl, tt;
        const int runs = job.lib->count > 100 ? std::min(repeat, 3) : repeat;
        for (int r = 0; r <= runs; ++r) {  // r == 0: warm-up
          const auto t0 = std::chrono::steady_clock::now();
          const EnviCube cube = open_envi(hdr);
          const double read_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
          SpectralResult res;
          try {
            res = spectral_match(ctx, cube, *job.lib, o);
          } catch (const Error& e) {
            std::printf("  %-28s skipped: %s\n", job.name.c_str(), e.what());
            break;
          }
          if (r == 0) continue;
          rd.push_back(read_ms);
          up.push_back(res.times.upload_ms);
          cp.push_back(res.times.compute_ms);
          dl.push_back(res.times.download_ms);
          tt.push_back(res.times.total_ms);
        }
        if (tt.empty()) continue;
        Row row{to_string(b), job.name, median(rd), median(up), median(cp), median(dl), median(tt)};
        rows.push_back(row);
        std::printf("  %-28s read %8.3f  upload %8.2f  compute %9.2f  download %8.2f  total %9.2f ms (median of %zu)\n",
                    job.name.c_str(), row.read, row.upload, row.compute, row.download, row.total, tt.size());
        js["runs"].push_back({{"backend", row.backend}, {"job", row.job}, {"read_ms", row.read}, {"upload_ms", row.upload},
                              {"compute_ms", row.compute}, {"download_ms", row.download}, {"total_ms", row.total}});
      }
    }

    if (spy_ms > 0)
      for (const auto& r : rows)
        if (r.job == "sam, 1 reference")
          std::printf("%-7s one reference end to end (read + match) %.2f ms: %.2fx Spectral Python's spectral_angles time\n",
                      r.backend.c_str(), r.read + r.total, spy_ms / (r.read + r.total));
    std::printf("\nJSON %s\n", js.dump().c_str());
    if (keep.empty()) fs::remove_all(dir);
  } catch (const std::exception& e) {
    std::cerr << "spectral_bench: error: " << e.what() << '\n';
    return 1;
  }
  return 0;
}

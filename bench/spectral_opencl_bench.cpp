// spectral_opencl_bench — the OpenCL backend of spectral matching on an AVIRIS-sized cube (issue 4, item 7).
//
// The cube is SYNTHETIC, built from real spectra with the recipe of spectral_gpu_bench (256 pixel spectra of
// the AVIRIS ABU urban-2 scene, bench/data/abu_urban_2_spectra_256x198.i16, interpolated to 224 bands,
// blended in 32x32 patches, brightness and 1% noise; 614 x 512 x 224 int16, 140.8 MB), so that both
// benchmarks measure the same bytes. When spectral_gpu_bench ran first in the same run, its files in
// /tmp/spectrasift_gpu_bench are used; otherwise the same cube is written to --dir.
//
// Everything goes through the public API (open_envi + spectral_match on a fresh mapping of a file in the
// page cache). Device times come from OpenCL profiling events (SpectralResult::times: upload = sum of the
// upload commands, compute = sum of the kernels, download = sum of the read-backs); end to end is the
// wall time of spectral_match. Medians of --reps runs after one warm-up.
//   ceilings     device copy bandwidth (read + write) and the pinned upload of the raw cube
//   one ref      per metric and interleave: kernel time against the memory floor (cube bytes / copy
//                bandwidth), end to end against the pinned upload; a chunk-size sweep
//   N refs       best match: kernel time (spectral_prepare + spectral_gemm), end to end, agreement of the
//                best reference with float64 (sampled pixels) and with the CPU backend (every pixel)
// On a CPU OpenCL device (PoCL) the defaults shrink (--refs 100, --reps 3) so that a run takes a minute.
// Usage: spectral_opencl_bench [--dir DIR] [--reps N] [--refs N] [--quick] [--no-cpu] [--device N]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "spectrasift/context.hpp"
#include "spectrasift/envi.hpp"
#include "spectrasift/error.hpp"
#include "spectrasift/spectral.hpp"
#include "synthetic_cube.hpp"
#ifdef SPECTRASIFT_HAVE_OPENCL
#include "hooks/opencl_hooks.hpp"
#endif

namespace fs = std::filesystem;
using namespace spectrasift;

#ifndef SPECTRASIFT_HAVE_OPENCL
int main() {
  std::printf("spectral_opencl_bench: the OpenCL backend is not compiled into this build; nothing to measure\n");
  return 0;
}
#else

namespace {

using namespace bench_cube;  // the synthetic cube, its files and float64 scores (synthetic_cube.hpp)

struct Timed {
  double e2e_ms = 0, upload_ms = 0, compute_ms = 0, download_ms = 0, read_ms = 0;
  SpectralResult last;
};

/// Median stage times of `reps` runs after one warm-up; the cube is mapped afresh for every run.
Timed run(Context& ctx, const fs::path& hdr, const SpectralLibrary& lib, const SpectralOptions& o, int reps) {
  std::vector<double> e2e, up, comp, down, rd;
  Timed t;
  for (int r = 0; r <= reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    const EnviCube cube = open_envi(hdr);
    SpectralResult res = spectral_match(ctx, cube, lib, o);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (r == 0) continue;  // warm-up: program builds, buffer allocation
    e2e.push_back(ms);
    up.push_back(res.times.upload_ms);
    comp.push_back(res.times.compute_ms);
    down.push_back(res.times.download_ms);
    rd.push_back(res.times.read_ms);
    if (r == reps) t.last = std::move(res);
  }
  t.e2e_ms = median(e2e);
  t.upload_ms = median(up);
  t.compute_ms = median(comp);
  t.download_ms = median(down);
  t.read_ms = median(rd);
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  fs::path dir = "/tmp/spectrasift_opencl_bench";
  const fs::path shared_dir = "/tmp/spectrasift_gpu_bench";
  fs::path table_path = fs::path(SPECTRASIFT_DATA_DIR) / ".." / "bench" / "data" / "abu_urban_2_spectra_256x198.i16";
  int reps = -1, nrefs = -1, device = -1;
  bool quick = false, with_cpu = true;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw Error(ErrorCode::kInvalidArgument, a + " needs a value");
      return argv[++i];
    };
    if (a == "--dir") dir = next();
    else if (a == "--reps") reps = std::stoi(next());
    else if (a == "--refs") nrefs = std::stoi(next());
    else if (a == "--device") device = std::stoi(next());
    else if (a == "--quick") quick = true;
    else if (a == "--no-cpu") with_cpu = false;
    else {
      std::fprintf(stderr, "usage: spectral_opencl_bench [--dir DIR] [--reps N] [--refs N] [--quick] [--no-cpu] [--device N]\n");
      return 2;
    }
  }
  try {
    // The device: the one asked for, else the first OpenCL GPU, else the first OpenCL device.
    const auto devices = list_devices();
    for (const auto& d : devices)
      if (device < 0 && d.backend == Backend::kOpenCL && d.type == "gpu") device = d.index;
    for (const auto& d : devices)
      if (device < 0 && d.backend == Backend::kOpenCL) device = d.index;
    if (device < 0) {
      std::printf("spectral_opencl_bench: no OpenCL device on this machine; nothing to measure\n");
      return 0;
    }
    ContextOptions co;
    co.backend = Backend::kOpenCL;
    co.device = device;
    Context ctx(co);
    const bool cpu_device = ctx.device().type == "cpu";
    if (reps < 0) reps = quick ? 3 : (cpu_device ? 3 : 20);
    if (nrefs < 0) nrefs = cpu_device ? 100 : 3000;
    std::printf("# spectral_opencl_bench on %s (%s)\n", ctx.describe().c_str(), ctx.device().version.c_str());

    // ---- data ----
    const auto table = load_table(table_path);
    fs::path cube_dir = dir;
    if (fs::exists(shared_dir / "cube_bip.hdr") && fs::exists(shared_dir / "cube_bsq.hdr") &&
        fs::exists(shared_dir / "cube_bil.hdr")) {
      cube_dir = shared_dir;  // the same bytes as spectral_gpu_bench
    } else if (!fs::exists(dir / "cube_bip.hdr")) {
      write_cubes(dir, make_cube(table));
    }
    const std::size_t cube_bytes = std::size_t(kSamples) * kLines * kBands * 2;
    std::printf("cube: %d samples x %d lines x %d bands int16 (%.1f MB), synthetic from real AVIRIS spectra (%s); %d refs\n",
                kSamples, kLines, kBands, double(cube_bytes) / 1e6, cube_dir.c_str(), nrefs);
    const EnviCube bip_cube = open_envi(cube_dir / "cube_bip.hdr");
    const auto* bip = reinterpret_cast<const std::int16_t*>(bip_cube.data());

    // ---- ceilings ----
    const double copy_gbps =
        opencl::bench::device_copy_gbps(ctx.impl(), cpu_device ? (std::size_t(256) << 20) : (std::size_t(1) << 30), reps);
    const double up_ms = opencl::bench::pinned_upload_ms(ctx.impl(), cube_bytes, reps);
    const double floor_ms = double(cube_bytes) / (copy_gbps * 1e6);
    std::printf("| ceiling | value |\n|---|---|\n");
    std::printf("| device copy bandwidth (%s D2D, read+write) | %s GB/s |\n", cpu_device ? "256 MiB" : "1 GiB",
                fmt(copy_gbps, 1).c_str());
    std::printf("| pinned upload of the raw cube (%.1f MB) | %s ms (%s GB/s) |\n", double(cube_bytes) / 1e6,
                fmt(up_ms).c_str(), fmt(double(cube_bytes) / (up_ms * 1e6), 1).c_str());
    std::printf("| memory floor of one pass (cube bytes / copy bandwidth) | %s ms |\n\n", fmt(floor_ms, 4).c_str());
    std::fflush(stdout);

    // ---- one reference ----
    SpectralLibrary ref1;
    ref1.count = 1;
    ref1.bands = kBands;
    ref1.names = {"mean 9x9 at (200,100)"};
    {
      std::vector<double> acc(kBands, 0.0);
      for (int y = 100; y < 109; ++y)
        for (int x = 200; x < 209; ++x)
          for (int b = 0; b < kBands; ++b) acc[b] += bip[(std::size_t(y) * kSamples + x) * kBands + b];
      for (int b = 0; b < kBands; ++b) ref1.spectra.push_back(float(acc[b] / 81.0));
    }
    std::printf("One reference (--best), OpenCL kernel time (spectral_one_ref, sum over chunks) against the memory floor "
                "%s ms, end to end (open + stream + results) against the pinned upload %s ms; median of %d:\n\n",
                fmt(floor_ms, 4).c_str(), fmt(up_ms).c_str(), reps);
    std::printf("| metric | interleave | kernel (ms) | x floor | upload (ms) | download (ms) | end to end (ms) | x pinned upload | identical to bsq |\n"
                "|---|---|---|---|---|---|---|---|---|\n");
    const Metric metrics[] = {Metric::kSpectralAngle, Metric::kEuclidean, Metric::kCorrelation, Metric::kInformationDivergence};
    const char* ils[] = {"bsq", "bil", "bip"};
    for (Metric m : metrics) {
      if (quick && m != Metric::kSpectralAngle) continue;
      SpectralOptions o;
      o.metric = m;
      o.reduction = Reduction::kBest;
      std::vector<float> first;
      for (const char* il : ils) {
        const Timed t = run(ctx, cube_dir / (std::string("cube_") + il + ".hdr"), ref1, o, reps);
        bool same = true;
        if (first.empty()) first = t.last.scores;
        else same = first.size() == t.last.scores.size() &&
                    std::memcmp(first.data(), t.last.scores.data(), first.size() * sizeof(float)) == 0;
        std::printf("| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", to_string(m), il, fmt(t.compute_ms).c_str(),
                    fmt(t.compute_ms / floor_ms, 1).c_str(), fmt(t.upload_ms).c_str(), fmt(t.download_ms).c_str(),
                    fmt(t.e2e_ms).c_str(), fmt(t.e2e_ms / up_ms, 2).c_str(), same ? "yes" : "NO");
        std::fflush(stdout);
      }
    }
    std::printf("\n");

    // ---- chunk sweep ----
    std::printf("One reference sam, bip, end to end by chunk size (lines), median of %d:\n\n", reps);
    std::printf("| chunk lines | chunks | end to end (ms) | upload (ms) | kernel (ms) | download (ms) | host staging copy (ms) |\n|---|---|---|---|---|---|---|\n");
    for (int chunk : {16, 64, 128, 512, 0}) {
      if (quick && chunk != 0 && chunk != 64) continue;
      SpectralOptions o;
      o.reduction = Reduction::kBest;
      o.chunk_lines = chunk;
      const Timed t = run(ctx, cube_dir / "cube_bip.hdr", ref1, o, reps);
      std::printf("| %s | %s | %s | %s | %s | %s | %s |\n", chunk ? std::to_string(chunk).c_str() : "auto",
                  chunk ? std::to_string((kLines + chunk - 1) / chunk).c_str() : "-", fmt(t.e2e_ms).c_str(),
                  fmt(t.upload_ms).c_str(), fmt(t.compute_ms).c_str(), fmt(t.download_ms).c_str(),
                  fmt(t.read_ms).c_str());
      std::fflush(stdout);
    }
    std::printf("\n");

    // ---- many references ----
    SpectralLibrary lib;
    lib.count = nrefs;
    lib.bands = kBands;
    lib.spectra = make_refs(table, nrefs);
    for (int i = 0; i < nrefs; ++i) {
      std::string name = std::to_string(i);  // (not "r" + to_string: GCC 12's -Wrestrict false positive)
      name.insert(name.begin(), 'r');
      lib.names.push_back(name);
    }
    const int many_reps = std::max(1, cpu_device ? 1 : std::min(reps, 5));
    std::printf("Best of %d references (bip), OpenCL kernel time (spectral_prepare + spectral_gemm) and end to end, "
                "median of %d; best index equal to float64 on every 997th pixel and to the CPU backend on every pixel:\n\n",
                nrefs, many_reps);
    std::printf("| metric | kernel (ms) | end to end (ms) | same best as f64 (sampled) | same best as CPU backend | CPU backend end to end (ms) |\n|---|---|---|---|---|---|\n");
    for (Metric m : {Metric::kSpectralAngle, Metric::kEuclidean}) {
      if (quick && m != Metric::kSpectralAngle) continue;
      SpectralOptions o;
      o.metric = m;
      o.reduction = Reduction::kBest;
      const Timed t = run(ctx, cube_dir / "cube_bip.hdr", lib, o, many_reps);
      const std::size_t npx = std::size_t(kSamples) * kLines;
      int agree = 0, total = 0;
      for (std::size_t p = 0; p < npx; p += 997) {
        int best = -1;
        double bs = 0;
        for (int r = 0; r < nrefs; ++r) {
          const double s = score64(bip + p * kBands, lib.spectra.data() + std::size_t(r) * kBands, m);
          if (best < 0 || s < bs) best = r, bs = s;
        }
        agree += t.last.index[p] == best;
        ++total;
      }
      std::string cpu_agree = "-", cpu_ms = "-";
      if (with_cpu) {
        ContextOptions cc;
        cc.backend = Backend::kCpu;
        Context cpu(cc);
        const Timed c = run(cpu, cube_dir / "cube_bip.hdr", lib, o, 1);
        std::size_t same = 0;
        for (std::size_t p = 0; p < npx; ++p) same += c.last.index[p] == t.last.index[p];
        cpu_agree = fmt(100.0 * double(same) / double(npx), 4) + " %";
        cpu_ms = fmt(c.e2e_ms, 1);
      }
      std::printf("| %s | %s | %s | %d / %d | %s | %s |\n", to_string(m), fmt(t.compute_ms).c_str(), fmt(t.e2e_ms).c_str(),
                  agree, total, cpu_agree.c_str(), cpu_ms.c_str());
      std::fflush(stdout);
    }
    std::printf("\n");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "spectral_opencl_bench: error: %s\n", e.what());
    return 1;
  }
  return 0;
}

#endif

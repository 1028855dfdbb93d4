// Probe (not part of the build): the host packer of the GPU u8 matching path (backend/descriptor_u8.cpp) per
// thread and on N threads (docs/performance/matching.md, 'GPU matching: the u8 path', 'Host packing').
// It measures, on 2 x ROWS random integer descriptors (0..255 as float, as sift_bench's):
//   1. one thread, all rows (wall and thread CPU time, medians): the loop as of b355df9 (portable C++, not vectorised by GCC without fast-math)
//      against the library's SIMD forms (AVX2 where the CPU has it, the SSE2 baseline under the ISA cap);
//   2. N threads (plain std::threads that spin, as the staging pool's), pieces of P rows claimed from one
//      counter, the packing alone (no CUDA): the time from the start signal to the last piece;
//   3. that every form gives the old loop's bytes, norms and verdict.
// Build and run (from the repository root; no GPU needed):
//   g++ -O3 -std=c++20 -fno-fast-math -ffp-contract=off -Isrc -Iinclude bench/probes/pack_u8_probe.cpp
//       src/backend/descriptor_u8.cpp src/core/cpu_features.cpp -o /tmp/pack_u8_probe -lpthread   (one line)
//   /tmp/pack_u8_probe [ROWS=16384] [THREADS=hardware] [ROUNDS=50]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <random>
#include <thread>
#include <vector>

#include "backend/descriptor_u8.hpp"
#include "core/cpu_features.hpp"

namespace {

// The library's loop as of b355df9 (the reference for speed and bits).
bool pack_old(const float* values, std::size_t begin, std::size_t end, int dim, std::uint8_t* bytes,
              std::int32_t* norms) {
  const std::size_t d = std::size_t(dim);
  bool bad = false;
  for (std::size_t r = begin; r < end; ++r) {
    const float* v = values + r * d;
    std::uint8_t* out = bytes + r * d;
    std::int32_t norm = 0;
    int row_bad = 0;
    for (std::size_t k = 0; k < d; ++k) {
      float c = v[k] > 0.0f ? v[k] : 0.0f;
      c = c < 255.0f ? c : 255.0f;
      const int u = int(c);
      row_bad |= int(float(u) != v[k]);
      out[k] = std::uint8_t(u);
      norm += u * u;
    }
    norms[r] = norm;
    bad |= row_bad != 0;
  }
  return !bad;
}

using PackFn = bool (*)(const float*, std::size_t, std::size_t, int, std::uint8_t*, std::int32_t*);

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// This thread's CPU time in ms: on a loaded machine (the 2-core build VM) the wall clock also counts the time
// the thread waited for a core; the CPU time does not.
double thread_cpu_ms() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) * 1e3 + double(t.tv_nsec) * 1e-6;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Pieces of `piece` rows on `threads` spinning threads (the caller is thread 0); the median time of `rounds`.
double threaded(PackFn fn, const float* src, std::size_t rows, std::uint8_t* bytes, std::int32_t* norms, int threads,
                std::size_t piece, int rounds) {
  std::atomic<int> generation{0}, done{0};
  std::atomic<std::size_t> next{0};
  std::atomic<bool> stop{false};
  const std::size_t pieces = (rows + piece - 1) / piece;
  const auto work = [&] {
    for (;;) {
      const std::size_t p = next.fetch_add(1);
      if (p >= pieces) break;
      fn(src, p * piece, std::min(rows, (p + 1) * piece), 128, bytes, norms);
    }
    done.fetch_add(1);
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t)
    pool.emplace_back([&] {
      int seen = 0;
      while (!stop.load()) {
        if (generation.load() == seen) continue;
        seen = generation.load();
        work();
      }
    });
  std::vector<double> times;
  for (int r = 0; r < rounds; ++r) {
    next.store(0);
    done.store(0);
    const auto t0 = std::chrono::steady_clock::now();
    generation.fetch_add(1);
    work();
    while (done.load() < threads) {
    }
    times.push_back(ms_since(t0));
  }
  stop.store(true);
  for (auto& t : pool) t.join();
  return median(times);
}

}  // namespace

int main(int argc, char** argv) {
  const std::size_t side = argc > 1 ? std::size_t(std::atol(argv[1])) : 16384;
  const int threads = argc > 2 ? std::atoi(argv[2]) : int(std::max(1u, std::thread::hardware_concurrency()));
  const int rounds = argc > 3 ? std::atoi(argv[3]) : 50;
  const std::size_t rows = 2 * side, values = rows * 128;
  std::vector<float> src(values);
  std::mt19937_64 g(1);
  for (float& v : src) v = float(g() % 256);
  std::vector<std::uint8_t> b_old(values), b_new(values);
  std::vector<std::int32_t> n_old(rows), n_new(rows);

  const spectrasift::CpuIsa widest = spectrasift::cpu_isa();
  std::printf("%zu rows of 128 (%.1f MB of floats read, %.1f MB of bytes + norms written); widest ISA %s\n", rows,
              values * 4e-6, (values + rows * 4) * 1e-6, spectrasift::to_string(widest));
  struct Form {
    const char* name;
    PackFn fn;
    spectrasift::CpuIsa cap;
  };
  const Form forms[] = {{"loop of b355df9", &pack_old, widest},
                        {"library, SSE2", &spectrasift::detail::pack_descriptors_u8, spectrasift::CpuIsa::kBaseline},
                        {"library, widest", &spectrasift::detail::pack_descriptors_u8, widest}};
  pack_old(src.data(), 0, rows, 128, b_old.data(), n_old.data());
  for (const Form& f : forms) {
    spectrasift::set_cpu_isa_cap(f.cap);
    std::vector<double> t, cpu;
    for (int r = 0; r < rounds; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      const double c0 = thread_cpu_ms();
      f.fn(src.data(), 0, rows, 128, b_new.data(), n_new.data());
      cpu.push_back(thread_cpu_ms() - c0);
      t.push_back(ms_since(t0));
    }
    const bool same = b_new == b_old && n_new == n_old;
    const double ms = median(cpu);
    std::printf("1 thread, %-16s wall %7.3f ms, CPU %7.3f ms: %5.2f ns/value, %5.1f GB/s of floats; same bits: %s\n",
                f.name, median(t), ms, ms * 1e6 / double(values), double(values) * 4e-6 / ms, same ? "yes" : "NO");
    for (std::size_t piece : {std::size_t(256), std::size_t(1024)})
      std::printf("  %d threads, pieces of %4zu rows: %7.3f ms\n", threads, piece,
                  threaded(f.fn, src.data(), rows, b_new.data(), n_new.data(), threads, piece, rounds));
  }
  return 0;
}

// CPU features read once, and the test/bench cap of the kernel ISA level (see cpu_features.hpp).
#include "core/cpu_features.hpp"

#include <atomic>

namespace spectrasift {

namespace {
std::atomic<int> g_isa_cap{int(CpuIsa::kAvx512)};
}  // namespace

const CpuFeatures& cpu_features() noexcept {
  static const CpuFeatures f = [] {
    CpuFeatures c;
#if defined(__GNUC__) && defined(__x86_64__)
    __builtin_cpu_init();
    c.avx2 = __builtin_cpu_supports("avx2");
    c.fma = __builtin_cpu_supports("fma");
    c.avx512f = __builtin_cpu_supports("avx512f");
    c.avx512bw = __builtin_cpu_supports("avx512bw");
    c.avx512vl = __builtin_cpu_supports("avx512vl");
    c.avx512cd = __builtin_cpu_supports("avx512cd");
    c.avx512vbmi = __builtin_cpu_supports("avx512vbmi");
    c.gfni = __builtin_cpu_supports("gfni");
#endif
    return c;
  }();
  return f;
}

const char* to_string(CpuIsa isa) noexcept {
  switch (isa) {
    case CpuIsa::kBaseline: return "baseline";
    case CpuIsa::kAvx2: return "avx2";
    case CpuIsa::kAvx512: return "avx512";
  }
  return "?";
}

CpuIsa cpu_isa() noexcept {
  const CpuFeatures& f = cpu_features();
  const CpuIsa best = f.avx512f ? CpuIsa::kAvx512 : f.avx2 ? CpuIsa::kAvx2 : CpuIsa::kBaseline;
  const int cap = g_isa_cap.load(std::memory_order_relaxed);
  return int(best) <= cap ? best : CpuIsa(cap);
}

void set_cpu_isa_cap(CpuIsa cap) noexcept { g_isa_cap.store(int(cap), std::memory_order_relaxed); }

}  // namespace spectrasift

// CPU instruction sets: what this CPU runs (read once), and the one pattern for ISA-specific kernels.
//
// The pattern (every CPU kernel with ISA-specific builds follows it):
//   1. The kernel's source is compiled once per ISA level inside an ISA region, in a namespace named after
//      the level:
//        SPECTRASIFT_ISA_BEGIN("avx2")
//        namespace avx2 {
//        #include "backend/cpu/spectral_kernels.inc"   // or the level's own hand-written function
//        }
//        SPECTRASIFT_ISA_END
//      A region is `#pragma GCC target` push/pop (clang: `#pragma clang attribute` push/pop of
//      target(...)): the standard headers stay outside it (included first, compiled for the baseline), so
//      no inline function of a header is ever emitted with AVX code that a baseline caller could link to.
//      No target_clones/ifunc either: ThreadSanitizer and static links need none of the resolver
//      machinery. Regions exist on x86-64 (SPECTRASIFT_ISA_REGIONS); elsewhere only the baseline build is
//      compiled.
//      A source built for AVX2 and the baseline only (namespaces avx2 and base) takes core/isa_builds.inc,
//      which writes that step once: #define SPECTRASIFT_ISA_SOURCE "backend/cpu/x_kernels.inc" and include it.
//   2. The build is picked with pick_isa({avx512 build, avx2 build, baseline}), which takes the widest
//      level that this CPU runs and that the test/bench cap allows (nullptr = no such build).
// All builds of a kernel perform the same operations per element in the same order (strict IEEE, no
// contraction), so the level picked never changes a result.
#pragma once

#include <initializer_list>

namespace spectrasift {

/// Instruction-set extensions of this CPU (cpuid, read once).
struct CpuFeatures {
  bool avx2 = false, fma = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512cd = false, avx512vbmi = false;
  bool gfni = false;
};
const CpuFeatures& cpu_features() noexcept;

/// Kernel ISA levels, narrowest first. kAvx2 needs AVX2; kAvx512 needs AVX-512F.
enum class CpuIsa { kBaseline = 0, kAvx2 = 1, kAvx512 = 2 };
const char* to_string(CpuIsa isa) noexcept;

/// The widest level this CPU runs, limited by the cap (set_cpu_isa_cap).
CpuIsa cpu_isa() noexcept;

/// Tests and benchmarks only: caps the level that kernels pick (kAvx512 = no cap). Not a user setting;
/// takes effect for kernels picked afterwards.
void set_cpu_isa_cap(CpuIsa cap) noexcept;

/// Picks the build of the widest level <= cpu_isa() from builds ordered {avx512, avx2, baseline}.
template <class Fn>
Fn pick_isa(Fn avx512, Fn avx2, Fn baseline, CpuIsa* picked = nullptr) noexcept {
  const CpuIsa level = cpu_isa();
  CpuIsa got = CpuIsa::kBaseline;
  Fn fn = baseline;
  if (level >= CpuIsa::kAvx512 && avx512) fn = avx512, got = CpuIsa::kAvx512;
  else if (level >= CpuIsa::kAvx2 && avx2) fn = avx2, got = CpuIsa::kAvx2;
  if (picked) *picked = got;
  return fn;
}

}  // namespace spectrasift

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define SPECTRASIFT_ISA_REGIONS 1
#define SPECTRASIFT_ISA_PRAGMA(x) _Pragma(#x)
/// Opens an ISA region: the functions up to SPECTRASIFT_ISA_END are compiled for `isa` (a string).
#if defined(__clang__)
#define SPECTRASIFT_ISA_BEGIN(isa) \
  SPECTRASIFT_ISA_PRAGMA(clang attribute push(__attribute__((target(isa))), apply_to = function))
#define SPECTRASIFT_ISA_END SPECTRASIFT_ISA_PRAGMA(clang attribute pop)
#else
#define SPECTRASIFT_ISA_BEGIN(isa) SPECTRASIFT_ISA_PRAGMA(GCC push_options) SPECTRASIFT_ISA_PRAGMA(GCC target(isa))
#define SPECTRASIFT_ISA_END SPECTRASIFT_ISA_PRAGMA(GCC pop_options)
#endif
#endif

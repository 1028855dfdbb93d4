// The CPU SIFT's hot loops compiled twice, for AVX2 and for the baseline ISA (the pattern of
// core/cpu_features.hpp), and the pick of one build (sift_kernels.hpp).
//
// Let g++ if-convert and vectorise the per-sample loops (the selects of the extremum test and of the
// polynomial atan2): with no-trapping-math a select may compute both arms. It changes no result; fast-math
// stays off. Set for the whole file (before any include) so that every inline function of the numeric headers
// is compiled with the same options and can be inlined into the loops.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif

#include "backend/cpu/sift_kernels.hpp"

#include <cmath>
#include <cstdint>

#include "numeric/sift_descriptor.h"
#include "numeric/sift_extrema.h"
#include "numeric/sift_orientation.h"

// g++ -O3 "unroll-and-jams" a tap loop around a vectorised column loop and emits scalar code for the result;
// SIFT_NO_JAM keeps the two-level structure of the blur passes so that the column loop stays vectorised.
#if defined(__GNUC__) && !defined(__clang__)
#define SIFT_NO_JAM __attribute__((optimize("no-loop-unroll-and-jam")))
#else
#define SIFT_NO_JAM
#endif

namespace spectrasift::cpu {

namespace {

#define SPECTRASIFT_ISA_SOURCE "backend/cpu/sift_kernels.inc"
#include "core/isa_builds.inc"  // namespaces avx2 and base
#undef SPECTRASIFT_ISA_SOURCE

}  // namespace

SiftKernels pick_sift_kernels() noexcept {
  const SiftKernels baseline{&base::vertical_pass,  &base::horizontal_pass, &base::subtract_row,
                             &base::blend_rows,     &base::extrema_flags,   &base::orientation_row,
                             &base::descriptor_row, &base::descriptor_accumulate_row, CpuIsa::kBaseline};
#ifdef SPECTRASIFT_ISA_REGIONS
  const SiftKernels wide{&avx2::vertical_pass,  &avx2::horizontal_pass, &avx2::subtract_row,
                         &avx2::blend_rows,     &avx2::extrema_flags,   &avx2::orientation_row,
                         &avx2::descriptor_row, &avx2::descriptor_accumulate_row, CpuIsa::kAvx2};
  const SiftKernels* avx2_set = &wide;
#else
  const SiftKernels* avx2_set = nullptr;
#endif
  return *pick_isa<const SiftKernels*>(nullptr, avx2_set, &baseline);
}

}  // namespace spectrasift::cpu

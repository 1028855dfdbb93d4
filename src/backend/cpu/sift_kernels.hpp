// The CPU SIFT's hot loops (sift_kernels.inc), compiled for AVX2 and for the baseline ISA and picked at run
// time with the one pattern of core/cpu_features.hpp. Every build gives the same bits (no FMA: the library is
// compiled with -ffp-contract=off; the same float operations per element in the same order); only the vector
// width differs. The stages pick a SiftKernels once per image (SiftStagesCpu::upload) and call through it.
#pragma once

#include <cstdint>

#include "core/cpu_features.hpp"

namespace spectrasift::cpu {

struct SiftKernels {
  // sift_pyramid.cpp: the separable blur's two passes, the fused DoG and the doubled base image.
  void (*vertical_pass)(float* out, const float* c, const float* const* rows, const float* k, int r, int w);
  void (*horizontal_pass)(float* out, const float* t, const float* k, int r, int w);
  void (*subtract_row)(float* d, const float* a, const float* b, int w);
  void (*blend_rows)(float* out, const float* a, float wa, const float* b, float wb, int w);
  // sift_extrema.cpp: the in-layer part of the extremum test over a row.
  void (*extrema_flags)(const float* c0, const float* c1, const float* c2, int begin, int end, float thr,
                        std::uint8_t* flags);
  // sift_orientation.cpp: one row of an orientation window.
  void (*orientation_row)(const float* up, const float* mid, const float* dn, int x0, int n, const float* wrow,
                          int* bin, float* mag2, float* raw);
  // sift_descriptor.cpp: one row of a descriptor window, and its accumulation into the histogram.
  void (*descriptor_row)(const float* up, const float* mid, const float* dn, int cx, int j0, int n, float fi,
                         float cos_t, float sin_t, float ori_kp, float bins_per_deg, int* ibin, float* rf,
                         float* cf, float* of, float* mag2);
  void (*descriptor_accumulate_row)(float* hist, const int* ibin, const float* rf, const float* cf, const float* of,
                                    const float* mag2, float wi, const float* wj, int n);
  CpuIsa isa = CpuIsa::kBaseline;  ///< the level picked
};

/// The widest build of the kernels that this CPU runs and the test cap allows (pick_isa).
SiftKernels pick_sift_kernels() noexcept;

}  // namespace spectrasift::cpu

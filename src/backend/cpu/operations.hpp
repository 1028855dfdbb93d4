// The CPU backend's operation functions, one per file of the same name (match.cpp, ransac.cpp, warp.cpp,
// spectral.cpp). CpuBackend (backend.cpp) forwards its entries to them; the contracts are the entries'
// in backend/backend.hpp. Internal to this folder.
#pragma once

#include <array>
#include <cstdint>
#include <memory>

#include "backend/backend.hpp"

namespace spectrasift::cpu {

/// match.cpp: descriptors of `dim` floats, rows contiguous; out has nq entries; `threads` WorkPool threads.
/// `progress` (optional) gets the fraction of queries done, from the calling thread, about 16 times.
void match_top2(const float* query, int nq, const float* train, int nt, int dim, int threads, Top2* out,
                const ProgressFn& progress = {});

/// ransac.cpp: see BackendImpl::score_models (parallel over models).
void score_models(const double* models, const std::uint8_t* valid, int count, const Point2* moving,
                  const Point2* fixed, int n, double threshold2, int threads, int* inliers, double* sums);

/// ransac.cpp: see BackendImpl::inlier_mask.
int inlier_mask(const double* model, const Point2* moving, const Point2* fixed, int n, double threshold2,
                std::uint8_t* mask, double* sum2);

/// warp.cpp: see BackendImpl::warp.
Image warp(const Image& moving, const std::array<double, 9>& inverse, int fixed_w, int fixed_h, int threads);

/// sift_stages.cpp: see BackendImpl::make_sift_stages (bound to ctx for its thread count).
std::unique_ptr<detail::SiftStages> make_sift_stages(detail::ContextImpl& ctx);

/// spectral.cpp: see BackendImpl::spectral_match.
void spectral_match(detail::ContextImpl& ctx, const detail::CubeView& cube, const detail::PreparedReferences& refs,
                    const SpectralOptions& options, SpectralResult& result, const ProgressFn& progress);

}  // namespace spectrasift::cpu

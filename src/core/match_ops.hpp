// Backend entry points of matching, RANSAC scoring and warping (internal; core/ checks the arguments
// once and calls these with valid input). Each backend folder implements them in the file of the
// same name: match.cpp, ransac.cpp, warp.cpp.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "spectrasift/match.hpp"
#include "spectrasift/types.hpp"

namespace spectrasift::cpu {

/// Nearest and second nearest train descriptor of every query (descriptors of `dim` floats, rows
/// contiguous). out has nq entries. Lower train index wins ties. `threads` OpenMP threads.
void match_top2(const float* query, int nq, const float* train, int nt, int dim, int threads, Top2* out);

/// Scores `count` models (9 doubles each, row-major) against n correspondences: for model h the
/// number of pairs with transfer error^2 <= threshold2 and the sum of those errors^2. Models with
/// valid[h] == 0 are skipped (count -1). Parallel over models; each sum is accumulated in point
/// order, so the result does not depend on the thread count.
void score_models(const double* models, const std::uint8_t* valid, int count, const Point2* moving,
                  const Point2* fixed, int n, double threshold2, int threads, int* inliers, double* sums);

/// The inlier mask of one model and the sum of squared errors of its inliers; returns the inlier count.
int inlier_mask(const double* model, const Point2* moving, const Point2* fixed, int n, double threshold2,
                std::uint8_t* mask, double* sum2);

/// Bilinear warp (see warp_image in geometry.hpp); `inverse` maps FIXED -> MOVING pixels.
Image warp(const Image& moving, const std::array<double, 9>& inverse, int fixed_w, int fixed_h, int threads);

}  // namespace spectrasift::cpu

// Model estimators (internal): the minimal and least-squares solvers of each model and the degeneracy
// checks, one file per model, and the per-model dispatch used by the RANSAC driver (core/ransac.cpp) and
// fit_model (core/geometry.cpp). Solvers work on normalised points where stated; m = moving, f = fixed.
#pragma once

#include <vector>

#include "core/linalg.hpp"
#include "spectrasift/geometry.hpp"

namespace spectrasift::geometry {

// ---- homography.cpp ----
/// Exact homography through 4 correspondences with h8 = 1 (8x8 system). False if singular.
bool homography_4pt(const Point2* m, const Point2* f, Mat3& h);
/// Algebraic least-squares homography (DLT): smallest eigenvector of A^T A.
bool homography_dlt(const std::vector<Point2>& m, const std::vector<Point2>& f, Mat3& h);
/// Levenberg-Marquardt on the one-sided transfer error, parameters h0..h7 with h8 = 1.
void homography_lm(const std::vector<Point2>& m, const std::vector<Point2>& f, Mat3& h);
/// Homography from a minimal sample of 4 pixel correspondences, with its orientation checks; nm and nf
/// are the global normalisations of the moving and fixed points. False when degenerate.
bool homography_minimal(const Point2* m, const Point2* f, const Normaliser& nm, const Normaliser& nf, Mat3& h);
/// Least-squares homography of pixel correspondences (normalised DLT, then LM when `nonlinear`).
bool homography_refit(std::vector<Point2>& m, std::vector<Point2>& f, bool nonlinear, Mat3& h);

// ---- estimator.cpp ----
/// Centroids of the moving and fixed points of n pairs (summed in index order).
struct PairCentroids {
  double mx, my, fx, fy;
};
PairCentroids pair_centroids(const Point2* m, const Point2* f, int n);

// ---- affine.cpp ----
/// Least-squares affine map (exact for 3 points). False when the moving points are collinear.
bool affine_ls(const Point2* m, const Point2* f, int n, Mat3& a);

// ---- similarity.cpp ----
/// Least-squares similarity x' = s R x + t without reflection (Umeyama 1991 in 2-D). False when the
/// moving points coincide.
bool similarity_ls(const Point2* m, const Point2* f, int n, Mat3& a);

// ---- degeneracy.cpp ----
double cross(Point2 a, Point2 b, Point2 c);
/// Coincident points (closer than 1e-3 px) in a sample.
bool has_coincident(const Point2* p, int n);
/// Sine of the angle at a between ab and ac below 0.01 (0.57 degrees): nearly collinear.
bool nearly_collinear(Point2 a, Point2 b, Point2 c);
/// Points whose coordinates are all collinear (used to refuse least-squares fits).
bool all_collinear(const std::vector<Point2>& p);

// ---- core/geometry.cpp ----
/// Throws Error(kInvalidArgument) unless the point lists have the same size and finite coordinates.
void check_points(const std::vector<Point2>& moving, const std::vector<Point2>& fixed);

// ---- estimator.cpp: per-model dispatch ----
/// Model from a minimal sample (minimal_sample_size(model) points); false when the sample is degenerate.
bool minimal_model(GeometryModel model, const Point2* m, const Point2* f, const Normaliser& nm,
                   const Normaliser& nf, Mat3& h);
/// Least-squares fit to a subset (indices), with the non-linear refinement when `nonlinear`.
bool fit_subset(GeometryModel model, const Point2* moving, const Point2* fixed, const std::vector<int>& idx,
                bool nonlinear, Mat3& h);

}  // namespace spectrasift::geometry

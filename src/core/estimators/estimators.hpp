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
/// The points are used as given (already normalised); the sums in numeric/refit_sums.h's block order.
bool homography_dlt(const std::vector<Point2>& m, const std::vector<Point2>& f, Mat3& h);
/// Levenberg-Marquardt on the one-sided transfer error, parameters h0..h7 with h8 = 1 (points as given).
void homography_lm(const std::vector<Point2>& m, const std::vector<Point2>& f, Mat3& h);
/// Homography from a minimal sample of 4 pixel correspondences, with its orientation checks; nm and nf
/// are the global normalisations of the moving and fixed points. False when degenerate.
bool homography_minimal(const Point2* m, const Point2* f, const Normaliser& nm, const Normaliser& nf, Mat3& h);

// ---- refit.cpp: the least-squares refits from the sums of numeric/refit_sums.h ----
/// Where a refit's sums come from: the host (HostRefitSums) or the RANSAC backend's device (core/ransac.cpp).
/// Every source gives the bits of numeric/refit_sums.h's fixed order, so a refit is the same on every backend.
class RefitSums {
 public:
  virtual ~RefitSums() = default;
  /// The totals of a chain of passes (numeric/refit_sums.h), concatenated in chain order in out; `given`: the
  /// parameters of the chain's first pass and of its LM passes (the others are derived in the chain).
  virtual void chain(const int* passes, int npasses, const double* given, double* out) = 0;
  /// One pass with given parameters.
  void sums(int pass, const double* given, double* out) { chain(&pass, 1, given, out); }
  /// True when a chain costs what one pass costs (a device: one round trip), so that LM asks for the normal
  /// equations with every cost (wasted when the step is rejected); false on the host (each pass costs its work).
  virtual bool prefers_chains() const { return false; }
  /// The number of selected pairs.
  virtual int count() const = 0;
};

/// The sums on the host over pairs idx[0 .. count) (ascending) of the n pairs moving/fixed, or over all n when
/// idx is null: blocks of 256 pair indices, each in index order, then ss_refit_tree. `threads` > 1 splits the
/// blocks over the calling thread's pool for large selections (the same bits).
void host_refit_sums(int pass, const double* p, const Point2* moving, const Point2* fixed, int n, const int* idx,
                     int count, double* out, int threads = 1);
/// A chain on the host: its passes one after the other, the parameters by ss_refit_chain_params.
void host_refit_chain(const int* passes, int npasses, const double* given, const Point2* moving, const Point2* fixed,
                      int n, const int* idx, int count, double* out, int threads = 1);

class HostRefitSums final : public RefitSums {
 public:
  HostRefitSums(const Point2* moving, const Point2* fixed, int n, const int* idx, int count)
      : moving_(moving), fixed_(fixed), n_(n), idx_(idx), count_(count) {}
  void chain(const int* passes, int npasses, const double* given, double* out) override {
    host_refit_chain(passes, npasses, given, moving_, fixed_, n_, idx_, count_, out);
  }
  int count() const override { return count_; }

 private:
  const Point2* moving_;
  const Point2* fixed_;
  int n_;
  const int* idx_;
  int count_;
};

/// Least-squares homography of the selected pixel correspondences: the Hartley normalisers and collinearity
/// checks from the centroid and spread sums, the normalised DLT (the 9 x 9 eigenvector on the host), then LM
/// when `nonlinear`. False when degenerate.
bool homography_refit(RefitSums& src, bool nonlinear, Mat3& h);
/// DLT from its 30 sums (SS_REFIT_DLT's order): A^T A, its smallest eigenvector, normalised.
bool homography_from_dlt_sums(const double* s, Mat3& h);
/// LM on the normalised points of the normalisers q = (cmx, cmy, sm, cfx, cfy, sf), starting from h.
void homography_lm(RefitSums& src, const double* q, Mat3& h);
/// Least-squares affine and similarity maps of the selected pairs (the centroid sums, then the moments).
bool affine_refit(RefitSums& src, Mat3& a);
bool similarity_refit(RefitSums& src, Mat3& a);

// ---- refit.cpp, over n pairs given as arrays (minimal samples) ----
/// Least-squares affine map (exact for 3 points). False when the moving points are collinear.
bool affine_ls(const Point2* m, const Point2* f, int n, Mat3& a);
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
/// Least-squares fit to the selected pairs of a source, with the non-linear refinement when `nonlinear`.
bool fit_subset(GeometryModel model, RefitSums& src, bool nonlinear, Mat3& h);

}  // namespace spectrasift::geometry

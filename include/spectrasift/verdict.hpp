// spectrasift/verdict.hpp — is a RANSAC model believable? A model that RANSAC "found" can still be
// wrong: a few chance inliers among many matches, or a homography that folds, mirrors or distorts the
// image far beyond what two photographs of one scene allow. assess_model() puts figures on both and
// says whether the model is reliable; `spectrasift register` refuses an unreliable model (exit 3) unless
// asked to keep it (--accept-weak).
//
// Support (a contrario, Moisan & Stival 2004, "ORSA"): if the matches were unrelated, a fixed point
// would fall within e pixels of the model's prediction with probability p(e) = pi e^2 / A, A the area
// of the fixed image. With the inliers sorted by residual e_1 <= ... <= e_K, the number of false alarms
// of "the k best are inliers" is
//     NFA(k) = (n - s) * C(n, k) * C(k, s) * p(e_k)^(k - s)
// (n matches, s = the minimal sample size: s points are always fitted exactly, so k runs from s + 1). The
// support is significant when min_k NFA(k) < 10^max_log10_nfa (default 10^0 = 1: less than one chance model
// expected). This is what tells 9 inliers of 907 matches (rejected unless their residuals are far
// below a pixel) from 5 inliers of 40 matches at 1.3 px (accepted: see tests/verdict_test.cpp).
// Only independent correspondences count (as in ORSA / AC-RANSAC, whose chance model takes the points as
// independent): inliers that share a location in either image (within 0.5 px) count once, the one with the
// smallest residual (distinct_inliers). SIFT gives one point several keypoints (extra orientations), and a
// contracting model can send many moving points onto the one fixed keypoint they all matched: camera -> coins
// as a similarity had 6 "inliers" (log10 NFA -10.4) that are 2 location pairs, i.e. no more than the 2 points
// every similarity sample fits exactly. With distinct_inliers <= s there is no evidence (log10 NFA = +inf).
//
// Shape, on the corners of the MOVING frame (the model is smooth inside it when it does not fold):
//   folds        the homography's denominator w changes sign over the frame (the line at infinity
//                crosses the image): never a real view.
//   flips        det of the Jacobian < 0: the model mirrors the image.
//   scale        sqrt|det J| at the frame's centre (FIXED pixels per MOVING pixel); must lie in
//                [1/max_scale, max_scale] (default 1/32 .. 32).
//   scale_range  sqrt(max |det J| / min |det J|) over the corners: how much the local scale changes
//                across the frame (perspective); default limit 8.
//   anisotropy   largest ratio of the Jacobian's singular values over the corners; default limit 8.
// The limits were chosen on real pairs (homography, query = MOVING; tests/verdict_test.cpp prints the figures
// of the bundled ones). Right pairs: box -> box_in_scene (scale_range 1.29, anisotropy 1.19, log10 NFA -244 with
// 64 distinct of 78 inliers; -302 when all were counted), graf1 -> graf3 (1.45, 1.84, -1587, 424 distinct of 463),
// and from opencv-doc leuvenA -> B (2.63, 1.70), graf3 -> graf1 colour (2.08, 2.12), Blender_Suzanne1 -> 2 (2.26,
// 1.60), basketball1 -> 2 (1.08, 1.05): all far inside the limits. Wrong pairs with a "model": graf1 ->
// box_in_scene (69 inliers of 173, log10 NFA -222 when counted separately, but they are 1 distinct location pair,
// and it folds, mirrors and shrinks 370x) and building -> home (15 of 92, log10 NFA -28 as counted then, folds,
// scale 0.0015): chance inliers on a degenerate model can look significant, which is why the shape is checked as
// well as the support.
#pragma once

#include <string>
#include <vector>

#include "spectrasift/geometry.hpp"
#include "spectrasift/types.hpp"

namespace spectrasift {

/// Limits of assess_model (defaults documented above).
struct VerdictOptions {
  double max_log10_nfa = 0.0;  ///< support: min_k log10 NFA(k) must be below this
  double max_scale = 32.0;     ///< scale at the centre within [1/max_scale, max_scale]
  double max_scale_range = 8.0;
  double max_anisotropy = 8.0;
};

/// The figures of one model and the verdict.
struct ModelVerdict {
  bool reliable = false;
  std::vector<std::string> problems;  ///< one sentence per failed check, with its figures (empty when reliable)
  int matches = 0;
  int inliers = 0;
  int distinct_inliers = 0;    ///< inliers, once per location pair (0.5 px, either image): the NFA's k
  double inlier_ratio = 0;     ///< inliers / matches
  double rms_px = 0;           ///< RMS transfer error of the inliers (FIXED pixels)
  double log10_nfa = 0;        ///< min over k of log10 NFA(k); +inf: no model, or distinct_inliers <= s
  double scale = 0;            ///< FIXED pixels per MOVING pixel at the frame's centre
  double scale_range = 0;
  double anisotropy = 0;
  bool folds = false;
  bool flips = false;

  /// "no reliable model: " + the problems joined by "; " (empty string when reliable).
  std::string summary() const;
};

/// Judges `estimate` fitted to moving[i] -> fixed[i] (the same points given to estimate_model).
/// moving_w x moving_h is the MOVING image's size (the frame whose shape is checked) and fixed_w x
/// fixed_h the FIXED image's (its area is A); a size of 0 x 0 stands for the bounding box of the points.
/// A model with found = false is unreliable ("no model"). Throws Error(kInvalidArgument) when the point
/// lists differ in size or do not match the estimate's inlier mask.
ModelVerdict assess_model(const ModelEstimate& estimate, const std::vector<Point2>& moving,
                          const std::vector<Point2>& fixed, int moving_w, int moving_h, int fixed_w, int fixed_h,
                          const VerdictOptions& options = {});

}  // namespace spectrasift

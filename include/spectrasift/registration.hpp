// spectrasift/registration.hpp — the registration flow of `spectrasift register` as one call: matching with
// query = MOVING and train = FIXED, RANSAC model MOVING -> FIXED on the matched keypoints, and its verdict.
// The CLI and the Python module both run it, so that they give the same model for the same features.
#pragma once

#include <functional>
#include <vector>

#include "spectrasift/context.hpp"
#include "spectrasift/geometry.hpp"
#include "spectrasift/match.hpp"
#include "spectrasift/types.hpp"
#include "spectrasift/verdict.hpp"

namespace spectrasift {

struct RegistrationOptions {
  MatchOptions match;
  RansacOptions ransac;
  VerdictOptions verdict;
};

/// What register_features found; `estimate.found` false means no model (the verdict then says "no model").
struct Registration {
  std::vector<Match> matches;         ///< query = MOVING, train = FIXED
  std::vector<Point2> moving_points;  ///< the matched MOVING keypoints, one per match
  std::vector<Point2> fixed_points;   ///< the matched FIXED keypoints, one per match
  ModelEstimate estimate;             ///< RANSAC's model MOVING -> FIXED
  ModelVerdict verdict;               ///< assess_model on the MOVING frame and the FIXED area
  double match_ms = 0;                ///< wall time of the matching
  double ransac_ms = 0;               ///< wall time of RANSAC (estimate_model)
};

/// Called with "match" and then "ransac" as each stage starts (the CLI's progress bar).
using RegistrationStageFn = std::function<void(const char* stage)>;

/// Matches `moving` (query) against `fixed` (train), fits options.ransac.model to the matched keypoints by
/// RANSAC and judges it (assess_model with the images' sizes; 0 x 0 = the points' bounding box). Throws what
/// match_features and estimate_model throw (invalid options); no model is not an error (estimate.found).
Registration register_features(Context& ctx, const Features& moving, const Features& fixed, int moving_w, int moving_h,
                               int fixed_w, int fixed_h, const RegistrationOptions& options = {},
                               const RegistrationStageFn& on_stage = {});

}  // namespace spectrasift

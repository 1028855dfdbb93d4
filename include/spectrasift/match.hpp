// spectrasift/match.hpp — nearest-neighbour descriptor matching with Lowe's ratio test.
//
// For every query descriptor q the matcher finds, by brute force over all train descriptors t,
// the nearest neighbour t1 and the second nearest t2 in Euclidean (L2) distance
//     d(q, t) = sqrt( sum_k (q_k - t_k)^2 )        (summed in float, in the order k = 0..127)
// keeping only the best two per query while it scans (no query x train distance matrix is ever
// stored). A pair (q, t1) is kept when
//     d(q, t1) <  ratio * d(q, t2)                 (Lowe 2004, section 7.1; OpenCV's usual test)
//     d(q, t1) <= max_distance
//     and, with `mutual`, q is also the nearest query of t1 (cross check).
// Ties are broken deterministically: among train descriptors at exactly the same distance the one
// with the lower index is the nearest (and the other then is the second nearest, so an exact tie
// fails the ratio test). The result does not depend on the number of threads.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "spectrasift/context.hpp"
#include "spectrasift/types.hpp"

namespace spectrasift {

struct MatchOptions {
  /// Lowe's ratio: keep a match when best < ratio * second best. Default 0.8 (Lowe 2004, OpenCV
  /// tutorials); range (0, 1]; 1.0 keeps every match whose two best distances are not tied.
  double ratio = 0.8;
  /// Keep a match only when it is also the best match in the other direction (train -> query).
  /// Default false. Costs a second pass over the descriptors.
  bool mutual = false;
  /// Largest accepted descriptor distance (L2, in descriptor units: default SIFT descriptors have
  /// norm about 512). Default +infinity (no limit); must be >= 0.
  double max_distance = std::numeric_limits<double>::infinity();

  void check() const;  ///< throws Error(kInvalidArgument) on an out-of-range value
};

/// One accepted correspondence.
struct Match {
  int query = 0;               ///< index into the query Features
  int train = 0;               ///< index into the train Features
  float distance = 0;          ///< L2 distance to the nearest train descriptor
  float second_distance = 0;   ///< L2 distance to the second nearest (+inf when train has one descriptor)
};

/// Matches every query descriptor against the train descriptors. The result is sorted by query
/// index (one match per query at most). Either set may be empty (the result is then empty).
/// Throws Error(kInvalidArgument) for invalid options or inconsistent Features (descriptor array
/// size not keypoints * 128), Error(kUnsupported) on a backend that has no matcher yet.
std::vector<Match> match_features(Context& ctx, const Features& query, const Features& train,
                                  const MatchOptions& options = {});

/// The two nearest train descriptors of every query descriptor, before any test: the raw output of
/// the brute-force pass (best1 = -1 when train is empty, best2 = -1 when it has one descriptor;
/// missing distances are +inf). Exposed for tests, benchmarks and custom filters.
struct Top2 {
  int best1 = -1;
  int best2 = -1;
  float distance1 = std::numeric_limits<float>::infinity();
  float distance2 = std::numeric_limits<float>::infinity();
};
std::vector<Top2> nearest_two(Context& ctx, const Features& query, const Features& train);

/// How draw_matches chooses and draws the matches.
struct DrawMatchesOptions {
  /// At most this many matches are drawn (0 = all): thousands of lines make a solid wall and take seconds.
  /// The drawn ones are select_matches_to_draw's sample.
  std::size_t max_matches = 300;
  bool legend = true;  ///< a strip below the images: colours and counts (matches, inliers, outliers, drawn)
};

/// The matches draw_matches draws, as indices into `matches` (ascending): all of them when there are at most
/// `max_matches` (or max_matches is 0); otherwise a sample spread over the image and best first. Inliers
/// and outliers (by `inlier_mask`, null = all inliers) share the budget in proportion to their counts, but
/// outliers keep at least min(outliers, max_matches / 10) and inliers at least one; within a group the query image is cut into an 8 x 8 grid and the
/// cells are visited in rounds, each round taking from every cell its best (smallest distance, then lowest
/// index) match not taken yet, cells in raster order, until the group's share is reached.
std::vector<std::size_t> select_matches_to_draw(const Features& query, int query_width, int query_height,
                                                const std::vector<Match>& matches,
                                                const std::vector<std::uint8_t>* inlier_mask,
                                                std::size_t max_matches);

/// A picture of the matches: the query image on the left and the train image on the right (top
/// aligned, black padding), every keypoint of a drawn match as a small circle and each drawn match as a
/// line with a dark outline; inliers yellow, outliers magenta (colours that stay visible on vegetation,
/// water and sky; when `inlier_mask` is null every match is an inlier). `inlier_mask`, when given, has one
/// entry per match (non-zero = inlier). Images of any type and 1..4 channels are shown as 8-bit RGB
/// (U16 / 257, F32 * 255). With options.legend, a strip below the images gives the colours and the counts:
/// "N matches: I inliers (drawn a), O outliers (drawn b)". Returns an RGB U8 image.
Image draw_matches(const Image& query_image, const Features& query, const Image& train_image,
                   const Features& train, const std::vector<Match>& matches,
                   const std::vector<std::uint8_t>* inlier_mask = nullptr, const DrawMatchesOptions& options = {});

}  // namespace spectrasift

// Descriptor matching: argument checks, backend dispatch, ratio / distance / mutual tests.
#include "spectrasift/match.hpp"

#include <chrono>
#include <cmath>
#include <string>

#include "core/context_impl.hpp"
#include "core/dispatch.hpp"
#include "spectrasift/error.hpp"

namespace spectrasift {

void MatchOptions::check() const {
  if (!(ratio > 0.0 && ratio <= 1.0))
    throw Error(ErrorCode::kInvalidArgument, "match ratio must be in (0, 1], got " + std::to_string(ratio));
  if (!(max_distance >= 0.0))  // also rejects NaN
    throw Error(ErrorCode::kInvalidArgument, "match max_distance must be >= 0, got " + std::to_string(max_distance));
}

namespace {

void check_features(const Features& f, const char* which) {
  if (f.descriptors.size() != f.keypoints.size() * std::size_t(Features::kDescriptorSize))
    throw Error(ErrorCode::kInvalidArgument,
                std::string(which) + " features: " + std::to_string(f.descriptors.size()) +
                    " descriptor values for " + std::to_string(f.keypoints.size()) + " keypoints (expected " +
                    std::to_string(Features::kDescriptorSize) + " per keypoint)");
  if (f.keypoints.size() > std::size_t(1) << 30)
    throw Error(ErrorCode::kInvalidArgument, std::string(which) + " features: too many keypoints");
}

/// One side of a matching call on `backend`: the host descriptors and, when still valid there, their device copy.
detail::FeatureView view_of(const Features& f, const detail::BackendImpl& backend) {
  return detail::FeatureView{f.descriptors.data(), int(f.size()), Features::kDescriptorSize,
                             detail::device_copy_for(f, backend)};
}

std::vector<Top2> top2(Context& ctx, const Features& query, const Features& train, Backend* ran_on = nullptr) {
  std::vector<Top2> out(query.size());
  detail::BackendImpl& backend = detail::backend_for(ctx.impl(), detail::Operation::kMatch);
  if (ran_on) *ran_on = backend.kind();
  backend.match_top2(ctx.impl(), view_of(query, backend), view_of(train, backend), out.data());
  return out;
}

}  // namespace

std::vector<Top2> nearest_two(Context& ctx, const Features& query, const Features& train) {
  const detail::ContextUse use(ctx.impl(), "nearest_two");
  check_features(query, "query");
  check_features(train, "train");
  detail::OperationProgress progress(ctx.impl());
  std::vector<Top2> out = top2(ctx, query, train);
  progress.finish();
  return out;
}

std::vector<Match> match_features(Context& ctx, const Features& query, const Features& train,
                                  const MatchOptions& options) {
  const detail::ContextUse use(ctx.impl(), "match_features");
  options.check();
  check_features(query, "query");
  check_features(train, "train");
  std::vector<Match> matches;
  if (query.size() == 0 || train.size() == 0) return matches;
  const auto t0 = std::chrono::steady_clock::now();
  Backend ran_on = Backend::kCpu;
  detail::OperationProgress progress(ctx.impl());  // per pass: the forward one, then the backward one
  if (options.mutual) progress.stage(0.0, 0.5);
  const std::vector<Top2> fwd = top2(ctx, query, train, &ran_on);
  std::vector<Top2> bwd;
  if (options.mutual) {
    progress.stage(0.5, 1.0);
    bwd = top2(ctx, train, query);
  }
  matches.reserve(fwd.size());
  for (std::size_t q = 0; q < fwd.size(); ++q) {
    const Top2& t = fwd[q];
    if (t.best1 < 0) continue;
    // Ratio test in double on the float distances; with one train descriptor the second is +inf
    // and the test passes (there is nothing to be ambiguous with).
    if (!(double(t.distance1) < options.ratio * double(t.distance2))) continue;
    if (double(t.distance1) > options.max_distance) continue;
    if (options.mutual && bwd[std::size_t(t.best1)].best1 != int(q)) continue;
    matches.push_back(Match{int(q), t.best1, t.distance1, t.distance2});
  }
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ctx.impl().log("match: " + std::to_string(query.size()) + " x " + std::to_string(train.size()) + " descriptors on " +
                 to_string(ran_on) + (ran_on == Backend::kCpu ? " (" + std::to_string(ctx.impl().cpu_threads()) + " threads)" : "") + ", " + std::to_string(matches.size()) + " matches, " +
                 std::to_string(ms) + " ms");
  progress.finish();
  return matches;
}

}  // namespace spectrasift

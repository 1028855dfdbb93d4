// Descriptor matching: argument checks and backend dispatch (the ratio / distance / mutual tests run in the
// backend's match_filtered: backend/backend.cpp, numeric/match_filter.h).
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
  if (f.descriptor_type != DescriptorType::kF32 && f.descriptor_type != DescriptorType::kU8)
    throw Error(ErrorCode::kInvalidArgument, std::string(which) + " features: unknown descriptor type code " +
                                                 std::to_string(int(f.descriptor_type)));
  const bool u8 = f.descriptor_type == DescriptorType::kU8;
  const std::size_t other = u8 ? f.descriptors.size() : f.descriptor_bytes.size();
  if (other != 0)
    throw Error(ErrorCode::kInvalidArgument,
                std::string(which) + " features: descriptor type " + to_string(f.descriptor_type) + " but " +
                    std::to_string(other) + (u8 ? " float" : " byte") + " descriptor values (that array must be empty)");
  if (f.descriptor_values() != f.keypoints.size() * std::size_t(Features::kDescriptorSize))
    throw Error(ErrorCode::kInvalidArgument,
                std::string(which) + " features: " + std::to_string(f.descriptor_values()) +
                    " descriptor values for " + std::to_string(f.keypoints.size()) + " keypoints (expected " +
                    std::to_string(Features::kDescriptorSize) + " per keypoint)");
  if (f.keypoints.size() > std::size_t(1) << 30)
    throw Error(ErrorCode::kInvalidArgument, std::string(which) + " features: too many keypoints");
}

/// One side of a matching call on `backend`: the host descriptors and, when still valid there, their device
/// copy. kU8 descriptors go as bytes to a backend that takes them, else as floats made here (into `floats`,
/// which must outlive the view).
detail::FeatureView view_of(const Features& f, const detail::BackendImpl& backend, std::vector<float>& floats) {
  detail::FeatureView v{nullptr, int(f.size()), Features::kDescriptorSize, detail::device_copy_for(f, backend)};
  if (f.descriptor_type == DescriptorType::kF32) {
    v.descriptors = f.descriptors.data();
  } else if (backend.takes_byte_views()) {
    v.bytes = f.descriptor_bytes.data();
  } else {
    floats.assign(f.descriptor_bytes.begin(), f.descriptor_bytes.end());
    v.descriptors = floats.data();
  }
  return v;
}

std::vector<Top2> top2(Context& ctx, const Features& query, const Features& train) {
  std::vector<Top2> out(query.size());
  detail::BackendImpl& backend = detail::backend_for(ctx.impl(), detail::Operation::kMatch);
  std::vector<float> qf, tf;
  backend.match_top2(ctx.impl(), view_of(query, backend, qf), view_of(train, backend, tf), out.data());
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
  detail::OperationProgress progress(ctx.impl());
  detail::BackendImpl& backend = detail::backend_for(ctx.impl(), detail::Operation::kMatch);
  const Backend ran_on = backend.kind();
  // One entry for both directions and the tests (BackendImpl::match_filtered): a GPU backend uploads each side
  // once and reads back only the kept matches.
  std::vector<float> qf, tf;
  backend.match_filtered(ctx.impl(), view_of(query, backend, qf), view_of(train, backend, tf), options, matches);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ctx.impl().log("match: " + std::to_string(query.size()) + " x " + std::to_string(train.size()) + " descriptors on " +
                 to_string(ran_on) + (ran_on == Backend::kCpu ? " (" + std::to_string(ctx.impl().cpu_threads()) + " threads)" : "") + ", " + std::to_string(matches.size()) + " matches, " +
                 std::to_string(ms) + " ms");
  progress.finish();
  return matches;
}

}  // namespace spectrasift

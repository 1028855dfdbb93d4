// The parts of the backend interface that every backend shares (see backend.hpp).
#include "backend/backend.hpp"

#include <atomic>
#include <cstring>
#include <string>

#include "core/context_impl.hpp"
#include "numeric/match_filter.h"
#include "spectrasift/error.hpp"

namespace spectrasift::detail {

const char* to_string(Operation op) noexcept {
  switch (op) {
    case Operation::kSift: return "SIFT";
    case Operation::kMatch: return "descriptor matching";
    case Operation::kRansac: return "RANSAC scoring";
    case Operation::kWarp: return "warping";
    case Operation::kSpectral: return "spectral matching";
  }
  return "?";
}

DeviceFeatures::DeviceFeatures(const BackendImpl& owner, std::size_t count, const float* host,
                               std::size_t values) noexcept
    : DeviceFeatures(owner, count, descriptor_digest(host, values), DescriptorType::kF32) {}

DeviceFeatures::DeviceFeatures(const BackendImpl& owner, std::size_t count, const std::uint8_t* host,
                               std::size_t values) noexcept
    : DeviceFeatures(owner, count, descriptor_digest(host, values), DescriptorType::kU8) {}

DeviceFeatures::DeviceFeatures(const BackendImpl& owner, std::size_t count, std::uint64_t digest,
                               DescriptorType type) noexcept
    : owner_(owner.instance()), count_(count), digest_(digest), type_(type) {}

DeviceFeatures::~DeviceFeatures() = default;

bool DeviceFeatures::owned_by(const BackendImpl& backend) const noexcept { return backend.instance() == owner_; }

bool DeviceFeatures::mirrors(const Features& f) const noexcept {
  const std::size_t values = count_ * std::size_t(Features::kDescriptorSize);
  if (f.size() != count_ || f.descriptor_type != type_) return false;
  if (type_ == DescriptorType::kU8)
    return f.descriptor_bytes.size() == values && descriptor_digest(f.descriptor_bytes.data(), values) == digest_;
  return f.descriptors.size() == values && descriptor_digest(f.descriptors.data(), values) == digest_;
}

BackendImpl::BackendImpl() noexcept : instance_([] {
  static std::atomic<std::uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}()) {}

BackendImpl::~BackendImpl() = default;

void BackendImpl::unreachable(Operation op) const {
  throw Error(ErrorCode::kInternal,
              std::string(to_string(op)) + " reached the " + spectrasift::to_string(kind()) +
                  " backend, which does not implement it (dispatch should have prevented this)",
              spectrasift::to_string(kind()));
}

void BackendImpl::match_top2(ContextImpl&, const FeatureView&, const FeatureView&, Top2*) {
  unreachable(Operation::kMatch);
}
void BackendImpl::match_filtered(ContextImpl& ctx, const FeatureView& query, const FeatureView& train,
                                 const MatchOptions& options, std::vector<Match>& out) {
  std::vector<Top2> forward(std::size_t(query.count)), backward;
  // With the mutual check the forward pass reports the first half of the operation's progress range and the
  // backward pass the second (the range is restored after, also when a pass throws: the caller's stage, or
  // an outer operation's).
  const double lo = ctx.progress_lo, hi = ctx.progress_hi, mid = lo + 0.5 * (hi - lo);
  struct RestoreRange {
    ContextImpl& ctx;
    double lo, hi;
    ~RestoreRange() {
      ctx.progress_lo = lo;
      ctx.progress_hi = hi;
    }
  } restore{ctx, lo, hi};
  if (options.mutual) ctx.progress_hi = mid;
  match_top2(ctx, query, train, forward.data());
  if (options.mutual) {
    ctx.progress_lo = mid;
    ctx.progress_hi = hi;
    ctx.report_progress(0);
    backward.resize(std::size_t(train.count));
    match_top2(ctx, train, query, backward.data());
  }
  filter_nearest_two(forward.data(), query.count, options.mutual ? backward.data() : nullptr, options, out);
}

void filter_nearest_two(const Top2* forward, int nq, const Top2* backward, const MatchOptions& options,
                        std::vector<Match>& out) {
  for (int q = 0; q < nq; ++q) {
    const Top2& t = forward[q];
    const int mutual_ok = backward == nullptr || (t.best1 >= 0 && backward[t.best1].best1 == q);
    if (ss_match_keep(t.best1, t.distance1, t.distance2, options.ratio, options.max_distance, mutual_ok))
      out.push_back(Match{q, t.best1, t.distance1, t.distance2});
  }
}

void BackendImpl::score_models(const double*, const std::uint8_t*, int, const PointPairs&, double, int, int*, double*) {
  unreachable(Operation::kRansac);
}
int BackendImpl::inlier_mask(const double*, const PointPairs&, double, std::uint8_t*, double*) {
  unreachable(Operation::kRansac);
}

bool BackendImpl::refit_sums(const int*, int, const double*, const PointPairs&, const RefitSelection&, double*) {
  return false;
}
Image BackendImpl::warp(const Image&, const std::array<double, 9>&, int, int, int) { unreachable(Operation::kWarp); }
std::unique_ptr<SiftStages> BackendImpl::make_sift_stages(ContextImpl&) { unreachable(Operation::kSift); }
void BackendImpl::spectral_match(ContextImpl&, const CubeView&, const PreparedReferences&, const SpectralOptions&,
                                 SpectralResult&, const ProgressFn&) {
  unreachable(Operation::kSpectral);
}

}  // namespace spectrasift::detail

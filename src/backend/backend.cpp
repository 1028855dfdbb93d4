// The parts of the backend interface that every backend shares (see backend.hpp).
#include "backend/backend.hpp"

#include <atomic>
#include <cstring>
#include <string>

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
    : owner_(owner.instance()), count_(count), digest_(descriptor_digest(host, values)) {}

DeviceFeatures::DeviceFeatures(const BackendImpl& owner, std::size_t count, std::uint64_t digest) noexcept
    : owner_(owner.instance()), count_(count), digest_(digest) {}

DeviceFeatures::~DeviceFeatures() = default;

bool DeviceFeatures::owned_by(const BackendImpl& backend) const noexcept { return backend.instance() == owner_; }

bool DeviceFeatures::mirrors(const Features& f) const noexcept {
  return f.size() == count_ && f.descriptors.size() == count_ * std::size_t(Features::kDescriptorSize) &&
         descriptor_digest(f.descriptors.data(), f.descriptors.size()) == digest_;
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
void BackendImpl::score_models(const double*, const std::uint8_t*, int, const PointPairs&, double, int, int*, double*) {
  unreachable(Operation::kRansac);
}
int BackendImpl::inlier_mask(const double*, const PointPairs&, double, std::uint8_t*, double*) {
  unreachable(Operation::kRansac);
}
Image BackendImpl::warp(const Image&, const std::array<double, 9>&, int, int, int) { unreachable(Operation::kWarp); }
std::unique_ptr<SiftStages> BackendImpl::make_sift_stages(ContextImpl&) { unreachable(Operation::kSift); }
void BackendImpl::spectral_match(ContextImpl&, const CubeView&, const PreparedReferences&, const SpectralOptions&,
                                 SpectralResult&, const ProgressFn&) {
  unreachable(Operation::kSpectral);
}

}  // namespace spectrasift::detail

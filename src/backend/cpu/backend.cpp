// The CPU backend's BackendImpl: every entry forwards to the operation's file in this folder.
#include "backend/backend.hpp"

#include "backend/cpu/operations.hpp"
#include "core/context_impl.hpp"
#include "core/sift_backend.hpp"

namespace spectrasift::cpu {

namespace {

class CpuBackend final : public detail::BackendImpl {
 public:
  Backend kind() const noexcept override { return Backend::kCpu; }
  bool implements(detail::Operation) const noexcept override { return true; }

  // The CPU backend makes no device copies: it matches the host descriptors.
  void match_top2(detail::ContextImpl& ctx, const detail::FeatureView& query, const detail::FeatureView& train,
                  Top2* out) override {
    cpu::match_top2(query.descriptors, query.count, train.descriptors, train.count, query.dim, ctx.cpu_threads(),
                    out, ctx.progress_active ? ProgressFn([&ctx](double f) { ctx.report_progress(f); }) : ProgressFn());
  }
  // The CPU backend scores the host arrays (pairs.id is for device copies).
  void score_models(const double* models, const std::uint8_t* valid, int count, const detail::PointPairs& pairs,
                    double threshold2, int threads, int* inliers, double* sums) override {
    cpu::score_models(models, valid, count, pairs.moving, pairs.fixed, pairs.n, threshold2, threads, inliers, sums);
  }
  int inlier_mask(const double* model, const detail::PointPairs& pairs, double threshold2, std::uint8_t* mask,
                  double* sum2) override {
    return cpu::inlier_mask(model, pairs.moving, pairs.fixed, pairs.n, threshold2, mask, sum2);
  }
  Image warp(const Image& moving, const std::array<double, 9>& inverse, int fixed_w, int fixed_h,
             int threads) override {
    return cpu::warp(moving, inverse, fixed_w, fixed_h, threads);
  }
  std::unique_ptr<detail::SiftStages> make_sift_stages(detail::ContextImpl& ctx) override {
    return cpu::make_sift_stages(ctx);
  }
  void spectral_match(detail::ContextImpl& ctx, const detail::CubeView& cube, const detail::PreparedReferences& refs,
                      const SpectralOptions& options, SpectralResult& result, const ProgressFn& progress) override {
    cpu::spectral_match(ctx, cube, refs, options, result, progress);
  }
};

}  // namespace

}  // namespace spectrasift::cpu

namespace spectrasift::detail {
std::unique_ptr<BackendImpl> make_cpu_backend() { return std::make_unique<cpu::CpuBackend>(); }
}  // namespace spectrasift::detail

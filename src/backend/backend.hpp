// The one backend interface (DESIGN.md "Backends and devices"): every operation's entry, declared once.
// core/ checks the arguments and prepares backend-independent data; it then asks core/dispatch.hpp which
// BackendImpl runs the operation and calls its entry, which may assume valid input. Each backend's
// context object IS its BackendImpl (cpu::CpuBackend, cuda::State, opencl::State); its entries forward to
// the file of the operation's name in its folder (ArrayFire's rule: match.cpp, ransac.cpp, ...).
// A backend folder includes this header, core's contract headers and src/numeric/, never another backend
// folder and never core/dispatch.hpp (checked by the test tests/include_rules.cmake).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "backend/descriptor_digest.hpp"
#include "spectrasift/context.hpp"
#include "spectrasift/match.hpp"
#include "spectrasift/spectral.hpp"
#include "spectrasift/types.hpp"

namespace spectrasift::detail {

struct ContextImpl;
struct CubeView;            // core/spectral_backend.hpp
struct PreparedReferences;  // core/spectral_backend.hpp
class SiftStages;           // core/sift_backend.hpp
class BackendImpl;

/// The operations a backend may implement.
enum class Operation { kSift, kMatch, kRansac, kWarp, kSpectral };
/// The operation's name in logs and errors: "SIFT", "descriptor matching", "RANSAC scoring", "warping",
/// "spectral matching".
const char* to_string(Operation op) noexcept;

/// Descriptors that a backend keeps on its device after extraction (GPU SIFT), so that matching on the
/// same backend does not pass through the host. Each backend derives its own type holding the device
/// buffer; this base records which backend owns it and which host descriptors it mirrors, so that
/// dispatch can tell whether the copy is still the Features' content (see device_copy_for in
/// core/dispatch.hpp): Features are plain values that the user may copy and edit. The derived type must
/// keep its device memory valid on its own (Features may outlive the Context that made them).
class DeviceFeatures {
 public:
  /// `host` / `values`: the host descriptors this copy mirrors (count * Features::kDescriptorSize floats of
  /// kF32 features, or bytes of kU8 features). The device copy itself is floats either way.
  DeviceFeatures(const BackendImpl& owner, std::size_t count, const float* host, std::size_t values) noexcept;
  DeviceFeatures(const BackendImpl& owner, std::size_t count, const std::uint8_t* host, std::size_t values) noexcept;
  /// The same with the digest of those host descriptors already computed (descriptor_digest(host, values),
  /// e.g. summed while the read-back was converted) and their type.
  DeviceFeatures(const BackendImpl& owner, std::size_t count, std::uint64_t digest, DescriptorType type) noexcept;
  virtual ~DeviceFeatures();
  DeviceFeatures(const DeviceFeatures&) = delete;
  DeviceFeatures& operator=(const DeviceFeatures&) = delete;

  /// Whether `backend` made this copy (compared by BackendImpl::instance(), not by address: a Context
  /// created later at a freed Context's address is another device).
  bool owned_by(const BackendImpl& backend) const noexcept;
  std::size_t count() const noexcept { return count_; }
  /// Whether this copy still holds exactly `f`'s descriptors: same count, same descriptor type and the same
  /// content digest (a 64-bit hash of the values' bits). A copy of the Features passes; any edit of a value, a
  /// resize, a moved-out vector or a conversion to the other type fails.
  bool mirrors(const Features& f) const noexcept;

 private:
  std::uint64_t owner_;  ///< the owner's instance()
  std::size_t count_;
  std::uint64_t digest_;
  DescriptorType type_;
};

// descriptor_digest (the content check of mirrors()): backend/descriptor_digest.hpp.

/// One side of a matching call: the host descriptors (always valid) and, when dispatch found one that
/// still mirrors them on the called backend, their device-resident copy. A backend without device copies
/// ignores `device`.
struct FeatureView {
  const float* descriptors = nullptr;  ///< count rows of dim floats, contiguous (null when `bytes` is given)
  int count = 0;
  int dim = Features::kDescriptorSize;
  const DeviceFeatures* device = nullptr;
  /// kU8 features: count rows of dim bytes instead of `descriptors`, given only to a backend whose
  /// takes_byte_views() is true (core converts them to floats for the others).
  const std::uint8_t* bytes = nullptr;
};

/// The correspondences of one RANSAC run (core/ransac.cpp): MOVING -> FIXED pairs on the host and an id
/// unique to the run in the process, so that a device backend uploads them once per run and keeps them
/// between its score_models / inlier_mask calls (the host arrays do not change during a run).
struct PointPairs {
  const Point2* moving = nullptr;
  const Point2* fixed = nullptr;
  int n = 0;
  std::uint64_t id = 0;
};

/// The pairs a least-squares refit of a RANSAC run sums over (core/ransac.cpp): the mask over the run's pairs
/// (1 = selected), the same selection as ascending indices, and their count.
struct RefitSelection {
  const std::uint8_t* mask = nullptr;
  const int* idx = nullptr;
  int count = 0;
};

/// The memory of a backend's device, which a job's working-memory estimate is checked against (issue 21,
/// item 2; core/limits.hpp). All zero for a backend that works in host memory (the CPU backend).
struct DeviceMemory {
  std::uint64_t total = 0;           ///< the device's memory (the default budget of a job there); 0 = host memory
  std::uint64_t available = 0;       ///< free now (CUDA: cudaMemGetInfo; for messages), else total (OpenCL cannot tell)
  std::uint64_t max_allocation = 0;  ///< the largest single buffer (OpenCL: CL_DEVICE_MAX_MEM_ALLOC_SIZE); 0 = no own limit
};

/// A backend. Each entry has a default body that throws Error(kInternal): a backend overrides implements()
/// and the entries of the operations it has (the CPU backend: all of them), and dispatch never calls an
/// entry whose operation implements() denies. (Defaults rather than pure virtuals, so that a GPU backend
/// lists only what it has, not one throwing stub per operation it lacks.)
class BackendImpl {
 public:
  BackendImpl() noexcept;
  virtual ~BackendImpl();
  BackendImpl(const BackendImpl&) = delete;
  BackendImpl& operator=(const BackendImpl&) = delete;

  virtual Backend kind() const noexcept = 0;
  virtual bool implements(Operation op) const noexcept = 0;
  /// kMatch: whether match_top2 / match_filtered take FeatureView::bytes (kU8 features) as they are; when
  /// false, core hands such a side over as floats.
  virtual bool takes_byte_views() const noexcept { return false; }
  /// The device's memory (default: all zero, host memory). Each GPU backend's context/state file answers it.
  virtual DeviceMemory device_memory() const { return {}; }
  /// A number unique to this backend object in the process (1, 2, ... in creation order).
  std::uint64_t instance() const noexcept { return instance_; }

  /// kMatch: the nearest and second nearest train descriptor of every query; out has query.count entries.
  /// Lower train index wins ties; distances are the exact squared L2 of backend/cpu/match.cpp.
  virtual void match_top2(ContextImpl& ctx, const FeatureView& query, const FeatureView& train, Top2* out);
  /// kMatch: match_features' result (spectrasift/match.hpp): query -> train best two, with options.mutual
  /// also train -> query best one, then the ratio, distance and mutual tests (numeric/match_filter.h), the kept
  /// matches appended to `out` in query order. Both sides are non-empty and options are checked. The default
  /// (the CPU backend's) runs match_top2 once or twice and filter_nearest_two; a GPU backend overrides it to
  /// reuse one upload for both directions and to read back only the matches.
  virtual void match_filtered(ContextImpl& ctx, const FeatureView& query, const FeatureView& train,
                              const MatchOptions& options, std::vector<Match>& out);
  /// kRansac: scores `count` models (9 doubles each, row-major) against the pairs: for model h the number
  /// of pairs with transfer error^2 <= threshold2 and the sum of those errors^2, exact and independent of
  /// the order of the additions (numeric/ransac_score.h), so every backend and thread count gives the same
  /// bits. Models with valid[h] == 0 are skipped (count -1, sum 0).
  virtual void score_models(const double* models, const std::uint8_t* valid, int count, const PointPairs& pairs,
                            double threshold2, int threads, int* inliers, double* sums);
  /// kRansac: the inlier mask of one model and the sum of squared errors of its inliers (as score_models);
  /// returns the count.
  virtual int inlier_mask(const double* model, const PointPairs& pairs, double threshold2, std::uint8_t* mask,
                          double* sum2);
  /// kRansac, optional: the totals of a chain of refit passes (numeric/refit_sums.h: `passes`, the parameters
  /// `given` of its first pass and its LM passes, the others derived by ss_refit_chain_params; the
  /// ss_refit_sum_count of each pass concatenated in out) over the selected pairs, in that header's fixed order
  /// (blocks of 256 pair indices, the pairwise tree), so the host's bits. Returns false when the backend leaves
  /// the sums to the host (the default: the CPU backend; OpenCL unless State::refit_variant asks for its device
  /// form); the driver then computes them on the host (core/estimators/refit.cpp). An empty chain (npasses 0) does
  /// nothing and says which it is.
  virtual bool refit_sums(const int* passes, int npasses, const double* given, const PointPairs& pairs,
                          const RefitSelection& sel, double* out);
  /// kWarp: bilinear warp (see warp_image in geometry.hpp); `inverse` maps FIXED -> MOVING pixels.
  virtual Image warp(const Image& moving, const std::array<double, 9>& inverse, int fixed_w, int fixed_h,
                     int threads);
  /// kSift: a new set of SIFT stages bound to ctx (the contract of core/sift_backend.hpp: plan in core, the
  /// stages and their two read-backs in the backend). Core keeps it in the context and reuses its buffers.
  virtual std::unique_ptr<SiftStages> make_sift_stages(ContextImpl& ctx);
  /// kSpectral: the contract of core/spectral_backend.hpp. Output buffers are sized by core before the
  /// call (result.scores / result.index already have their size).
  virtual void spectral_match(ContextImpl& ctx, const CubeView& cube, const PreparedReferences& refs,
                              const SpectralOptions& options, SpectralResult& result, const ProgressFn& progress);

 protected:
  /// The default entries' body: throws Error(kInternal).
  [[noreturn]] void unreachable(Operation op) const;

 private:
  const std::uint64_t instance_;
};

/// match_features' tests over nearest-two results (numeric/match_filter.h): `forward` has nq entries (query ->
/// train), `backward` (options.mutual only, else null) one per train descriptor (train -> query); the kept
/// matches are appended to `out` in query order. The host form of the GPU backends' filter kernels.
void filter_nearest_two(const Top2* forward, int nq, const Top2* backward, const MatchOptions& options,
                        std::vector<Match>& out);

/// The CPU backend (backend/cpu/backend.cpp). It holds no state (its plans live in ContextImpl::plans).
std::unique_ptr<BackendImpl> make_cpu_backend();

}  // namespace spectrasift::detail

namespace spectrasift::cuda {
/// Creates the CUDA backend for a device (stream, cuBLAS handle, pools); throws Error when absent.
std::unique_ptr<detail::BackendImpl> create_state(int device, DeviceInfo& info);
std::vector<DeviceInfo> list_devices();
}  // namespace spectrasift::cuda

namespace spectrasift::opencl {
/// Creates the OpenCL backend for a device index of list_devices(); throws Error when absent.
std::unique_ptr<detail::BackendImpl> create_state(int device, DeviceInfo& info);
std::vector<DeviceInfo> list_devices();
}  // namespace spectrasift::opencl

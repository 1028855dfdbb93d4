// The RANSAC driver: samples drawn with Philox, hypotheses from the estimators (core/estimators/),
// batched scoring and inlier masks in the context's backend (backend/*/ransac.*: on the device for the GPU
// backends, with the CPU backend's bits), local optimisation, model choice in iteration order, and the
// final refinement. The maths is documented in include/spectrasift/geometry.hpp.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <string>

#include "core/context_impl.hpp"
#include "core/estimators/estimators.hpp"
#include "core/dispatch.hpp"
#include "core/thread_pool.hpp"
#include "numeric/philox.h"
#include "spectrasift/error.hpp"

namespace spectrasift {

using geometry::Mat3;
using geometry::Normaliser;

namespace {

// ---- one hypothesis from a minimal sample ---------------------------------------------------------

struct Problem {
  GeometryModel model;
  int s;
  const Point2* moving;
  const Point2* fixed;
  int n;
  std::uint64_t seed;
  Normaliser nm, nf;  // global normalisation for the minimal homography solver
  detail::BackendImpl* scorer = nullptr;  // runs score_models and inlier_mask
  detail::PointPairs pairs{};  // moving, fixed, n and the run's id
  double* scoring_ms = nullptr;  // time spent in the scorer's calls (the log line's split)
  int* masks = nullptr;          // inlier_mask calls (each one a round trip on a device)
  int* chains = nullptr;         // refit sum chains on the scorer's device (each one a round trip)
  int threads = 1;               // host threads of the refits' sums (when the scorer leaves them to the host)
};

/// Adds the time of its scope to *ms.
class ScopeTimer {
 public:
  explicit ScopeTimer(double* ms) : ms_(ms), t0_(std::chrono::steady_clock::now()) {}
  ~ScopeTimer() { *ms_ += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0_).count(); }
  ScopeTimer(const ScopeTimer&) = delete;
  ScopeTimer& operator=(const ScopeTimer&) = delete;

 private:
  double* ms_;
  std::chrono::steady_clock::time_point t0_;
};

/// A new id for a run's PointPairs (process-wide, never 0).
std::uint64_t next_pairs_id() {
  static std::atomic<std::uint64_t> counter{0};
  return counter.fetch_add(1, std::memory_order_relaxed) + 1;
}

/// Indices of the sample of `iteration`: draws j = 0, 1, ... skipping repeats (see geometry.hpp).
bool draw_sample(const Problem& pb, std::uint64_t iteration, int* idx) {
  int got = 0;
  for (std::uint32_t j = 0; got < pb.s && j < std::uint32_t(64 * pb.s); ++j) {
    const int k = int(ss_uniform_index(ss_ransac_draw(pb.seed, iteration, j), std::uint32_t(pb.n)));
    bool repeat = false;
    for (int q = 0; q < got; ++q) repeat = repeat || idx[q] == k;
    if (!repeat) idx[got++] = k;
  }
  return got == pb.s;
}

/// Model from the sample of `iteration`; false when the sample is degenerate.
bool hypothesis(const Problem& pb, std::uint64_t iteration, Mat3& h) {
  int idx[4];
  if (!draw_sample(pb, iteration, idx)) return false;
  Point2 m[4], f[4];
  for (int i = 0; i < pb.s; ++i) {
    m[i] = pb.moving[idx[i]];
    f[i] = pb.fixed[idx[i]];
  }
  return geometry::minimal_model(pb.model, m, f, pb.nm, pb.nf, h);
}

struct Scored {
  Mat3 h{1, 0, 0, 0, 1, 0, 0, 0, 1};
  int inliers = -1;
  double sum = std::numeric_limits<double>::infinity();
  /// Inlier ranking (DESIGN.md): more inliers, then the lower sum of their squared errors. MSAC ranking:
  /// the lower truncated cost sum + (n - inliers) * t^2, then more inliers.
  bool better_than(const Scored& o, bool msac, int n, double thr2) const {
    if (msac) {
      const double c = sum + double(n - inliers) * thr2, oc = o.inliers < 0 ? HUGE_VAL : o.sum + double(n - o.inliers) * thr2;
      if (c != oc) return c < oc;
      return inliers > o.inliers;
    }
    return inliers > o.inliers || (inliers == o.inliers && sum < o.sum);
  }
};

Scored score_one(const Problem& pb, const Mat3& h, double thr2, std::vector<std::uint8_t>& mask) {
  Scored s;
  s.h = h;
  const ScopeTimer timer(pb.scoring_ms);
  ++*pb.masks;
  s.inliers = pb.scorer->inlier_mask(h.data(), pb.pairs, thr2, mask.data(), &s.sum);
  return s;
}

std::vector<int> indices_of(const std::vector<std::uint8_t>& mask) {
  std::vector<int> idx;
  for (std::size_t i = 0; i < mask.size(); ++i)
    if (mask[i]) idx.push_back(int(i));
  return idx;
}

/// A refit's sums over a mask of the run's pairs: on the scorer's device when it computes them
/// (BackendImpl::refit_sums; CUDA and OpenCL with doubles), else on the host. Both give numeric/refit_sums.h's bits.
class MaskRefitSums final : public geometry::RefitSums {
 public:
  MaskRefitSums(const Problem& pb, const std::vector<std::uint8_t>& mask) : pb_(pb), idx_(indices_of(mask)) {
    sel_.mask = mask.data();
    sel_.idx = idx_.data();
    sel_.count = int(idx_.size());
    // Whether the scorer computes the sums (a device: a chain is one round trip); asked with an empty chain.
    on_device_ = pb_.scorer->refit_sums(nullptr, 0, nullptr, pb_.pairs, sel_, nullptr);
  }
  void chain(const int* passes, int npasses, const double* given, double* out) override {
    if (on_device_ && pb_.scorer->refit_sums(passes, npasses, given, pb_.pairs, sel_, out)) {
      ++*pb_.chains;
      return;
    }
    geometry::host_refit_chain(passes, npasses, given, pb_.moving, pb_.fixed, pb_.n, sel_.idx, sel_.count, out,
                               pb_.threads);
  }
  bool prefers_chains() const override { return on_device_; }
  int count() const override { return sel_.count; }

 private:
  const Problem& pb_;
  std::vector<int> idx_;
  detail::RefitSelection sel_;
  bool on_device_ = false;
};

int adaptive_iterations(const RansacOptions& o, int inliers, int n) {
  const double w = double(inliers) / double(n);
  const double ws = std::pow(w, minimal_sample_size(o.model));
  double need;
  if (ws >= 1.0) need = 1;
  else {
    const double denom = std::log1p(-ws);
    need = denom < 0 ? std::ceil(std::log(1.0 - o.confidence) / denom) : double(o.max_iterations);
  }
  need = std::clamp(need, double(std::max(o.min_iterations, 1)), double(o.max_iterations));
  return int(need);
}

}  // namespace

ModelEstimate estimate_model(Context& ctx, const std::vector<Point2>& moving, const std::vector<Point2>& fixed,
                             const RansacOptions& options) {
  const detail::ContextUse use(ctx.impl(), "estimate_model");
  options.check();
  geometry::check_points(moving, fixed);
  const auto t0 = std::chrono::steady_clock::now();
  ModelEstimate result;
  result.model = options.model;
  const int n = int(moving.size());
  result.inlier_mask.assign(std::size_t(n), 0);
  Problem pb{options.model, minimal_sample_size(options.model), moving.data(), fixed.data(), n, options.seed, {}, {}};
  if (n < pb.s) return result;
  if (!pb.nm.fit(pb.moving, nullptr, n) || !pb.nf.fit(pb.fixed, nullptr, n)) return result;  // all points coincide
  // Scoring runs on the context's backend (the device for GPU backends: the points are uploaded once per
  // run, keyed by pairs.id); its counts and sums are the same bits on every backend (backend.hpp), so the
  // decision sequence below is identical everywhere. Hypotheses and decisions stay on the host.
  pb.scorer = &detail::backend_for(ctx.impl(), detail::Operation::kRansac);
  pb.pairs = {pb.moving, pb.fixed, n, next_pairs_id()};
  // Where the time goes, for the log line: hypotheses (host), scoring and masks (the backend), refits (host, their
  // sums on the device where the backend computes them: each chain of sums a round trip).
  double hypotheses_ms = 0, scoring_ms = 0, refits_ms = 0;
  int batches = 0, masks = 0, refits = 0, chains = 0;  // scorer calls, refits and their device trips, for the log
  pb.scoring_ms = &scoring_ms;
  pb.masks = &masks;
  pb.chains = &chains;
  const auto refit = [&](const std::vector<std::uint8_t>& m, bool nonlinear, Mat3& h) {
    const ScopeTimer timer(&refits_ms);
    ++refits;
    MaskRefitSums src(pb, m);
    return geometry::fit_subset(options.model, src, nonlinear, h);
  };
  const int threads = ctx.impl().cpu_threads();
  pb.threads = threads;
  const double thr2 = options.threshold_px * options.threshold_px;

  Scored best;
  std::vector<std::uint8_t> mask(static_cast<std::size_t>(n));
  // best's inlier mask once local optimisation has scored it (best's count and sum are that mask's).
  std::vector<std::uint8_t> best_mask(static_cast<std::size_t>(n));
  bool best_mask_valid = false;
  int limit = options.max_iterations;
  int processed = 0;
  constexpr int kBatch = 128;
  std::vector<double> models(std::size_t(kBatch) * 9);
  std::vector<std::uint8_t> valid(kBatch);
  std::vector<int> counts(kBatch);
  std::vector<double> sums(kBatch);
  // On the CPU the batch grows from 16 to kBatch (scoring costs in proportion to the models, and the adaptive
  // limit is often reached within a few dozen iterations). On a device a batch costs a host round trip
  // (upload, launch, read-back: ~20 us on the H200) whatever its size up to kBatch (128 models x 10k pairs score
  // in ~40 us there), so the whole kBatch goes first: 112 iterations are one round trip instead of three.
  // The batch size never changes the result (decisions in iteration order).
  int batch = pb.scorer->kind() == Backend::kCpu ? 16 : kBatch;
  // Progress: the iterations done of the current limit (which only shrinks), then the refinement.
  detail::OperationProgress progress(ctx.impl());
  progress.stage(0.0, 0.95);
  while (processed < limit) {
    ctx.impl().report_progress(double(processed) / double(limit));
    const int base = processed;
    const int b = std::min(batch, limit - base);
    batch = std::min(kBatch, 2 * batch);
    const auto solve_batch = [&](int k0, int k1, int) {
      for (int k = k0; k < k1; ++k) {
        Mat3 h;
        valid[std::size_t(k)] = hypothesis(pb, std::uint64_t(base + k), h) ? 1 : 0;
        std::copy(h.begin(), h.end(), models.begin() + std::ptrdiff_t(k) * 9);
      }
    };
    // Threads only pay off for large batches (waking the pool costs more than ~100 small solves).
    {
      const ScopeTimer timer(&hypotheses_ms);
      if (b >= 64 && std::int64_t(b) * n >= (1 << 17)) calling_thread_pool(threads).run(b, 8, solve_batch);
      else solve_batch(0, b, 0);
    }
    {
      const ScopeTimer timer(pb.scoring_ms);
      ++batches;
      pb.scorer->score_models(models.data(), valid.data(), b, pb.pairs, thr2, threads, counts.data(), sums.data());
    }
    // Decisions are taken strictly in iteration order, so the batch size and the thread count do not
    // change the result.
    for (int k = 0; k < b && base + k < limit; ++k) {
      processed = base + k + 1;
      if (!valid[std::size_t(k)]) continue;
      Scored cand;
      std::copy(models.begin() + std::ptrdiff_t(k) * 9, models.begin() + std::ptrdiff_t(k) * 9 + 9, cand.h.begin());
      cand.inliers = counts[std::size_t(k)];
      cand.sum = sums[std::size_t(k)];
      if (!cand.better_than(best, options.msac, n, thr2)) continue;
      best = cand;
      best_mask_valid = false;
      if (options.local_optimization && best.inliers > pb.s) {
        // A kept round's mask becomes best's (a swap): each model is scored once.
        score_one(pb, best.h, thr2, best_mask);
        best_mask_valid = true;
        for (int round = 0; round < 4; ++round) {
          Mat3 h;
          if (!refit(best_mask, false, h)) break;
          const Scored lo = score_one(pb, h, thr2, mask);
          if (!lo.better_than(best, options.msac, n, thr2)) break;
          best = lo;
          best_mask.swap(mask);
        }
      }
      limit = std::max(adaptive_iterations(options, best.inliers, n), processed);
    }
  }
  result.iterations = processed;
  progress.stage(0.95, 1.0);
  if (best.inliers < 0) return result;

  // Final refinement on the inliers; a refit is kept only when it is at least as good. With local
  // optimisation best's mask is already known: no second scoring of best (a device round trip).
  Scored cur = best;
  if (best_mask_valid) mask.swap(best_mask);
  else cur = score_one(pb, best.h, thr2, mask);
  std::vector<std::uint8_t> cur_mask = mask;
  if (options.refine) {
    for (int round = 0; round < 3; ++round) {
      Mat3 h;
      if (!refit(cur_mask, true, h)) break;
      const Scored cand = score_one(pb, h, thr2, mask);
      if (!cand.better_than(cur, options.msac, n, thr2)) break;
      const bool same = mask == cur_mask;
      cur = cand;
      cur_mask = mask;
      if (same) break;
    }
  }
  result.inliers = cur.inliers;
  if (cur.inliers < options.required_inliers()) {
    ctx.impl().log("ransac: best " + std::string(to_string(options.model)) + " has " + std::to_string(cur.inliers) +
                   " inliers of " + std::to_string(n) + ", fewer than the " +
                   std::to_string(options.required_inliers()) + " required: no model");
    return result;
  }
  result.found = true;
  result.matrix = cur.h;
  result.inlier_mask = cur_mask;
  result.rms_px = cur.inliers > 0 ? std::sqrt(cur.sum / cur.inliers) : 0.0;
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ctx.impl().log("ransac: " + std::string(to_string(options.model)) + " " + std::to_string(result.inliers) + "/" +
                 std::to_string(n) + " inliers, rms " + std::to_string(result.rms_px) + " px, " +
                 std::to_string(result.iterations) + " iterations, " + std::to_string(ms) + " ms (hypotheses " +
                 std::to_string(hypotheses_ms) + " ms, scoring " + std::to_string(scoring_ms) + " ms on " +
                 spectrasift::to_string(pb.scorer->kind()) + " in " + std::to_string(batches) + " batches and " +
                 std::to_string(masks) + " masks, " + std::to_string(refits) + " least-squares refits " +
                 std::to_string(refits_ms) + " ms" +
                 (chains > 0 ? " with " + std::to_string(chains) + " sum chains on the device" : std::string()) + ")");
  return result;
}

}  // namespace spectrasift

// CUDA RANSAC scoring (BackendImpl::score_models and inlier_mask) on the device, kernels/ransac.cuh: the same
// per-pair maths as the CPU backend (numeric/ransac_score.h), so the counts, masks and sums are its bits.
// A run's pairs are uploaded once (keyed by PointPairs::id) and stay on the device between the batches of the
// driver (core/ransac.cpp). A batch costs one upload (its models and flags, packed in pinned memory), one
// launch and one read-back of a 16-byte record per model. The refits' sums (BackendImpl::refit_sums) run here
// too, a chain of passes per call: one upload of the parameters and the mask, a block kernel and a tree kernel
// per pass, one read-back of the chain's totals (numeric/refit_sums.h's order, so the host's bits); the small
// dense solves stay on the host.
#include <algorithm>
#include <cstring>
#include <vector>

#include "backend/cuda/check.hpp"
#include "backend/cuda/kernels/ransac.cuh"
#include "backend/cuda/state.hpp"

namespace spectrasift::cuda {

namespace {

static_assert(sizeof(Point2) == sizeof(double2), "Point2 is two doubles, x then y");

// The run's pairs on the device (n moving, then n fixed, as double2), uploaded when the run is new.
const double2* pairs_on_device(State& st, const detail::PointPairs& p) {
  const std::size_t half = std::size_t(p.n) * sizeof(double2);
  DeviceBuffer& b = st.buffer("ransac.pairs", std::max<std::size_t>(2 * half, 32));
  if (st.ransac_pairs_id != p.id || p.id == 0) {
    st.ransac_pairs_id = 0;
    SPECTRASIFT_CUDA_CHECK(cudaMemcpyAsync(b.ptr, p.moving, half, cudaMemcpyHostToDevice, st.compute));
    SPECTRASIFT_CUDA_CHECK(
        cudaMemcpyAsync(b.as<char>() + half, p.fixed, half, cudaMemcpyHostToDevice, st.compute));
    st.ransac_pairs_id = p.id;
  }
  return b.as<const double2>();
}

}  // namespace

void State::score_models(const double* models, const std::uint8_t* valid, int count, const detail::PointPairs& pairs,
                         double threshold2, int, int* inliers, double* sums) {
  if (count <= 0) return;
  activate();
  const double2* p = pairs_on_device(*this, pairs);
  const std::size_t c = std::size_t(count), model_bytes = c * 9 * sizeof(double);
  // Models and flags travel in one copy through pinned memory; the records come back in one copy.
  PinnedBuffer& io = pinned_buffer("ransac.io", std::max(model_bytes + c, c * sizeof(kernels::RansacScore)));
  std::memcpy(io.ptr, models, model_bytes);
  std::memcpy(io.as<char>() + model_bytes, valid, c);
  DeviceBuffer& in = buffer("ransac.models", model_bytes + c);
  DeviceBuffer& out = buffer("ransac.scores", c * sizeof(kernels::RansacScore));
  SPECTRASIFT_CUDA_CHECK(cudaMemcpyAsync(in.ptr, io.ptr, model_bytes + c, cudaMemcpyHostToDevice, compute));
  kernels::ransac_score<<<unsigned(count), kernels::kRansacThreads, 0, compute>>>(
      in.as<const double>(), in.as<const std::uint8_t>() + model_bytes, p, p + pairs.n, pairs.n, threshold2,
      ss_score_scale(threshold2), ss_score_inv_scale(threshold2), out.as<kernels::RansacScore>());
  SPECTRASIFT_CUDA_CHECK_LAUNCH();
  SPECTRASIFT_CUDA_CHECK(
      cudaMemcpyAsync(io.ptr, out.ptr, c * sizeof(kernels::RansacScore), cudaMemcpyDeviceToHost, compute));
  SPECTRASIFT_CUDA_CHECK(cudaStreamSynchronize(compute));
  const auto* rec = io.as<const kernels::RansacScore>();
  for (std::size_t h = 0; h < c; ++h) {
    inliers[h] = rec[h].inliers;
    sums[h] = rec[h].sum;
  }
}

int State::inlier_mask(const double* model, const detail::PointPairs& pairs, double threshold2, std::uint8_t* mask,
                       double* sum2) {
  *sum2 = 0;
  if (pairs.n <= 0) return 0;
  activate();
  const double2* p = pairs_on_device(*this, pairs);
  // Four pairs per thread, at most two blocks per multiprocessor.
  const int per_block = 4 * kernels::kRansacThreads;
  const int blocks = std::clamp((pairs.n + per_block - 1) / per_block, 1, 2 * std::max(props.multiProcessorCount, 1));
  const std::size_t n = std::size_t(pairs.n), part_bytes = std::size_t(blocks) * sizeof(kernels::RansacPartial);
  DeviceBuffer& m = buffer("ransac.model", 9 * sizeof(double));
  DeviceBuffer& out = buffer("ransac.mask", part_bytes + n);  // the partials, then the mask
  PinnedBuffer& io = pinned_buffer("ransac.mask_io", std::max(part_bytes + n, 9 * sizeof(double)));
  std::memcpy(io.ptr, model, 9 * sizeof(double));
  SPECTRASIFT_CUDA_CHECK(cudaMemcpyAsync(m.ptr, io.ptr, 9 * sizeof(double), cudaMemcpyHostToDevice, compute));
  kernels::ransac_inlier_mask<<<unsigned(blocks), kernels::kRansacThreads, 0, compute>>>(
      m.as<const double>(), p, p + pairs.n, pairs.n, threshold2, ss_score_scale(threshold2),
      out.as<std::uint8_t>() + part_bytes, out.as<kernels::RansacPartial>());
  SPECTRASIFT_CUDA_CHECK_LAUNCH();
  SPECTRASIFT_CUDA_CHECK(cudaMemcpyAsync(io.ptr, out.ptr, part_bytes + n, cudaMemcpyDeviceToHost, compute));
  SPECTRASIFT_CUDA_CHECK(cudaStreamSynchronize(compute));
  std::memcpy(mask, io.as<const char>() + part_bytes, n);
  const auto* part = io.as<const kernels::RansacPartial>();
  int total = 0;
  ss_u64 hi = 0, lo = 0;  // integers: the order of the additions does not matter
  for (int b = 0; b < blocks; ++b) {
    total += part[b].inliers;
    hi += part[b].hi;
    lo += part[b].lo;
  }
  *sum2 = ss_score_sum(hi, lo, ss_score_inv_scale(threshold2));
  return total;
}

bool State::refit_sums(const int* passes, int npasses, const double* given, const detail::PointPairs& pairs,
                       const detail::RefitSelection& sel, double* out) {
  if (npasses <= 0 || pairs.n <= 0) return npasses <= 0;  // an empty chain: yes, the sums are computed here
  activate();
  const double2* p = pairs_on_device(*this, pairs);
  const int nb = ss_refit_blocks(pairs.n);
  const int total = ss_refit_chain_sum_count(passes, npasses);  // the chain's totals
  const std::size_t n = std::size_t(pairs.n), given_bytes = SS_REFIT_MAX_PARAMS * sizeof(double);
  const std::size_t out_bytes = std::size_t(total) * sizeof(double);
  // The given parameters and the mask go in one copy (the mask with every chain: 10 KB for 10,000 pairs, a
  // microsecond or two beside the launches, and no device state to go stale between the driver's masks); the
  // chain's totals come back in one.
  PinnedBuffer& io = pinned_buffer("ransac.refit_io", std::max(given_bytes + n, out_bytes));
  std::fill(io.as<double>(), io.as<double>() + SS_REFIT_MAX_PARAMS, 0.0);
  // The given parameters that the chain's passes read (ss_refit_chain_params).
  const int given_count = ss_refit_chain_given_count(passes, npasses);
  if (given_count > 0) std::copy(given, given + given_count, io.as<double>());
  std::memcpy(io.as<char>() + given_bytes, sel.mask, n);
  DeviceBuffer& in = buffer("ransac.refit_in", given_bytes + n);
  DeviceBuffer& part =
      buffer("ransac.refit_part", (std::size_t(nb) * SS_REFIT_MAX_SUMS + std::size_t(total)) * sizeof(double));
  double* totals = part.as<double>() + std::size_t(nb) * SS_REFIT_MAX_SUMS;  // after the block partials
  SPECTRASIFT_CUDA_CHECK(cudaMemcpyAsync(in.ptr, io.ptr, given_bytes + n, cudaMemcpyHostToDevice, compute));
  // Pass by pass in stream order: the blocks, then the tree into the chain's totals, which the next pass's
  // blocks read for their parameters. The partials are reused (the next blocks kernel starts after the tree).
  int at = 0;
  for (int c = 0; c < npasses; ++c) {
    const int k = ss_refit_sum_count(passes[c]);
    kernels::ransac_refit_blocks<<<unsigned(nb), SS_REFIT_BLOCK, 0, compute>>>(
        passes[c], c == 0 ? 1 : 0, in.as<const double>(), totals, sel.count, p, p + pairs.n,
        in.as<const std::uint8_t>() + given_bytes, pairs.n, part.as<double>());
    SPECTRASIFT_CUDA_CHECK_LAUNCH();
    kernels::ransac_refit_tree<<<1, 32, 0, compute>>>(part.as<double>(), nb, k, totals + at);
    SPECTRASIFT_CUDA_CHECK_LAUNCH();
    at += k;
  }
  SPECTRASIFT_CUDA_CHECK(cudaMemcpyAsync(io.ptr, totals, out_bytes, cudaMemcpyDeviceToHost, compute));
  SPECTRASIFT_CUDA_CHECK(cudaStreamSynchronize(compute));
  std::memcpy(out, io.ptr, out_bytes);
  return true;
}

}  // namespace spectrasift::cuda

// CUDA RANSAC scoring (BackendImpl::score_models and inlier_mask) on the device, kernels/ransac.cuh: the same
// per-pair maths as the CPU backend (numeric/ransac_score.h), so the counts, masks and sums are its bits.
// A run's pairs are uploaded once (keyed by PointPairs::id) and stay on the device between the batches of the
// driver (core/ransac.cpp). A batch costs one upload (its models and flags, packed in pinned memory), one
// launch and one read-back of a 16-byte record per model.
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

}  // namespace spectrasift::cuda

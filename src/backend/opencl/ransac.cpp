// OpenCL RANSAC scoring (BackendImpl::score_models and inlier_mask) on the device, kernels/ransac.cl: the
// same per-pair maths as the CPU backend (numeric/ransac_score.h), so the counts, masks and sums are its bits.
// A run's pairs are uploaded once (keyed by PointPairs::id) and stay on the device between the batches of
// the driver (core/ransac.cpp); a batch costs one upload of its models, one launch and one read-back.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "backend/opencl/sift.hpp"
#include "backend/opencl/state.hpp"
#include "numeric/ransac_score.h"
#include "spectrasift/error.hpp"

namespace spectrasift::opencl {

namespace {

constexpr const char* kProgram = "ransac.cl";
static_assert(sizeof(Point2) == 2 * sizeof(double), "Point2 is two doubles, x then y");

/// A kernel of ransac.cl and its work-group width: the largest power of two <= 256 that the device and the
/// compiled kernel allow (the local-memory tree needs a power of two).
cl_kernel ransac_kernel(State& st, const char* name, std::size_t& width) {
  std::size_t wg = 256;
  while (wg > 1 && wg > st.max_work_group) wg /= 2;
  for (;; wg /= 2) {
    cl_kernel k = st.kernel(kProgram, name, "-DRANSAC_WG=" + std::to_string(wg));
    if (st.limits(k).work_group_size >= wg || wg == 1) {
      width = wg;
      return k;
    }
  }
}

/// The run's pairs on the device (moving then fixed, 4 n doubles), uploaded when the run is new. The writes
/// are enqueued on the in-order queue; every entry ends with a blocking read, so they are complete before
/// the caller's arrays can change.
cl_mem pairs_on_device(State& st, const detail::PointPairs& p) {
  const std::size_t half = 2 * std::size_t(p.n) * sizeof(double);
  const cl_mem m = st.buffer("ransac.pairs", std::max<std::size_t>(2 * half, 32), CL_MEM_READ_ONLY);
  if (st.ransac_pairs_id != p.id || p.id == 0) {
    st.ransac_pairs_id = 0;
    SPECTRASIFT_CL_CHECK(clEnqueueWriteBuffer(st.queue, m, CL_FALSE, 0, half, p.moving, 0, nullptr, nullptr));
    SPECTRASIFT_CL_CHECK(clEnqueueWriteBuffer(st.queue, m, CL_FALSE, half, half, p.fixed, 0, nullptr, nullptr));
    st.ransac_pairs_id = p.id;
  }
  return m;
}

}  // namespace

bool State::has_fp64() const noexcept {
  cl_device_fp_config dbl = 0;
  if (clGetDeviceInfo(device, CL_DEVICE_DOUBLE_FP_CONFIG, sizeof dbl, &dbl, nullptr) != CL_SUCCESS) return false;
  return dbl != 0;
}

void State::score_models(const double* models, const std::uint8_t* valid, int count, const detail::PointPairs& pairs,
                         double threshold2, int, int* inliers, double* sums) {
  if (count <= 0) return;
  std::size_t wg = 1;
  cl_kernel k = ransac_kernel(*this, "ransac_score", wg);
  const cl_mem p = pairs_on_device(*this, pairs);
  const std::size_t c = std::size_t(count);
  const cl_mem m = buffer("ransac.models", c * 9 * sizeof(double), CL_MEM_READ_ONLY);
  const cl_mem v = buffer("ransac.valid", c, CL_MEM_READ_ONLY);
  const cl_mem in = buffer("ransac.inliers", c * sizeof(cl_int));
  const cl_mem sm = buffer("ransac.sums", c * sizeof(double));
  SPECTRASIFT_CL_CHECK(
      clEnqueueWriteBuffer(queue, m, CL_FALSE, 0, c * 9 * sizeof(double), models, 0, nullptr, nullptr));
  SPECTRASIFT_CL_CHECK(clEnqueueWriteBuffer(queue, v, CL_FALSE, 0, c, valid, 0, nullptr, nullptr));
  set_args(k, m, v, p, cl_int(pairs.n), threshold2, ss_score_scale(threshold2), ss_score_inv_scale(threshold2), in, sm);
  const std::size_t global = c * wg;
  SPECTRASIFT_CL_CHECK(clEnqueueNDRangeKernel(queue, k, 1, nullptr, &global, &wg, 0, nullptr, nullptr));
  SPECTRASIFT_CL_CHECK(clEnqueueReadBuffer(queue, in, CL_FALSE, 0, c * sizeof(cl_int), inliers, 0, nullptr, nullptr));
  SPECTRASIFT_CL_CHECK(clEnqueueReadBuffer(queue, sm, CL_TRUE, 0, c * sizeof(double), sums, 0, nullptr, nullptr));
}

int State::inlier_mask(const double* model, const detail::PointPairs& pairs, double threshold2, std::uint8_t* mask,
                       double* sum2) {
  *sum2 = 0;
  if (pairs.n <= 0) return 0;
  std::size_t wg = 1;
  cl_kernel k = ransac_kernel(*this, "ransac_inlier_mask", wg);
  const cl_mem p = pairs_on_device(*this, pairs);
  // Enough work-groups to fill a GPU (at most 256 pairs per work-item), few on a CPU device.
  const std::size_t per_group = wg * (is_cpu ? 256 : 4);
  const std::size_t groups = std::clamp<std::size_t>((std::size_t(pairs.n) + per_group - 1) / per_group, 1, 1024);
  const cl_mem m = buffer("ransac.model", 9 * sizeof(double), CL_MEM_READ_ONLY);
  const cl_mem mk = buffer("ransac.mask", std::size_t(pairs.n));
  const cl_mem pc = buffer("ransac.part_count", groups * sizeof(cl_int));
  const cl_mem ph = buffer("ransac.part_hi", groups * sizeof(cl_ulong));
  const cl_mem pl = buffer("ransac.part_lo", groups * sizeof(cl_ulong));
  SPECTRASIFT_CL_CHECK(clEnqueueWriteBuffer(queue, m, CL_FALSE, 0, 9 * sizeof(double), model, 0, nullptr, nullptr));
  set_args(k, m, p, cl_int(pairs.n), threshold2, ss_score_scale(threshold2), mk, pc, ph, pl);
  const std::size_t global = groups * wg;
  SPECTRASIFT_CL_CHECK(clEnqueueNDRangeKernel(queue, k, 1, nullptr, &global, &wg, 0, nullptr, nullptr));
  std::vector<cl_int> count(groups);
  std::vector<cl_ulong> hi(groups), lo(groups);
  SPECTRASIFT_CL_CHECK(clEnqueueReadBuffer(queue, mk, CL_FALSE, 0, std::size_t(pairs.n), mask, 0, nullptr, nullptr));
  SPECTRASIFT_CL_CHECK(
      clEnqueueReadBuffer(queue, pc, CL_FALSE, 0, groups * sizeof(cl_int), count.data(), 0, nullptr, nullptr));
  SPECTRASIFT_CL_CHECK(
      clEnqueueReadBuffer(queue, ph, CL_FALSE, 0, groups * sizeof(cl_ulong), hi.data(), 0, nullptr, nullptr));
  SPECTRASIFT_CL_CHECK(
      clEnqueueReadBuffer(queue, pl, CL_TRUE, 0, groups * sizeof(cl_ulong), lo.data(), 0, nullptr, nullptr));
  int total = 0;
  ss_u64 h = 0, l = 0;  // integers: the order of the additions does not matter
  for (std::size_t g = 0; g < groups; ++g) {
    total += count[g];
    h += hi[g];
    l += lo[g];
  }
  *sum2 = ss_score_sum(h, l, ss_score_inv_scale(threshold2));
  return total;
}

}  // namespace spectrasift::opencl

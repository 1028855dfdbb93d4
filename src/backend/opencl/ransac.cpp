// OpenCL RANSAC scoring (BackendImpl::score_models and inlier_mask) on the device, kernels/ransac.cl: the
// same per-pair maths as the CPU backend (numeric/ransac_score.h), so the counts, masks and sums are its bits.
// A run's pairs are uploaded once (keyed by PointPairs::id) and stay on the device between the batches of
// the driver (core/ransac.cpp); a batch costs one upload of its models, one launch and one read-back.
// The refits' sums (BackendImpl::refit_sums) run here too, as on CUDA: a chain of passes per call, one upload
// of the given parameters and the mask, a block kernel and a tree kernel per pass, one read-back of the
// chain's totals (numeric/refit_sums.h's order, so the host's bits); the small dense solves stay on the host.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "backend/opencl/sift.hpp"
#include "backend/opencl/state.hpp"
#include "numeric/ransac_score.h"
#include "numeric/refit_sums.h"
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

bool State::refit_sums(const int* passes, int npasses, const double* given, const detail::PointPairs& pairs,
                       const detail::RefitSelection& sel, double* out) {
  // By default the host computes the sums on every OpenCL device (refit_variant): on a CPU device they are the
  // same work without the launches, and on NVIDIA's OpenCL the device form is not measured yet (predicted no
  // faster than the host's: ransac.md, "The refit sums on OpenCL"). 1 runs them here (tests, timing).
  if (refit_variant <= 0) return false;
  // The header needs doubles on the device; without them the host computes the sums (the same bits).
  if (!has_fp64()) return false;
  // One work-group per block of SS_REFIT_BLOCK pairs, each work-item one pair: the block kernel needs that width
  // (it is built in ransac.cl's program of the scoring kernels, the same -DRANSAC_WG=256 option where the device
  // allows 256). A device or compiled kernel that allows less leaves the sums to the host.
  std::size_t wg = 1;
  cl_kernel blocks = ransac_kernel(*this, "ransac_refit_blocks", wg);
  if (wg != SS_REFIT_BLOCK) return false;
  if (npasses <= 0) return true;   // an empty chain: yes, the sums are computed here
  if (pairs.n <= 0) return false;  // nothing to launch over: the host's (empty) sums
  cl_kernel tree = kernel(kProgram, "ransac_refit_tree", "-DRANSAC_WG=" + std::to_string(SS_REFIT_BLOCK));
  const cl_mem p = pairs_on_device(*this, pairs);
  const int nb = ss_refit_blocks(pairs.n);
  const int total = ss_refit_chain_sum_count(passes, npasses);  // the chain's totals
  const std::size_t n = std::size_t(pairs.n), given_bytes = SS_REFIT_MAX_PARAMS * sizeof(double);
  const std::size_t out_bytes = std::size_t(total) * sizeof(double);
  // The given parameters and the mask go in one write (the mask with every chain: 10 KB for 10,000 pairs, and
  // no device state to go stale between the driver's masks), from pinned memory (a GPU copies it directly);
  // the chain's totals come back in one read. The write is complete before the read reuses the staging memory
  // (one in-order queue).
  PinnedBuffer& io = pinned("ransac.refit_io", std::max(given_bytes + n, out_bytes));
  auto* host = static_cast<unsigned char*>(io.host);
  std::fill(reinterpret_cast<double*>(host), reinterpret_cast<double*>(host) + SS_REFIT_MAX_PARAMS, 0.0);
  // The given parameters that the chain's passes read (ss_refit_chain_params).
  const int given_count = ss_refit_chain_given_count(passes, npasses);
  if (given_count > 0) std::memcpy(host, given, std::size_t(given_count) * sizeof(double));
  std::memcpy(host + given_bytes, sel.mask, n);
  const cl_mem in = buffer("ransac.refit_in", given_bytes + n, CL_MEM_READ_ONLY);
  const cl_mem part = buffer("ransac.refit_part", std::size_t(nb) * SS_REFIT_MAX_SUMS * sizeof(double));
  const cl_mem totals = buffer("ransac.refit_totals", out_bytes);
  SPECTRASIFT_CL_CHECK(clEnqueueWriteBuffer(queue, in, CL_FALSE, 0, given_bytes + n, host, 0, nullptr, nullptr));
  // Pass by pass in queue order: the blocks, then the tree into the chain's totals, which the next pass's
  // blocks read for their parameters. The partials are reused (the next blocks kernel starts after the tree).
  const std::size_t local = SS_REFIT_BLOCK, global = std::size_t(nb) * SS_REFIT_BLOCK, tree_size = 32;
  int at = 0;
  for (int c = 0; c < npasses; ++c) {
    const int k = ss_refit_sum_count(passes[c]);
    set_args(blocks, cl_int(passes[c]), cl_int(c == 0 ? 1 : 0), in, totals, cl_int(at), cl_int(sel.count), p,
             cl_int(pairs.n), part);
    SPECTRASIFT_CL_CHECK(clEnqueueNDRangeKernel(queue, blocks, 1, nullptr, &global, &local, 0, nullptr, nullptr));
    set_args(tree, part, cl_int(nb), cl_int(k), totals, cl_int(at));
    SPECTRASIFT_CL_CHECK(clEnqueueNDRangeKernel(queue, tree, 1, nullptr, &tree_size, &tree_size, 0, nullptr, nullptr));
    at += k;
  }
  SPECTRASIFT_CL_CHECK(clEnqueueReadBuffer(queue, totals, CL_TRUE, 0, out_bytes, host, 0, nullptr, nullptr));
  std::memcpy(out, host, out_bytes);
  return true;
}

}  // namespace spectrasift::opencl

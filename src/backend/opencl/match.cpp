// OpenCL descriptor matching: the nearest and second nearest train descriptor of every query on the device,
// distance and best-two in one kernel (kernels/match_l2_top2.cl), no distance matrix in memory. The results
// are the CPU backend's bit for bit (indices, ties to the lower train index, and distances: the kernel
// returns squared distances summed in the CPU's order and the square roots are taken here). Descriptors of
// small integers (SIFT's) take fused multiply-adds, exact for them (a device-side check decides, see the kernel).
//
// Descriptors that the OpenCL SIFT left on this device (FeatureView::device, a DeviceDescriptors) are read
// in place; others are uploaded into named buffers reused across calls. The ratio test and the mutual check
// stay in core/match.cpp on the Top2 results (a pass over n entries; the mutual check is a second match_top2).
#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "backend/opencl/device_features.hpp"
#include "backend/opencl/sift.hpp"
#include "backend/opencl/state.hpp"
#include "spectrasift/error.hpp"

namespace spectrasift::opencl {

namespace {

constexpr const char* kProgram = "match_l2_top2.cl";
constexpr std::size_t kRowQueries = 64;  // queries per work-item of match_l2_top2_rows (MATCH_ROW_Q)

/// The kernel's shape: work-group (wx, wy), a register tile of rx train x ry query descriptors per
/// work-item, dk dimensions per local-memory chunk.
struct MatchShape {
  int wx, wy, rx, ry, dk;
  std::size_t local_bytes() const {
    const std::size_t qt = std::size_t(wy) * ry, tt = std::size_t(wx) * rx;
    return std::size_t(dk) * (qt + tt) * sizeof(float) + qt * std::size_t(wx) * 2 * (sizeof(float) + sizeof(int));
  }
};

std::string shape_options(const MatchShape& s, int dim) {
  // The largest magnitude of integer values whose products and partial sums stay below 2^24 (exact in float).
  int exact_max = 0;
  while (double(exact_max + 1) * double(exact_max + 1) * dim <= double(1 << 24)) ++exact_max;
  return "-DMATCH_EXACT_MAX=" + std::to_string(exact_max) + ".0f -DMATCH_DIM=" + std::to_string(dim) +
         " -DMATCH_DK=" + std::to_string(s.dk) + " -DMATCH_WX=" + std::to_string(s.wx) +
         " -DMATCH_WY=" + std::to_string(s.wy) + " -DMATCH_RX=" + std::to_string(s.rx) +
         " -DMATCH_RY=" + std::to_string(s.ry);
}

/// The match_l2_top2 kernel for this device and its shape (its program also holds the other matching
/// kernels): the first candidate whose work-group and local memory the device (and then the compiled kernel)
/// allows. GPUs: 16 x 16 work-items with 4 x 4 register tiles (64 queries per work-group against tiles of 64
/// train descriptors: 8 local loads per 16 multiply-adds; 16384 queries make 256 work-groups). CPU devices run
/// match_l2_top2_rows by default; their tiled shape (tests) starts at 8 x 8. Smaller shapes follow for
/// devices with small limits.
cl_kernel top2_kernel(State& st, int dim, MatchShape& shape, std::string& options) {
  int dk = 16;
  while (dim % dk != 0) dk /= 2;
  std::vector<MatchShape> candidates;
  if (!st.is_cpu) candidates.push_back({16, 16, 4, 4, dk});
  candidates.push_back({8, 8, 4, 4, dk});
  candidates.push_back({4, 4, 2, 2, dk});
  candidates.push_back({1, 1, 1, 1, dk});
  for (const MatchShape& s : candidates) {
    const std::size_t items = std::size_t(s.wx) * std::size_t(s.wy);
    if (items > st.max_work_group || s.local_bytes() > st.local_mem) continue;
    cl_kernel k = st.kernel(kProgram, "match_l2_top2", shape_options(s, dim));
    if (st.limits(k).work_group_size < items) continue;
    shape = s;
    options = shape_options(s, dim);
    return k;
  }
  throw Error(ErrorCode::kUnsupported,
              "descriptor matching: the OpenCL device allows no work-group shape of match_l2_top2 (" +
                  std::to_string(st.local_mem) + " bytes of local memory)",
              "opencl");
}

/// Whether the row form (match_l2_top2_rows) runs: on CPU devices unless State::match_variant says otherwise.
bool use_rows(const State& st) { return st.match_variant == 1 || (st.match_variant < 0 && st.is_cpu); }

/// The device buffer of one side: its device copy when dispatch passed one, else an upload (enqueued on
/// the in-order queue; the blocking read at the end orders it before the caller's memory can change).
cl_mem descriptors_on_device(State& st, const detail::FeatureView& v, const char* name) {
  if (const auto* dev = dynamic_cast<const DeviceDescriptors*>(v.device)) return dev->mem();
  const std::size_t bytes = std::size_t(v.count) * std::size_t(v.dim) * sizeof(float);
  const cl_mem m = st.buffer(name, bytes, CL_MEM_READ_ONLY);
  SPECTRASIFT_CL_CHECK(clEnqueueWriteBuffer(st.queue, m, CL_FALSE, 0, bytes, v.descriptors, 0, nullptr, nullptr));
  return m;
}

/// Sets `flag` (zeroed first) when a descriptor value of either side is not a small integer (see the kernel).
void check_exact(State& st, const std::string& options, cl_mem flag, cl_mem q, std::size_t q_values, cl_mem t,
                 std::size_t t_values) {
  const cl_int zero = 0;
  SPECTRASIFT_CL_CHECK(clEnqueueFillBuffer(st.queue, flag, &zero, sizeof zero, 0, sizeof zero, 0, nullptr, nullptr));
  cl_kernel k = st.kernel(kProgram, "match_l2_exact_check", options);
  const std::size_t local = st.work_group_1d(k, 256);
  for (const auto& [mem, values] : {std::pair{q, q_values}, std::pair{t, t_values}}) {
    set_args(k, mem, cl_long(values), flag);
    // A grid of at most 1024 work-groups, each work-item striding over the rest.
    const std::size_t global = std::min(round_up(values, local), local * 1024);
    SPECTRASIFT_CL_CHECK(clEnqueueNDRangeKernel(st.queue, k, 1, nullptr, &global, &local, 0, nullptr, nullptr));
  }
}

/// The squared norms of `count` descriptors (match_l2_norms of the same program as the top-2 kernel).
cl_mem squared_norms(State& st, const std::string& options, cl_mem desc, int count, const char* name) {
  const cl_mem norms = st.buffer(name, std::size_t(count) * sizeof(float));
  cl_kernel k = st.kernel(kProgram, "match_l2_norms", options);
  set_args(k, desc, cl_int(count), norms);
  const std::size_t local = st.work_group_1d(k, 64);
  const std::size_t global = round_up(std::size_t(count), local);
  SPECTRASIFT_CL_CHECK(clEnqueueNDRangeKernel(st.queue, k, 1, nullptr, &global, &local, 0, nullptr, nullptr));
  return norms;
}

}  // namespace

void match_top2(detail::ContextImpl& ctx, const detail::FeatureView& query, const detail::FeatureView& train,
                Top2* out) {
  const int nq = query.count, nt = train.count, dim = query.dim;
  if (nq <= 0) return;
  if (nt <= 0) {  // nothing to match: the CPU's empty result (indices -1, distances +inf)
    std::fill(out, out + nq, Top2{});
    return;
  }
  State& st = state(ctx);
  MatchShape shape{};
  std::string options;
  cl_kernel k = top2_kernel(st, dim, shape, options);
  const cl_mem q = descriptors_on_device(st, query, "match.query");
  const cl_mem t = descriptors_on_device(st, train, "match.train");
  const cl_mem qn = squared_norms(st, options, q, nq, "match.query_norms");
  const cl_mem tn = squared_norms(st, options, t, nt, "match.train_norms");
  const cl_mem dist = st.buffer("match.distance", 2 * std::size_t(nq) * sizeof(float));
  const cl_mem index = st.buffer("match.index", 2 * std::size_t(nq) * sizeof(cl_int));
  const cl_mem inexact = st.buffer("match.inexact", sizeof(cl_int));
  check_exact(st, options, inexact, q, std::size_t(nq) * std::size_t(dim), t, std::size_t(nt) * std::size_t(dim));
  if (use_rows(st)) {
    // CPU devices: the queries dimension-major, then one work-item per 64 queries (kernels/match_l2_top2.cl).
    cl_kernel tr = st.kernel(kProgram, "match_l2_transpose", options);
    cl_kernel rows = st.kernel(kProgram, "match_l2_top2_rows", options);
    const std::size_t local = st.work_group_1d(rows, 4);
    const std::size_t items = round_up((std::size_t(nq) + kRowQueries - 1) / kRowQueries, local);
    const std::size_t stride = items * kRowQueries;
    const cl_mem qt = st.buffer("match.query_t", stride * std::size_t(dim) * sizeof(float));
    set_args(tr, q, cl_int(nq), cl_int(stride), qt);
    const std::size_t tr_local = st.work_group_1d(tr, 16);
    const std::size_t tr_global = round_up(std::size_t(nq), tr_local);
    SPECTRASIFT_CL_CHECK(clEnqueueNDRangeKernel(st.queue, tr, 1, nullptr, &tr_global, &tr_local, 0, nullptr, nullptr));
    set_args(rows, qt, cl_int(nq), cl_int(stride), qn, t, cl_int(nt), tn, inexact, dist, index);
    SPECTRASIFT_CL_CHECK(clEnqueueNDRangeKernel(st.queue, rows, 1, nullptr, &items, &local, 0, nullptr, nullptr));
  } else {
    set_args(k, q, cl_int(nq), qn, t, cl_int(nt), tn, inexact, dist, index);
    const std::size_t qt = std::size_t(shape.wy) * std::size_t(shape.ry);
    const std::size_t local[2] = {std::size_t(shape.wx), std::size_t(shape.wy)};
    const std::size_t global[2] = {local[0], (std::size_t(nq) + qt - 1) / qt * local[1]};
    SPECTRASIFT_CL_CHECK(clEnqueueNDRangeKernel(st.queue, k, 2, nullptr, global, local, 0, nullptr, nullptr));
  }
  std::vector<float> d(2 * std::size_t(nq));
  std::vector<cl_int> i(2 * std::size_t(nq));
  SPECTRASIFT_CL_CHECK(clEnqueueReadBuffer(st.queue, index, CL_FALSE, 0, i.size() * sizeof(cl_int), i.data(), 0,
                                           nullptr, nullptr));
  SPECTRASIFT_CL_CHECK(
      clEnqueueReadBuffer(st.queue, dist, CL_TRUE, 0, d.size() * sizeof(float), d.data(), 0, nullptr, nullptr));
  for (int r = 0; r < nq; ++r) {
    Top2& o = out[r];
    o.best1 = i[2 * std::size_t(r)];
    o.best2 = i[2 * std::size_t(r) + 1];
    o.distance1 = std::sqrt(d[2 * std::size_t(r)]);
    o.distance2 = std::sqrt(d[2 * std::size_t(r) + 1]);
  }
}

void State::match_top2(detail::ContextImpl& ctx, const detail::FeatureView& query, const detail::FeatureView& train,
                       Top2* out) {
  opencl::match_top2(ctx, query, train, out);
}

}  // namespace spectrasift::opencl

// OpenCL descriptor matching: the nearest and second nearest train descriptor of every query on the device,
// distance and best-two in one kernel (kernels/match_l2_top2.cl), no distance matrix in memory. The results
// are the CPU backend's bit for bit (indices, ties to the lower train index, and distances: the kernel
// returns squared distances summed in the CPU's order and the square roots are taken here). Descriptors of
// small integers (SIFT's) take fused multiply-adds, exact for them (a device-side check decides, see the kernel).
// On NVIDIA GPUs (dp4a), descriptors whose values are all integers 0..255 take the u8 path instead
// (kernels/match_u8_top2.cl): packed bytes (a quarter of the upload), integer dot products of four bytes at a
// time, the same bits.
//
// Descriptors that the OpenCL SIFT left on this device (FeatureView::device, a DeviceDescriptors) are read
// in place; others are uploaded into named buffers reused across calls. match_features' entry (match_filtered)
// runs both directions from one packing / upload of each side, the ratio, distance and mutual tests and the
// compaction of the kept matches on the device (kernels/match_filter.cl), and reads back only those.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <tuple>
#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "backend/descriptor_u8_job.hpp"
#include "backend/opencl/device_features.hpp"
#include "backend/opencl/sift.hpp"
#include "backend/opencl/state.hpp"
#include "core/context_impl.hpp"
#include "core/thread_pool.hpp"
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
/// the in-order queue; the blocking read at the end orders it before the caller's memory can change). A side
/// of bytes (kU8 features on the float path: a mixed call, or a device without the u8 path) is converted into
/// a temporary vector of floats and written blocking.
cl_mem descriptors_on_device(State& st, const detail::FeatureView& v, const char* name) {
  if (const auto* dev = dynamic_cast<const DeviceDescriptors*>(v.device)) return dev->mem();
  const std::size_t values = std::size_t(v.count) * std::size_t(v.dim), bytes = values * sizeof(float);
  const cl_mem m = st.buffer(name, bytes, CL_MEM_READ_ONLY);
  if (v.bytes) {
    const std::vector<float> floats(v.bytes, v.bytes + values);
    SPECTRASIFT_CL_CHECK(clEnqueueWriteBuffer(st.queue, m, CL_TRUE, 0, bytes, floats.data(), 0, nullptr, nullptr));
  } else {
    SPECTRASIFT_CL_CHECK(clEnqueueWriteBuffer(st.queue, m, CL_FALSE, 0, bytes, v.descriptors, 0, nullptr, nullptr));
  }
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


constexpr const char* kU8Program = "match_u8_top2.cl";
// cl_khr_integer_dot_product's query (not in every CL header): CL_DEVICE_INTEGER_DOT_PRODUCT_CAPABILITIES_KHR
// and its bit CL_DEVICE_INTEGER_DOT_PRODUCT_INPUT_4x8BIT_PACKED_KHR.
constexpr cl_device_info kDotProductCapabilities = 0x1073;
constexpr cl_bitfield kDotProductPacked4x8 = 1;

/// Whether the device reports cl_khr_integer_dot_product with packed 4 x 8-bit inputs.
bool has_khr_dot4(const State& st) {
  std::size_t n = 0;
  std::string ext;
  if (clGetDeviceInfo(st.device, CL_DEVICE_EXTENSIONS, 0, nullptr, &n) == CL_SUCCESS && n > 0) {
    ext.resize(n);
    if (clGetDeviceInfo(st.device, CL_DEVICE_EXTENSIONS, n, ext.data(), nullptr) != CL_SUCCESS) ext.clear();
  }
  cl_bitfield caps = 0;
  return ext.find("cl_khr_integer_dot_product") != std::string::npos &&
         clGetDeviceInfo(st.device, kDotProductCapabilities, sizeof caps, &caps, nullptr) == CL_SUCCESS &&
         (caps & kDotProductPacked4x8) != 0;
}

/// The packed dot products the u8 kernel is built with, best first (State::match_dot4 numbers them): 2 NVIDIA's
/// dp4a through inline PTX on NVIDIA's platform, 0 four integer multiply-adds (any device). The default u8
/// path runs only with dp4a (nearest_two_on_device), the one hardware form measured on a real device (NVIDIA
/// OpenCL on the H200). 1, cl_khr_integer_dot_product's, has never run on a GPU: it is built only when
/// State::match_dot4 forces it (a test, on devices that report the extension, such as PoCL 5). The forced u8
/// tests' wrong indices on PoCL 5 (H200 host) are not khr's: they stayed with khr excluded (not diagnosed).
std::vector<int> dot4_candidates(const State& st) {
  std::vector<int> out;
  if (!st.device_identity.empty() && st.device_identity[0].find("NVIDIA") != std::string::npos) out.push_back(2);
  out.push_back(0);
  return out;
}

std::string u8_options(const MatchShape& s, int dim, int dot4) {
  static const char* const kDot4[] = {"", " -DMATCH_DOT4_KHR", " -DMATCH_DOT4_PTX"};
  return "-DMATCH_W4=" + std::to_string(dim / 4) + " -DMATCH_WX=" + std::to_string(s.wx) +
         " -DMATCH_WY=" + std::to_string(s.wy) + " -DMATCH_RX=" + std::to_string(s.rx) +
         " -DMATCH_RY=" + std::to_string(s.ry) + kDot4[dot4];
}

/// Local memory of the u8 kernel's shape: the query and train words, and the merge records.
std::size_t u8_local_bytes(const MatchShape& s, int dim) {
  const std::size_t qt = std::size_t(s.wy) * s.ry, tt = std::size_t(s.wx) * s.rx;
  return std::size_t(dim / 4) * (qt + tt) * 4 + qt * std::size_t(s.wx) * 4 * sizeof(cl_int);
}

/// The match_u8_top2 kernel for this device, its shape and options: the first shape the device allows (as
/// top2_kernel), with the best packed dot product that builds (probed once: a failed build falls back to the
/// next candidate, and State::match_dot4 remembers the one that built), or the one State::match_dot4 forces.
cl_kernel u8_kernel(State& st, int dim, MatchShape& shape, std::string& options) {
  if (st.match_dot4 == 1 && !has_khr_dot4(st))
    throw Error(ErrorCode::kUnsupported,
                "descriptor matching: State::match_dot4 forces cl_khr_integer_dot_product's packed 4 x 8-bit dot "
                "product, which the OpenCL device does not report",
                "opencl");
  // 8 x 16 work-items with 8 x 8 register tiles (128 queries per work-group against tiles of 64 train
  // descriptors: 16 local loads per 64 four-byte dot products, so the dot products bound the loop, not the
  // local-memory loads as with 4 x 4 tiles: 8 per 16), then smaller shapes for devices with small limits. The
  // same list on every device (CPU devices take this kernel only when asked), so PoCL tests the GPU's shape.
  const MatchShape candidates[] = {{8, 16, 8, 8, 0}, {16, 16, 4, 4, 0}, {8, 8, 4, 4, 0}, {4, 4, 2, 2, 0}, {1, 1, 1, 1, 0}};
  for (const MatchShape& s : candidates) {
    const std::size_t items = std::size_t(s.wx) * std::size_t(s.wy);
    if (items > st.max_work_group || u8_local_bytes(s, dim) > st.local_mem) continue;
    const std::vector<int> dots = st.match_dot4 >= 0 ? std::vector<int>{st.match_dot4} : dot4_candidates(st);
    for (int dot : dots) {
      cl_kernel k = nullptr;
      try {
        k = st.kernel(kU8Program, "match_u8_top2", u8_options(s, dim, dot));
      } catch (const Error&) {
        if (dot == 0) throw;  // the portable form must build
        continue;
      }
      st.match_dot4 = dot;
      if (st.limits(k).work_group_size < items) break;
      shape = s;
      options = u8_options(s, dim, dot);
      return k;
    }
  }
  throw Error(ErrorCode::kUnsupported,
              "descriptor matching: the OpenCL device allows no work-group shape of match_u8_top2 (" +
                  std::to_string(st.local_mem) + " bytes of local memory)",
              "opencl");
}

/// The u8 form of one side: packed bytes (dim / 4 words per descriptor) and squared norms.
struct PackedSide {
  cl_mem bytes = nullptr, norms = nullptr;
};

/// Both sides from host memory: packed on the host (the calling thread's pool) into one pinned buffer, each chunk
/// of bytes written (non-blocking) as soon as it is packed (detail::U8PackJob), the norms last. False when a value
/// is not an integer 0..255 (chunks already written stay enqueued; the staging buffer's reuse waits for them).
/// The device buffers of a side's bytes are taken at its first chunk's write: the verdict is known only once
/// every chunk is packed, and the writes that overlap the packing need their destination before it. A call
/// whose first chunk holds a non-byte (float descriptors) allocates none; the norms' buffers follow the verdict.
bool pack_host_sides(detail::ContextImpl& ctx, State& st, const detail::FeatureView& query,
                     const detail::FeatureView& train, PackedSide& q, PackedSide& t) {
  const std::size_t dim = std::size_t(query.dim);
  const std::size_t nq = std::size_t(query.count), nt = std::size_t(train.count);
  const std::size_t q_bytes = nq * dim, t_bytes = nt * dim;
  // The staging buffer may still be read by the uploads of a call that threw before its read-back.
  if (st.match_staging_upload.ev) {
    SPECTRASIFT_CL_CHECK(clWaitForEvents(1, &st.match_staging_upload.ev));
    st.match_staging_upload.reset();
  }
  PinnedBuffer& pin = st.pinned("match.u8.staging", q_bytes + t_bytes + (nq + nt) * sizeof(cl_int));
  auto* base = static_cast<std::uint8_t*>(pin.host);
  auto* norms = reinterpret_cast<std::int32_t*>(base + q_bytes + t_bytes);
  q = {};
  t = {};
  detail::U8PackJob job({query.descriptors, nq, base, norms, query.bytes},
                        {train.descriptors, nt, base + q_bytes, norms + nq, train.bytes},
                        query.dim);
  Event last;  // the last write from the staging buffer (the queue is in order: it ends after the others)
  const auto write = [&](cl_mem m, std::size_t offset, std::size_t bytes, const void* src) {
    Event e;
    SPECTRASIFT_CL_CHECK(clEnqueueWriteBuffer(st.queue, m, CL_FALSE, offset, bytes, src, 0, nullptr, &e.ev));
    last = std::move(e);
  };
  const auto upload = [&](const detail::U8Chunk& c) {
    cl_mem& bytes = c.side ? t.bytes : q.bytes;
    if (!bytes) bytes = st.buffer(c.side ? "match.u8.train" : "match.u8.query", c.side ? t_bytes : q_bytes);
    write(bytes, c.begin * dim, (c.end - c.begin) * dim, base + (c.side ? q_bytes : 0) + c.begin * dim);
  };
  WorkPool& pool = calling_thread_pool(ctx.cpu_threads());
  bool exact = false;
  try {
    // One item per thread; the calling thread's (thread 0) also writes the chunks as they are packed. Where the
    // workers took every item first, the second call writes them after the run. Once a write threw, thread 0
    // hands over no more chunks in the items it still claims (the pool runs them before it rethrows).
    bool upload_failed = false;  // thread 0's only
    pool.run(pool.size(), 1, [&](int, int, int thread) {
      if (thread != 0 || upload_failed) return job.pack_all();
      try {
        job.pack_and_upload(upload);
      } catch (...) {
        upload_failed = true;
        throw;
      }
    });
    exact = job.pack_and_upload(upload);
    if (exact) {
      q.norms = st.buffer("match.u8.query_norms", nq * sizeof(cl_int));
      t.norms = st.buffer("match.u8.train_norms", nt * sizeof(cl_int));
      write(q.norms, 0, nq * sizeof(cl_int), norms);
      write(t.norms, 0, nt * sizeof(cl_int), norms + nq);
    }
  } catch (...) {
    st.match_staging_upload = std::move(last);
    throw;
  }
  st.match_staging_upload = std::move(last);
  return exact;
}

/// Float descriptors on the device packed there (match_u8_pack); the flag is read back (one round trip):
/// false when a value of either side is not an integer 0..255.
bool pack_device_sides(State& st, const std::string& options, cl_mem qf, int nq, cl_mem tf, int nt, int dim,
                       PackedSide& q, PackedSide& t) {
  const cl_mem flag = st.buffer("match.u8.inexact", sizeof(cl_int));
  const cl_int zero = 0;
  SPECTRASIFT_CL_CHECK(clEnqueueFillBuffer(st.queue, flag, &zero, sizeof zero, 0, sizeof zero, 0, nullptr, nullptr));
  cl_kernel k = st.kernel(kU8Program, "match_u8_pack", options);
  const std::size_t local = st.work_group_1d(k, 64);
  for (auto [mem, n, side, name] : {std::tuple{qf, nq, &q, "match.u8.query"}, std::tuple{tf, nt, &t, "match.u8.train"}}) {
    side->bytes = st.buffer(std::string(name), std::size_t(n) * std::size_t(dim));
    side->norms = st.buffer(std::string(name) + "_norms", std::size_t(n) * sizeof(cl_int));
    set_args(k, mem, cl_int(n), side->bytes, side->norms, flag);
    const std::size_t global = round_up(std::size_t(n), local);
    SPECTRASIFT_CL_CHECK(clEnqueueNDRangeKernel(st.queue, k, 1, nullptr, &global, &local, 0, nullptr, nullptr));
  }
  cl_int inexact = 1;
  SPECTRASIFT_CL_CHECK(clEnqueueReadBuffer(st.queue, flag, CL_TRUE, 0, sizeof inexact, &inexact, 0, nullptr, nullptr));
  return inexact == 0;
}

/// The u8 kernel over both packed sides, split over the train set so that the device has at least four
/// work-groups per compute unit, then the merge of the splits into dist / index (squared distances). The
/// partial best twos go to the named buffer (one per direction: the backward run never regrows a buffer that
/// the forward run's queued merge still reads).
void run_u8(State& st, cl_kernel k, const MatchShape& shape, const std::string& options, const PackedSide& q, int nq,
            const PackedSide& t, int nt, cl_mem dist, cl_mem index, const char* partial_name) {
  const std::size_t qt = std::size_t(shape.wy) * std::size_t(shape.ry), tt = std::size_t(shape.wx) * std::size_t(shape.rx);
  const std::size_t groups = (std::size_t(nq) + qt - 1) / qt;
  cl_uint units = 1;
  SPECTRASIFT_CL_CHECK(clGetDeviceInfo(st.device, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof units, &units, nullptr));
  const std::size_t tiles = (std::size_t(nt) + tt - 1) / tt;
  const std::size_t want = std::clamp<std::size_t>((4 * std::size_t(units) + groups - 1) / groups, 1, tiles);
  const std::size_t per_split = (tiles + want - 1) / want * tt;  // whole tiles per split
  const std::size_t splits = (std::size_t(nt) + per_split - 1) / per_split;
  const cl_mem partial = st.buffer(partial_name, splits * std::size_t(nq) * 4 * sizeof(cl_int));
  set_args(k, q.bytes, cl_int(nq), t.bytes, cl_int(nt), t.norms, cl_int(per_split), partial);
  const std::size_t local[2] = {std::size_t(shape.wx), std::size_t(shape.wy)};
  const std::size_t global[2] = {local[0] * splits, groups * local[1]};
  SPECTRASIFT_CL_CHECK(clEnqueueNDRangeKernel(st.queue, k, 2, nullptr, global, local, 0, nullptr, nullptr));
  cl_kernel merge = st.kernel(kU8Program, "match_u8_merge", options);
  set_args(merge, partial, cl_int(nq), cl_int(splits), q.norms, dist, index);
  const std::size_t m_local = st.work_group_1d(merge, 64);
  const std::size_t m_global = round_up(std::size_t(nq), m_local);
  SPECTRASIFT_CL_CHECK(clEnqueueNDRangeKernel(st.queue, merge, 1, nullptr, &m_global, &m_local, 0, nullptr, nullptr));
}

/// The float kernels (match_l2_top2 or, on CPU devices, match_l2_top2_rows) over both sides: any values.
void run_float(State& st, int dim, cl_mem q, int nq, cl_mem t, int nt, cl_mem dist, cl_mem index) {
  MatchShape shape{};
  std::string options;
  cl_kernel k = top2_kernel(st, dim, shape, options);
  const cl_mem qn = squared_norms(st, options, q, nq, "match.query_norms");
  const cl_mem tn = squared_norms(st, options, t, nt, "match.train_norms");
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
}

/// Whether the u8 path is tried: on GPUs (CPU devices keep the float row kernel; a GPU then needs dp4a, see
/// nearest_two_on_device) or when State::match_variant asks for it (2), for descriptors of whole words.
bool try_u8(const State& st, int dim) {
  return dim % 4 == 0 && (st.match_variant == 2 || (st.match_variant < 0 && !st.is_cpu));
}

/// With ContextOptions::verbose, the parts of a call by the clock, the queue drained after each (only then).
class PartClock {
 public:
  PartClock(detail::ContextImpl& ctx, State& st) : on_(ctx.options.verbose), st_(st), last_(std::chrono::steady_clock::now()) {}
  void operator()(const std::string& name) {
    if (!on_) return;
    SPECTRASIFT_CL_CHECK(clFinish(st_.queue));
    const auto now = std::chrono::steady_clock::now();
    parts_ += (parts_.empty() ? "" : ", ") + name + " " +
              std::to_string(std::chrono::duration<double, std::milli>(now - last_).count()) + " ms";
    last_ = now;
  }
  const std::string& parts() const { return parts_; }

 private:
  bool on_;
  State& st_;
  std::chrono::steady_clock::time_point last_;
  std::string parts_;
};

/// One direction's results on the device: squared distances and indices, two per query (match_u8_merge's and
/// match_l2_top2's layout).
struct Top2Buffers {
  cl_mem dist = nullptr, index = nullptr;
};

Top2Buffers top2_buffers(State& st, const char* name, int n) {
  return {st.buffer(std::string(name) + ".distance", 2 * std::size_t(n) * sizeof(float)),
          st.buffer(std::string(name) + ".index", 2 * std::size_t(n) * sizeof(cl_int))};
}

/// query -> train nearest two into `fwd` and, when `bwd` is given, train -> query into *bwd, from one packing
/// and upload of each side (the backward pass runs the same kernels with the sides' roles swapped). Both
/// sides are non-empty.
void nearest_two_on_device(detail::ContextImpl& ctx, State& st, const detail::FeatureView& query,
                           const detail::FeatureView& train, const Top2Buffers& fwd, const Top2Buffers* bwd,
                           PartClock& part) {
  const int nq = query.count, nt = train.count, dim = query.dim;
  const bool on_host = dynamic_cast<const DeviceDescriptors*>(query.device) == nullptr &&
                       dynamic_cast<const DeviceDescriptors*>(train.device) == nullptr;
  if (try_u8(st, dim)) {
    MatchShape shape{};
    std::string options;
    cl_kernel k = u8_kernel(st, dim, shape, options);
    // By default a GPU takes the u8 path only with dp4a: the portable form's byte extractions cost more than
    // the float kernel's fused multiply-adds, and the khr form never ran on a GPU (dot4_candidates; match_variant
    // 2 forces the path, match_dot4 the form).
    if (st.match_variant == 2 || st.match_dot4 == 2) {
      PackedSide q8, t8;
      // Host descriptors are packed on the host (a quarter of the upload); device copies on the device.
      const bool exact = on_host ? pack_host_sides(ctx, st, query, train, q8, t8)
                                 : pack_device_sides(st, options, descriptors_on_device(st, query, "match.query"), nq,
                                                     descriptors_on_device(st, train, "match.train"), nt, dim, q8, t8);
      part(on_host ? "u8 packing on the host and uploads" : "u8 packing on the device");
      if (exact) {
        run_u8(st, k, shape, options, q8, nq, t8, nt, fwd.dist, fwd.index, "match.u8.partial");
        if (bwd) run_u8(st, k, shape, options, t8, nt, q8, nq, bwd->dist, bwd->index, "match.u8.back_partial");
        part("u8 kernels (dot products: " +
             std::string(st.match_dot4 == 1 ? "khr" : st.match_dot4 == 2 ? "dp4a PTX" : "portable") + ")");
        return;
      }
    }
  }
  const cl_mem q = descriptors_on_device(st, query, "match.query"), t = descriptors_on_device(st, train, "match.train");
  part("float uploads");
  run_float(st, dim, q, nq, t, nt, fwd.dist, fwd.index);
  if (bwd) run_float(st, dim, t, nt, q, nq, bwd->dist, bwd->index);
  part("float kernels");
}

/// match_filter.cl over the device results: the tests and the kept matches compacted in query order into
/// `out` (record 0 the count); returns the buffer. Two launches, no read-back.
cl_mem filter_on_device(State& st, const Top2Buffers& fwd, const Top2Buffers* bwd, int nq, const MatchOptions& options) {
  constexpr const char* kFilterProgram = "match_filter.cl";
  cl_kernel count = st.kernel(kFilterProgram, "match_filter_count", "");
  cl_kernel compact = st.kernel(kFilterProgram, "match_filter_compact", "");
  // A power of two (the kernels' tree reduction) that both kernels allow, at most 256.
  const std::size_t allowed = std::min(st.work_group_1d(count, 256), st.work_group_1d(compact, 256));
  std::size_t local = 1;
  while (local * 2 <= allowed) local *= 2;
  const std::size_t groups = (std::size_t(nq) + local - 1) / local, global = groups * local;
  const cl_mem group_counts = st.buffer("match.filter.groups", groups * sizeof(cl_int));
  const cl_mem out = st.buffer("match.filter.out", (std::size_t(nq) + 1) * 4 * sizeof(cl_int));
  const cl_mem back = bwd ? bwd->index : fwd.index;  // not read without the mutual check
  const cl_int mutual = bwd ? 1 : 0;
  const cl_double ratio = options.ratio, max_distance = options.max_distance;
  set_args(count, fwd.dist, fwd.index, back, cl_int(nq), mutual, ratio, max_distance, group_counts);
  SPECTRASIFT_CL_CHECK(clSetKernelArg(count, 8, local * sizeof(cl_int), nullptr));
  SPECTRASIFT_CL_CHECK(clEnqueueNDRangeKernel(st.queue, count, 1, nullptr, &global, &local, 0, nullptr, nullptr));
  set_args(compact, fwd.dist, fwd.index, back, cl_int(nq), mutual, ratio, max_distance, group_counts, out);
  SPECTRASIFT_CL_CHECK(clSetKernelArg(compact, 9, local * sizeof(cl_int), nullptr));
  SPECTRASIFT_CL_CHECK(clEnqueueNDRangeKernel(st.queue, compact, 1, nullptr, &global, &local, 0, nullptr, nullptr));
  return out;
}

}  // namespace

void match_top2(detail::ContextImpl& ctx, const detail::FeatureView& query, const detail::FeatureView& train,
                Top2* out) {
  const int nq = query.count, nt = train.count;
  if (nq <= 0) return;
  if (nt <= 0) {  // nothing to match: the CPU's empty result (indices -1, distances +inf)
    std::fill(out, out + nq, Top2{});
    return;
  }
  State& st = state(ctx);
  PartClock part(ctx, st);
  const Top2Buffers fwd = top2_buffers(st, "match", nq);
  nearest_two_on_device(ctx, st, query, train, fwd, nullptr, part);
  std::vector<float> d(2 * std::size_t(nq));
  std::vector<cl_int> i(2 * std::size_t(nq));
  SPECTRASIFT_CL_CHECK(clEnqueueReadBuffer(st.queue, fwd.index, CL_FALSE, 0, i.size() * sizeof(cl_int), i.data(), 0,
                                           nullptr, nullptr));
  SPECTRASIFT_CL_CHECK(
      clEnqueueReadBuffer(st.queue, fwd.dist, CL_TRUE, 0, d.size() * sizeof(float), d.data(), 0, nullptr, nullptr));
  for (int r = 0; r < nq; ++r) {
    Top2& o = out[r];
    o.best1 = i[2 * std::size_t(r)];
    o.best2 = i[2 * std::size_t(r) + 1];
    o.distance1 = std::sqrt(d[2 * std::size_t(r)]);
    o.distance2 = std::sqrt(d[2 * std::size_t(r) + 1]);
  }
  part("read-back and square roots");
  if (ctx.options.verbose)
    ctx.log("match_top2 on opencl: " + std::to_string(nq) + " x " + std::to_string(nt) + ": " + part.parts());
}

void match_filtered(detail::ContextImpl& ctx, const detail::FeatureView& query, const detail::FeatureView& train,
                    const MatchOptions& options, std::vector<Match>& out) {
  State& st = state(ctx);
  const int nq = query.count, nt = train.count;
  PartClock part(ctx, st);
  const Top2Buffers fwd = top2_buffers(st, "match", nq);
  const Top2Buffers bwd = options.mutual ? top2_buffers(st, "match.back", nt) : Top2Buffers{};
  nearest_two_on_device(ctx, st, query, train, fwd, options.mutual ? &bwd : nullptr, part);
  const cl_mem kept = filter_on_device(st, fwd, options.mutual ? &bwd : nullptr, nq, options);
  part("filter kernels");
  // One read-back of the bounded buffer (count and up to nq records): cheaper than reading the count first and
  // then the matches (a second round trip) for the few hundred KB of a large call.
  std::vector<cl_int> records((std::size_t(nq) + 1) * 4);
  SPECTRASIFT_CL_CHECK(clEnqueueReadBuffer(st.queue, kept, CL_TRUE, 0, records.size() * sizeof(cl_int),
                                           records.data(), 0, nullptr, nullptr));
  const int count = records[0];
  out.reserve(out.size() + std::size_t(count));
  for (int k = 1; k <= count; ++k) {
    const cl_int* r = &records[4 * std::size_t(k)];
    Match m{r[0], r[1], 0.0f, 0.0f};
    std::memcpy(&m.distance, &r[2], sizeof(float));
    std::memcpy(&m.second_distance, &r[3], sizeof(float));
    out.push_back(m);
  }
  part("read-back of " + std::to_string(count) + " matches");
  if (ctx.options.verbose)
    ctx.log(std::string("match_features on opencl: ") + std::to_string(nq) + " x " + std::to_string(nt) +
            (options.mutual ? " and back" : "") + ": " + part.parts());
}

void State::match_top2(detail::ContextImpl& ctx, const detail::FeatureView& query, const detail::FeatureView& train,
                       Top2* out) {
  opencl::match_top2(ctx, query, train, out);
}

void State::match_filtered(detail::ContextImpl& ctx, const detail::FeatureView& query,
                           const detail::FeatureView& train, const MatchOptions& options, std::vector<Match>& out) {
  // The filter kernels decide in double (numeric/match_filter.h); without doubles the host decides.
  if (!has_fp64()) return BackendImpl::match_filtered(ctx, query, train, options, out);
  opencl::match_filtered(ctx, query, train, options, out);
}

}  // namespace spectrasift::opencl

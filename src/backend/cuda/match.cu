// CUDA descriptor matching (BackendImpl::match_top2): the nearest two train descriptors of every query, with
// backend/cpu/match.cpp's exact numbers. Two kernels:
// - descriptors whose values are all integers 0..255 (SIFT's as exported) take the u8 path on compute
//   capability 8.0 and later (kernels/match_u8_mma.cuh: tensor-core integer dot products, exact): host
//   descriptors are packed to bytes on the host (threads of the staging pool, into pinned memory, uploaded in
//   chunks beside the packing: a quarter of the float bytes), device copies (Features::device, left there by CUDA SIFT) on the device;
// - any other values, the float kernel (kernels/match_l2_top2.cuh), from the device copy or a float upload.
// docs/performance/matching.md, 'GPU matching: the u8 path'. match_features' entry (match_filtered) runs both
// directions from one packing / upload, the tests and the compaction on the device (kernels/match_filter.cuh)
// and reads back only the kept matches ('GPU matching: ratio test and mutual check').
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <string>

#include "backend/cuda/check.hpp"
#include "backend/cuda/device_features.hpp"
#include "backend/cuda/host_copy.hpp"
#include "backend/cuda/kernels/match_filter.cuh"
#include "backend/cuda/kernels/match_l2_top2.cuh"
#include "backend/cuda/kernels/match_u8_mma.cuh"
#include "backend/cuda/state.hpp"
#include "backend/descriptor_u8_job.hpp"
#include "core/context_impl.hpp"

namespace spectrasift::cuda {

namespace {

static_assert(sizeof(kernels::MatchTop2) == sizeof(Top2), "Top2 is two ints and two floats");
static_assert(sizeof(kernels::MatchRecord) == sizeof(Match) && offsetof(Match, query) == 0 &&
                  offsetof(Match, train) == offsetof(kernels::MatchRecord, train) &&
                  offsetof(Match, distance) == offsetof(kernels::MatchRecord, distance) &&
                  offsetof(Match, second_distance) == offsetof(kernels::MatchRecord, second_distance),
              "Match and MatchRecord have one layout");
static_assert(offsetof(Top2, best1) == offsetof(kernels::MatchTop2, best1) &&
                  offsetof(Top2, best2) == offsetof(kernels::MatchTop2, best2) &&
                  offsetof(Top2, distance1) == offsetof(kernels::MatchTop2, distance1) &&
                  offsetof(Top2, distance2) == offsetof(kernels::MatchTop2, distance2),
              "Top2 and MatchTop2 have one layout");

unsigned blocks_for(int items, int per_block) { return unsigned((items + per_block - 1) / per_block); }

// The device copy of one side when it is this device's, else nullptr.
const CudaDeviceFeatures* device_copy(const State& st, const detail::FeatureView& v) {
  const auto* d = dynamic_cast<const CudaDeviceFeatures*>(v.device);
  return d && d->device() == st.device ? d : nullptr;
}

// The float descriptors of one side on the device: the device copy, else an upload into the named buffer
// (on the compute stream; pageable memory is staged before the call returns, so a side of bytes is converted
// into a temporary vector of floats: the rare mixed call of a device copy and host bytes, or a GPU without
// the u8 kernel).
const float* device_descriptors(State& st, const detail::FeatureView& v, const char* buffer_name) {
  if (const CudaDeviceFeatures* d = device_copy(st, v)) return d->descriptors();
  const std::size_t values = std::size_t(v.count) * std::size_t(v.dim), bytes = values * sizeof(float);
  DeviceBuffer& b = st.buffer(buffer_name, std::max<std::size_t>(bytes, 16));
  std::vector<float> floats;
  if (v.bytes) floats.assign(v.bytes, v.bytes + values);
  SPECTRASIFT_CUDA_CHECK(cudaMemcpyAsync(b.ptr, v.bytes ? floats.data() : v.descriptors, bytes,
                                         cudaMemcpyHostToDevice, st.compute));
  return b.as<const float>();
}

// Both sides as bytes and norms on the device, laid out as [query bytes | train bytes | query norms | train
// norms] in buffer "match.u8".
struct PackedSides {
  const std::uint8_t* query = nullptr;
  const std::uint8_t* train = nullptr;
  const int* query_norm = nullptr;
  const int* train_norm = nullptr;
};

PackedSides packed_layout(std::uint8_t* base, int nq, int nt) {
  const std::size_t qb = std::size_t(nq) * kernels::kU8Dim, tb = std::size_t(nt) * kernels::kU8Dim;
  return {base, base + qb, reinterpret_cast<const int*>(base + qb + tb),
          reinterpret_cast<const int*>(base + qb + tb) + nq};
}

std::size_t packed_bytes(int nq, int nt) {
  return (std::size_t(nq) + std::size_t(nt)) * (kernels::kU8Dim + sizeof(int));
}

// Host descriptors of both sides packed to bytes and norms in pinned memory by the staging pool's threads, each
// chunk of bytes uploaded as soon as it is packed (detail::U8PackJob), the norms last. False when a value is not
// an integer 0..255 (chunks already handed over stay enqueued; the staging buffer's reuse waits for them).
bool pack_on_host(detail::ContextImpl& ctx, State& st, const detail::FeatureView& query,
                  const detail::FeatureView& train, std::uint8_t* device_base) {
  HostCopyPool& pool = st.host_copy_pool(ctx.cpu_threads());
  pool.wake();  // sleeping workers start to spin during the set-up below
  const int nq = query.count, nt = train.count;
  const std::size_t bytes = packed_bytes(nq, nt);
  // The staging buffer may still be read by the upload of a call that threw before its read-back (an event
  // never recorded returns at once).
  const cudaEvent_t uploaded = st.match_events[0];
  SPECTRASIFT_CUDA_CHECK(cudaEventSynchronize(uploaded));
  PinnedBuffer& pin = st.pinned_buffer("match.u8.staging", bytes);
  auto* host = pin.as<std::uint8_t>();
  const std::size_t qb = std::size_t(nq) * kernels::kU8Dim, tb = std::size_t(nt) * kernels::kU8Dim;
  auto* norms = reinterpret_cast<std::int32_t*>(host + qb + tb);
  detail::U8PackJob job({query.descriptors, std::size_t(nq), host, norms, query.bytes},
                        {train.descriptors, std::size_t(nt), host + qb, norms + nq, train.bytes}, kernels::kU8Dim);
  const auto upload = [&](const detail::U8Chunk& c) {
    const std::size_t offset = (c.side ? qb : 0) + c.begin * kernels::kU8Dim;
    SPECTRASIFT_CUDA_CHECK(cudaMemcpyAsync(device_base + offset, host + offset, (c.end - c.begin) * kernels::kU8Dim,
                                           cudaMemcpyHostToDevice, st.compute));
  };
  pool.start(pool.threads(), [&job](int) { job.pack_all(); });
  bool exact = false;
  try {
    exact = job.pack_and_upload(upload);
  } catch (...) {
    pool.finish();  // the workers still read `job`
    (void)cudaEventRecord(uploaded, st.compute);
    throw;
  }
  pool.finish();
  if (exact)
    SPECTRASIFT_CUDA_CHECK(cudaMemcpyAsync(device_base + qb + tb, norms, bytes - qb - tb, cudaMemcpyHostToDevice,
                                           st.compute));
  SPECTRASIFT_CUDA_CHECK(cudaEventRecord(uploaded, st.compute));
  return exact;
}

// Float descriptors on the device packed there (match_u8_pack); the flag is read back (one round trip):
// false when a value of either side is not an integer 0..255.
bool pack_on_device(State& st, const float* q, int nq, const float* t, int nt, std::uint8_t* device_base) {
  int* flag = st.buffer("match.u8.inexact", sizeof(int)).as<int>();
  SPECTRASIFT_CUDA_CHECK(cudaMemsetAsync(flag, 0, sizeof(int), st.compute));
  const std::size_t qb = std::size_t(nq) * kernels::kU8Dim, tb = std::size_t(nt) * kernels::kU8Dim;
  int* norms = reinterpret_cast<int*>(device_base + qb + tb);
  kernels::match_u8_pack<<<blocks_for(nq, 8), 256, 0, st.compute>>>(
      q, nq, reinterpret_cast<std::uint32_t*>(device_base), norms, flag);
  SPECTRASIFT_CUDA_CHECK_LAUNCH();
  kernels::match_u8_pack<<<blocks_for(nt, 8), 256, 0, st.compute>>>(
      t, nt, reinterpret_cast<std::uint32_t*>(device_base + qb), norms + nq, flag);
  SPECTRASIFT_CUDA_CHECK_LAUNCH();
  int* host_flag = st.pinned_buffer("match.u8.flag", sizeof(int)).as<int>();
  SPECTRASIFT_CUDA_CHECK(cudaMemcpyAsync(host_flag, flag, sizeof(int), cudaMemcpyDeviceToHost, st.compute));
  SPECTRASIFT_CUDA_CHECK(cudaStreamSynchronize(st.compute));
  return *host_flag == 0;
}

// The u8 kernel split over the train set so that the grid has about 8 blocks per SM (the last wave's
// imbalance stays small), then the merge of the splits into the Top2 records.
void run_u8(State& st, const PackedSides& p, int nq, int nt, kernels::MatchTop2* result, const char* partial_name) {
  const int query_blocks = int(blocks_for(nq, kernels::kU8BlockQueries));
  const int tiles = int(blocks_for(nt, kernels::kU8TileTrains));
  const int want = std::clamp((8 * st.props.multiProcessorCount + query_blocks - 1) / query_blocks, 1, tiles);
  const int per_split = (tiles + want - 1) / want * kernels::kU8TileTrains;  // whole tiles per split
  const int splits = (nt + per_split - 1) / per_split;
  auto* partial = st.buffer(partial_name, std::size_t(splits) * std::size_t(nq) * sizeof(kernels::MatchU8Best))
                      .as<kernels::MatchU8Best>();
  kernels::match_u8_top2<<<dim3(unsigned(query_blocks), unsigned(splits)), kernels::kU8Threads, 0, st.compute>>>(
      p.query, nq, p.train, p.train_norm, nt, per_split, partial);
  SPECTRASIFT_CUDA_CHECK_LAUNCH();
  kernels::match_u8_finish<<<blocks_for(nq, 256), 256, 0, st.compute>>>(partial, nq, splits, p.query_norm, result);
  SPECTRASIFT_CUDA_CHECK_LAUNCH();
}

// The float kernel (any values) over float descriptors on the device.
void run_float(State& st, const float* q, int nq, const float* t, int nt, int dim, kernels::MatchTop2* result) {
  float* qn = st.buffer("match.query_norm", std::size_t(nq) * sizeof(float)).as<float>();
  float* tn = st.buffer("match.train_norm", std::size_t(nt) * sizeof(float)).as<float>();
  kernels::match_norms<<<blocks_for(nq, 256), 256, 0, st.compute>>>(q, nq, dim, qn);
  SPECTRASIFT_CUDA_CHECK_LAUNCH();
  kernels::match_norms<<<blocks_for(nt, 256), 256, 0, st.compute>>>(t, nt, dim, tn);
  SPECTRASIFT_CUDA_CHECK_LAUNCH();
  kernels::match_l2_top2<<<blocks_for(nq, kernels::kMatchQueries), kernels::kMatchThreads, 0, st.compute>>>(
      q, qn, nq, t, tn, nt, dim, result);
  SPECTRASIFT_CUDA_CHECK_LAUNCH();
}


// With ContextOptions::verbose, the parts of one call (docs/performance/matching.md, 'GPU matching: where the
// time goes'): events on the compute stream at the start, after the uploads, after the kernels and after the
// read-back, and the host's packing and final copy by the clock (the chunks' uploads run beside the packing: what
// is printed as uploads is what is left of them after it). Nothing is recorded otherwise.
class MatchTimer {
 public:
  MatchTimer(State& st, bool on) : st_(st), on_(on) {
    if (!on_) return;
    for (cudaEvent_t& e : events_) SPECTRASIFT_CUDA_CHECK(cudaEventCreate(&e));
    start_ = std::chrono::steady_clock::now();
  }
  ~MatchTimer() {
    if (on_)
      for (cudaEvent_t e : events_) cudaEventDestroy(e);
  }
  MatchTimer(const MatchTimer&) = delete;
  MatchTimer& operator=(const MatchTimer&) = delete;
  // Marks point i (0 start, 1 uploaded, 2 computed, 3 read back) on the compute stream.
  void mark(int i) {
    if (on_) SPECTRASIFT_CUDA_CHECK(cudaEventRecord(events_[i], st_.compute));
  }
  // Adds the host's time in `f` to the packing time.
  template <class F> auto host_pack(F&& f) {
    const auto t0 = std::chrono::steady_clock::now();
    auto r = f();
    pack_ms_ += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    return r;
  }
  // The line, after the final synchronisation and copy-out.
  std::string report(const char* entry, int nq, int nt, const char* path) const {
    if (!on_) return {};
    float ms[3] = {};
    for (int i = 0; i < 3; ++i) SPECTRASIFT_CUDA_CHECK(cudaEventElapsedTime(&ms[i], events_[i], events_[i + 1]));
    const double total = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_).count();
    char line[320];
    std::snprintf(line, sizeof line,
                  "%s on cuda: %d x %d, %s: host packing %.3f ms, uploads after it %.3f ms, kernels %.3f ms, "
                  "read-back %.3f ms, whole call %.3f ms",
                  entry, nq, nt, path, pack_ms_, double(ms[0]) - pack_ms_, double(ms[1]), double(ms[2]), total);
    return line;
  }

 private:
  State& st_;
  bool on_;
  cudaEvent_t events_[4] = {};
  std::chrono::steady_clock::time_point start_;
  double pack_ms_ = 0;
};

// query -> train nearest two into `fwd` and, when `bwd` is given, train -> query into it, from one packing /
// upload of each side (the backward pass runs the same kernels with the sides' roles swapped). Both sides are
// non-empty. Marks point 1 (uploaded) of the timer; returns the path's name for the log.
const char* nearest_two_on_device(detail::ContextImpl& ctx, State& st, const detail::FeatureView& query,
                                  const detail::FeatureView& train, kernels::MatchTop2* fwd, kernels::MatchTop2* bwd,
                                  MatchTimer& timer) {
  const int nq = query.count, nt = train.count;
  const bool u8_capable = st.props.major >= 8 && query.dim == kernels::kU8Dim && train.dim == kernels::kU8Dim;
  const bool on_host = device_copy(st, query) == nullptr && device_copy(st, train) == nullptr;
  bool u8 = false;
  const float* q = nullptr;
  const float* t = nullptr;
  std::uint8_t* base = nullptr;
  if (u8_capable) {
    base = st.buffer("match.u8", packed_bytes(nq, nt)).as<std::uint8_t>();
    if (on_host) {
      u8 = timer.host_pack([&] { return pack_on_host(ctx, st, query, train, base); });
    } else {
      // Float copies on the device (the host side, if any, uploaded as floats: a mixed call is rare), packed
      // there; the float kernel reads the same copies when the values are not all bytes.
      q = device_descriptors(st, query, "match.query");
      t = device_descriptors(st, train, "match.train");
      u8 = pack_on_device(st, q, nq, t, nt, base);
    }
  }
  if (!u8 && q == nullptr) {
    q = device_descriptors(st, query, "match.query");
    t = device_descriptors(st, train, "match.train");
  }
  timer.mark(1);
  if (u8) {
    const PackedSides p = packed_layout(base, nq, nt);
    run_u8(st, p, nq, nt, fwd, "match.u8.partial");
    if (bwd) run_u8(st, PackedSides{p.train, p.query, p.train_norm, p.query_norm}, nt, nq, bwd, "match.u8.back_partial");
  } else {
    run_float(st, q, nq, t, nt, query.dim, fwd);
    if (bwd) run_float(st, t, nt, q, nq, query.dim, bwd);
  }
  return u8 ? (on_host ? "u8 tensor cores, packed on the host" : "u8 tensor cores, packed on the device") : "float kernel";
}

}  // namespace

void State::match_top2(detail::ContextImpl& ctx, const detail::FeatureView& query, const detail::FeatureView& train,
                       Top2* out) {
  const int nq = query.count, nt = train.count;
  if (nq <= 0) return;
  if (nt <= 0) {
    std::fill(out, out + nq, Top2{});
    return;
  }
  activate();
  MatchTimer timer(*this, ctx.options.verbose);
  timer.mark(0);
  auto* result = buffer("match.top2", std::size_t(nq) * sizeof(Top2)).as<kernels::MatchTop2>();
  const char* path = nearest_two_on_device(ctx, *this, query, train, result, nullptr, timer);
  timer.mark(2);
  // Read back through pinned memory (a DMA without the driver's pageable staging), then into the caller's array.
  auto* host = pinned_buffer("match.top2_host", std::size_t(nq) * sizeof(Top2)).as<Top2>();
  SPECTRASIFT_CUDA_CHECK(
      cudaMemcpyAsync(host, result, std::size_t(nq) * sizeof(Top2), cudaMemcpyDeviceToHost, compute));
  timer.mark(3);
  SPECTRASIFT_CUDA_CHECK(cudaStreamSynchronize(compute));
  std::memcpy(out, host, std::size_t(nq) * sizeof(Top2));
  if (ctx.options.verbose) ctx.log(timer.report("match_top2", nq, nt, path));
}

void State::match_filtered(detail::ContextImpl& ctx, const detail::FeatureView& query,
                           const detail::FeatureView& train, const MatchOptions& options, std::vector<Match>& out) {
  const int nq = query.count, nt = train.count;
  activate();
  MatchTimer timer(*this, ctx.options.verbose);
  timer.mark(0);
  auto* fwd = buffer("match.top2", std::size_t(nq) * sizeof(Top2)).as<kernels::MatchTop2>();
  kernels::MatchTop2* bwd =
      options.mutual ? buffer("match.top2_back", std::size_t(nt) * sizeof(Top2)).as<kernels::MatchTop2>() : nullptr;
  const char* path = nearest_two_on_device(ctx, *this, query, train, fwd, bwd, timer);
  // The tests and the compaction (kernels/match_filter.cuh), then one read-back of the bounded buffer (count and
  // up to nq records, 16 bytes each): cheaper than a count round trip (~10-20 us) and a second copy.
  const unsigned blocks = blocks_for(nq, kernels::kFilterThreads);
  int* block_counts = buffer("match.filter.blocks", std::size_t(blocks) * sizeof(int)).as<int>();
  const std::size_t record_bytes = (std::size_t(nq) + 1) * sizeof(kernels::MatchRecord);
  auto* records = buffer("match.filter.out", record_bytes).as<kernels::MatchRecord>();
  kernels::match_filter_count<<<blocks, kernels::kFilterThreads, 0, compute>>>(fwd, bwd, nq, options.ratio,
                                                                                options.max_distance, block_counts);
  SPECTRASIFT_CUDA_CHECK_LAUNCH();
  kernels::match_filter_compact<<<blocks, kernels::kFilterThreads, 0, compute>>>(
      fwd, bwd, nq, options.ratio, options.max_distance, block_counts, records);
  SPECTRASIFT_CUDA_CHECK_LAUNCH();
  timer.mark(2);
  auto* host = pinned_buffer("match.filter_host", record_bytes).as<kernels::MatchRecord>();
  SPECTRASIFT_CUDA_CHECK(cudaMemcpyAsync(host, records, record_bytes, cudaMemcpyDeviceToHost, compute));
  timer.mark(3);
  SPECTRASIFT_CUDA_CHECK(cudaStreamSynchronize(compute));
  const std::size_t count = std::size_t(host[0].query);
  const std::size_t first = out.size();
  out.resize(first + count);
  std::memcpy(out.data() + first, host + 1, count * sizeof(Match));
  if (ctx.options.verbose) ctx.log(timer.report(options.mutual ? "match_features (mutual)" : "match_features", nq, nt, path));
}

}  // namespace spectrasift::cuda

// The CUDA backend's measurement hooks (see cuda_hooks.hpp): knobs of State::tuning, telemetry, and timings of
// the device alone. Part of spectrasift_bench_hooks, linked by tests and benchmarks only.
#include "hooks/cuda_hooks.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cuda/check.hpp"
#include "backend/cuda/spectral_compute.hpp"
#include "backend/cuda/spectral_plan.hpp"
#include "backend/cuda/state.hpp"
#include "backend/cuda/stream_pipeline.hpp"

namespace spectrasift::cuda::bench {
namespace {
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

/// Milliseconds of `reps` runs of enqueue(stream) after one warm-up, between two timing events of the hook's own.
template <class F> std::vector<double> time_on(cudaStream_t s, int reps, F&& enqueue) {
  EventSet ev(EventSet::kTiming);
  std::vector<double> t;
  for (int i = 0; i <= reps; ++i) {
    SPECTRASIFT_CUDA_CHECK(cudaEventRecord(ev[0], s));
    enqueue(s);
    SPECTRASIFT_CUDA_CHECK(cudaEventRecord(ev[1], s));
    SPECTRASIFT_CUDA_CHECK(cudaEventSynchronize(ev[1]));
    if (i > 0) t.push_back(ms_between(ev[0], ev[1]));
  }
  return t;
}
}  // namespace

double device_copy_gbps(Context& ctx, std::size_t bytes, int reps) {
  State& st = state(ctx.impl());
  st.activate();
  auto& a = st.buffer("bench.copy_a", bytes);
  auto& b = st.buffer("bench.copy_b", bytes);
  SPECTRASIFT_CUDA_CHECK(cudaMemsetAsync(a.ptr, 1, bytes, st.compute));
  const auto t = time_on(st.compute, reps, [&](cudaStream_t s) {
    SPECTRASIFT_CUDA_CHECK(cudaMemcpyAsync(b.ptr, a.ptr, bytes, cudaMemcpyDeviceToDevice, s));
  });
  return 2.0 * double(bytes) / (median(t) * 1e6);
}

std::vector<float> read_float_buffer(Context& ctx, const std::string& name, std::size_t floats) {
  State& st = state(ctx.impl());
  st.activate();
  const auto it = st.buffers.find(name);
  if (it == st.buffers.end() || it->second.bytes < floats * sizeof(float))
    throw Error(ErrorCode::kInvalidArgument, "read_float_buffer: no buffer " + name + " of that size", "cuda");
  std::vector<float> v(floats);
  SPECTRASIFT_CUDA_CHECK(cudaDeviceSynchronize());
  SPECTRASIFT_CUDA_CHECK(cudaMemcpy(v.data(), it->second.ptr, floats * sizeof(float), cudaMemcpyDeviceToHost));
  return v;
}

void fill_buffer(Context& ctx, const std::string& name, unsigned char byte) {
  State& st = state(ctx.impl());
  st.activate();
  const auto it = st.buffers.find(name);
  if (it == st.buffers.end()) throw Error(ErrorCode::kInvalidArgument, "fill_buffer: no buffer " + name, "cuda");
  SPECTRASIFT_CUDA_CHECK(cudaDeviceSynchronize());
  SPECTRASIFT_CUDA_CHECK(cudaMemset(it->second.ptr, byte, it->second.bytes));
}

void set_score_block_bytes(Context& ctx, std::size_t bytes) { state(ctx.impl()).tuning.score_block_bytes = bytes; }

void set_fused_best(Context& ctx, bool on) { state(ctx.impl()).tuning.fused_best = on; }

void set_stage_chunk_bytes(Context& ctx, std::size_t chunk_bytes) { state(ctx.impl()).tuning.stage_chunk_bytes = chunk_bytes; }

void set_fused_wgmma(Context& ctx, bool on) { state(ctx.impl()).tuning.fused_wgmma = on; }

void set_demote_last_chunk(Context& ctx, bool on) { state(ctx.impl()).tuning.demote_last_chunk = on; }

void set_trace(Context& ctx, bool on) { state(ctx.impl()).tuning.trace_on = on; }

std::string last_trace(Context& ctx) { return state(ctx.impl()).telemetry.trace; }

void set_copy_threads(Context& ctx, int threads) { state(ctx.impl()).tuning.copy_threads = std::max(0, threads); }

void set_one_ref_rows(Context& ctx, bool on) { state(ctx.impl()).tuning.one_ref_rows = on; }

void set_pack_policy(Context& ctx, int policy) {
  if (policy < 0 || policy > 2) throw Error(ErrorCode::kInvalidArgument, "set_pack_policy: policy " + std::to_string(policy));
  state(ctx.impl()).tuning.pack_policy = PackPolicy(policy);
}

double last_pack_ratio(Context& ctx) { return state(ctx.impl()).telemetry.last_pack_ratio; }

double last_packed_share(Context& ctx) { return state(ctx.impl()).telemetry.last_packed_share; }

void set_pack_isa(Context& ctx, int isa) {
  using detail::PackIsa;
  if (isa < 0 || isa > int(PackIsa::kAvx512Gfni)) throw Error(ErrorCode::kInvalidArgument, "set_pack_isa: " + std::to_string(isa));
  state(ctx.impl()).tuning.pack_max_isa = PackIsa(isa);
}

bool fused_wgmma_available(Context& ctx) {
#if defined(SPECTRASIFT_CUDA_WGMMA)
  const State& st = state(ctx.impl());
  return st.props.major == 9 && st.props.minor == 0;
#else
  (void)ctx;
  return false;
#endif
}

std::size_t device_memory_used_bytes(Context& ctx) {
  State& st = state(ctx.impl());
  st.activate();
  SPECTRASIFT_CUDA_CHECK(cudaDeviceSynchronize());
  std::size_t free_b = 0, total_b = 0;
  SPECTRASIFT_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  return total_b - free_b;
}

unsigned long long fused_overflow_pixels(Context& ctx) {
  State& st = state(ctx.impl());
  st.activate();
  const auto it = st.buffers.find("spectral.best_counters");
  if (it == st.buffers.end()) return 0;
  unsigned c[2] = {0, 0};
  SPECTRASIFT_CUDA_CHECK(cudaMemcpy(c, it->second.ptr, sizeof c, cudaMemcpyDeviceToHost));
  return c[1];
}

double pinned_upload_ms(Context& ctx, std::size_t bytes, int reps) {
  State& st = state(ctx.impl());
  st.activate();
  auto& h = st.pinned_buffer("bench.pinned", bytes);
  std::memset(h.ptr, 1, bytes);
  auto& d = st.buffer("bench.upload", bytes);
  return median(time_on(st.copy, reps, [&](cudaStream_t s) {
    SPECTRASIFT_CUDA_CHECK(cudaMemcpyAsync(d.ptr, h.ptr, bytes, cudaMemcpyHostToDevice, s));
  }));
}

void* pinned_host_alloc(Context& ctx, std::size_t bytes) {
  state(ctx.impl()).activate();
  void* p = nullptr;
  SPECTRASIFT_CUDA_CHECK(cudaMallocHost(&p, bytes));
  return p;
}

void pinned_host_free(void* p) { cudaFreeHost(p); }

double resident_compute_ms(Context& ctx, const detail::CubeView& cube, const detail::PreparedReferences& refs,
                           const SpectralOptions& options, int reps, SpectralResult* result, bool force_exact) {
  using namespace spectral;
  State& st = state(ctx.impl());
  st.activate();
  HostCopyPool& pool = st.host_copy_pool(ctx.impl().cpu_threads());
  // force_exact for this plan only: the knob goes back to its value even when the plan throws.
  struct Restore {
    bool& knob;
    bool was;
    ~Restore() { knob = was; }
  } restore{st.tuning.force_exact, st.tuning.force_exact};
  st.tuning.force_exact = force_exact;
  Plan pl = make_plan(st, pool, cube, refs, options, cube.lines, true);
  st.tuning.force_exact = restore.was;
  auto& pin = st.pinned_buffer("bench.cube", pl.chunk_bytes);
  auto& dev = st.buffer("bench.cube_dev", pl.chunk_bytes);
  std::vector<CopyPiece> pieces;
  chunk_pieces(pl, 0, cube.lines, pin.ptr, pieces);
  pool.copy(pieces, std::size_t(1) << 18);
  SPECTRASIFT_CUDA_CHECK(cudaMemcpyAsync(dev.ptr, pin.ptr, pl.chunk_bytes, cudaMemcpyHostToDevice, st.compute));
  const auto t = time_on(st.compute, reps, [&](cudaStream_t s) { compute_chunk(pl, dev.ptr, 0, cube.lines, s); });
  if (result) {
    check_result_sizes(*result, pl);
    download(pl, *result, 0, std::size_t(cube.samples) * cube.lines, 0);
  }
  return median(t);
}

}  // namespace spectrasift::cuda::bench

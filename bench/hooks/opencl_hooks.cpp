// Ceilings for the benchmarks: device copy bandwidth and pinned upload time; the SIFT stage profile (see
// opencl_hooks.hpp).
#include "hooks/opencl_hooks.hpp"

#include <algorithm>
#include <vector>

#include "backend/opencl/sift.hpp"
#include "backend/opencl/state.hpp"

namespace spectrasift::opencl::bench {

namespace {
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}
}  // namespace

double device_copy_gbps(detail::ContextImpl& ctx, std::size_t bytes, int reps) {
  State& s = state(ctx);
  bytes = std::min(bytes, s.max_alloc);
  cl_mem a = s.buffer("bench.copy_a", bytes);
  cl_mem b = s.buffer("bench.copy_b", bytes);
  const unsigned char zero = 0;
  SPECTRASIFT_CL_CHECK(clEnqueueFillBuffer(s.queue, a, &zero, 1, 0, bytes, 0, nullptr, nullptr));
  std::vector<double> ms;
  for (int r = 0; r <= std::max(1, reps); ++r) {
    Event e;
    SPECTRASIFT_CL_CHECK(clEnqueueCopyBuffer(s.queue, a, b, 0, 0, bytes, 0, nullptr, &e.ev));
    SPECTRASIFT_CL_CHECK(clWaitForEvents(1, &e.ev));
    if (r > 0) ms.push_back(e.elapsed_ms());  // the first is the warm-up
  }
  const double t = median(ms);
  s.buffers.erase("bench.copy_a");
  s.buffers.erase("bench.copy_b");
  return t > 0 ? 2.0 * double(bytes) / (t * 1e6) : 0.0;
}

double pinned_upload_ms(detail::ContextImpl& ctx, std::size_t bytes, int reps) {
  State& s = state(ctx);
  PinnedBuffer& host = s.pinned("bench.pinned", bytes);
  std::fill_n(static_cast<unsigned char*>(host.host), bytes, static_cast<unsigned char>(1));
  cl_mem dev = s.buffer("bench.upload", bytes);
  std::vector<double> ms;
  for (int r = 0; r <= std::max(1, reps); ++r) {
    Event e;
    SPECTRASIFT_CL_CHECK(clEnqueueWriteBuffer(s.queue, dev, CL_FALSE, 0, bytes, host.host, 0, nullptr, &e.ev));
    SPECTRASIFT_CL_CHECK(clWaitForEvents(1, &e.ev));
    if (r > 0) ms.push_back(e.elapsed_ms());
  }
  s.buffers.erase("bench.upload");
  return median(ms);
}

namespace {
/// The OpenCL SIFT stages core keeps in the context (core/sift.cpp, slot "sift.stages.opencl"), or null.
SiftStagesOpenCL* sift_stages_of(detail::ContextImpl& ctx) {
  const auto it = ctx.plans.find("sift.stages.opencl");
  if (it == ctx.plans.end()) return nullptr;
  const auto* p = std::any_cast<std::shared_ptr<detail::SiftStages>>(&it->second);
  return p ? dynamic_cast<SiftStagesOpenCL*>(p->get()) : nullptr;
}
}  // namespace

bool set_sift_profiling(detail::ContextImpl& ctx, bool on) {
  SiftStagesOpenCL* st = sift_stages_of(ctx);
  if (st) st->set_profiling(on);
  return st != nullptr;
}

std::vector<std::pair<std::string, double>> sift_stage_ms(detail::ContextImpl& ctx) {
  std::vector<std::pair<std::string, double>> out;
  if (SiftStagesOpenCL* st = sift_stages_of(ctx))
    for (int s = 0; s < SiftStagesOpenCL::kStages; ++s)
      out.emplace_back(SiftStagesOpenCL::stage_name(s), st->stage_ms()[std::size_t(s)]);
  return out;
}

bool set_refit_variant(detail::ContextImpl& ctx, int variant) {
  auto* s = dynamic_cast<State*>(ctx.backend_impl.get());
  if (!s) return false;
  s->refit_variant = variant;
  return true;
}

}  // namespace spectrasift::opencl::bench

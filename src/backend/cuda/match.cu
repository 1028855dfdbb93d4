// CUDA descriptor matching (BackendImpl::match_top2): the nearest two train descriptors of every query in one
// kernel (kernels/match_l2_top2.cuh), with backend/cpu/match.cpp's exact numbers. Descriptors come from their
// device copy (Features::device, left there by CUDA SIFT) when dispatch found one, else they are uploaded.
#include <algorithm>
#include <cstddef>
#include <cstring>

#include "backend/cuda/check.hpp"
#include "backend/cuda/device_features.hpp"
#include "backend/cuda/kernels/match_l2_top2.cuh"
#include "backend/cuda/state.hpp"

namespace spectrasift::cuda {

namespace {

static_assert(sizeof(kernels::MatchTop2) == sizeof(Top2), "Top2 is two ints and two floats");
static_assert(offsetof(Top2, best1) == offsetof(kernels::MatchTop2, best1) &&
                  offsetof(Top2, best2) == offsetof(kernels::MatchTop2, best2) &&
                  offsetof(Top2, distance1) == offsetof(kernels::MatchTop2, distance1) &&
                  offsetof(Top2, distance2) == offsetof(kernels::MatchTop2, distance2),
              "Top2 and MatchTop2 have one layout");

// The descriptors of one side on the device: the device copy when it is this device's, else an upload into
// the named buffer (on the compute stream; pageable memory is staged before the call returns).
const float* device_descriptors(State& st, const detail::FeatureView& v, const char* buffer_name) {
  if (const auto* d = dynamic_cast<const CudaDeviceFeatures*>(v.device); d && d->device() == st.device)
    return d->descriptors();
  const std::size_t bytes = std::size_t(v.count) * std::size_t(v.dim) * sizeof(float);
  DeviceBuffer& b = st.buffer(buffer_name, std::max<std::size_t>(bytes, 16));
  SPECTRASIFT_CUDA_CHECK(cudaMemcpyAsync(b.ptr, v.descriptors, bytes, cudaMemcpyHostToDevice, st.compute));
  return b.as<const float>();
}

unsigned blocks_for(int items, int per_block) { return unsigned((items + per_block - 1) / per_block); }

}  // namespace

void State::match_top2(detail::ContextImpl&, const detail::FeatureView& query, const detail::FeatureView& train,
                       Top2* out) {
  if (query.count <= 0) return;
  if (train.count <= 0) {
    std::fill(out, out + query.count, Top2{});
    return;
  }
  activate();
  const float* q = device_descriptors(*this, query, "match.query");
  const float* t = device_descriptors(*this, train, "match.train");
  float* qn = buffer("match.query_norm", std::size_t(query.count) * sizeof(float)).as<float>();
  float* tn = buffer("match.train_norm", std::size_t(train.count) * sizeof(float)).as<float>();
  auto* result = buffer("match.top2", std::size_t(query.count) * sizeof(Top2)).as<kernels::MatchTop2>();
  kernels::match_norms<<<blocks_for(query.count, 256), 256, 0, compute>>>(q, query.count, query.dim, qn);
  SPECTRASIFT_CUDA_CHECK_LAUNCH();
  kernels::match_norms<<<blocks_for(train.count, 256), 256, 0, compute>>>(t, train.count, train.dim, tn);
  SPECTRASIFT_CUDA_CHECK_LAUNCH();
  kernels::match_l2_top2<<<blocks_for(query.count, kernels::kMatchQueries), kernels::kMatchThreads, 0, compute>>>(
      q, qn, query.count, t, tn, train.count, query.dim, result);
  SPECTRASIFT_CUDA_CHECK_LAUNCH();
  SPECTRASIFT_CUDA_CHECK(
      cudaMemcpyAsync(out, result, std::size_t(query.count) * sizeof(Top2), cudaMemcpyDeviceToHost, compute));
  SPECTRASIFT_CUDA_CHECK(cudaStreamSynchronize(compute));
}

}  // namespace spectrasift::cuda

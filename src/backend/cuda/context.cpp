// CUDA device enumeration and per-context state.
#include <cuda_runtime.h>

#include <algorithm>

#include "backend/cuda/check.hpp"
#include "backend/cuda/state.hpp"

namespace spectrasift::cuda {

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (ptr) cudaFree(ptr);
    ptr = o.ptr; bytes = o.bytes; o.ptr = nullptr; o.bytes = 0;
  }
  return *this;
}
DeviceBuffer::~DeviceBuffer() { if (ptr) cudaFree(ptr); }
void DeviceBuffer::reserve(std::size_t n) {
  if (n <= bytes) return;
  if (ptr) { cudaFree(ptr); ptr = nullptr; bytes = 0; }
  SPECTRASIFT_CUDA_CHECK(cudaMalloc(&ptr, n));
  bytes = n;
}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& o) noexcept {
  if (this != &o) {
    if (ptr) cudaFreeHost(ptr);
    ptr = o.ptr; bytes = o.bytes; o.ptr = nullptr; o.bytes = 0;
  }
  return *this;
}
PinnedBuffer::~PinnedBuffer() { if (ptr) cudaFreeHost(ptr); }
void PinnedBuffer::reserve(std::size_t n) {
  if (n <= bytes) return;
  if (ptr) { cudaFreeHost(ptr); ptr = nullptr; bytes = 0; }
  SPECTRASIFT_CUDA_CHECK(cudaMallocHost(&ptr, n));
  bytes = n;
}

cublasHandle_t State::cublas_handle() {
  if (!cublas) {
    activate();
    SPECTRASIFT_CUBLAS_CHECK(cublasCreate(&cublas));
    SPECTRASIFT_CUBLAS_CHECK(cublasSetStream(cublas, compute));
  }
  return cublas;
}

HostCopyPool& State::host_copy_pool(int threads) {
  if (tuning.copy_threads > 0) threads = tuning.copy_threads;
  threads = std::max(1, threads);
  if (!host_pool || host_pool->threads() != threads) {
    host_pool.reset();  // joins the old workers first
    host_pool = std::make_unique<HostCopyPool>(threads - 1);
  }
  return *host_pool;
}

DeviceBuffer& State::buffer(const std::string& name, std::size_t bytes) {
  auto& b = buffers[name];
  b.reserve(bytes);
  return b;
}

PinnedBuffer& State::pinned_buffer(const std::string& name, std::size_t bytes) {
  auto& b = pinned[name];
  b.reserve(bytes);
  return b;
}

void State::activate() const { SPECTRASIFT_CUDA_CHECK(cudaSetDevice(device)); }

detail::DeviceMemory State::device_memory() const {
  activate();
  std::size_t free = 0, total = 0;
  SPECTRASIFT_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  return {total, free, 0};
}

State& state(detail::ContextImpl& ctx) {
  auto* s = dynamic_cast<State*>(ctx.backend_impl.get());
  if (!s) throw Error(ErrorCode::kInternal, "CUDA operation on a context that is not a CUDA context", "cuda");
  return *s;
}

void State::spectral_match(detail::ContextImpl& ctx, const detail::CubeView& cube,
                           const detail::PreparedReferences& refs, const SpectralOptions& options,
                           SpectralResult& result, const ProgressFn& progress) {
  cuda::spectral_match(ctx, cube, refs, options, result, progress);
}

State::~State() {
  State* s = this;
  cudaSetDevice(s->device);
  cudaDeviceSynchronize();
  s->buffers.clear();
  s->pinned.clear();
  s->host_pool.reset();
  if (s->cublas) cublasDestroy(s->cublas);
  if (s->compute) cudaStreamDestroy(s->compute);
  if (s->copy) cudaStreamDestroy(s->copy);
  if (s->aux) cudaStreamDestroy(s->aux);
  if (s->download) cudaStreamDestroy(s->download);
}

namespace {
DeviceInfo info_from(int index, const cudaDeviceProp& p) {
  DeviceInfo d;
  d.backend = Backend::kCuda;
  d.index = index;
  d.name = p.name;
  int rt = 0;
  cudaRuntimeGetVersion(&rt);
  d.platform = "CUDA " + std::to_string(rt / 1000) + "." + std::to_string((rt % 1000) / 10);
  d.type = "gpu";
  d.global_memory = p.totalGlobalMem;
  d.local_memory = p.sharedMemPerBlock;
  d.compute_units = p.multiProcessorCount;
  d.max_work_group_size = p.maxThreadsPerBlock;
  d.version = "compute capability " + std::to_string(p.major) + "." + std::to_string(p.minor);
  return d;
}
}  // namespace

std::vector<DeviceInfo> list_devices() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error
    return {};
  }
  std::vector<DeviceInfo> out;
  for (int i = 0; i < n; ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) == cudaSuccess) out.push_back(info_from(i, p));
  }
  return out;
}

std::unique_ptr<detail::BackendImpl> create_state(int device, DeviceInfo& info) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    cudaGetLastError();
    throw Error(ErrorCode::kBackendUnavailable, "the CUDA backend was asked for but no CUDA device is present", "cuda");
  }
  if (device >= n)
    throw Error(ErrorCode::kBackendUnavailable,
                "CUDA device " + std::to_string(device) + " does not exist (" + std::to_string(n) + " present)", "cuda");
  auto s = std::make_unique<State>();
  s->device = device;
  SPECTRASIFT_CUDA_CHECK(cudaSetDevice(device));
  SPECTRASIFT_CUDA_CHECK(cudaGetDeviceProperties(&s->props, device));
  SPECTRASIFT_CUDA_CHECK(cudaStreamCreateWithFlags(&s->compute, cudaStreamNonBlocking));
  SPECTRASIFT_CUDA_CHECK(cudaStreamCreateWithFlags(&s->copy, cudaStreamNonBlocking));
  SPECTRASIFT_CUDA_CHECK(cudaStreamCreateWithFlags(&s->aux, cudaStreamNonBlocking));
  SPECTRASIFT_CUDA_CHECK(cudaStreamCreateWithFlags(&s->download, cudaStreamNonBlocking));
  info = info_from(device, s->props);
  return s;
}

}  // namespace spectrasift::cuda

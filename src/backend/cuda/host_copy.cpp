// HostCopyPool: see host_copy.hpp.
#include "backend/cuda/host_copy.hpp"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>

namespace spectrasift::cuda {

namespace {
/// memcpy with non-temporal (streaming) stores for the bulk: the destination (a pinned staging buffer
/// that the GPU reads next) is not read for ownership nor kept in the caches, which leaves more of the
/// host's memory bandwidth to the DMA engine that uploads the previous chunk at the same time.
void copy_streaming(void* dst, const void* src, std::size_t n) {
#if defined(__SSE2__)
  auto* d = static_cast<std::uint8_t*>(dst);
  const auto* s = static_cast<const std::uint8_t*>(src);
  const std::size_t head = std::min<std::size_t>(n, (16 - (reinterpret_cast<std::uintptr_t>(d) & 15)) & 15);
  std::memcpy(d, s, head);
  d += head;
  s += head;
  n -= head;
  const std::size_t bulk = n & ~std::size_t(63);
  for (std::size_t i = 0; i < bulk; i += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 32));
    const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 48), e);
  }
  std::memcpy(d + bulk, s + bulk, n - bulk);
  _mm_sfence();  // the streaming stores are visible before the copy is reported done
#else
  std::memcpy(dst, src, n);
#endif
}
}  // namespace

HostCopyPool::HostCopyPool(int threads) {
  for (int i = 0; i < threads; ++i) workers_.emplace_back([this] { worker_loop(); });
}

HostCopyPool::~HostCopyPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void HostCopyPool::drain(const std::function<void(int)>& fn, int n) {
  for (;;) {
    const int i = next_.fetch_add(1, std::memory_order_relaxed);
    if (i >= n) break;
    fn(i);
    finished_.fetch_add(1, std::memory_order_release);
  }
}

void HostCopyPool::worker_loop() {
  unsigned seen = 0;
  for (;;) {
    // Spin briefly before sleeping: the streaming pipeline hands out a job every few hundred us, and a
    // condition-variable wake-up costs tens of microseconds.
    const auto spin_until = std::chrono::steady_clock::now() + std::chrono::microseconds(500);
    while (generation_.load(std::memory_order_acquire) == seen && std::chrono::steady_clock::now() < spin_until) {
    }
    const std::function<void(int)>* job = nullptr;
    int n = 0;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || generation_.load(std::memory_order_acquire) != seen; });
      if (stop_) return;
      seen = generation_.load(std::memory_order_acquire);
      // The job is taken under the lock: a worker that wakes after the job finished sees none.
      job = job_;
      n = job_n_;
      if (!job) continue;
      ++busy_workers_;
    }
    drain(*job, n);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      --busy_workers_;
    }
    done_.notify_all();
  }
}

void HostCopyPool::parallel_for(int n, const std::function<void(int)>& fn) {
  if (n <= 0) return;
  if (workers_.empty() || n == 1) {
    for (int i = 0; i < n; ++i) fn(i);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = &fn;
    job_n_ = n;
    next_.store(0, std::memory_order_relaxed);
    finished_.store(0, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  drain(fn, n);
  // Wait until every index is done and no worker still holds the job.
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [&] { return finished_.load(std::memory_order_acquire) >= n && busy_workers_ == 0; });
  job_ = nullptr;
}

void HostCopyPool::copy(const std::vector<CopyPiece>& pieces, std::size_t split_bytes) {
  split_.clear();
  for (const auto& p : pieces) {
    for (std::size_t off = 0; off < p.bytes; off += split_bytes) {
      const std::size_t b = std::min(split_bytes, p.bytes - off);
      split_.push_back({static_cast<char*>(p.dst) + off, static_cast<const char*>(p.src) + off, b});
    }
  }
  const std::function<void(int)> fn = [this](int i) { copy_streaming(split_[i].dst, split_[i].src, split_[i].bytes); };
  parallel_for(int(split_.size()), fn);
}

}  // namespace spectrasift::cuda

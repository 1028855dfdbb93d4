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

/// memcpy, then every destination line pushed from the core's private caches to the shared last-level cache.
void copy_demote(void* dst, const void* src, std::size_t n) {
  std::memcpy(dst, src, n);
  demote_lines(dst, n);
}
}  // namespace

// CLDEMOTE is a hint with no effect on the bytes, and its encoding is a NOP on processors without it.
#if defined(__x86_64__)
__attribute__((target("cldemote"))) void demote_lines(const void* p, std::size_t n) {
  auto* d = static_cast<char*>(const_cast<void*>(p));  // the builtin takes a non-const pointer; nothing is written
  for (std::size_t i = 0; i < n; i += 64) __builtin_ia32_cldemote(d + i);
  if (n) __builtin_ia32_cldemote(d + n - 1);
}
#else
void demote_lines(const void*, std::size_t) {}
#endif

HostCopyPool::HostCopyPool(int threads) {
  for (int i = 0; i < threads; ++i) workers_.emplace_back([this] { worker_loop(); });
}

HostCopyPool::~HostCopyPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_.store(true);
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
    // Spin before sleeping: the streaming pipeline hands out a job every few hundred us, and a
    // condition-variable wake-up costs tens of microseconds.
    const auto spin_until = std::chrono::steady_clock::now() + std::chrono::microseconds(2000);
    while (generation_.load() == seen && !stop_.load() && std::chrono::steady_clock::now() < spin_until) {
#if defined(__SSE2__)
      _mm_pause();
#endif
    }
    if (generation_.load() == seen && !stop_.load()) {
      std::unique_lock<std::mutex> lock(mutex_);
      sleepers_.fetch_add(1);
      wake_.wait(lock, [&] { return stop_.load() || generation_.load() != seen; });
      sleepers_.fetch_sub(1);
    }
    if (stop_.load()) return;
    seen = generation_.load();
    active_.fetch_add(1);
    const std::function<void(int)>* job = job_.load();
    if (job) drain(*job, job_n_.load());
    active_.fetch_sub(1);
  }
}

void HostCopyPool::wake() {
  if (sleepers_.load() == 0) return;
  std::lock_guard<std::mutex> lock(mutex_);
  generation_.fetch_add(1);  // no job: a worker that sees it finds job_ == nullptr and spins again
  wake_.notify_all();
}

void HostCopyPool::parallel_for(int n, const std::function<void(int)>& fn) {
  start(n, fn);
  finish();
}

void HostCopyPool::start(int n, std::function<void(int)> fn) {
  started_fn_ = std::move(fn);
  started_n_ = std::max(n, 0);
  started_on_workers_ = !workers_.empty() && started_n_ > 1;
  if (!started_on_workers_) return;  // finish() runs it on the calling thread
  next_.store(0);
  finished_.store(0);
  job_n_.store(started_n_);
  job_.store(&started_fn_);
  generation_.fetch_add(1);
  if (sleepers_.load() > 0) {
    std::lock_guard<std::mutex> lock(mutex_);  // a sleeper between its check and wait() cannot miss this
    wake_.notify_all();
  }
}

void HostCopyPool::finish() {
  const int n = started_n_;
  started_n_ = 0;
  if (!started_on_workers_) {
    for (int i = 0; i < n; ++i) started_fn_(i);
    return;
  }
  started_on_workers_ = false;
  drain(started_fn_, n);
  while (finished_.load() < n) {
#if defined(__SSE2__)
    _mm_pause();
#endif
  }
  job_.store(nullptr);  // before waiting for active_ == 0: see the member comment
  while (active_.load() > 0) {
#if defined(__SSE2__)
    _mm_pause();
#endif
  }
}

void HostCopyPool::start_copy(const std::vector<CopyPiece>& pieces, std::size_t split_bytes, CopyStores stores) {
  split_.clear();
  for (const auto& p : pieces) {
    for (std::size_t off = 0; off < p.bytes; off += split_bytes) {
      const std::size_t b = std::min(split_bytes, p.bytes - off);
      split_.push_back({static_cast<char*>(p.dst) + off, static_cast<const char*>(p.src) + off, b});
    }
  }
  start(int(split_.size()), [this, stores](int i) {
    const CopyPiece& p = split_[std::size_t(i)];
    switch (stores) {
      case CopyStores::kStreaming: copy_streaming(p.dst, p.src, p.bytes); break;
      case CopyStores::kDemote: copy_demote(p.dst, p.src, p.bytes); break;
      default: std::memcpy(p.dst, p.src, p.bytes);
    }
  });
}

void HostCopyPool::copy(const std::vector<CopyPiece>& pieces, std::size_t split_bytes, CopyStores stores) {
  start_copy(pieces, split_bytes, stores);
  finish();
}

}  // namespace spectrasift::cuda

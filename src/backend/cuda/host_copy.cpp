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

// HostCopyPool: see host_copy.hpp.
#include "backend/cuda/host_copy.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>

namespace spectrasift::cuda {

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
    // Spin briefly before sleeping: the streaming pipeline hands out a job every ~100 us, and a
    // condition-variable wake-up costs tens of microseconds.
    const auto spin_until = std::chrono::steady_clock::now() + std::chrono::microseconds(200);
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
  const std::function<void(int)> fn = [this](int i) { std::memcpy(split_[i].dst, split_[i].src, split_[i].bytes); };
  parallel_for(int(split_.size()), fn);
}

}  // namespace spectrasift::cuda

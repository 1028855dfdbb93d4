// WorkPool: the one host thread pool of the CPU backend (SIFT, spectral matching, descriptor matching,
// RANSAC scoring, warping). The calling thread takes part, chunks are claimed from an atomic counter,
// and the caller waits only for chunks that another thread has actually claimed. A worker that finished a
// job watches for the next one for up to kWatch (yielding its core between looks), then sleeps on a
// condition variable: back-to-back jobs (the staging copies of a streamed call, one every few hundred
// microseconds) then start on awake workers, while a pool that is idle for longer costs nothing. On the
// H200 VM a condition-variable wake-up of 15 workers took long enough that the calling thread copied most
// of each chunk alone (OpenCL streamed spectral matching 4.6 -> 6.1 ms end to end before the watch).
//
// Why not OpenMP: an OpenMP region ends with a barrier that every team thread must reach, and idle
// OpenMP threads spin. On a loaded machine each region can then wait a whole scheduler time slice for a
// worker that has not been scheduled yet (measured: SIFT on box.png 1.65 s instead of 0.05 s with the
// load average at 8 on 2 cores; CPU spectral matching of the HYDICE cube 110-208 ms instead of 3.2-16 ms
// with one thread). Here a worker that wakes up late finds no chunk left and the step has already
// finished without it.
//
// Determinism: which thread runs a chunk varies; every chunk must write only its own outputs (rows,
// pixels, queries, models) or a per-thread buffer (indexed by the `thread` argument) that the caller
// combines in a fixed order afterwards. Then results never depend on the thread count.
//
// The CUDA backend's staging pool (backend/cuda/host_copy.hpp) is a separate type on purpose: see
// DESIGN.md "Host threads".
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace spectrasift {

class WorkPool {
 public:
  /// fn(begin, end, thread): processes items [begin, end) on thread index 0..size()-1 (0 = the caller).
  using Body = std::function<void(int, int, int)>;

  explicit WorkPool(int threads) : size_(std::max(threads, 1)) {
    for (int i = 1; i < size_; ++i) workers_.emplace_back([this, i] { worker(i); });
  }
  ~WorkPool() {
    {
      std::lock_guard<std::mutex> lk(m_);
      stop_ = true;
      stop_flag_.store(true, std::memory_order_relaxed);
    }
    cv_.notify_all();
    for (auto& t : workers_) t.join();
  }
  WorkPool(const WorkPool&) = delete;
  WorkPool& operator=(const WorkPool&) = delete;

  int size() const noexcept { return size_; }

  /// Runs fn over [0, n) in chunks of `chunk` items; returns when all are done. Rethrows the first
  /// exception a chunk threw (after every claimed chunk has finished).
  void run(int n, int chunk, const Body& fn) {
    if (n <= 0) return;
    chunk = std::max(chunk, 1);
    const int chunks = (n + chunk - 1) / chunk;
    if (workers_.empty() || chunks == 1) {
      for (int b = 0; b < n; b += chunk) fn(b, std::min(b + chunk, n), 0);
      return;
    }
    auto job = std::make_shared<Job>();
    job->fn = &fn;
    job->n = n;
    job->chunk = chunk;
    job->chunks = chunks;
    {
      std::lock_guard<std::mutex> lk(m_);
      job_ = job;
      generation_.fetch_add(1, std::memory_order_release);
    }
    cv_.notify_all();
    work(*job, 0);
    // Every chunk is claimed now; wait for the ones other threads are still running.
    for (int spin = 0; job->done.load(std::memory_order_acquire) < chunks; ++spin) {
      if (spin > 64) std::this_thread::yield();
    }
    {
      std::lock_guard<std::mutex> lk(m_);
      if (job_ == job) job_.reset();
    }
    if (job->error) std::rethrow_exception(job->error);
  }

 private:
  struct Job {
    const Body* fn = nullptr;  // valid while a claimed chunk is unfinished (the caller is still waiting)
    int n = 0, chunk = 1, chunks = 0;
    std::atomic<int> next{0};
    std::atomic<int> done{0};
    std::mutex error_m;
    std::exception_ptr error;
  };

  static void work(Job& j, int thread) {
    for (;;) {
      const int c = j.next.fetch_add(1, std::memory_order_relaxed);
      if (c >= j.chunks) return;
      const int b = c * j.chunk;
      try {
        (*j.fn)(b, std::min(b + j.chunk, j.n), thread);
      } catch (...) {
        std::lock_guard<std::mutex> lk(j.error_m);
        if (!j.error) j.error = std::current_exception();
      }
      j.done.fetch_add(1, std::memory_order_release);
    }
  }

  void worker(int thread) {
    std::uint64_t seen = 0;
    for (;;) {
      // Watch for the next job for a while (yielding: on a loaded machine other threads get the core).
      const auto watch_end = std::chrono::steady_clock::now() + kWatch;
      while (generation_.load(std::memory_order_acquire) == seen && !stop_flag_.load(std::memory_order_relaxed) &&
             std::chrono::steady_clock::now() < watch_end)
        std::this_thread::yield();
      std::shared_ptr<Job> j;
      {
        std::unique_lock<std::mutex> lk(m_);
        cv_.wait(lk, [&] { return stop_ || generation_.load(std::memory_order_relaxed) != seen; });
        if (stop_) return;
        seen = generation_.load(std::memory_order_relaxed);
        j = job_;
      }
      if (j) work(*j, thread);
    }
  }

  /// How long a worker watches for the next job before it sleeps.
  static constexpr std::chrono::microseconds kWatch{1000};

  int size_;
  std::vector<std::thread> workers_;
  std::mutex m_;
  std::condition_variable cv_;
  std::shared_ptr<Job> job_;
  std::atomic<std::uint64_t> generation_{0};  ///< written under m_, read by watching workers without it
  bool stop_ = false;
  std::atomic<bool> stop_flag_{false};  ///< stop_ for the watch loop
};

/// The default host thread count: std::thread::hardware_concurrency(), at least 1.
int default_thread_count() noexcept;

/// The pool of the calling thread with `threads` threads (0 = default_thread_count()): created on first
/// use and kept until the thread ends (re-created when the count changes), so that repeated calls do not
/// start threads. One per calling thread: operations running concurrently on different threads (one
/// Context each) never share workers.
WorkPool& calling_thread_pool(int threads);

}  // namespace spectrasift

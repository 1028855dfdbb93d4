// A small pool of host threads for the staging copies of the CUDA backend (mmap'd file -> pinned
// buffer). Plain C++ (no CUDA header) so that it compiles with the host compiler and its OpenMP-free
// threads never depend on the caller's OpenMP settings. Work is split into independent pieces, so
// the bytes copied never depend on which thread copies which piece.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace spectrasift::cuda {

/// How a staging copy stores: plain memcpy (the destination stays in the copying cores' caches), or memcpy then
/// CLDEMOTE of every line (it moves to the shared last-level cache, where a DMA read finds it without snooping a
/// core; a NOP on processors without CLDEMOTE). (Non-temporal stores were slower on the H200 host, 3.62 against
/// 3.29 ms end to end, and were removed: docs/performance/spectral.md, 'Host staging copies'.)
enum class CopyStores { kPlain, kDemote };

/// When the staging pass of a streamed spectral match packs a chunk of 16-bit samples (numeric/sample_pack.h)
/// instead of copying it: never, always, or when the host is two chunks ahead of the upload engine (balanced:
/// packing costs the host more than a copy and saves upload time, so a chunk is copied raw when the uploads
/// are about to wait for the host, and packed when the host has time to spare).
enum class PackPolicy { kNever, kAlways, kBalanced };

/// One contiguous copy of `bytes` bytes.
struct CopyPiece {
  void* dst = nullptr;
  const void* src = nullptr;
  std::size_t bytes = 0;
};

/// Pushes the cache lines of [p, p + n) from this core's private caches to the shared last-level cache
/// (CLDEMOTE, a hint: a NOP on processors without it), where a DMA read finds them without snooping a core.
void demote_lines(const void* p, std::size_t n);

class HostCopyPool {
 public:
  /// threads: workers besides the calling thread (0 = the caller copies alone).
  explicit HostCopyPool(int threads);
  ~HostCopyPool();
  HostCopyPool(const HostCopyPool&) = delete;
  HostCopyPool& operator=(const HostCopyPool&) = delete;

  int threads() const noexcept { return int(workers_.size()) + 1; }
  /// Runs fn(i) for i in [0, n) on the workers and the calling thread; returns when all are done.
  void parallel_for(int n, const std::function<void(int)>& fn);
  /// Starts fn(i) for i in [0, n) on the workers and returns at once, so that the calling thread can do
  /// other work (the CUDA calls of the previous chunk) while they run; finish() then helps with what is
  /// left and returns when all are done. One job at a time: every start is followed by a finish; a finish
  /// with no job started returns at once.
  void start(int n, std::function<void(int)> fn);
  void finish();
  /// start() of a copy: the pieces (split like copy() does) are taken before it returns.
  void start_copy(const std::vector<CopyPiece>& pieces, std::size_t split_bytes = std::size_t(1) << 18,
                  CopyStores stores = CopyStores::kPlain);
  /// Wakes sleeping workers without work, so that they spin (ready) for a while: a call about to copy
  /// calls this before its set-up, which hides the wake-up.
  void wake();
  /// Copies every piece, pieces larger than `split_bytes` being split further; blocks until done.
  void copy(const std::vector<CopyPiece>& pieces, std::size_t split_bytes = std::size_t(1) << 18,
            CopyStores stores = CopyStores::kPlain);

 private:
  void worker_loop();
  void drain(const std::function<void(int)>& fn, int n);
  // Hand-off without locks on the hot path (a mutex convoy of 16 threads cost ~80 us per job on the H200
  // VM): the job is published with generation_, workers that are spinning take it at once, and a worker
  // counts itself in active_ BEFORE it reads job_, while parallel_for clears job_ BEFORE it waits for
  // active_ == 0 (both sequentially consistent), so no worker can use a job after parallel_for returned.
  // Workers that found nothing for a while sleep on wake_ (mutex_ guards only that).
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::atomic<const std::function<void(int)>*> job_{nullptr};
  std::atomic<int> job_n_{0};
  std::atomic<int> next_{0};
  std::atomic<int> finished_{0};
  std::atomic<unsigned> generation_{0};
  std::atomic<int> active_{0};
  std::atomic<int> sleepers_{0};
  std::atomic<bool> stop_{false};
  std::vector<CopyPiece> split_;  // scratch of copy()
  std::function<void(int)> started_fn_;  // the job between start() and finish()
  int started_n_ = 0;
  bool started_on_workers_ = false;
};

}  // namespace spectrasift::cuda

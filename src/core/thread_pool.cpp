// The calling thread's WorkPool (see thread_pool.hpp).
#include "core/thread_pool.hpp"

namespace spectrasift {

int default_thread_count() noexcept {
  const unsigned n = std::thread::hardware_concurrency();
  return n > 0 ? int(n) : 1;
}

WorkPool& calling_thread_pool(int threads) {
  if (threads <= 0) threads = default_thread_count();
  thread_local std::unique_ptr<WorkPool> pool;
  if (!pool || pool->size() != threads) pool = std::make_unique<WorkPool>(threads);
  return *pool;
}

}  // namespace spectrasift

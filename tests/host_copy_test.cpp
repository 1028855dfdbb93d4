// The CUDA backend's staging pool (src/backend/cuda/host_copy.*): host-only code, so these tests run on any
// machine whose build has the CUDA backend compiled in (CI compiles it; no GPU is needed). The pool hands
// jobs to spinning workers without a lock (an atomic generation and an active-worker count), so the tests
// run many jobs of every size back to back and check that every byte is copied and every index runs once.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#ifdef SPECTRASIFT_HAVE_CUDA
#include "backend/cuda/host_copy.hpp"
#endif

namespace {

#ifdef SPECTRASIFT_HAVE_CUDA
using spectrasift::cuda::CopyPiece;
using spectrasift::cuda::HostCopyPool;

TEST(HostCopyPool, CopiesEveryByteOfManyJobsBackToBack) {
  for (int threads : {0, 1, 5}) {
    HostCopyPool pool(threads);
    std::mt19937 rng(7u + unsigned(threads));
    std::vector<unsigned char> src(1 << 20), dst(src.size());
    for (auto& c : src) c = static_cast<unsigned char>(rng());
    for (int it = 0; it < 300; ++it) {
      const std::size_t n = 1 + rng() % src.size();
      const std::size_t off = rng() % (src.size() - n + 1);
      std::memset(dst.data(), 0xAB, dst.size());
      // Two pieces, split further into 4 KiB parts: most jobs have many more parts than threads.
      const std::vector<CopyPiece> pieces{{dst.data(), src.data() + off, n / 2},
                                          {dst.data() + n / 2, src.data() + off + n / 2, n - n / 2}};
      pool.copy(pieces, 4096, spectrasift::cuda::CopyStores(it % 2));  // plain and demoted stores
      ASSERT_EQ(std::memcmp(dst.data(), src.data() + off, n), 0) << "threads " << threads << ", job " << it;
      for (std::size_t i = n; i < dst.size(); ++i) ASSERT_EQ(dst[i], 0xAB) << "wrote past the pieces, job " << it;
    }
  }
}

TEST(HostCopyPool, ParallelForRunsEveryIndexExactlyOnce) {
  HostCopyPool pool(3);
  for (int n : {1, 2, 3, 4, 5, 17, 1000}) {
    for (int rep = 0; rep < 50; ++rep) {
      std::vector<int> hits(std::size_t(n), 0);  // each index has its own slot: no two threads write one
      pool.parallel_for(n, [&](int i) { ++hits[std::size_t(i)]; });
      for (int i = 0; i < n; ++i) ASSERT_EQ(hits[std::size_t(i)], 1) << "n " << n << ", index " << i;
    }
  }
}

TEST(HostCopyPool, WakingSleepingWorkersBetweenJobsRunsEveryIndexOnce) {
  // wake() bumps the generation with no job: a worker that wakes must neither run a job twice nor miss the next.
  HostCopyPool pool(3);
  for (int rep = 0; rep < 20; ++rep) {
    if (rep % 4 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));  // workers fall asleep (2 ms spin)
    pool.wake();
    if (rep % 2) pool.wake();  // twice in a row: harmless
    std::vector<int> hits(1000, 0);
    pool.parallel_for(1000, [&](int i) { ++hits[std::size_t(i)]; });
    for (int i = 0; i < 1000; ++i) ASSERT_EQ(hits[std::size_t(i)], 1) << "rep " << rep << ", index " << i;
  }
}

TEST(HostCopyPool, StartedJobsRunWhileTheCallerWorksAndFinishJoinsThem) {
  // The streaming loop starts chunk c+1's pass, makes chunk c's CUDA calls, then finishes the pass: every
  // index must run once whether the workers took all of it before finish() or the caller helps.
  for (int threads : {0, 1, 3}) {
    HostCopyPool pool(threads);
    pool.finish();  // nothing started: returns at once
    std::vector<unsigned char> src(1 << 18), dst(src.size());
    for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 7 + 1);
    for (int rep = 0; rep < 200; ++rep) {
      std::vector<int> hits(257, 0);
      pool.start(257, [&hits](int i) { ++hits[std::size_t(i)]; });
      if (rep % 3 == 0) std::this_thread::sleep_for(std::chrono::microseconds(50));  // the caller's own work
      pool.finish();
      for (int i = 0; i < 257; ++i) ASSERT_EQ(hits[std::size_t(i)], 1) << "threads " << threads << ", rep " << rep;
      std::memset(dst.data(), 0, dst.size());
      pool.start_copy({{dst.data(), src.data(), src.size()}}, 4096);
      pool.finish();
      ASSERT_EQ(std::memcmp(dst.data(), src.data(), src.size()), 0) << "threads " << threads << ", rep " << rep;
    }
  }
}

TEST(HostCopyPool, EmptyJobsAndDestructionRightAfterAJob) {
  std::vector<unsigned char> src(4096, 7), dst(4096, 0);
  {
    HostCopyPool pool(4);
    pool.copy({}, 1024);              // nothing to do
    pool.parallel_for(0, [](int) {});  // likewise
    pool.copy({{dst.data(), src.data(), src.size()}}, 1024);
  }  // the workers stop with the job just done
  EXPECT_EQ(std::memcmp(dst.data(), src.data(), src.size()), 0);
}
#else
TEST(HostCopyPool, NeedsTheCudaBackend) {
  GTEST_SKIP() << "the CUDA backend (and its staging pool) is not compiled into this build";
}
#endif

}  // namespace

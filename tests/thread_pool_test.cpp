// WorkPool (core/thread_pool.hpp): every item runs exactly once whatever the thread count, the calling
// thread takes part, exceptions reach the caller, and a figure (printed, never asserted) of CPU spectral
// matching on the HYDICE cube with and without a competing busy thread.
#include <gtest/gtest.h>

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <vector>

#include "core/thread_pool.hpp"
#include "spectrasift/spectral.hpp"

using namespace spectrasift;

TEST(WorkPool, EveryItemOnceForAnyThreadCount) {
  for (int threads : {1, 2, 3, 8}) {
    WorkPool pool(threads);
    EXPECT_EQ(pool.size(), threads);
    for (int chunk : {1, 7, 1000}) {
      std::vector<int> hits(997, 0);
      std::vector<std::atomic<int>> by_thread(std::size_t(pool.size()));
      pool.run(int(hits.size()), chunk, [&](int b, int e, int t) {
        ASSERT_GE(t, 0);
        ASSERT_LT(t, pool.size());
        by_thread[std::size_t(t)] += e - b;
        for (int i = b; i < e; ++i) ++hits[std::size_t(i)];
      });
      EXPECT_TRUE(std::all_of(hits.begin(), hits.end(), [](int h) { return h == 1; })) << threads << " " << chunk;
      int total = 0;
      for (auto& n : by_thread) total += n;
      EXPECT_EQ(total, int(hits.size()));
    }
  }
}

TEST(WorkPool, ExceptionsReachTheCaller) {
  WorkPool pool(3);
  EXPECT_THROW(pool.run(100, 1, [](int b, int, int) { if (b == 42) throw std::runtime_error("chunk 42"); }),
               std::runtime_error);
  int n = 0;  // the pool still works afterwards
  pool.run(10, 10, [&](int b, int e, int) { n += e - b; });
  EXPECT_EQ(n, 10);
}

TEST(WorkPool, CallingThreadPoolIsKeptPerThread) {
  WorkPool& a = calling_thread_pool(2);
  EXPECT_EQ(&a, &calling_thread_pool(2));
  WorkPool* other = nullptr;
  std::thread([&] { other = &calling_thread_pool(2); }).join();
  EXPECT_NE(other, &a);
  EXPECT_GE(default_thread_count(), 1);
}

TEST(WorkPool, CpuSpectralIsTheSameForAnyThreadCount) {
  const EnviCube cube = open_envi(std::string(SPECTRASIFT_TEST_DATA) + "/hydice_data.hdr");
  const SpectralLibrary refs = reference_from_pixels(cube, {{10, 10}, {40, 30}, {5, 50}, {60, 20}, {20, 20}});
  SpectralOptions so;
  so.reduction = Reduction::kTopK;
  so.top_k = 2;
  so.chunk_lines = 7;  // several chunks, each cut into tiles claimed by whichever thread is free
  std::vector<SpectralResult> results;
  for (int threads : {1, 2, 3, 5}) {
    ContextOptions co;
    co.backend = Backend::kCpu;
    co.threads = threads;
    Context ctx(co);
    results.push_back(spectral_match(ctx, cube, refs, so));
  }
  for (std::size_t i = 1; i < results.size(); ++i) {
    EXPECT_EQ(results[i].index, results[0].index);
    ASSERT_EQ(results[i].scores.size(), results[0].scores.size());
    EXPECT_EQ(std::memcmp(results[i].scores.data(), results[0].scores.data(), results[0].scores.size() * sizeof(float)), 0);
  }
}

TEST(WorkPool, SpectralUnderACompetingLoad) {
  // A measurement, not a timed assertion: the median of CPU spectral matching (HYDICE, 5 references, sam,
  // 2 threads) alone and with a busy thread pinned to CPU 0. Results must be identical either way.
  const EnviCube cube = open_envi(std::string(SPECTRASIFT_TEST_DATA) + "/hydice_data.hdr");
  const SpectralLibrary refs = reference_from_pixels(cube, {{10, 10}, {40, 30}, {5, 50}, {60, 20}, {20, 20}});
  ContextOptions co;
  co.backend = Backend::kCpu;
  co.threads = 2;
  Context ctx(co);
  SpectralOptions so;
  so.reduction = Reduction::kBest;
  const SpectralResult expected = spectral_match(ctx, cube, refs, so);
  auto median_ms = [&] {
    std::vector<double> ms;
    for (int i = 0; i < 7; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      const SpectralResult r = spectral_match(ctx, cube, refs, so);
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      EXPECT_EQ(r.index, expected.index);
      EXPECT_EQ(std::memcmp(r.scores.data(), expected.scores.data(), r.scores.size() * sizeof(float)), 0);
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
  };
  const double alone = median_ms();
  std::atomic<bool> stop{false};
  std::thread busy([&] {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(0, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);  // best effort
    while (!stop.load(std::memory_order_relaxed)) {
    }
  });
  const double loaded = median_ms();
  stop = true;
  busy.join();
  std::printf("[ figure ] CPU spectral, HYDICE 80x100x162, 5 refs, 2 threads: %.2f ms alone, %.2f ms with a busy "
              "thread on CPU 0 (median of 7)\n", alone, loaded);
}

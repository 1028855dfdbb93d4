// Timing helper shared by the benchmark programs: the median of repeated runs after a warm-up.
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

namespace spectrasift::bench {

/// Runs f once (warm-up), then `runs` times; the median wall time in milliseconds.
inline double median_ms(int runs, const std::function<void()>& f) {
  f();
  std::vector<double> t;
  for (int i = 0; i < runs; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace spectrasift::bench

// The OpenCL device a test program runs on: the first OpenCL device, or the one SPECTRASIFT_TEST_OPENCL_DEVICE
// names (an index of `spectrasift devices`'s OpenCL list), so that a machine with two platforms (NVIDIA and
// PoCL) can run the suites on each. -1 when there is none.
#pragma once

#include <cstdlib>
#include <vector>

#include "spectrasift/context.hpp"

namespace spectrasift::test {

inline int opencl_device() {
  static const int index = [] {
    std::vector<int> found;
    for (const auto& d : list_devices())
      if (d.backend == Backend::kOpenCL) found.push_back(d.index);
    if (found.empty()) return -1;
    const char* want = std::getenv("SPECTRASIFT_TEST_OPENCL_DEVICE");
    if (!want || !*want) return found.front();
    const int i = std::atoi(want);
    for (int f : found)
      if (f == i) return f;
    return -1;
  }();
  return index;
}

inline ContextOptions opencl_options() {
  ContextOptions o;
  o.backend = Backend::kOpenCL;
  o.device = opencl_device();
  return o;
}

}  // namespace spectrasift::test

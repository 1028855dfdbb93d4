// Helpers that the tests and the benchmarks (bench/, which adds tests/ to its include path) share:
// running a shell command with its output captured, and the mean corner error of a homography against the
// ground truth (the accuracy figure of the registration tests and of match_bench).
#pragma once

#include <sys/wait.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <string>

#include "spectrasift/geometry.hpp"

namespace spectrasift::test {

/// The standard output of the shell command cmd; status = its exit status (-1 when it did not run or exit).
inline std::string run_capture(const std::string& cmd, int& status) {
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) {
    status = -1;
    return {};
  }
  std::string out;
  std::array<char, 4096> buf{};
  while (std::size_t n = std::fread(buf.data(), 1, buf.size(), p)) out.append(buf.data(), n);
  const int s = ::pclose(p);
  status = WIFEXITED(s) ? WEXITSTATUS(s) : -1;
  return out;
}

/// The mean distance between the images of the four corners of a w x h frame under models a and b (3 x 3,
/// row-major), in pixels.
inline double mean_corner_error(const std::array<double, 9>& a, const std::array<double, 9>& b, int w, int h) {
  const Point2 corners[4] = {{0, 0}, {double(w - 1), 0}, {double(w - 1), double(h - 1)}, {0, double(h - 1)}};
  double e = 0;
  for (const auto& c : corners) {
    const Point2 p = apply_model(a, c), q = apply_model(b, c);
    e += std::hypot(p.x - q.x, p.y - q.y);
  }
  return e / 4;
}

}  // namespace spectrasift::test

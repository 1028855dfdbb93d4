// Helpers of the device matching tests (match_opencl_test.cpp, match_cuda_test.cpp, match_filter_opencl_test.cpp,
// match_filter_cuda_test.cpp): random descriptors, planted ties, the bitwise comparison of match lists, and
// the check of a device backend's match_filtered against the CPU backend and against the host filter over the
// same device's nearest twos.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/context_impl.hpp"
#include "core/dispatch.hpp"
#include "spectrasift/context.hpp"
#include "spectrasift/match.hpp"

namespace spectrasift::test {

/// A CPU backend context with two threads (the reference of the device tests).
inline Context& cpu_match_context() {
  static Context c = [] {
    ContextOptions o;
    o.backend = Backend::kCpu;
    o.threads = 2;
    return Context(o);
  }();
  return c;
}

/// n random descriptors: integer-valued 0..255 (SIFT's) or RootSIFT-like (square roots of values summing to 1).
inline Features random_match_features(int n, std::uint64_t seed, bool integer) {
  constexpr int kDim = Features::kDescriptorSize;
  std::mt19937_64 g(seed);
  Features f;
  f.keypoints.resize(std::size_t(n));
  f.descriptors.resize(std::size_t(n) * kDim);
  for (int i = 0; i < n; ++i) {
    float* d = f.descriptors.data() + std::size_t(i) * kDim;
    double sum = 0;
    for (int k = 0; k < kDim; ++k) {
      d[k] = float(g() % 256);
      sum += d[k];
    }
    if (!integer)
      for (int k = 0; k < kDim; ++k) d[k] = float(std::sqrt(double(d[k]) / sum));
  }
  return f;
}

/// Row i of `to` becomes row j of `from`.
inline void copy_descriptor(Features& to, std::size_t i, const Features& from, std::size_t j) {
  std::memcpy(&to.descriptors[i * Features::kDescriptorSize], &from.descriptors[j * Features::kDescriptorSize],
              Features::kDescriptorSize * sizeof(float));
}

/// The GPU u8 path's fallback after uploads (match_cuda_test, match_opencl_test): 2000 integer queries and 5000
/// integer train descriptors `good`; `bad` is `good` with 1000.5 in row 4500, in the second chunk (rows 4096..) of
/// U8PackJob's host packing, so the query chunk and the first train chunk are uploaded before the verdict. Query 0
/// is train row 4500 with 255 in place of 1000.5: that row is its nearest (745.5^2 apart, a distance that no byte
/// form gives).
struct U8LateFallbackSets {
  static constexpr int kBadRow = 4500;
  Features query, good, bad;
};

inline U8LateFallbackSets u8_late_fallback_sets() {
  U8LateFallbackSets s{random_match_features(2000, 61, true), random_match_features(5000, 62, true), {}};
  s.bad = s.good;
  s.bad.descriptors[std::size_t(U8LateFallbackSets::kBadRow) * Features::kDescriptorSize + 9] = 1000.5f;
  copy_descriptor(s.query, 0, s.good, std::size_t(U8LateFallbackSets::kBadRow));
  s.query.descriptors[9] = 255.0f;
  return s;
}

/// The same matches, in the same order, with the same distance bits.
inline void expect_same_match_bits(const std::vector<Match>& a, const std::vector<Match>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const bool same = a[i].query == b[i].query && a[i].train == b[i].train &&
                      std::memcmp(&a[i].distance, &b[i].distance, sizeof(float)) == 0 &&
                      std::memcmp(&a[i].second_distance, &b[i].second_distance, sizeof(float)) == 0;
    ASSERT_TRUE(same) << what << ": match " << i << ": device (" << a[i].query << ", " << a[i].train << ", "
                      << a[i].distance << ", " << a[i].second_distance << ") reference (" << b[i].query << ", "
                      << b[i].train << ", " << b[i].distance << ", " << b[i].second_distance << ")";
  }
}

/// match_features on `gpu` against the CPU backend, and the device's match_filtered against the host filter
/// over the same device's nearest twos (BackendImpl's default body, called directly: proof that the device's
/// kernels decided). Returns the device's matches.
inline std::vector<Match> expect_device_filter_agrees(Context& gpu, const Features& q, const Features& t,
                                                      const MatchOptions& o, const std::string& what) {
  const std::vector<Match> dev = match_features(gpu, q, t, o);
  expect_same_match_bits(dev, match_features(cpu_match_context(), q, t, o), what + " (against the CPU backend)");
  detail::BackendImpl& backend = *gpu.impl().backend_impl;
  const auto view = [&](const Features& f) {
    return detail::FeatureView{f.descriptors.data(), int(f.size()), Features::kDescriptorSize,
                               detail::device_copy_for(f, backend)};
  };
  std::vector<Match> host_filter, device_filter;
  backend.detail::BackendImpl::match_filtered(gpu.impl(), view(q), view(t), o, host_filter);
  backend.match_filtered(gpu.impl(), view(q), view(t), o, device_filter);
  expect_same_match_bits(device_filter, host_filter, what + " (against the host filter)");
  return dev;
}

/// 700 x 900 descriptors (three blocks of 256 queries and a partial one) with planted ties: 40 train rows
/// duplicated at the end (tied best distances: the ratio test fails), 40 queries equal to train rows (distance
/// 0: the ratio test passes), queries 600..619 equal to query 13 (the lowest query wins the mutual check); then
/// ratio 0.8 and 1.0, mutual on and off, with and without a distance limit, each through
/// expect_device_filter_agrees.
inline void expect_filter_cases_agree(Context& gpu, bool integer, const std::string& prefix) {
  Features q = random_match_features(700, 51, integer), t = random_match_features(900, 52, integer);
  for (int i = 0; i < 40; ++i) {
    copy_descriptor(t, t.size() - 1 - std::size_t(i), t, std::size_t(i * 11));
    copy_descriptor(q, std::size_t(i * 13), t, std::size_t(i * 11 + 1));
  }
  for (int i = 600; i < 620; ++i) copy_descriptor(q, std::size_t(i), q, 13);
  for (double ratio : {0.8, 1.0}) {
    for (bool mutual : {false, true}) {
      for (bool limit : {false, true}) {
        MatchOptions o;
        o.ratio = ratio;
        o.mutual = mutual;
        // A limit between the planted exact matches (0) and the random pairs' distances.
        if (limit) o.max_distance = integer ? 1500.0 : 0.35;
        const std::string what = prefix + (integer ? ", integer" : ", RootSIFT-like") + ", ratio " +
                                 std::to_string(ratio) + (mutual ? ", mutual" : "") + (limit ? ", max_distance" : "");
        const std::vector<Match> m = expect_device_filter_agrees(gpu, q, t, o, what);
        // The tests decide something: the planted matches pass, not everything does.
        EXPECT_GE(m.size(), 40u) << what;
        EXPECT_LT(m.size(), q.size()) << what;
        if (mutual) {
          for (const Match& x : m) EXPECT_FALSE(x.query > 600 && x.query < 620) << what << ": a tie lost to 13";
        }
      }
    }
  }
}

/// One train descriptor (second distance +inf: every query passes the ratio test), one query, one by one, and
/// empty sets, ratio 0.8 and 1.0, mutual on and off.
inline void expect_tiny_and_empty_sets_agree(Context& gpu) {
  const Features many = random_match_features(300, 61, true), one = random_match_features(1, 62, true), empty;
  for (bool mutual : {false, true}) {
    for (double ratio : {0.8, 1.0}) {
      MatchOptions o;
      o.ratio = ratio;
      o.mutual = mutual;
      const std::vector<Match> m = expect_device_filter_agrees(gpu, many, one, o, "one train descriptor");
      EXPECT_EQ(m.size(), mutual ? 1u : many.size());
      expect_device_filter_agrees(gpu, one, many, o, "one query");
      expect_device_filter_agrees(gpu, one, one, o, "one by one");
      EXPECT_TRUE(match_features(gpu, empty, many, o).empty());
      EXPECT_TRUE(match_features(gpu, many, empty, o).empty());
      EXPECT_TRUE(match_features(gpu, empty, empty, o).empty());
    }
  }
}

}  // namespace spectrasift::test

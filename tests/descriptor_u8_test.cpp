// The host packer of the GPU u8 matching path (backend/descriptor_u8.hpp) and its threaded job with chunked
// uploads (backend/descriptor_u8_job.hpp): the bytes, norms and verdict of a plain reference on every ISA build
// (AVX2, SSE2), rows that are not a multiple of the vector width, every bad value at every position, and the
// pieces and chunks of the job around their boundaries, on several threads.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "backend/descriptor_u8.hpp"
#include "backend/descriptor_u8_job.hpp"
#include "core/cpu_features.hpp"

namespace {

using spectrasift::CpuIsa;
using spectrasift::set_cpu_isa_cap;
using spectrasift::detail::pack_descriptors_u8;
using spectrasift::detail::U8Chunk;
using spectrasift::detail::U8PackJob;
using spectrasift::detail::U8Side;

constexpr std::uint8_t kUntouched = 0xa5;
constexpr std::int32_t kUntouchedNorm = -7;

// Restores the ISA cap at the end of a test.
struct IsaCap {
  explicit IsaCap(CpuIsa cap) { set_cpu_isa_cap(cap); }
  ~IsaCap() { set_cpu_isa_cap(CpuIsa::kAvx512); }
};

// Every ISA build the packer has: AVX2 and the SSE2 baseline.
const CpuIsa kCaps[] = {CpuIsa::kAvx512, CpuIsa::kBaseline};

// False (and says so) for the AVX2 pass on a CPU without AVX2: that pass would run the baseline again.
bool isa_runs_here(CpuIsa cap) {
  if (cap == CpuIsa::kBaseline || spectrasift::cpu_isa() >= CpuIsa::kAvx2) return true;
  std::printf("[   NOTE   ] AVX2 form not tested: this CPU has no AVX2 (%s)\n",
              ::testing::UnitTest::GetInstance()->current_test_info()->name());
  return false;
}

std::vector<float> random_bytes(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 g(seed);
  std::vector<float> v(n);
  for (float& x : v) x = float(g() % 256);
  return v;
}

// The reference: each value as its byte, each row's sum of squares.
void reference(const std::vector<float>& v, int dim, std::vector<std::uint8_t>& bytes, std::vector<std::int32_t>& norms) {
  const std::size_t rows = v.size() / std::size_t(dim);
  bytes.assign(v.size(), 0);
  norms.assign(rows, 0);
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t k = 0; k < std::size_t(dim); ++k) {
      const int u = int(v[r * std::size_t(dim) + k]);
      bytes[r * std::size_t(dim) + k] = std::uint8_t(u);
      norms[r] += u * u;
    }
}

TEST(DescriptorU8, BytesAndNormsOfEveryDimAndRange) {
  for (CpuIsa cap : kCaps) {
    if (!isa_runs_here(cap)) continue;
    const IsaCap capped(cap);
    // 128 (SIFT), multiples of 4 around the SSE2 (16) and AVX2 (32) steps, and odd widths for the scalar tail.
    for (int dim : {128, 4, 8, 12, 16, 20, 28, 32, 36, 44, 48, 60, 64, 100, 132, 1, 3, 17, 33}) {
      const std::size_t rows = 11;
      std::vector<float> v = random_bytes(rows * std::size_t(dim), std::uint64_t(dim));
      // The extremes in every lane position of row 3, -0.0 in row 4.
      for (int k = 0; k < dim; ++k) v[3 * std::size_t(dim) + std::size_t(k)] = k % 2 ? 255.0f : 0.0f;
      for (int k = 0; k < dim; k += 3) v[4 * std::size_t(dim) + std::size_t(k)] = -0.0f;
      std::vector<std::uint8_t> want_bytes;
      std::vector<std::int32_t> want_norms;
      reference(v, dim, want_bytes, want_norms);
      for (auto [begin, end] : {std::pair{0, 11}, std::pair{2, 9}, std::pair{5, 6}, std::pair{7, 7}}) {
        std::vector<std::uint8_t> bytes(v.size(), kUntouched);
        std::vector<std::int32_t> norms(rows, kUntouchedNorm);
        ASSERT_TRUE(pack_descriptors_u8(v.data(), std::size_t(begin), std::size_t(end), dim, bytes.data(), norms.data()))
            << "dim " << dim << " rows " << begin << ".." << end;
        for (std::size_t r = 0; r < rows; ++r) {
          const bool inside = int(r) >= begin && int(r) < end;
          EXPECT_EQ(norms[r], inside ? want_norms[r] : kUntouchedNorm) << "dim " << dim << " row " << r;
          for (std::size_t k = 0; k < std::size_t(dim); ++k) {
            const std::size_t i = r * std::size_t(dim) + k;
            ASSERT_EQ(bytes[i], inside ? want_bytes[i] : kUntouched) << "dim " << dim << " row " << r << " value " << k;
          }
        }
      }
    }
  }
}

TEST(DescriptorU8, EveryNonByteAtEveryPositionIsRejected) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const float bad[] = {-1.0f, 256.0f, 255.5f, 254.99998f, 0.5f, -0.5f, 1e-30f,
                       std::numeric_limits<float>::denorm_min(), nan, -nan, inf, -inf, 65537.0f, 2147483648.0f,
                       -2147483648.0f, 4294967296.0f, 1e30f, -1e30f};
  for (CpuIsa cap : kCaps) {
    if (!isa_runs_here(cap)) continue;
    const IsaCap capped(cap);
    for (int dim : {128, 36, 20}) {
      const std::vector<float> good = random_bytes(5 * std::size_t(dim), 7);
      std::vector<std::uint8_t> bytes(good.size());
      std::vector<std::int32_t> norms(5);
      ASSERT_TRUE(pack_descriptors_u8(good.data(), 0, 5, dim, bytes.data(), norms.data()));
      for (float b : bad)
        for (int k = 0; k < dim; ++k) {
          std::vector<float> v = good;
          v[2 * std::size_t(dim) + std::size_t(k)] = b;
          EXPECT_FALSE(pack_descriptors_u8(v.data(), 1, 4, dim, bytes.data(), norms.data()))
              << "value " << b << " at " << k << " of dim " << dim << " (cap " << int(cap) << ")";
          // Outside the rows asked for, a bad value is not looked at.
          EXPECT_TRUE(pack_descriptors_u8(v.data(), 3, 5, dim, bytes.data(), norms.data()));
        }
    }
  }
}

// A job over two sides of the given sizes on `helpers` extra threads: every chunk is handed over once, in order,
// with its bytes final at that moment; the result is the reference. A bad value at (side, row) makes it false and
// no chunk from the bad one on is handed over.
void check_job(std::size_t nq, std::size_t nt, int helpers, int bad_side = -1, std::size_t bad_row = 0) {
  constexpr int dim = 128;
  std::vector<float> q = random_bytes(nq * dim, nq + 1), t = random_bytes(nt * dim, nt + 2);
  if (bad_side == 0) q[bad_row * dim + 5] = 0.25f;
  if (bad_side == 1) t[bad_row * dim + 127] = 300.0f;
  std::vector<std::uint8_t> want_q, want_t;
  std::vector<std::int32_t> want_qn, want_tn;
  reference(q, dim, want_q, want_qn);
  reference(t, dim, want_t, want_tn);
  std::vector<std::uint8_t> bytes((nq + nt) * dim, kUntouched);
  std::vector<std::int32_t> norms(nq + nt, kUntouchedNorm);
  U8PackJob job({q.data(), nq, bytes.data(), norms.data()}, {t.data(), nt, bytes.data() + nq * dim, norms.data() + nq},
                dim);
  std::vector<U8Chunk> handed;
  std::vector<std::thread> threads;
  for (int h = 0; h < helpers; ++h) threads.emplace_back([&job] { job.pack_all(); });
  const bool exact = job.pack_and_upload([&](const U8Chunk& c) {
    handed.push_back(c);
    const std::vector<std::uint8_t>& want = c.side ? want_t : want_q;
    const std::uint8_t* got = bytes.data() + (c.side ? nq * dim : 0);
    EXPECT_EQ(0, std::memcmp(got + c.begin * dim, want.data() + c.begin * dim, (c.end - c.begin) * dim))
        << "chunk " << c.side << ":" << c.begin << " handed over before its bytes were final";
  });
  for (auto& th : threads) th.join();
  EXPECT_TRUE(job.pack_and_upload([&](const U8Chunk&) { ADD_FAILURE() << "a chunk handed over twice"; }) == exact);
  const std::vector<U8Chunk>& chunks = job.chunks();
  // The chunks: each side's rows in order, consecutive, at most kChunkRows each.
  std::size_t c = 0;
  for (int side = 0; side < 2; ++side) {
    std::size_t row = 0;
    for (; c < chunks.size() && chunks[c].side == side; ++c) {
      EXPECT_EQ(chunks[c].begin, row);
      EXPECT_GT(chunks[c].end, chunks[c].begin);
      EXPECT_LE(chunks[c].end - chunks[c].begin, U8PackJob::kChunkRows);
      row = chunks[c].end;
    }
    EXPECT_EQ(row, side ? nt : nq) << "side " << side;
  }
  EXPECT_EQ(c, chunks.size());
  if (bad_side < 0) {
    EXPECT_TRUE(exact);
    ASSERT_EQ(handed.size(), chunks.size());
    for (std::size_t i = 0; i < handed.size(); ++i)
      EXPECT_TRUE(handed[i].side == chunks[i].side && handed[i].begin == chunks[i].begin && handed[i].end == chunks[i].end);
    EXPECT_TRUE(std::equal(want_q.begin(), want_q.end(), bytes.begin()));
    EXPECT_TRUE(std::equal(want_t.begin(), want_t.end(), bytes.begin() + std::ptrdiff_t(nq * dim)));
    EXPECT_TRUE(std::equal(want_qn.begin(), want_qn.end(), norms.begin()));
    EXPECT_TRUE(std::equal(want_tn.begin(), want_tn.end(), norms.begin() + std::ptrdiff_t(nq)));
  } else {
    EXPECT_FALSE(exact);
    for (const U8Chunk& h : handed)
      EXPECT_TRUE(h.side < bad_side || (h.side == bad_side && h.end <= bad_row))
          << "chunk " << h.side << ":" << h.begin << " handed over after the bad value at " << bad_side << ":" << bad_row;
  }
}

TEST(DescriptorU8, JobPiecesAndChunksAroundTheirBoundaries) {
  constexpr std::size_t P = U8PackJob::kPieceRows, C = U8PackJob::kChunkRows;
  for (int helpers : {0, 1, 3})
    for (std::size_t n : {std::size_t(1), P - 1, P, P + 1, C - 1, C, C + 1, 2 * C + P + 3}) {
      SCOPED_TRACE(::testing::Message() << "helpers " << helpers << ", n " << n);
      check_job(n, 3 * P + 1, helpers);
      check_job(5, n, helpers);
    }
  check_job(0, 700, 2);  // an empty side has no chunk
  check_job(700, 0, 2);
}

TEST(DescriptorU8, JobStopsHandingOverAtABadValue) {
  constexpr std::size_t C = U8PackJob::kChunkRows;
  for (int helpers : {0, 2}) {
    check_job(3 * C + 10, 2 * C, helpers, 0, 0);
    check_job(3 * C + 10, 2 * C, helpers, 0, 2 * C + 1);
    check_job(3 * C + 10, 2 * C, helpers, 1, C);
    check_job(3 * C + 10, 2 * C, helpers, 1, 2 * C - 1);
  }
}

}  // namespace

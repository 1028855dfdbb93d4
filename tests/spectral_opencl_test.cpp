// OpenCL-specific tests of spectral matching: every ENVI type, interleave and byte order read in place by
// the kernels; streaming with chunk sizes that do not divide the lines, with and without pinned staging;
// tile and work-group shapes taken from (altered) device limits; the program cache; the build-log error.
// Oracles: a float64 computation written here from the definitions in spectral.hpp (squared ED of an
// integer cube is exact, so ED is compared bit for bit), and the backend against itself (the one-reference
// kernel and the tiled product must give the same bits; a layout or chunking change must not change a bit).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "spectrasift/context.hpp"
#include "spectrasift/envi.hpp"
#include "spectrasift/error.hpp"
#include "spectrasift/spectral.hpp"

#ifdef SPECTRASIFT_HAVE_OPENCL
#include "backend/opencl/state.hpp"
#include "core/context_impl.hpp"
#include "tolerances.hpp"

namespace fs = std::filesystem;
using namespace spectrasift;

namespace {

constexpr int kSamples = 37, kLines = 23, kBands = 19;
constexpr int kBadBand = 5;        // bbl = 0
constexpr int kIgnoreX = 4, kIgnoreY = 9;
constexpr double kIgnoreValue = 250;  // only that pixel holds it (other values are 1..200)

/// The cube's integer values, (y, x, b) -> value in 1..200 (and 250 at the ignored pixel's band 2).
std::vector<int> make_values() {
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int> d(1, 200);
  std::vector<int> v(std::size_t(kLines) * kSamples * kBands);
  for (auto& x : v) x = d(rng);
  // Pixel (30, 20) is a copy of pixel (3, 2), the first reference: distance 0, angle 0.
  for (int b = 0; b < kBands; ++b)
    v[(std::size_t(20) * kSamples + 30) * kBands + b] = v[(std::size_t(2) * kSamples + 3) * kBands + b];
  v[(std::size_t(kIgnoreY) * kSamples + kIgnoreX) * kBands + 2] = int(kIgnoreValue);
  return v;
}

int value_at(const std::vector<int>& v, int y, int x, int b) { return v[(std::size_t(y) * kSamples + x) * kBands + b]; }

/// Stores `value` as ENVI type t into 8 bytes (host order), returns the size.
std::size_t encode(SampleType t, int value, unsigned char* out) {
  auto put = [&](auto x) {
    std::memcpy(out, &x, sizeof x);
    return sizeof x;
  };
  switch (t) {
    case SampleType::kU8: return put(std::uint8_t(value));
    case SampleType::kI16: return put(std::int16_t(value));
    case SampleType::kU16: return put(std::uint16_t(value));
    case SampleType::kI32: return put(std::int32_t(value));
    case SampleType::kU32: return put(std::uint32_t(value));
    case SampleType::kF32: return put(float(value));
    case SampleType::kF64: return put(double(value));
    case SampleType::kI64: return put(std::int64_t(value));
    case SampleType::kU64: return put(std::uint64_t(value));
  }
  return 0;
}

/// Writes DIR/NAME.hdr and DIR/NAME.img holding the cube in the given layout; returns the header path.
fs::path write_cube(const fs::path& dir, const std::string& name, const std::vector<int>& v, SampleType t,
                    Interleave il, bool big_endian, int header_offset, double scale_factor = 0) {
  fs::create_directories(dir);
  const fs::path hdr = dir / (name + ".hdr");
  {
    std::ofstream h(hdr);
    h << "ENVI\ndescription = {OpenCL test cube}\nsamples = " << kSamples << "\nlines = " << kLines
      << "\nbands = " << kBands << "\nheader offset = " << header_offset << "\nfile type = ENVI Standard\ndata type = "
      << int(t) << "\ninterleave = " << to_string(il) << "\nbyte order = " << (big_endian ? 1 : 0)
      << "\ndata ignore value = " << kIgnoreValue << "\nbbl = {";
    for (int b = 0; b < kBands; ++b) h << (b ? ", " : "") << (b == kBadBand ? 0 : 1);
    h << "}\n";
    if (scale_factor > 0) h << "reflectance scale factor = " << scale_factor << "\n";
  }
  std::vector<unsigned char> bytes(std::size_t(header_offset), 0xAB);
  auto emit = [&](int y, int x, int b) {
    unsigned char e[8];
    const std::size_t n = encode(t, value_at(v, y, x, b), e);
    if (big_endian) std::reverse(e, e + n);
    bytes.insert(bytes.end(), e, e + n);
  };
  switch (il) {
    case Interleave::kBsq:
      for (int b = 0; b < kBands; ++b)
        for (int y = 0; y < kLines; ++y)
          for (int x = 0; x < kSamples; ++x) emit(y, x, b);
      break;
    case Interleave::kBil:
      for (int y = 0; y < kLines; ++y)
        for (int b = 0; b < kBands; ++b)
          for (int x = 0; x < kSamples; ++x) emit(y, x, b);
      break;
    case Interleave::kBip:
      for (int y = 0; y < kLines; ++y)
        for (int x = 0; x < kSamples; ++x)
          for (int b = 0; b < kBands; ++b) emit(y, x, b);
      break;
  }
  std::ofstream(dir / (name + ".img"), std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                                             std::streamsize(bytes.size()));
  return hdr;
}

/// References: `count` spectra; the first is pixel (3, 2) of the cube, the others random integers.
SpectralLibrary make_refs(const std::vector<int>& v, int count, unsigned seed = 99) {
  SpectralLibrary lib;
  lib.count = count;
  lib.bands = kBands;
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(1, 200);
  for (int r = 0; r < count; ++r) {
    for (int b = 0; b < kBands; ++b) lib.spectra.push_back(r == 0 ? float(value_at(v, 2, 3, b)) : float(d(rng)));
    lib.names.push_back("r" + std::to_string(r));
  }
  return lib;
}

/// The metric in float64 from its definition (spectral.hpp), used bands only, values times `scale`.
double oracle(Metric m, const std::vector<int>& v, int y, int x, const SpectralLibrary& lib, int r, double scale) {
  std::vector<double> p, q;
  for (int b = 0; b < kBands; ++b) {
    if (b == kBadBand) continue;
    p.push_back(value_at(v, y, x, b) * scale);
    q.push_back(double(lib.spectra[std::size_t(r) * kBands + b]));
  }
  const double n = double(p.size());
  double s = 0, pp = 0, qq = 0, pq = 0, mp = 0, mq = 0;
  switch (m) {
    case Metric::kEuclidean:
      for (std::size_t i = 0; i < p.size(); ++i) s += (p[i] - q[i]) * (p[i] - q[i]);
      return std::sqrt(s);
    case Metric::kSpectralAngle:
      for (std::size_t i = 0; i < p.size(); ++i) pp += p[i] * p[i], qq += q[i] * q[i], pq += p[i] * q[i];
      return std::acos(std::clamp(pq / std::sqrt(pp * qq), -1.0, 1.0));
    case Metric::kCorrelation:
      for (std::size_t i = 0; i < p.size(); ++i) mp += p[i] / n, mq += q[i] / n;
      for (std::size_t i = 0; i < p.size(); ++i)
        pp += (p[i] - mp) * (p[i] - mp), qq += (q[i] - mq) * (q[i] - mq), pq += (p[i] - mp) * (q[i] - mq);
      return pq / std::sqrt(pp * qq);
    case Metric::kInformationDivergence: {
      double sp = 0, sq = 0;
      for (std::size_t i = 0; i < p.size(); ++i) sp += std::max(p[i], 1e-12), sq += std::max(q[i], 1e-12);
      for (std::size_t i = 0; i < p.size(); ++i) {
        const double a = std::max(p[i], 1e-12) / sp, c = std::max(q[i], 1e-12) / sq;
        s += a * std::log(a / c) + c * std::log(c / a);
      }
      return s;
    }
  }
  return 0;
}

std::vector<int> opencl_devices() {
  std::vector<int> out;
  for (const auto& d : list_devices())
    if (d.backend == Backend::kOpenCL) out.push_back(d.index);
  return out;
}

Context opencl_context(int device) {
  ContextOptions o;
  o.backend = Backend::kOpenCL;
  o.device = device;
  return Context(o);
}

bool bits_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

class SpectralOpenCL : public ::testing::Test {
 protected:
  void SetUp() override {
    devices_ = opencl_devices();
    if (devices_.empty()) GTEST_SKIP() << "no OpenCL device on this machine (or OpenCL not compiled in)";
    dir_ = fs::temp_directory_path() / ("spectrasift_ocl_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    values_ = make_values();
  }
  void TearDown() override {
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }
  std::vector<int> devices_;
  fs::path dir_;
  std::vector<int> values_;
};

/// Checks every pixel's score of reference r against the float64 oracle; the no-data pixel must be NaN.
void expect_matches_oracle(const SpectralResult& res, Metric m, const std::vector<int>& v, const SpectralLibrary& lib,
                           int r, int band, double scale, const std::string& what) {
  const std::size_t plane = std::size_t(kSamples) * kLines;
  int bad = 0;
  for (int y = 0; y < kLines; ++y)
    for (int x = 0; x < kSamples; ++x) {
      const float got = res.scores[std::size_t(band) * plane + std::size_t(y) * kSamples + x];
      if (x == kIgnoreX && y == kIgnoreY) {
        EXPECT_TRUE(std::isnan(got)) << what << ": the no-data pixel must be NaN";
        continue;
      }
      const double want = oracle(m, v, y, x, lib, r, scale);
      if (m == Metric::kEuclidean) {
        // The squared distance of integers is exact in double: the float score is the rounded exact value.
        if (got != float(want) && ++bad < 5) ADD_FAILURE() << what << " ed at " << x << "," << y << ": " << got << " vs " << want;
      } else {
        const double tol = m == Metric::kInformationDivergence ? 1e-5 + 1e-4 * std::abs(want) : 2e-5;
        if (!(std::abs(double(got) - want) <= tol) && ++bad < 5)
          ADD_FAILURE() << what << " " << to_string(m) << " at " << x << "," << y << ": " << got << " vs " << want;
      }
    }
  EXPECT_EQ(bad, 0) << what;
}

}  // namespace

// Every ENVI type, both byte orders and every interleave, with an odd header offset (misaligned map): the
// one-reference kernel reads them in place and must give the same bits as the little-endian u8 bsq cube,
// and that cube must agree with the float64 oracle (ED exactly).
TEST_F(SpectralOpenCL, EveryTypeInterleaveAndByteOrderGivesIdenticalScores) {
  const SampleType types[] = {SampleType::kU8,  SampleType::kI16, SampleType::kU16, SampleType::kI32, SampleType::kU32,
                              SampleType::kF32, SampleType::kF64, SampleType::kI64, SampleType::kU64};
  const Interleave ils[] = {Interleave::kBsq, Interleave::kBil, Interleave::kBip};
  const SpectralLibrary ref = make_refs(values_, 1);
  for (int dev : devices_) {
    Context ctx = opencl_context(dev);
    for (Metric m : {Metric::kSpectralAngle}) {  // (ed: StreamingChunks...; each type is one more build)
      SpectralOptions opt;
      opt.metric = m;
      opt.chunk_lines = 7;  // 23 lines = 7 + 7 + 7 + 2
      const EnviCube base = open_envi(write_cube(dir_, "base", values_, SampleType::kU8, Interleave::kBsq, false, 0));
      const SpectralResult want = spectral_match(ctx, base, ref, opt);
      expect_matches_oracle(want, m, values_, ref, 0, 0, 1.0, "u8 bsq");
      int cubes = 0;
      for (SampleType t : types)
        for (Interleave il : ils)
          for (bool be : {false, true}) {
            // Keep the run short: every type in every byte order, every interleave with three of the types.
            if (il != Interleave::kBsq && t != SampleType::kI16 && t != SampleType::kF64 && t != SampleType::kU32) continue;
            const std::string name = std::string(to_string(t)) + "_" + to_string(il) + (be ? "_be" : "_le");
            const EnviCube cube = open_envi(write_cube(dir_, name, values_, t, il, be, 3));
            const SpectralResult got = spectral_match(ctx, cube, ref, opt);
            EXPECT_TRUE(bits_equal(got.scores, want.scores)) << to_string(m) << " " << name << " on " << ctx.describe();
            ++cubes;
          }
      EXPECT_EQ(cubes, 9 * 2 + 2 * 3 * 2);
    }
  }
}

// Chunks of 1, 5 (does not divide 23), 23 and automatic lines, with pinned staging and with direct
// rectangular uploads, give the same bits; scores of every metric agree with the float64 oracle; the
// reflectance scale factor is applied.
TEST_F(SpectralOpenCL, StreamingChunksAndStagingDoNotChangeResults) {
  const SpectralLibrary ref = make_refs(values_, 1);
  for (int dev : devices_) {
    Context ctx = opencl_context(dev);
    auto& st = opencl::state(ctx.impl());
    for (Interleave il : {Interleave::kBsq, Interleave::kBil, Interleave::kBip}) {
      const EnviCube cube =
          open_envi(write_cube(dir_, std::string("c_") + to_string(il), values_, SampleType::kI16, il, false, 0, 2.0));
      SpectralLibrary scaled = ref;
      for (auto& x : scaled.spectra) x *= 0.5f;
      for (Metric m : {Metric::kEuclidean, Metric::kSpectralAngle, Metric::kCorrelation, Metric::kInformationDivergence}) {
        SpectralOptions opt;
        opt.metric = m;
        opt.chunk_lines = 23;
        st.host_staging = false;
        const SpectralResult one = spectral_match(ctx, cube, scaled, opt);
        // (ed stays exact: halves of integers square and sum exactly in double)
        expect_matches_oracle(one, m, values_, scaled, 0, 0, 0.5, std::string("scaled ") + to_string(il));
        for (bool staging : {false, true})
          for (int chunk : {1, 5, 0}) {
            st.host_staging = staging;
            opt.chunk_lines = chunk;
            const SpectralResult r = spectral_match(ctx, cube, scaled, opt);
            EXPECT_TRUE(bits_equal(r.scores, one.scores))
                << to_string(m) << " " << to_string(il) << " chunk " << chunk << " staging " << staging;
            EXPECT_GT(r.times.compute_ms, 0.0);
          }
        // Samples staged through __local memory (the GPU path for bip), forced here on any device: same
        // bits, with chunks of 5 lines (185 pixels: the last work-group is partly empty).
        if (m == Metric::kSpectralAngle || m == Metric::kInformationDivergence) {
          st.stage_samples = 1;
          opt.chunk_lines = 5;
          const SpectralResult r = spectral_match(ctx, cube, scaled, opt);
          st.stage_samples = -1;
          EXPECT_TRUE(bits_equal(r.scores, one.scores)) << to_string(m) << " " << to_string(il) << " staged samples";
        }
      }
    }
    st.host_staging = !st.is_cpu;
  }
}

// Many references: the product kernels (tiled: several reference tiles, 70 > any tile width; rows: several
// register blocks) give for every reference the same bits as the one-reference kernel and as each other; best / top-k / threshold equal the reduction of
// the full score cube with the comparator of spectral_metrics.h; no-data pixels get -1.
TEST_F(SpectralOpenCL, ProductKernelsAgreeWithOneReferenceKernelAndReductions) {
  const int kRefs = 70;
  const SpectralLibrary lib = make_refs(values_, kRefs);
  const std::size_t plane = std::size_t(kSamples) * kLines;
  for (int dev : devices_) {
    Context ctx = opencl_context(dev);
    const EnviCube cube = open_envi(write_cube(dir_, "many", values_, SampleType::kI16, Interleave::kBil, true, 0));
    for (Metric m : {Metric::kEuclidean, Metric::kSpectralAngle, Metric::kCorrelation, Metric::kInformationDivergence}) {
      SpectralOptions opt;
      opt.metric = m;
      opt.chunk_lines = 6;
      const SpectralResult all = spectral_match(ctx, cube, lib, opt);
      ASSERT_EQ(all.scores.size(), plane * kRefs);
      for (int r : {0, 1, 37, 69}) {
        SpectralLibrary one;
        one.count = 1;
        one.bands = kBands;
        one.spectra.assign(lib.spectra.begin() + std::ptrdiff_t(r) * kBands, lib.spectra.begin() + std::ptrdiff_t(r + 1) * kBands);
        const SpectralResult single = spectral_match(ctx, cube, one, opt);
        if (m == Metric::kSpectralAngle) {
          // Many references report the exact rescoring of the angle (spectral_sam_exact), one reference acos
          // of its float cosine: they agree on the cosine within the float dot product's error.
          int bad = 0;
          for (std::size_t i = 0; i < plane && bad < 5; ++i)
            if (!test::scores_agree(m, single.scores[i], all.scores[std::size_t(r) * plane + i], test::cpu_vs_f64(m)) &&
                ++bad)
              ADD_FAILURE() << "sam reference " << r << " pixel " << i << ": " << single.scores[i] << " vs "
                            << all.scores[std::size_t(r) * plane + i];
          continue;
        }
        EXPECT_EQ(std::memcmp(single.scores.data(), all.scores.data() + std::size_t(r) * plane, plane * sizeof(float)), 0)
            << to_string(m) << " reference " << r << ": product and one-reference kernel differ";
      }
      expect_matches_oracle(all, m, values_, lib, 0, 0, 1.0, "product ref 0");
      expect_matches_oracle(all, m, values_, lib, 69, 69, 1.0, "product ref 69");
      // The other product kernel (tiled on a CPU device, rows on a GPU) gives the same bits.
      auto& st = opencl::state(ctx.impl());
      const int other = st.is_cpu ? 0 : 1;
      st.gemm_variant = other;
      const SpectralResult all_other = spectral_match(ctx, cube, lib, opt);
      st.gemm_variant = -1;
      EXPECT_TRUE(bits_equal(all.scores, all_other.scores)) << to_string(m) << ": tiled and row kernels differ";
      if (m == Metric::kInformationDivergence) {  // spectral_prepare with samples staged in __local memory
        st.stage_samples = 1;
        const SpectralResult staged = spectral_match(ctx, cube, lib, opt);
        st.stage_samples = -1;
        EXPECT_TRUE(bits_equal(all.scores, staged.scores)) << "staged spectral_prepare differs";
      }
      // The reductions depend on the metric only through its direction: check one of each direction
      // (each metric and reduction is one more program build, slow on PoCL in CI).
      if (m != Metric::kEuclidean && m != Metric::kCorrelation) continue;

      const bool higher = higher_is_better(m);
      auto better = [&](float sa, int ia, float sb, int ib) {
        if (std::isnan(sa)) return false;
        if (std::isnan(sb)) return true;
        if (sa == sb) return ia < ib;
        return higher ? sa > sb : sa < sb;
      };
      const int k = 40;  // most of the 70: a deep heap (spectral_topk_heap_push / _sort), sorted best first
      opt.reduction = Reduction::kTopK;
      opt.top_k = k;
      const SpectralResult top = spectral_match(ctx, cube, lib, opt);
      opt.reduction = Reduction::kBest;
      const SpectralResult best = spectral_match(ctx, cube, lib, opt);
      // A threshold that some pixels pass and some fail: the median best score.
      std::vector<float> bests;
      for (std::size_t p = 0; p < plane; ++p)
        if (!std::isnan(best.scores[p])) bests.push_back(best.scores[p]);
      ASSERT_FALSE(bests.empty());
      std::nth_element(bests.begin(), bests.begin() + std::ptrdiff_t(bests.size() / 2), bests.end());
      opt.reduction = Reduction::kThreshold;
      opt.threshold = bests[bests.size() / 2];
      const SpectralResult thr = spectral_match(ctx, cube, lib, opt);
      int passed = 0, failed = 0;
      for (std::size_t p = 0; p < plane; ++p) {
        std::vector<int> order(kRefs);
        for (int r = 0; r < kRefs; ++r) order[r] = r;
        std::sort(order.begin(), order.end(), [&](int a, int b) {
          return better(all.scores[std::size_t(a) * plane + p], a, all.scores[std::size_t(b) * plane + p], b);
        });
        const bool nodata = p == std::size_t(kIgnoreY) * kSamples + kIgnoreX;
        for (int j = 0; j < k; ++j) {
          const int want = nodata ? -1 : order[j];
          ASSERT_EQ(top.index[std::size_t(j) * plane + p], want) << to_string(m) << " top " << j << " pixel " << p;
          if (!nodata) {
            ASSERT_EQ(top.scores[std::size_t(j) * plane + p], all.scores[std::size_t(want) * plane + p]);
          }
        }
        ASSERT_EQ(best.index[p], top.index[p]);
        const float s = nodata ? std::numeric_limits<float>::quiet_NaN() : all.scores[std::size_t(order[0]) * plane + p];
        const bool pass = !std::isnan(s) && (higher ? s >= float(opt.threshold) : s <= float(opt.threshold));
        ASSERT_EQ(thr.index[p], pass ? order[0] : -1) << to_string(m) << " threshold, pixel " << p;
        if (pass) ++passed; else ++failed;
      }
      EXPECT_GT(passed, 0);
      EXPECT_GT(failed, 0);
      // Pixel (30, 20) is reference 0: distance 0 (ed), angle 0 (sam), correlation 1, divergence 0.
      const std::size_t p0 = std::size_t(20) * kSamples + 30;
      EXPECT_EQ(best.index[p0], 0) << to_string(m);
      if (m == Metric::kCorrelation) {  // the fused reductions of the other kernel give the same answers
        st.gemm_variant = other;
        const SpectralResult thr2 = spectral_match(ctx, cube, lib, opt);
        opt.reduction = Reduction::kTopK;
        const SpectralResult top2 = spectral_match(ctx, cube, lib, opt);
        st.gemm_variant = -1;
        EXPECT_TRUE(bits_equal(thr2.scores, thr.scores));
        EXPECT_EQ(thr2.index, thr.index);
        EXPECT_TRUE(bits_equal(top2.scores, top.scores));
        EXPECT_EQ(top2.index, top.index);
      }
    }
  }
}

// Tile and work-group shapes come from the device's limits: with the limits lowered (small local memory,
// small work-groups) other kernels are built and the results do not change by a bit.
TEST_F(SpectralOpenCL, WorkGroupsAndTilesFollowDeviceLimits) {
  const SpectralLibrary lib = make_refs(values_, 40);
  for (int dev : devices_) {
    Context ctx = opencl_context(dev);
    auto& st = opencl::state(ctx.impl());
    st.gemm_variant = 0;  // the tiled product: its tiles follow the limits
    const EnviCube cube = open_envi(write_cube(dir_, "wg", values_, SampleType::kF32, Interleave::kBip, false, 0));
    // 1-D work-groups: a multiple of the kernel's preferred multiple, within the kernel's limit.
    cl_kernel k = st.kernel("spectral_one_ref.cl", "spectral_one_ref",
                            "-DSAMPLE_TYPE=4 -DSAMPLE_BIG_ENDIAN=0 -DMETRIC=1 -DREF_IN_LOCAL=1");
    const auto lim = st.limits(k);
    const std::size_t wg = st.work_group_1d(k, 256);
    EXPECT_GE(wg, 1u);
    EXPECT_LE(wg, lim.work_group_size);
    EXPECT_LE(wg, st.max_work_group);
    if (wg >= lim.preferred_multiple) {
      EXPECT_EQ(wg % lim.preferred_multiple, 0u);
    }
    // sid: the largest __local footprint (two tiles per operand), so the one that shrinks the most.
    for (Metric m : {Metric::kInformationDivergence}) {
      SpectralOptions opt;
      opt.metric = m;
      opt.reduction = Reduction::kTopK;
      opt.top_k = 2;
      const SpectralResult want = spectral_match(ctx, cube, lib, opt);
      const std::size_t saved_local = st.local_mem, saved_wg = st.max_work_group;
      st.local_mem = 3 * 1024;  // forces thinner band tiles (and smaller register tiles for sid)
      st.max_work_group = 16;   // forces 4x4 work-groups
      const std::size_t builds = st.program_builds + st.program_binary_loads;  // built, or loaded from the disk cache
      const SpectralResult got = spectral_match(ctx, cube, lib, opt);
      st.local_mem = saved_local;
      st.max_work_group = saved_wg;
      EXPECT_GT(st.program_builds + st.program_binary_loads, builds) << "other tile options must build another program";
      EXPECT_TRUE(bits_equal(got.scores, want.scores)) << to_string(m);
      EXPECT_EQ(got.index, want.index) << to_string(m);
      // Too little local memory for any tile: a clear error, not a crash.
      st.local_mem = 64;
      EXPECT_THROW(spectral_match(ctx, cube, lib, opt), Error);
      st.local_mem = saved_local;
    }
  }
}

// The program cache: a second identical call builds nothing; a build failure reports the build log.
TEST_F(SpectralOpenCL, ProgramCacheAndBuildErrors) {
  const SpectralLibrary lib = make_refs(values_, 3);
  for (int dev : devices_) {
    Context ctx = opencl_context(dev);
    auto& st = opencl::state(ctx.impl());
    const EnviCube cube = open_envi(write_cube(dir_, "cache", values_, SampleType::kU16, Interleave::kBsq, false, 0));
    SpectralOptions opt;
    opt.reduction = Reduction::kBest;
    const SpectralResult a = spectral_match(ctx, cube, lib, opt);
    // Programs come from a build or from the disk cache (program_cache.hpp): count both.
    const std::size_t builds = st.program_builds + st.program_binary_loads;
    EXPECT_GE(builds, 2u);  // prepare + product
    const SpectralResult b = spectral_match(ctx, cube, lib, opt);
    EXPECT_EQ(st.program_builds + st.program_binary_loads, builds) << "the second call must reuse the cached programs";
    EXPECT_TRUE(bits_equal(a.scores, b.scores));
    EXPECT_EQ(a.index, b.index);
    // The product kernel without its tile options does not compile: the error carries the build log.
    try {
      st.program("spectral_gemm.cl", "-DMETRIC=1 -DKEEP=1");
      ADD_FAILURE() << "building without tile sizes must fail";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kBackend);
      EXPECT_EQ(e.backend(), "opencl");
      const std::string msg = e.what();
      EXPECT_NE(msg.find("spectral_gemm.cl"), std::string::npos) << msg;
      EXPECT_NE(msg.find("build log"), std::string::npos) << msg;
      EXPECT_NE(msg.find("WG_"), std::string::npos) << "the log should name the missing macro: " << msg;
    }
    EXPECT_THROW(st.program("no_such_kernel.cl"), Error);
  }
}

#else

TEST(SpectralOpenCL, NotCompiled) { GTEST_SKIP() << "the OpenCL backend is not compiled into this build"; }

#endif

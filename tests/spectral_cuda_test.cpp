// CUDA backend of spectral matching, against the CPU backend and the float64 oracle of
// spectral_test_util.hpp. Runs where a CUDA device is present (scripts/device-check.sh on the GPU
// machine); skipped elsewhere with a message.
//   - every ENVI type, both byte orders, every interleave, an odd header offset (misaligned map):
//     identical bits on CUDA, ed bit-identical to the CPU backend (integer cube), sam within tolerance;
//   - streaming with chunks that do not divide the lines changes no bit;
//   - every metric and reduction (all, best, top-k, threshold) on the exact path (few references) and the
//     GEMM path (many references; TF32 and FP32) agrees with the CPU backend: scores within the tolerance
//     table, indices equal except for near ties (the CPU score of CUDA's pick equals the CPU best within
//     tolerance);
//   - no-data pixels give NaN / -1;
//   - on a real scene (HYDICE) with 200 real reference spectra, the TF32 path picks the CPU's best reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "spectral_test_util.hpp"
#include "spectrasift/context.hpp"
#include "spectrasift/envi.hpp"
#include "spectrasift/error.hpp"
#include "spectrasift/spectral.hpp"
#include "tolerances.hpp"
#ifdef SPECTRASIFT_HAVE_CUDA
#include "backend/cuda/host/sample_packer.hpp"
#include "hooks/cuda_hooks.hpp"
#endif

namespace spectrasift::test {
namespace {

bool have_cuda() {
  for (const auto& d : list_devices())
    if (d.backend == Backend::kCuda) return true;
  return false;
}

Context make_ctx(Backend b) {
  ContextOptions o;
  o.backend = b;
  o.threads = 2;
  return Context(o);
}

bool bits_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

const char* type_name(int t) {
  switch (t) {
    case 1: return "u8"; case 2: return "i16"; case 3: return "i32"; case 4: return "f32"; case 5: return "f64";
    case 12: return "u16"; case 13: return "u32"; case 14: return "i64"; case 15: return "u64";
  }
  return "?";
}

class SpectralCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_cuda()) GTEST_SKIP() << "no CUDA device on this machine (or the CUDA backend is not compiled in)";
  }
};

/// Compares a CUDA result with the CPU result of the same call: scores within tolerance (NaN with NaN);
/// indices equal, or a near tie: the CPU's score of CUDA's pick agrees with the CPU's score at that rank.
/// `cpu_all` (the CPU's kAll scores, band per reference) decides near ties. Returns the exact index matches.
std::size_t expect_agree(const SpectralResult& cuda, const SpectralResult& cpu, const SpectralResult* cpu_all, Metric m,
                         const std::string& what) {
  const Tolerance tol = backend_vs_cpu(Backend::kCuda, m);
  EXPECT_EQ(cuda.scores.size(), cpu.scores.size()) << what;
  EXPECT_EQ(cuda.index.size(), cpu.index.size()) << what;
  if (cuda.scores.size() != cpu.scores.size() || cuda.index.size() != cpu.index.size()) return 0;
  int bad = 0;
  for (std::size_t i = 0; i < cpu.scores.size(); ++i)
    if (!scores_agree(m, cuda.scores[i], cpu.scores[i], tol) && ++bad <= 5)
      ADD_FAILURE() << what << ": score " << i << " cuda " << cuda.scores[i] << " cpu " << cpu.scores[i];
  EXPECT_EQ(bad, 0) << what;
  std::size_t same = 0;
  const std::size_t plane = std::size_t(cpu.samples) * cpu.lines;
  int bad_index = 0;
  for (std::size_t i = 0; i < cpu.index.size(); ++i) {
    if (cuda.index[i] == cpu.index[i]) {
      ++same;
      continue;
    }
    bool near_tie = false;
    if (cpu_all && cuda.index[i] >= 0 && cpu.index[i] >= 0) {
      const std::size_t p = i % plane;
      const float mine = cpu_all->scores[std::size_t(cuda.index[i]) * plane + p];
      near_tie = scores_agree(m, mine, cpu.scores[i], tol);
    }
    if (!near_tie && ++bad_index <= 5)
      ADD_FAILURE() << what << ": index " << i << " cuda " << cuda.index[i] << " cpu " << cpu.index[i];
  }
  EXPECT_EQ(bad_index, 0) << what;
  return same;
}

// Every ENVI type in both byte orders and every interleave, with an odd header offset so that the map is
// misaligned: the CUDA scores are the same bits for every encoding; ed equals the CPU's bit for bit
// (integer cube: the squared distance is exact), sam agrees within the tolerance table.
TEST_F(SpectralCuda, EveryTypeInterleaveAndByteOrder) {
  TempDir dir("cuda-types");
  const TestCube c = TestCube::random(37, 23, 19, 11, /*integer=*/true, /*scale=*/80.0);  // 0..~190: fits u8
  const SpectralLibrary ref = library_of({pixel_spectrum(c, 5, 7)});
  Context gpu = make_ctx(Backend::kCuda), cpu = make_ctx(Backend::kCpu);
  const EnviCube base = open_envi(write_cube(dir.path(), "base", c, 1, "bsq", false));
  for (Metric m : {Metric::kEuclidean, Metric::kSpectralAngle}) {
    SpectralOptions opt;
    opt.metric = m;
    opt.reduction = Reduction::kBest;
    opt.chunk_lines = 7;  // 23 = 7 + 7 + 7 + 2
    const SpectralResult want_cpu = spectral_match(cpu, base, ref, opt);
    const SpectralResult want = spectral_match(gpu, base, ref, opt);
    if (m == Metric::kEuclidean) {
      EXPECT_TRUE(bits_equal(want.scores, want_cpu.scores)) << "ed u8 bsq: CUDA vs CPU bits";
    }
    expect_agree(want, want_cpu, nullptr, m, std::string("u8 bsq ") + to_string(m));
    int cubes = 0;
    for (int t : {1, 2, 3, 4, 5, 12, 13, 14, 15})
      for (const char* il : {"bsq", "bil", "bip"})
        for (bool be : {false, true}) {
          const std::string name = std::string(type_name(t)) + "_" + il + (be ? "_be" : "_le");
          const EnviCube cube = open_envi(write_cube(dir.path(), name, c, t, il, be, {}, 3));
          const SpectralResult got = spectral_match(gpu, cube, ref, opt);
          EXPECT_TRUE(bits_equal(got.scores, want.scores)) << to_string(m) << " " << name;
          EXPECT_EQ(got.index, want.index) << to_string(m) << " " << name;
          ++cubes;
        }
    EXPECT_EQ(cubes, 54);
  }
}

// The one-reference kernels of small-integer cubes: every thread mapping of the 4-pixels-per-thread kernel (BSQ;
// BIL whose rows hold a multiple of 4, an even and an odd number of samples; BIP with 16-byte pixels) and the
// general 8-threads-per-pixel kernel (BIP u8 with 24-byte pixels takes it anyway) give the same bits for ed, sam and scc, with an integer-valued and a fractional reference, on
// positive and negative samples; they agree with the CPU backend (ed bit for bit for the integer reference);
// a reference too large for ed's split form takes the double-precision form and still agrees.
#ifdef SPECTRASIFT_HAVE_CUDA
TEST_F(SpectralCuda, OneReferenceKernelsGiveSameBits) {
  TempDir dir("cuda-one-ref");
  Context gpu = make_ctx(Backend::kCuda), cpu = make_ctx(Backend::kCpu);
  int checked = 0;
  for (int samples : {40, 38, 37}) {
    TestCube c = TestCube::random(samples, 9, 24, 17 + samples, /*integer=*/true, /*scale=*/80.0);  // fits u8
    TestCube neg = c;
    for (double& v : neg.v) v -= 150.0;  // i16 only
    std::vector<double> frac(24), big(24);
    for (int b = 0; b < 24; ++b) {
      frac[b] = (c.at(1, 2, b) + c.at(4, 5, b) + c.at(7, 3, b)) / 3.0 + 0.37;
      big[b] = b == 5 ? 3.0e6 : c.at(2, 2, b);
    }
    const SpectralLibrary integer_ref = library_of({pixel_spectrum(c, 3, 4)});
    const SpectralLibrary frac_ref = library_of({frac});
    const SpectralLibrary big_ref = library_of({big});
    for (int t : {1, 2, 12})
      for (const TestCube* cube_values : {&c, &neg}) {
        if (cube_values == &neg && t != 2) continue;
        const std::string base = std::string("c") + std::to_string(samples) + "_" + type_name(t) + (cube_values == &neg ? "n" : "");
        std::vector<EnviCube> cubes;  // bsq, bil, bip
        for (const char* il : {"bsq", "bil", "bip"})
          cubes.push_back(open_envi(write_cube(dir.path(), base + "_" + il, *cube_values, t, il, false)));
        for (const SpectralLibrary* lib : {&integer_ref, &frac_ref, &big_ref})
          for (Metric m : {Metric::kEuclidean, Metric::kSpectralAngle, Metric::kCorrelation}) {
            if (lib == &big_ref && m != Metric::kEuclidean) continue;
            SpectralOptions opt;
            opt.metric = m;
            opt.reduction = Reduction::kBest;
            const std::string tag = std::string(type_name(t)) + (cube_values == &neg ? " negative" : "") + " samples " +
                                    std::to_string(samples) + " " + to_string(m) +
                                    (lib == &integer_ref ? " integer ref" : lib == &frac_ref ? " fractional ref" : " large ref");
            const SpectralResult want = spectral_match(gpu, cubes[0], *lib, opt);
            const SpectralResult want_cpu = spectral_match(cpu, cubes[0], *lib, opt);
            expect_agree(want, want_cpu, nullptr, m, tag + ": CUDA vs CPU");
            if (m == Metric::kEuclidean && lib == &integer_ref) {
              EXPECT_TRUE(bits_equal(want.scores, want_cpu.scores)) << tag << ": ed must be the CPU's bits";
            }
            for (const EnviCube& cube : cubes) {
              const char* il = to_string(cube.header().interleave);
              for (bool rows : {true, false})
                for (int chunk : {0, 4}) {
                  cuda::bench::set_one_ref_rows(gpu, rows);
                  opt.chunk_lines = chunk;
                  const SpectralResult got = spectral_match(gpu, cube, *lib, opt);
                  const std::string what = tag + " " + il + (rows ? " rows kernel" : " general kernel") + " chunk " + std::to_string(chunk);
                  EXPECT_TRUE(bits_equal(got.scores, want.scores)) << what;
                  EXPECT_EQ(got.index, want.index) << what;
                  ++checked;
                }
              opt.chunk_lines = 0;
              cuda::bench::set_one_ref_rows(gpu, true);
            }
          }
      }
  }
  EXPECT_EQ(checked, 3 * (3 * 7 + 7) * 3 * 4);
}
#endif

// Chunks of 1, 5 and 7 lines (none divides 23), the whole cube, and the automatic size give the same bits
// for every metric, on the one-reference kernel, the exact multi-reference kernel and the GEMM path.
TEST_F(SpectralCuda, StreamingChunksDoNotChangeABit) {
  TempDir dir("cuda-chunks");
  const TestCube c = TestCube::random(29, 23, 31, 5, /*integer=*/false);
  std::vector<std::vector<double>> spectra;
  for (int i = 0; i < 120; ++i) spectra.push_back(pixel_spectrum(c, (i * 7) % 29, (i * 3) % 23));
  const SpectralLibrary many = library_of(spectra);
  const SpectralLibrary one = library_of({spectra[3]});
  const SpectralLibrary few = library_of({spectra[0], spectra[1], spectra[2], spectra[3], spectra[4]});
  Context gpu = make_ctx(Backend::kCuda);
  for (const char* il : {"bsq", "bip"}) {
    const EnviCube cube = open_envi(write_cube(dir.path(), std::string("c_") + il, c, 4, il, false));
    for (Metric m : all_metrics())
      for (const SpectralLibrary* lib : {&one, &few, &many}) {
        SpectralOptions opt;
        opt.metric = m;
        opt.reduction = lib == &few ? Reduction::kAll : Reduction::kBest;
        opt.chunk_lines = 23;
        const SpectralResult want = spectral_match(gpu, cube, *lib, opt);
        for (int chunk : {1, 5, 7, 0}) {
          opt.chunk_lines = chunk;
          const SpectralResult got = spectral_match(gpu, cube, *lib, opt);
          EXPECT_TRUE(bits_equal(got.scores, want.scores)) << il << " " << to_string(m) << " refs " << lib->count << " chunk " << chunk;
          EXPECT_EQ(got.index, want.index) << il << " " << to_string(m) << " refs " << lib->count << " chunk " << chunk;
        }
      }
  }
}

// Every metric and every reduction against the CPU backend, on the exact path (5 references) and on the
// GEMM path (150 references, TF32 and FP32), on a BIL cube with a bad band and a reflectance scale factor.
TEST_F(SpectralCuda, EveryMetricAndReductionAgreesWithCpu) {
  TempDir dir("cuda-reductions");
  const TestCube c = TestCube::random(31, 27, 40, 9, /*integer=*/true);
  std::string bbl = "bbl = {";
  for (int b = 0; b < 40; ++b) bbl += std::string(b ? ", " : "") + (b == 13 ? "0" : "1");
  bbl += "}\nreflectance scale factor = 1000\n";
  const EnviCube cube = open_envi(write_cube(dir.path(), "c", c, 2, "bil", false, bbl));
  const TestCube scaled = read_values(cube);
  std::vector<std::vector<double>> spectra;
  for (int i = 0; i < 150; ++i) {
    auto s = pixel_spectrum(scaled, (i * 11) % 31, (i * 5) % 27);
    for (auto& v : s) v *= 1.0 + 0.01 * ((i * 37) % 7);
    spectra.push_back(s);
  }
  const SpectralLibrary many = library_of(spectra);
  const SpectralLibrary few = library_of({spectra[0], spectra[10], spectra[20], spectra[30], spectra[40]});
  Context gpu = make_ctx(Backend::kCuda), cpu = make_ctx(Backend::kCpu);
  for (Metric m : all_metrics()) {
    for (const SpectralLibrary* lib : {&few, &many}) {
      SpectralOptions all;
      all.metric = m;
      all.reduction = Reduction::kAll;
      const SpectralResult cpu_all = spectral_match(cpu, cube, *lib, all);
      if (lib == &few) {
        const SpectralResult g = spectral_match(gpu, cube, *lib, all);
        expect_agree(g, cpu_all, nullptr, m, std::string("all ") + to_string(m));
      }
      for (bool tf32 : {true, false}) {
        if (lib == &few && !tf32) continue;  // no GEMM on the exact path
        for (Reduction r : {Reduction::kBest, Reduction::kTopK, Reduction::kThreshold}) {
          SpectralOptions opt;
          opt.metric = m;
          opt.reduction = r;
          opt.top_k = 3;
          opt.allow_tensor_cores = tf32;
          // A threshold that keeps about half of the pixels: the median of the CPU's best scores.
          SpectralOptions best = opt;
          best.reduction = Reduction::kBest;
          const SpectralResult cpu_best = spectral_match(cpu, cube, *lib, best);
          // (in the widest gap of the middle half of the sorted scores, so that no pixel sits on it)
          std::vector<float> sorted;
          for (float v : cpu_best.scores)
            if (!std::isnan(v)) sorted.push_back(v);
          std::sort(sorted.begin(), sorted.end());
          std::size_t gap = sorted.size() / 4;
          for (std::size_t i = sorted.size() / 4; i + 1 < 3 * sorted.size() / 4; ++i)
            if (sorted[i + 1] - sorted[i] > sorted[gap + 1] - sorted[gap]) gap = i;
          opt.threshold = 0.5 * (double(sorted[gap]) + double(sorted[gap + 1]));
          const SpectralResult want = spectral_match(cpu, cube, *lib, opt);
          const SpectralResult got = spectral_match(gpu, cube, *lib, opt);
          const std::string what = std::string(to_string(m)) + (r == Reduction::kBest ? " best" : r == Reduction::kTopK ? " top3" : " threshold") +
                                   " refs " + std::to_string(lib->count) + (tf32 ? " tf32" : " fp32");
          const std::size_t same = expect_agree(got, want, &cpu_all, m, what);
          EXPECT_GE(double(same), 0.99 * double(want.index.size())) << what;
        }
      }
    }
  }
}

// A pixel holding the data ignore value in a used band gives NaN and index -1 on every path.
TEST_F(SpectralCuda, NoDataPixels) {
  TempDir dir("cuda-nodata");
  TestCube c = TestCube::random(13, 11, 17, 3, /*integer=*/true);
  c.at(4, 6, 9) = -999;
  c.at(10, 0, 0) = -999;
  const EnviCube cube = open_envi(write_cube(dir.path(), "c", c, 2, "bip", false, "data ignore value = -999\n"));
  std::vector<std::vector<double>> spectra;
  for (int i = 0; i < 100; ++i) spectra.push_back(pixel_spectrum(c, i % 13, (i / 13) % 11 == 4 ? 5 : (i / 13) % 11));
  Context gpu = make_ctx(Backend::kCuda);
  for (int count : {1, 5, 100})
    for (Metric m : all_metrics()) {
      std::vector<std::vector<double>> s(spectra.begin(), spectra.begin() + count);
      SpectralOptions opt;
      opt.metric = m;
      opt.reduction = Reduction::kBest;
      const SpectralResult r = spectral_match(gpu, cube, library_of(s), opt);
      for (auto [x, y] : {std::pair{6, 4}, std::pair{0, 10}}) {
        const std::size_t p = std::size_t(y) * 13 + x;
        EXPECT_TRUE(std::isnan(r.scores[p])) << to_string(m) << " refs " << count;
        EXPECT_EQ(r.index[p], -1) << to_string(m) << " refs " << count;
      }
      EXPECT_FALSE(std::isnan(r.scores[0])) << to_string(m) << " refs " << count;
    }
}

// NaN in the data (a float cube) gives NaN / -1 for that pixel on every path (sid: the shared clamp turns
// NaN into 1e-12), as on the CPU, and leaves the other pixels alone (the GEMM path's candidate order stays a
// total order with NaN keys).
TEST_F(SpectralCuda, NanDataGivesNoMatch) {
  TempDir dir("cuda-nan");
  TestCube c = TestCube::random(19, 9, 23, 21, /*integer=*/false);
  c.at(3, 4, 7) = std::nan("");
  const EnviCube cube = open_envi(write_cube(dir.path(), "c", c, 4, "bsq", false));
  std::vector<std::vector<double>> spectra;
  for (int i = 0; i < 110; ++i) spectra.push_back(pixel_spectrum(c, (i * 5) % 19, 5 + (i % 4)));
  Context gpu = make_ctx(Backend::kCuda), cpu = make_ctx(Backend::kCpu);
  for (int count : {1, 5, 110})
    for (Metric m : all_metrics()) {
      std::vector<std::vector<double>> s(spectra.begin(), spectra.begin() + count);
      SpectralOptions opt;
      opt.metric = m;
      opt.reduction = Reduction::kBest;
      const SpectralResult got = spectral_match(gpu, cube, library_of(s), opt);
      const SpectralResult want = spectral_match(cpu, cube, library_of(s), opt);
      const std::size_t p = std::size_t(3) * 19 + 4;
      if (m != Metric::kInformationDivergence) {  // sid clamps every value below 1e-12, NaN included, to 1e-12
        EXPECT_TRUE(std::isnan(got.scores[p])) << to_string(m) << " refs " << count;
        EXPECT_EQ(got.index[p], -1) << to_string(m) << " refs " << count;
      }
      SpectralOptions all = opt;
      all.reduction = Reduction::kAll;
      const SpectralResult cpu_all = spectral_match(cpu, cube, library_of(s), all);
      expect_agree(got, want, &cpu_all, m, std::string("nan ") + to_string(m) + " refs " + std::to_string(count));
    }
}

#ifdef SPECTRASIFT_HAVE_CUDA
// Packed uploads of 16-bit cubes (numeric/sample_pack.h, unpacked on the GPU): the real scene written as
// uint16 and, shifted to negative samples, as int16, in every interleave and both byte orders (big-endian
// ones behind an odd header offset: a misaligned map), whole or in chunks of 7 lines (partial groups and
// blocks), give the bits of raw uploads for one reference and for the best of 120 (tensor-core path), with
// every chunk packed (and then really travel packed) or packed as the balanced default decides. A cube of random 16-bit samples does not pack: the call goes back to raw uploads
// after its first chunk, with the same bits.
TEST_F(SpectralCuda, PackedUploadsGiveTheBitsOfRawUploads) {
  if (detail::SamplePacker::best_isa() != detail::PackIsa::kAvx512Gfni)
    GTEST_SKIP() << "this processor lacks the AVX-512 VBMI + GFNI packer: uploads are never packed";
  TempDir dir("cuda-packed");
  const TestCube hydice = read_values(open_envi(fs::path(SPECTRASIFT_TEST_DATA) / "hydice_data.hdr"));
  TestCube shifted = hydice;
  for (auto& x : shifted.v) x -= 300;
  TestCube noise = TestCube::zeros(hydice.samples, hydice.lines, hydice.bands);
  std::mt19937 rng(9);
  for (auto& x : noise.v) x = double(int(rng() % 65536u) - 32768);
  std::vector<std::vector<double>> spectra;
  for (int i = 0; i < 120; ++i) spectra.push_back(pixel_spectrum(hydice, (i * 13) % hydice.samples, (i * 7) % hydice.lines));
  const SpectralLibrary many = library_of(spectra);
  const SpectralLibrary one = library_of({spectra[5]});
  Context gpu = make_ctx(Backend::kCuda);
  struct Case {
    const TestCube* values;
    int type;
    const char* name;
  };
  int checked = 0;
  for (const Case& cs : {Case{&hydice, 12, "u16"}, Case{&shifted, 2, "i16"}, Case{&noise, 2, "noise"}})
    for (const char* il : {"bsq", "bil", "bip"})
      for (bool big : {false, true}) {
        const std::string name = std::string(cs.name) + "_" + il + (big ? "_be" : "_le");
        const EnviCube cube = open_envi(write_cube(dir.path(), name, *cs.values, cs.type, il, big, {}, big ? 1 : 0));
        for (const SpectralLibrary* lib : {&one, &many})
          for (int chunk : {0, 7}) {
            SpectralOptions opt;
            opt.metric = Metric::kSpectralAngle;
            opt.reduction = Reduction::kBest;
            opt.chunk_lines = chunk;
            const std::string what = name + (lib == &one ? " one reference" : " best of 120") + " chunk " + std::to_string(chunk);
            cuda::bench::set_pack_policy(gpu, 0);  // never
            const SpectralResult raw = spectral_match(gpu, cube, *lib, opt);
            EXPECT_EQ(cuda::bench::last_pack_ratio(gpu), 0.0) << what;
            cuda::bench::set_pack_policy(gpu, 2);  // balanced (the default): some chunks packed, some not
            const SpectralResult balanced = spectral_match(gpu, cube, *lib, opt);
            EXPECT_TRUE(bits_equal(balanced.scores, raw.scores)) << what << " balanced";
            EXPECT_EQ(balanced.index, raw.index) << what << " balanced";
            cuda::bench::set_pack_policy(gpu, 1);  // always
            const SpectralResult packed = spectral_match(gpu, cube, *lib, opt);
            const double ratio = cuda::bench::last_pack_ratio(gpu);
            EXPECT_TRUE(bits_equal(packed.scores, raw.scores)) << what;
            EXPECT_EQ(packed.index, raw.index) << what;
            if (cs.values == &noise) {
              EXPECT_GT(ratio, 1.0) << what << ": random samples cannot pack";
            } else if (chunk == 0) {
              EXPECT_GT(ratio, 0.3) << what;
              EXPECT_LT(ratio, 0.7) << what;
            } else {
              EXPECT_GT(ratio, 0.0) << what << ": the first chunk at least travels packed";
            }
            ++checked;
          }
      }
  cuda::bench::set_pack_policy(gpu, 2);
  EXPECT_EQ(checked, 3 * 3 * 2 * 2 * 2);
}
#endif

// A real scene (HYDICE urban, uint16, 162 bands) against 200 real spectra of the scene (pixels and
// mixtures of pixels): the TF32 GEMM path with exact rescoring picks the CPU's best reference (near ties
// aside) on every pixel, and exactly the same reference on at least 99.9% of them.
TEST_F(SpectralCuda, Tf32BestMatchesCpuOnRealScene) {
  const EnviCube cube = open_envi(fs::path(SPECTRASIFT_TEST_DATA) / "hydice_data.hdr");
  const TestCube v = read_values(cube);
  std::vector<std::vector<double>> spectra;
  for (int i = 0; i < 200; ++i) {
    const auto a = pixel_spectrum(v, (i * 13) % v.samples, (i * 7) % v.lines);
    const auto b = pixel_spectrum(v, (i * 29 + 3) % v.samples, (i * 17 + 5) % v.lines);
    std::vector<double> s(a.size());
    const double w = (i % 5) / 8.0;
    for (std::size_t k = 0; k < s.size(); ++k) s[k] = (1 - w) * a[k] + w * b[k];
    spectra.push_back(s);
  }
  const SpectralLibrary lib = library_of(spectra);
  Context gpu = make_ctx(Backend::kCuda), cpu = make_ctx(Backend::kCpu);
  for (Metric m : all_metrics()) {
    SpectralOptions all;
    all.metric = m;
    all.reduction = Reduction::kAll;
    const SpectralResult cpu_all = spectral_match(cpu, cube, lib, all);
    SpectralOptions opt;
    opt.metric = m;
    opt.reduction = Reduction::kBest;
    const SpectralResult want = spectral_match(cpu, cube, lib, opt);
    const SpectralResult got = spectral_match(gpu, cube, lib, opt);
    const std::size_t same = expect_agree(got, want, &cpu_all, m, std::string("hydice tf32 ") + to_string(m));
    EXPECT_GE(double(same), 0.999 * double(want.index.size())) << to_string(m);
  }
}

// The fused FP16 kernel (best / threshold of many references with tensor cores) rescores its candidates
// with the exact formulas: on the real scene its scores and indices are the bits of the FP32 cuBLAS path
// (also exact rescoring), for ed, sam and scc; in both its forms (wgmma where built, and mma.sync).
TEST_F(SpectralCuda, FusedFp16BestEqualsFp32PathBitForBit) {
  const EnviCube cube = open_envi(fs::path(SPECTRASIFT_TEST_DATA) / "hydice_data.hdr");
  const TestCube v = read_values(cube);
  std::vector<std::vector<double>> spectra;
  for (int i = 0; i < 300; ++i) {
    auto s = pixel_spectrum(v, (i * 31) % v.samples, (i * 11) % v.lines);
    for (auto& x : s) x *= 1.0 + 0.002 * (i % 9);  // near-duplicates: many candidates within the margin
    spectra.push_back(s);
  }
  const SpectralLibrary lib = library_of(spectra);
  Context gpu = make_ctx(Backend::kCuda);
  std::vector<bool> forms = {false};
#ifdef SPECTRASIFT_HAVE_CUDA
  if (cuda::bench::fused_wgmma_available(gpu)) forms.push_back(true);
#endif
  for (bool wgmma : forms)
  for (Metric m : {Metric::kEuclidean, Metric::kSpectralAngle, Metric::kCorrelation}) {
    SCOPED_TRACE(wgmma ? "wgmma" : "mma.sync");
#ifdef SPECTRASIFT_HAVE_CUDA
    cuda::bench::set_fused_wgmma(gpu, wgmma);
#endif
    double median_best = 0;
    for (Reduction r : {Reduction::kBest, Reduction::kThreshold}) {
      SpectralOptions fp16;
      fp16.metric = m;
      fp16.reduction = r;
      fp16.threshold = median_best;  // about half of the pixels pass
      SpectralOptions fp32 = fp16;
      fp32.allow_tensor_cores = false;
      const SpectralResult a = spectral_match(gpu, cube, lib, fp16);
      const SpectralResult b = spectral_match(gpu, cube, lib, fp32);
      EXPECT_TRUE(bits_equal(a.scores, b.scores)) << to_string(m);
      EXPECT_EQ(a.index, b.index) << to_string(m);
      std::size_t matched = 0;
      for (int i : a.index) matched += i >= 0;
      EXPECT_GT(matched, a.index.size() / 10) << to_string(m);  // a real share matches (or passes)
      std::vector<float> sorted;
      for (float x : a.scores)
        if (!std::isnan(x)) sorted.push_back(x);
      std::sort(sorted.begin(), sorted.end());
      if (!sorted.empty()) median_best = sorted[sorted.size() / 2];
    }
  }
}

}  // namespace
}  // namespace spectrasift::test

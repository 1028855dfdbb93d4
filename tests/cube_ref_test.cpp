// In-memory cube views (spectrasift/cube.hpp): a cube already in memory gives the same bits as the same
// samples read from an ENVI file, on the CPU backend and on OpenCL (when a device exists), in BIP with
// explicit strides and in BSQ with the interleave's dense layout; bad views are refused with a message.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/cpu_features.hpp"
#include "spectral_test_util.hpp"
#include "spectrasift/cube.hpp"
#include "spectrasift/error.hpp"
#include "spectrasift/spectral.hpp"

using namespace spectrasift;
using namespace spectrasift::test;

namespace {

const std::string kData = SPECTRASIFT_TEST_DATA;

std::vector<std::uint8_t> read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

bool bits_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

/// The metadata of an opened ENVI cube on a view of other bytes.
CubeRef with_metadata(const EnviCube& cube, const std::vector<std::uint8_t>& bytes) {
  CubeRef r = cube_ref(cube);
  r.data = bytes.data();
  r.size_bytes = bytes.size();
  r.line_stride = r.sample_stride = r.band_stride = 0;
  r.name = "in-memory cube";
  return r;
}

std::vector<Context> contexts() {
  std::vector<Context> out;
  ContextOptions cpu;
  cpu.backend = Backend::kCpu;
  cpu.threads = 2;
  out.emplace_back(cpu);
  for (const auto& d : list_devices())
    if (d.backend == Backend::kOpenCL) {
      ContextOptions o;
      o.backend = Backend::kOpenCL;
      o.device = d.index;
      out.emplace_back(o);
      break;
    }
  return out;
}

std::vector<SpectralOptions> option_sets() {
  std::vector<SpectralOptions> out;
  for (Metric m : {Metric::kEuclidean, Metric::kSpectralAngle, Metric::kCorrelation, Metric::kInformationDivergence}) {
    SpectralOptions all;
    all.metric = m;
    out.push_back(all);
    SpectralOptions top = all;
    top.reduction = Reduction::kTopK;
    top.top_k = 3;
    out.push_back(top);
  }
  return out;
}

void expect_same(const SpectralResult& a, const SpectralResult& b, const std::string& what) {
  EXPECT_TRUE(bits_equal(a.scores, b.scores)) << what;
  EXPECT_EQ(a.index, b.index) << what;
  EXPECT_EQ(a.k, b.k) << what;
}

}  // namespace

TEST(CubeRef, InMemoryMatchesTheEnviFileBitForBit) {
  const fs::path hdr = kData + "/hydice_data.hdr";
  const EnviCube bip_file = open_envi(hdr);
  const EnviHeader& h = bip_file.header();
  ASSERT_EQ(h.interleave, Interleave::kBip);
  const std::size_t S = std::size_t(h.samples), L = std::size_t(h.lines), B = std::size_t(h.bands);
  const std::size_t es = sample_size(h.data_type);

  // The file's bytes in memory (BIP, explicit strides), and transposed to BSQ (written as a file too).
  const std::vector<std::uint8_t> bip = read_all(bip_file.data_path());
  ASSERT_EQ(bip.size(), S * L * B * es);
  std::vector<std::uint8_t> bsq(bip.size());
  for (std::size_t y = 0; y < L; ++y)
    for (std::size_t x = 0; x < S; ++x)
      for (std::size_t b = 0; b < B; ++b)
        std::memcpy(&bsq[((b * L + y) * S + x) * es], &bip[((y * S + x) * B + b) * es], es);
  TempDir dir("cube-ref");
  std::string text = read_text(hdr);
  const auto at = text.find("interleave = bip");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 16, "interleave = bsq");
  write_text(dir / "bsq.hdr", text);
  write_bytes(dir / "bsq.img", bsq);
  const EnviCube bsq_file = open_envi(dir / "bsq.hdr");

  CubeRef bip_ref = with_metadata(bip_file, bip);
  bip_ref.line_stride = S * B;
  bip_ref.sample_stride = B;
  bip_ref.band_stride = 1;
  CubeRef bsq_ref = with_metadata(bip_file, bsq);
  bsq_ref.interleave = Interleave::kBsq;  // strides left 0: the dense BSQ layout

  const SpectralLibrary five = reference_from_pixels(bip_file, {{10, 10}, {40, 30}, {5, 50}, {60, 20}, {20, 20}});
  const SpectralLibrary one = reference_from_pixels(bip_file, {{33, 44}});
  int compared = 0;
  for (Context& ctx : contexts()) {
    for (const SpectralOptions& o : option_sets()) {
      for (const SpectralLibrary* lib : {&one, &five}) {
        if (o.reduction == Reduction::kTopK && lib->count < o.top_k) continue;
        const std::string what = ctx.describe() + " " + to_string(o.metric) + " refs " + std::to_string(lib->count) +
                                 (o.reduction == Reduction::kTopK ? " top 3" : " all");
        expect_same(spectral_match(ctx, bip_file, *lib, o), spectral_match(ctx, bip_ref, *lib, o), what + " bip");
        expect_same(spectral_match(ctx, bsq_file, *lib, o), spectral_match(ctx, bsq_ref, *lib, o), what + " bsq");
        compared += 2;
      }
    }
  }
  EXPECT_GE(compared, 2 * 8 * 2 - 8);
}

TEST(CubeRef, EveryCpuKernelBuildGivesTheSameBits) {
  // The CPU spectral kernels exist as AVX2 and baseline builds (core/cpu_features.hpp); the test hook
  // caps the choice. On a CPU without AVX2 both runs use the baseline and the test passes trivially.
  const EnviCube cube = open_envi(kData + "/hydice_data.hdr");
  const SpectralLibrary five = reference_from_pixels(cube, {{10, 10}, {40, 30}, {5, 50}, {60, 20}, {20, 20}});
  ContextOptions co;
  co.backend = Backend::kCpu;
  Context ctx(co);
  for (const SpectralOptions& o : option_sets()) {
    set_cpu_isa_cap(CpuIsa::kBaseline);
    const SpectralResult base = spectral_match(ctx, cube, five, o);
    set_cpu_isa_cap(CpuIsa::kAvx512);
    expect_same(base, spectral_match(ctx, cube, five, o), std::string("metric ") + to_string(o.metric));
  }
}

TEST(CubeRef, BadViewsAreRefusedWithAMessage) {
  const std::vector<std::uint8_t> bytes(4 * 3 * 2 * 2, 1);  // 4 samples x 3 lines x 2 bands of uint16
  CubeRef good;
  good.data = bytes.data();
  good.size_bytes = bytes.size();
  good.type = SampleType::kU16;
  good.samples = 4;
  good.lines = 3;
  good.bands = 2;
  SpectralLibrary lib;
  lib.count = 1;
  lib.bands = 2;
  lib.spectra = {1.0f, 2.0f};
  ContextOptions co;
  co.backend = Backend::kCpu;
  Context ctx(co);
  EXPECT_NO_THROW(spectral_match(ctx, good, lib, SpectralOptions{}));

  struct Case {
    const char* what;
    CubeRef ref;
    const char* message;
  };
  std::vector<Case> cases;
  auto add = [&](const char* what, const char* message, auto edit) {
    CubeRef r = good;
    edit(r);
    cases.push_back({what, r, message});
  };
  add("null", "data pointer is null", [](CubeRef& r) { r.data = nullptr; });
  add("zero samples", "shape must be positive", [](CubeRef& r) { r.samples = 0; });
  add("zero bands", "shape must be positive", [](CubeRef& r) { r.bands = 0; });
  add("small buffer", "buffer holds", [](CubeRef& r) { r.size_bytes -= 1; });
  add("no size", "buffer holds", [](CubeRef& r) { r.size_bytes = 0; });
  add("one stride", "all three strides", [](CubeRef& r) { r.sample_stride = 1; });
  add("overlap", "overlap", [](CubeRef& r) { r.sample_stride = 1, r.line_stride = 4, r.band_stride = 2; });
  add("padded", "not a dense", [](CubeRef& r) { r.band_stride = 1, r.sample_stride = 2, r.line_stride = 10; });
  add("bbl", "bad band list", [](CubeRef& r) { r.bbl = {1, 1, 1}; });
  add("wavelength", "wavelength list", [](CubeRef& r) { r.wavelength = {400.0}; });
  add("scale", "reflectance scale factor", [](CubeRef& r) { r.reflectance_scale_factor = 0.0; });
  for (const Case& c : cases) {
    try {
      spectral_match(ctx, c.ref, lib, SpectralOptions{});
      ADD_FAILURE() << c.what << ": no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << c.what;
      EXPECT_NE(std::string(e.what()).find(c.message), std::string::npos) << c.what << ": " << e.what();
      EXPECT_NE(std::string(e.what()).find("in-memory cube"), std::string::npos) << c.what << ": " << e.what();
    }
  }
}

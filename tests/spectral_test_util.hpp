// Helpers of the ENVI and spectral tests: temporary directories, cubes written byte by byte in any
// type / interleave / byte order (independently of the library's writer), and the float64 reference
// implementation of the four metrics (textbook two-pass formulas, no shared code with the backends).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

#include "spectrasift/context.hpp"
#include "spectrasift/envi.hpp"
#include "spectrasift/error.hpp"
#include "spectrasift/spectral.hpp"

namespace spectrasift::test {

namespace fs = std::filesystem;

/// A context on backend b, or null with the reason in `why`: the backend is not compiled in, has no device
/// on this machine, or its context cannot be created (tests then skip with the reason).
inline std::unique_ptr<Context> backend_context_or_reason(Backend b, std::string& why) {
  bool compiled = false;
  for (Backend c : compiled_backends()) compiled = compiled || c == b;
  if (!compiled) {
    why = to_string(b) + std::string(" backend is not compiled into this build");
    return nullptr;
  }
  bool device = false;
  for (const auto& d : list_devices()) device = device || d.backend == b;
  if (!device) {
    why = to_string(b) + std::string(" backend has no device on this machine");
    return nullptr;
  }
  ContextOptions o;
  o.backend = b;
  try {
    return std::make_unique<Context>(o);
  } catch (const Error& e) {
    why = to_string(b) + std::string(" context cannot be created: ") + e.what();
    return nullptr;
  }
}

/// A fresh directory under the system's temp dir, removed with its content at the end of the scope.
class TempDir {
 public:
  explicit TempDir(const std::string& tag) {
    static int counter = 0;
    path_ = fs::temp_directory_path() / ("spectrasift-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  fs::path operator/(const std::string& name) const { return path_ / name; }

 private:
  fs::path path_;
};

inline void write_text(const fs::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary) << text;
}
inline void write_bytes(const fs::path& p, const std::vector<std::uint8_t>& b) {
  std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
}

/// Values of a cube in double, element (y, x, b) at v[(y * samples + x) * bands + b].
struct TestCube {
  int samples = 0, lines = 0, bands = 0;
  std::vector<double> v;
  double& at(int y, int x, int b) { return v[(std::size_t(y) * samples + x) * bands + b]; }
  double at(int y, int x, int b) const { return v[(std::size_t(y) * samples + x) * bands + b]; }
  static TestCube zeros(int s, int l, int b) {
    TestCube c;
    c.samples = s;
    c.lines = l;
    c.bands = b;
    c.v.assign(std::size_t(s) * l * b, 0.0);
    return c;
  }
  /// Smooth positive "spectra" with per-pixel variation; integer-valued when `integer`.
  static TestCube random(int s, int l, int b, unsigned seed, bool integer, double scale = 1000.0) {
    TestCube c = zeros(s, l, b);
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> u(0.0, 1.0);
    for (int y = 0; y < l; ++y)
      for (int x = 0; x < s; ++x) {
        const double a = 0.2 + u(rng), f = 1.0 + 4.0 * u(rng), ph = 6.28 * u(rng);
        for (int k = 0; k < b; ++k) {
          double val = scale * (a + 0.5 * std::sin(f * k / b * 6.28 + ph) + 0.6 + 0.05 * u(rng));
          c.at(y, x, k) = integer ? std::round(val) : val;
        }
      }
    return c;
  }
};

inline std::size_t type_size(int type) {
  switch (type) {
    case 1: return 1;
    case 2: case 12: return 2;
    case 3: case 4: case 13: return 4;
    default: return 8;
  }
}

/// One value in ENVI type `type`, little- or big-endian.
inline void encode(double v, int type, bool big, std::uint8_t* out) {
  std::uint8_t b[8] = {};
  auto put = [&](auto x) { std::memcpy(b, &x, sizeof x); };
  switch (type) {
    case 1: put(std::uint8_t(v)); break;
    case 2: put(std::int16_t(v)); break;
    case 3: put(std::int32_t(v)); break;
    case 4: put(float(v)); break;
    case 5: put(double(v)); break;
    case 12: put(std::uint16_t(v)); break;
    case 13: put(std::uint32_t(v)); break;
    case 14: put(std::int64_t(v)); break;
    case 15: put(std::uint64_t(v)); break;
  }
  const std::size_t n = type_size(type);
  if (big) std::reverse(b, b + n);
  std::memcpy(out, b, n);
}

/// Writes NAME.hdr + NAME.img (or the data name given) for the cube; `extra` is appended to the header.
inline fs::path write_cube(const fs::path& dir, const std::string& name, const TestCube& c, int type,
                           const std::string& interleave, bool big_endian, const std::string& extra = {},
                           std::size_t header_offset = 0, const std::string& data_ext = ".img") {
  const std::size_t es = type_size(type);
  std::vector<std::uint8_t> bytes(header_offset + std::size_t(c.samples) * c.lines * c.bands * es, 0xAB);
  std::size_t e = 0;
  auto emit = [&](int y, int x, int b) { encode(c.at(y, x, b), type, big_endian, &bytes[header_offset + (e++) * es]); };
  if (interleave == "bsq") {
    for (int b = 0; b < c.bands; ++b)
      for (int y = 0; y < c.lines; ++y)
        for (int x = 0; x < c.samples; ++x) emit(y, x, b);
  } else if (interleave == "bil") {
    for (int y = 0; y < c.lines; ++y)
      for (int b = 0; b < c.bands; ++b)
        for (int x = 0; x < c.samples; ++x) emit(y, x, b);
  } else {
    for (int y = 0; y < c.lines; ++y)
      for (int x = 0; x < c.samples; ++x)
        for (int b = 0; b < c.bands; ++b) emit(y, x, b);
  }
  const fs::path hdr = dir / (name + ".hdr");
  write_text(hdr, "ENVI\nsamples = " + std::to_string(c.samples) + "\nlines = " + std::to_string(c.lines) +
                      "\nbands = " + std::to_string(c.bands) + "\nheader offset = " + std::to_string(header_offset) +
                      "\nfile type = ENVI Standard\ndata type = " + std::to_string(type) + "\ninterleave = " +
                      interleave + "\nbyte order = " + (big_endian ? "1" : "0") + "\n" + extra);
  write_bytes(dir / (name + data_ext), bytes);
  return hdr;
}

/// A cube's values (after the reflectance scale factor) in double, read through EnviCube::value.
inline TestCube read_values(const EnviCube& cube) {
  const auto& h = cube.header();
  TestCube c = TestCube::zeros(h.samples, h.lines, h.bands);
  const double scale = h.reflectance_scale_factor ? 1.0 / *h.reflectance_scale_factor : 1.0;
  for (int y = 0; y < h.lines; ++y)
    for (int x = 0; x < h.samples; ++x)
      for (int b = 0; b < h.bands; ++b) c.at(y, x, b) = cube.value(y, x, b) * scale;
  return c;
}

/// The float64 reference score of pixel p against reference r over the used bands (NaN = no data).
inline double reference_score(Metric m, const std::vector<double>& p, const std::vector<double>& r) {
  const std::size_t n = p.size();
  const double nan = std::nan("");
  switch (m) {
    case Metric::kEuclidean: {
      double s = 0;
      for (std::size_t i = 0; i < n; ++i) s += (p[i] - r[i]) * (p[i] - r[i]);
      return std::sqrt(s);
    }
    case Metric::kSpectralAngle: {
      double pr = 0, pp = 0, rr = 0;
      for (std::size_t i = 0; i < n; ++i) {
        pr += p[i] * r[i];
        pp += p[i] * p[i];
        rr += r[i] * r[i];
      }
      if (pp == 0 || rr == 0) return nan;
      return std::acos(std::clamp(pr / std::sqrt(pp * rr), -1.0, 1.0));
    }
    case Metric::kCorrelation: {
      double mp = 0, mr = 0;
      for (std::size_t i = 0; i < n; ++i) {
        mp += p[i];
        mr += r[i];
      }
      mp /= double(n);
      mr /= double(n);
      double c = 0, vp = 0, vr = 0;
      for (std::size_t i = 0; i < n; ++i) {
        c += (p[i] - mp) * (r[i] - mr);
        vp += (p[i] - mp) * (p[i] - mp);
        vr += (r[i] - mr) * (r[i] - mr);
      }
      if (vp == 0 || vr == 0) return nan;
      return c / std::sqrt(vp * vr);
    }
    case Metric::kInformationDivergence: {
      const double eps = double(1e-12f);
      double sp = 0, sr = 0;
      for (std::size_t i = 0; i < n; ++i) {
        sp += std::max(p[i], eps);
        sr += std::max(r[i], eps);
      }
      double d = 0;
      for (std::size_t i = 0; i < n; ++i) {
        const double a = std::max(p[i], eps) / sp, b = std::max(r[i], eps) / sr;
        d += (a - b) * (std::log(a) - std::log(b));
      }
      return d;
    }
  }
  return nan;
}

/// Reference scores of every pixel (row-major) against reference `r` (all bands of the cube), with the
/// bad bands of `bbl` left out and pixels holding `ignore` in a used band giving NaN.
inline std::vector<double> reference_scores(Metric m, const TestCube& c, const std::vector<double>& r,
                                            const std::vector<int>& bbl = {}, const double* ignore = nullptr,
                                            const TestCube* raw = nullptr) {
  std::vector<double> out;
  for (int y = 0; y < c.lines; ++y)
    for (int x = 0; x < c.samples; ++x) {
      std::vector<double> p, rr;
      bool nodata = false;
      for (int b = 0; b < c.bands; ++b) {
        if (!bbl.empty() && bbl[b] == 0) continue;
        const double rawv = raw ? raw->at(y, x, b) : c.at(y, x, b);
        if (ignore && float(rawv) == float(*ignore)) nodata = true;
        p.push_back(c.at(y, x, b));
        rr.push_back(r[b]);
      }
      out.push_back(nodata ? std::nan("") : reference_score(m, p, rr));
    }
  return out;
}

inline std::vector<double> pixel_spectrum(const TestCube& c, int x, int y) {
  std::vector<double> s(c.bands);
  for (int b = 0; b < c.bands; ++b) s[b] = c.at(y, x, b);
  return s;
}

inline SpectralLibrary library_of(const std::vector<std::vector<double>>& spectra) {
  SpectralLibrary lib;
  lib.count = int(spectra.size());
  lib.bands = int(spectra.at(0).size());
  for (std::size_t i = 0; i < spectra.size(); ++i) {
    for (double v : spectra[i]) lib.spectra.push_back(float(v));
    lib.names.push_back("ref" + std::to_string(i));
  }
  return lib;
}

inline const std::vector<Metric>& all_metrics() {
  static const std::vector<Metric> m{Metric::kEuclidean, Metric::kSpectralAngle, Metric::kCorrelation,
                                     Metric::kInformationDivergence};
  return m;
}

}  // namespace spectrasift::test

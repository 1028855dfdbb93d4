// The synthetic AVIRIS-sized cube of the GPU spectral benchmarks (spectral_gpu_bench, spectral_opencl_bench),
// written once so that both measure the same bytes: 256 real pixel spectra of the AVIRIS ABU urban-2 scene
// (bench/data/abu_urban_2_spectra_256x198.i16) interpolated to 224 bands, blended in 32x32 patches, times a
// brightness factor, plus 1% noise; 614 x 512 x 224 int16. Also the references drawn from the same table,
// the ENVI files, the float64 scores the benchmarks check against, and their small printing helpers.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "spectrasift/error.hpp"
#include "spectrasift/spectral.hpp"

namespace spectrasift::bench_cube {

namespace fs = std::filesystem;

constexpr int kSamples = 614, kLines = 512, kBands = 224;
constexpr int kTableSpectra = 256, kTableBands = 198;

struct Rng {  // splitmix64: the same numbers on every machine
  std::uint64_t s;
  std::uint64_t next() {
    std::uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform() { return double(next() >> 11) * (1.0 / 9007199254740992.0); }
  double normal() {  // Box-Muller
    const double u = std::max(uniform(), 1e-300), v = uniform();
    return std::sqrt(-2.0 * std::log(u)) * std::cos(6.283185307179586 * v);
  }
};

/// The spectra table, 198 -> 224 bands by linear interpolation along the band axis.
inline std::vector<double> load_table(const fs::path& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error(ErrorCode::kIo, path.string() + ": cannot open the spectra table");
  std::vector<std::int16_t> raw(std::size_t(kTableSpectra) * kTableBands);
  f.read(reinterpret_cast<char*>(raw.data()), std::streamsize(raw.size() * 2));
  if (!f) throw Error(ErrorCode::kBadFormat, path.string() + ": truncated spectra table");
  std::vector<double> t(std::size_t(kTableSpectra) * kBands);
  for (int s = 0; s < kTableSpectra; ++s)
    for (int b = 0; b < kBands; ++b) {
      const double pos = double(b) * (kTableBands - 1) / (kBands - 1);
      const int i0 = std::min(int(pos), kTableBands - 2);
      const double w = pos - i0;
      t[std::size_t(s) * kBands + b] =
          (1 - w) * raw[std::size_t(s) * kTableBands + i0] + w * raw[std::size_t(s) * kTableBands + i0 + 1];
    }
  return t;
}

/// BIP int16 cube: patches of 32x32 pixels, each a blend of two table spectra that varies across the
/// patch, times a brightness factor 0.8..1.2, plus 1% noise.
inline std::vector<std::int16_t> make_cube(const std::vector<double>& table) {
  std::vector<std::int16_t> cube(std::size_t(kSamples) * kLines * kBands);
  const int px = (kSamples + 31) / 32, py = (kLines + 31) / 32;
  std::vector<int> a(std::size_t(px) * py), b(std::size_t(px) * py);
  Rng r{42};
  for (std::size_t i = 0; i < a.size(); ++i) {
    a[i] = int(r.next() % kTableSpectra);
    b[i] = int(r.next() % kTableSpectra);
  }
  for (int y = 0; y < kLines; ++y) {
    Rng rr{std::uint64_t(1000 + y)};
    for (int x = 0; x < kSamples; ++x) {
      const int patch = (y / 32) * px + x / 32;
      const double w = ((x % 32) + (y % 32)) / 62.0;
      const double bright = 0.8 + 0.4 * rr.uniform();
      std::int16_t* out = cube.data() + (std::size_t(y) * kSamples + x) * kBands;
      for (int k = 0; k < kBands; ++k) {
        const double v = (1 - w) * table[std::size_t(a[patch]) * kBands + k] + w * table[std::size_t(b[patch]) * kBands + k];
        const double noisy = bright * v * (1.0 + 0.01 * rr.normal());
        out[k] = std::int16_t(std::lround(std::clamp(noisy, -32768.0, 32767.0)));
      }
    }
  }
  return cube;
}

/// `count` references: blends of two table spectra with 0.5% noise.
inline std::vector<float> make_refs(const std::vector<double>& table, int count) {
  std::vector<float> refs(std::size_t(count) * kBands);
  Rng r{7};
  for (int i = 0; i < count; ++i) {
    const int a = int(r.next() % kTableSpectra), b = int(r.next() % kTableSpectra);
    const double w = r.uniform();
    for (int k = 0; k < kBands; ++k) {
      const double v = (1 - w) * table[std::size_t(a) * kBands + k] + w * table[std::size_t(b) * kBands + k];
      refs[std::size_t(i) * kBands + k] = float(v * (1.0 + 0.005 * r.normal()));
    }
  }
  return refs;
}

inline void write_file(const fs::path& p, const void* data, std::size_t bytes) {
  std::ofstream f(p, std::ios::binary);
  f.write(static_cast<const char*>(data), std::streamsize(bytes));
  if (!f) throw Error(ErrorCode::kIo, p.string() + ": write failed");
}

/// The ENVI header of a kSamples x kLines x kBands int16 cube.
inline void write_header(const fs::path& p, const char* interleave, int byte_order = 0) {
  std::ofstream f(p);
  f << "ENVI\ndescription = {spectrasift synthetic AVIRIS-sized cube from real ABU urban-2 spectra}\n"
    << "samples = " << kSamples << "\nlines = " << kLines << "\nbands = " << kBands
    << "\nheader offset = 0\nfile type = ENVI Standard\ndata type = 2\ninterleave = " << interleave
    << "\nbyte order = " << byte_order << "\n";
}

/// Writes cube_{bsq,bil,bip}.{img,hdr} of the BIP cube bip into dir.
inline void write_cubes(const fs::path& dir, const std::vector<std::int16_t>& bip) {
  fs::create_directories(dir);
  const std::size_t S = kSamples, L = kLines, B = kBands;
  std::vector<std::int16_t> tmp(bip.size());
  for (std::size_t y = 0; y < L; ++y)
    for (std::size_t x = 0; x < S; ++x)
      for (std::size_t b = 0; b < B; ++b) tmp[b * S * L + y * S + x] = bip[(y * S + x) * B + b];
  write_file(dir / "cube_bsq.img", tmp.data(), tmp.size() * 2);
  write_header(dir / "cube_bsq.hdr", "bsq");
  for (std::size_t y = 0; y < L; ++y)
    for (std::size_t x = 0; x < S; ++x)
      for (std::size_t b = 0; b < B; ++b) tmp[y * S * B + b * S + x] = bip[(y * S + x) * B + b];
  write_file(dir / "cube_bil.img", tmp.data(), tmp.size() * 2);
  write_header(dir / "cube_bil.hdr", "bil");
  write_file(dir / "cube_bip.img", bip.data(), bip.size() * 2);
  write_header(dir / "cube_bip.hdr", "bip");
}

/// float64 score of pixel px (kBands values of the BIP cube) against raw reference r, by the definitions of
/// spectral.hpp.
inline double score64(const std::int16_t* px, const float* r, Metric m) {
  double s = 0;
  switch (m) {
    case Metric::kEuclidean:
      for (int b = 0; b < kBands; ++b) s += (px[b] - double(r[b])) * (px[b] - double(r[b]));
      return std::sqrt(s);
    case Metric::kSpectralAngle: {
      double pp = 0, rr = 0;
      for (int b = 0; b < kBands; ++b) {
        s += px[b] * double(r[b]);
        pp += double(px[b]) * px[b];
        rr += double(r[b]) * r[b];
      }
      return std::acos(std::clamp(s / std::sqrt(pp * rr), -1.0, 1.0));
    }
    case Metric::kCorrelation: {
      double mp = 0, mr = 0;
      for (int b = 0; b < kBands; ++b) {
        mp += px[b];
        mr += r[b];
      }
      mp /= kBands;
      mr /= kBands;
      double pp = 0, rr = 0;
      for (int b = 0; b < kBands; ++b) {
        s += (px[b] - mp) * (r[b] - mr);
        pp += (px[b] - mp) * (px[b] - mp);
        rr += (r[b] - mr) * (r[b] - mr);
      }
      return s / std::sqrt(pp * rr);
    }
    case Metric::kInformationDivergence: {
      double P = 0, R = 0;
      for (int b = 0; b < kBands; ++b) {
        P += std::max(double(px[b]), 1e-12);
        R += std::max(double(r[b]), 1e-12);
      }
      for (int b = 0; b < kBands; ++b) {
        const double a = std::max(double(px[b]), 1e-12) / P, c = std::max(double(r[b]), 1e-12) / R;
        s += (a - c) * (std::log(a) - std::log(c));
      }
      return s;
    }
  }
  return 0;
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

inline std::string fmt(double v, int prec = 3) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", prec, v);
  return b;
}

}  // namespace spectrasift::bench_cube

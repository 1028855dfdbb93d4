// Spectral matching on the CPU: OpenMP over tiles of pixels, SIMD-friendly inner loops.
//
// The cube is walked in chunks of whole lines (progress is reported between chunks, from the calling
// thread). A chunk is cut into tiles of up to kTile consecutive pixels of one line; one thread owns a
// tile from start to end, so results never depend on scheduling. A tile is
//   1. converted from the native type (byte order, scale) into a band-major float tile P[j][i]
//      (j = used band, i = pixel), reading the memory map in the interleave's contiguous order;
//   2. reduced to its per-pixel statistics (double, numeric/spectral_metrics.h);
//   3. multiplied against the references in blocks: D[r][i] = sum_j R[r][j] P[j][i], a small matrix
//      product whose micro-kernel keeps NR references x NP pixels of accumulators in registers and
//      vectorises over pixels (each lane is one pixel's sum, summed in band order: no reassociation,
//      so strict IEEE arithmetic still vectorises). One reference uses NR = 1: a single pass.
//      ed sums ((double)p - (double)r)^2 in double (exact for integer cubes); sid runs two products
//      (p' . log b and log p' . b);
//   4. finalised and reduced in the same loop (best / top-k / threshold), so the full score cube is
//      written only for Reduction::kAll.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "core/spectral_backend.hpp"
#include "numeric/spectral_metrics.h"
#include "spectrasift/error.hpp"

namespace spectrasift::cpu {

namespace {

using detail::CubeView;
using detail::PreparedReferences;

constexpr int kTile = 64;      ///< pixels per tile (a multiple of every NP below)
constexpr int kRefBlock = 64;  ///< references whose scores are finalised together

/// Micro-kernel: out[r][i] = sum_j R[r*ldr + j] * P[j*kTile + i] for NR references and NP pixels.
template <int NR, int NP, class T>
inline void dot_micro(const T* P, const T* R, int n, int ldr, T* out, int ldo) {
  T acc[NR][NP] = {};
  for (int j = 0; j < n; ++j) {
    const T* pj = P + std::size_t(j) * kTile;
    for (int r = 0; r < NR; ++r) {
      const T rv = R[std::size_t(r) * ldr + j];
      for (int i = 0; i < NP; ++i) acc[r][i] += pj[i] * rv;
    }
  }
  for (int r = 0; r < NR; ++r)
    for (int i = 0; i < NP; ++i) out[std::size_t(r) * ldo + i] = acc[r][i];
}

/// The same with squared differences (ed): out[r][i] = sum_j (P[j][i] - R[r][j])^2, in double.
template <int NR, int NP>
inline void diff2_micro(const double* P, const double* R, int n, int ldr, double* out, int ldo) {
  double acc[NR][NP] = {};
  for (int j = 0; j < n; ++j) {
    const double* pj = P + std::size_t(j) * kTile;
    for (int r = 0; r < NR; ++r) {
      const double rv = R[std::size_t(r) * ldr + j];
      for (int i = 0; i < NP; ++i) {
        const double d = pj[i] - rv;
        acc[r][i] += d * d;
      }
    }
  }
  for (int r = 0; r < NR; ++r)
    for (int i = 0; i < NP; ++i) out[std::size_t(r) * ldo + i] = acc[r][i];
}

/// D[r][i] for references [r0, r0 + nr) (nr a multiple of NR; padded rows are zero) and pixels [0, np).
template <int NR, int NP, class T>
void dot_block(const T* P, const T* R, int n, int r0, int nr, int np, T* D) {
  for (int r = 0; r < nr; r += NR)
    for (int i = 0; i < np; i += NP) dot_micro<NR, NP>(P + i, R + std::size_t(r0 + r) * n, n, n, D + std::size_t(r) * kTile + i, kTile);
}
template <int NR, int NP>
void diff2_block(const double* P, const double* R, int n, int r0, int nr, int np, double* D) {
  for (int r = 0; r < nr; r += NR)
    for (int i = 0; i < np; i += NP) diff2_micro<NR, NP>(P + i, R + std::size_t(r0 + r) * n, n, n, D + std::size_t(r) * kTile + i, kTile);
}

template <class T>
inline T load_native(const std::uint8_t* p, bool swap) {
  T v;
  if (!swap) {
    std::memcpy(&v, p, sizeof v);
  } else {
    std::uint8_t b[sizeof(T)];
    for (std::size_t k = 0; k < sizeof(T); ++k) b[k] = p[sizeof(T) - 1 - k];
    std::memcpy(&v, b, sizeof v);
  }
  return v;
}

/// Per-thread workspace, allocated once per call.
struct Workspace {
  std::vector<float> p, lp;          ///< used_bands x kTile (band-major); sid: p' and log p'
  std::vector<double> pd;            ///< ed: the tile in double
  std::vector<float> d, d2;          ///< kRefBlock x kTile dot products
  std::vector<double> dd;            ///< ed: kRefBlock x kTile squared distances
  std::vector<float> top_s;          ///< kTile x k best scores
  std::vector<int> top_i;            ///< kTile x k best indices
  SpectralPixelStats stats[kTile];
  bool nodata[kTile];
};

struct Job {
  Job(const CubeView& c, const PreparedReferences& r, const SpectralOptions& o, SpectralResult& res)
      : cube(c), refs(r), options(o), result(res) {}
  const CubeView& cube;
  const PreparedReferences& refs;
  const SpectralOptions& options;
  SpectralResult& result;
  int n = 0;                 ///< used bands
  int padded = 0;            ///< reference rows rounded up to NR
  int nr_micro = 1;          ///< NR of the micro-kernel: 1 for one reference, 4 otherwise
  int k = 1;                 ///< kept per pixel (reductions other than kAll)
  int metric = 0, higher = 0;
  float ignore = 0;
  std::vector<float> r1, r2;  ///< padded copies of refs.values / values2
  std::vector<double> rd;     ///< ed: padded refs in double
};

/// Step 1: the tile of line y, pixels [x0, x0 + np), into ws.p (and pd / lp); marks no-data pixels.
template <class T>
void convert_tile(const Job& job, Workspace& ws, int y, int x0, int np) {
  const CubeView& c = job.cube;
  const std::size_t es = sizeof(T);
  const bool swap = c.big_endian;
  const float scale = c.scale;
  const int n = job.n;
  const auto& bi = job.refs.band_index;
  const std::uint8_t* base = c.data + std::size_t(y) * c.line_stride * es;
  for (int i = 0; i < kTile; ++i) ws.nodata[i] = false;
  auto put = [&](int j, int i, T raw) {
    const float v = float(raw);
    if (c.has_ignore && v == job.ignore) ws.nodata[i] = true;
    ws.p[std::size_t(j) * kTile + i] = v * scale;
  };
  if (c.interleave == Interleave::kBip) {
    for (int i = 0; i < np; ++i) {
      const std::uint8_t* px = base + std::size_t(x0 + i) * c.sample_stride * es;
      for (int j = 0; j < n; ++j) put(j, i, load_native<T>(px + std::size_t(bi[j]) * c.band_stride * es, swap));
    }
  } else {
    for (int j = 0; j < n; ++j) {
      const std::uint8_t* row = base + (std::size_t(bi[j]) * c.band_stride + std::size_t(x0) * c.sample_stride) * es;
      for (int i = 0; i < np; ++i) put(j, i, load_native<T>(row + std::size_t(i) * c.sample_stride * es, swap));
    }
  }
  // Unused columns of a partial tile are zero so that the micro-kernel may run over them.
  for (int j = 0; j < n; ++j)
    for (int i = np; i < kTile; ++i) ws.p[std::size_t(j) * kTile + i] = 0.0f;
}

void convert_tile_any(const Job& job, Workspace& ws, int y, int x0, int np) {
  switch (job.cube.type) {
    case SampleType::kU8: convert_tile<std::uint8_t>(job, ws, y, x0, np); break;
    case SampleType::kI16: convert_tile<std::int16_t>(job, ws, y, x0, np); break;
    case SampleType::kU16: convert_tile<std::uint16_t>(job, ws, y, x0, np); break;
    case SampleType::kI32: convert_tile<std::int32_t>(job, ws, y, x0, np); break;
    case SampleType::kU32: convert_tile<std::uint32_t>(job, ws, y, x0, np); break;
    case SampleType::kF32: convert_tile<float>(job, ws, y, x0, np); break;
    case SampleType::kF64: convert_tile<double>(job, ws, y, x0, np); break;
    case SampleType::kI64: convert_tile<std::int64_t>(job, ws, y, x0, np); break;
    case SampleType::kU64: convert_tile<std::uint64_t>(job, ws, y, x0, np); break;
  }
}

void process_tile(const Job& job, Workspace& ws, int y, int x0, int np) {
  const int n = job.n;
  convert_tile_any(job, ws, y, x0, np);
  // Step 2: per-pixel statistics in band order (double); sid's p' and log p' tiles.
  for (int i = 0; i < kTile; ++i) spectral_stats_init(&ws.stats[i]);
  for (int j = 0; j < n; ++j) {
    float* pj = &ws.p[std::size_t(j) * kTile];
    for (int i = 0; i < np; ++i) spectral_stats_add(&ws.stats[i], job.metric, pj[i]);
    if (job.metric == SPECTRAL_METRIC_SID) {
      float* lj = &ws.lp[std::size_t(j) * kTile];
      for (int i = 0; i < kTile; ++i) {
        pj[i] = spectral_sid_clamp(pj[i]);
        lj[i] = spectral_sid_log(pj[i]);
      }
    } else if (job.metric == SPECTRAL_METRIC_ED) {
      double* dj = &ws.pd[std::size_t(j) * kTile];
      for (int i = 0; i < kTile; ++i) dj[i] = double(pj[i]);
    }
  }
  const Reduction red = job.options.reduction;
  const int k = job.k;
  if (red != Reduction::kAll) {
    for (int i = 0; i < np; ++i) spectral_topk_init(&ws.top_s[std::size_t(i) * k], &ws.top_i[std::size_t(i) * k], k);
  }
  const std::size_t npix = std::size_t(job.cube.samples) * job.cube.lines;
  const std::size_t pix0 = std::size_t(y) * job.cube.samples + x0;
  const int count = job.refs.count;
  // Steps 3 and 4, one block of references at a time.
  for (int r0 = 0; r0 < count; r0 += kRefBlock) {
    const int nb = std::min(kRefBlock, job.padded - r0);
    const bool one = job.nr_micro == 1;
    switch (job.metric) {
      case SPECTRAL_METRIC_ED:
        if (one) diff2_block<1, 8>(ws.pd.data(), job.rd.data(), n, r0, nb, np, ws.dd.data());
        else diff2_block<4, 4>(ws.pd.data(), job.rd.data(), n, r0, nb, np, ws.dd.data());
        break;
      case SPECTRAL_METRIC_SID:
        if (one) {
          dot_block<1, 16>(ws.p.data(), job.r2.data(), n, r0, nb, np, ws.d.data());
          dot_block<1, 16>(ws.lp.data(), job.r1.data(), n, r0, nb, np, ws.d2.data());
        } else {
          dot_block<4, 8>(ws.p.data(), job.r2.data(), n, r0, nb, np, ws.d.data());
          dot_block<4, 8>(ws.lp.data(), job.r1.data(), n, r0, nb, np, ws.d2.data());
        }
        break;
      default:
        if (one) dot_block<1, 16>(ws.p.data(), job.r1.data(), n, r0, nb, np, ws.d.data());
        else dot_block<4, 8>(ws.p.data(), job.r1.data(), n, r0, nb, np, ws.d.data());
        break;
    }
    const int rend = std::min(count, r0 + kRefBlock);
    for (int r = r0; r < rend; ++r) {
      const std::size_t row = std::size_t(r - r0) * kTile;
      const double constant = job.refs.constant[r];
      for (int i = 0; i < np; ++i) {
        float s;
        if (ws.nodata[i]) {
          s = spectral_nan();
        } else {
          switch (job.metric) {
            case SPECTRAL_METRIC_ED: s = spectral_finalise_ed(ws.dd[row + i]); break;
            case SPECTRAL_METRIC_SAM: s = spectral_finalise_sam(&ws.stats[i], ws.d[row + i]); break;
            case SPECTRAL_METRIC_SCC: s = spectral_finalise_scc(&ws.stats[i], n, ws.d[row + i]); break;
            default: s = spectral_finalise_sid(&ws.stats[i], ws.d[row + i], ws.d2[row + i], constant); break;
          }
        }
        if (red == Reduction::kAll) job.result.scores[std::size_t(r) * npix + pix0 + i] = s;
        else spectral_topk_insert(&ws.top_s[std::size_t(i) * k], &ws.top_i[std::size_t(i) * k], k, s, r, job.higher);
      }
    }
  }
  if (red == Reduction::kAll) return;
  const float thr = float(job.options.threshold);
  for (int i = 0; i < np; ++i) {
    for (int b = 0; b < k; ++b) {
      float s = ws.top_s[std::size_t(i) * k + b];
      int idx = ws.top_i[std::size_t(i) * k + b];
      if (red == Reduction::kThreshold && !spectral_passes(s, thr, job.higher)) {
        s = spectral_nan();
        idx = -1;
      }
      job.result.scores[std::size_t(b) * npix + pix0 + i] = s;
      job.result.index[std::size_t(b) * npix + pix0 + i] = idx;
    }
  }
}

}  // namespace

void spectral_match(detail::ContextImpl& ctx, const detail::CubeView& cube, const detail::PreparedReferences& refs,
                    const SpectralOptions& options, SpectralResult& result, const ProgressFn& progress) {
  const auto t0 = std::chrono::steady_clock::now();
  Job job(cube, refs, options, result);
  job.n = refs.used_bands;
  job.metric = int(refs.metric);
  job.higher = spectral_higher_is_better(job.metric);
  job.ignore = float(cube.ignore_value);
  job.k = options.reduction == Reduction::kTopK ? options.top_k : 1;
  job.nr_micro = refs.count == 1 ? 1 : 4;
  job.padded = (refs.count + job.nr_micro - 1) / job.nr_micro * job.nr_micro;
  const std::size_t n = std::size_t(job.n);
  if (job.metric == SPECTRAL_METRIC_ED) {
    job.rd.assign(std::size_t(job.padded) * n, 0.0);
    for (std::size_t v = 0; v < refs.values.size(); ++v) job.rd[v] = double(refs.values[v]);
  } else {
    job.r1.assign(std::size_t(job.padded) * n, 0.0f);
    std::copy(refs.values.begin(), refs.values.end(), job.r1.begin());
    if (job.metric == SPECTRAL_METRIC_SID) {
      job.r2.assign(std::size_t(job.padded) * n, 0.0f);
      std::copy(refs.values2.begin(), refs.values2.end(), job.r2.begin());
    }
  }

  const int threads = std::max(1, ctx.cpu_threads());
  std::vector<Workspace> ws(threads);
  for (auto& w : ws) {
    w.p.assign(n * kTile, 0.0f);
    if (job.metric == SPECTRAL_METRIC_SID) {
      w.lp.assign(n * kTile, 0.0f);
      w.d2.assign(std::size_t(kRefBlock) * kTile, 0.0f);
    }
    if (job.metric == SPECTRAL_METRIC_ED) w.pd.assign(n * kTile, 0.0);
    w.d.assign(std::size_t(kRefBlock) * kTile, 0.0f);
    if (job.metric == SPECTRAL_METRIC_ED) w.dd.assign(std::size_t(kRefBlock) * kTile, 0.0);
    w.top_s.assign(std::size_t(kTile) * job.k, 0.0f);
    w.top_i.assign(std::size_t(kTile) * job.k, -1);
  }

  const int tiles_per_line = (cube.samples + kTile - 1) / kTile;
  // Chunks of whole lines: enough tiles to keep every thread busy, few enough for a lively progress bar.
  int chunk = options.chunk_lines;
  if (chunk <= 0) chunk = std::max(1, (64 * threads + tiles_per_line - 1) / tiles_per_line);
  for (int y0 = 0; y0 < cube.lines; y0 += chunk) {
    const int y1 = std::min(cube.lines, y0 + chunk);
    const long tiles = long(y1 - y0) * tiles_per_line;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (long t = 0; t < tiles; ++t) {
      const int y = y0 + int(t / tiles_per_line);
      const int x0 = int(t % tiles_per_line) * kTile;
      const int np = std::min(kTile, cube.samples - x0);
      process_tile(job, ws[omp_get_thread_num()], y, x0, np);
    }
    if (progress) progress(double(y1) / double(cube.lines));
  }
  result.times.compute_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ctx.log("cpu spectral: " + std::to_string(threads) + " threads, " + (job.nr_micro == 1 ? "single pass" : "blocked product") +
          ", chunks of " + std::to_string(chunk) + " lines");
}

}  // namespace spectrasift::cpu

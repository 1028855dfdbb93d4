// Spectral matching on the CPU: tiles of pixels on the WorkPool (core/thread_pool.hpp), SIMD-friendly
// inner loops.
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
#include <algorithm>
#include <chrono>
#include <cstring>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include <string>
#include <type_traits>
#include <vector>

#include "backend/cpu/operations.hpp"
#include "core/cpu_features.hpp"
#include "core/spectral_backend.hpp"
#include "core/thread_pool.hpp"
#include "numeric/spectral_metrics.h"
#include "spectrasift/error.hpp"

namespace spectrasift::cpu {

namespace {

using detail::CubeView;
using detail::PreparedReferences;

constexpr int kTile = 64;      ///< pixels per tile (a multiple of every NP below)
constexpr int kRefBlock = 64;  ///< references whose scores are finalised together

/// Per-thread workspace, allocated once per call.
struct Workspace {
  std::vector<float> p, lp;          ///< used_bands x kTile (band-major); sid: p' and log p'
  std::vector<float> tmp;            ///< kTile x used_bands (pixel-major), bip conversion
  std::vector<std::uint64_t> raw;    ///< one pixel's raw samples (8-byte aligned), bip single pass
  std::vector<double> pd;            ///< ed: the tile in double
  std::vector<float> d, d2;          ///< kRefBlock x kTile dot products
  std::vector<double> dd;            ///< ed: kRefBlock x kTile squared distances; sam (kAll): sum (a - b)^2
  std::vector<double> dd2;           ///< sam (kAll): sum (a + b)^2
  std::vector<float> top_s;          ///< kTile x k best scores
  std::vector<int> top_i;            ///< kTile x k best indices
  std::vector<double> top_k;         ///< kTile x k ranking keys (reduce_keyed)
  // Per-pixel statistics as separate arrays so that their accumulation vectorises over pixels.
  double s1[kTile], s2[kTile], slp[kTile];
  unsigned char nodata[kTile];
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
  bool all_bands = false;    ///< band_index[j] == j for every j
  bool bip_one = false;      ///< one reference (sam, ed, scc) on a bip cube: the per-pixel pass
  bool sam_exact = false;    ///< sam with refs.raw: reported angles rescored exactly (spectral_sam_exact_*)
  float ignore = 0;
  std::vector<float> r1, r2;  ///< padded copies of refs.values / values2
  std::vector<double> rd;     ///< ed: padded refs in double
  /// sam_exact with Reduction::kAll: the unit references b = raw / |r| (padded rows of zeros) and -b, so that
  /// diff2_block gives sum (a - b)^2 and sum (a - (-b))^2 = sum (a + b)^2 of spectral_sam_exact_add, vectorised.
  std::vector<double> unit, unit_neg;
};

constexpr int kLanes = 8;
// GCC/Clang vector types: element-wise IEEE arithmetic (no reassociation), lowered to AVX2 or SSE2.
typedef float v8f __attribute__((vector_size(32)));
typedef float v4f __attribute__((vector_size(16)));
typedef double v4d __attribute__((vector_size(32)));
typedef int v8i __attribute__((vector_size(32)));
typedef unsigned v8u __attribute__((vector_size(32)));
typedef unsigned v4u __attribute__((vector_size(16)));
typedef unsigned long long v4u64 __attribute__((vector_size(32)));

// The kernels twice: for AVX2 and for the baseline ISA, picked at run time (core/cpu_features.hpp).
#define SPECTRASIFT_ISA_SOURCE "backend/cpu/spectral_kernels.inc"
#include "core/isa_builds.inc"  // namespaces avx2 and base
#undef SPECTRASIFT_ISA_SOURCE

using TileFn = void (*)(const Job&, Workspace&, int, int, int);

TileFn pick_kernel(std::string& name) {
#ifdef SPECTRASIFT_ISA_REGIONS
  const TileFn avx2_fn = &avx2::process_tile;
#else
  const TileFn avx2_fn = nullptr;
#endif
  CpuIsa isa = CpuIsa::kBaseline;
  const TileFn fn = pick_isa<TileFn>(nullptr, avx2_fn, &base::process_tile, &isa);
  name = to_string(isa);
  return fn;
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
  job.all_bands = true;
  for (int j = 0; j < refs.used_bands; ++j) job.all_bands = job.all_bands && refs.band_index[j] == j;
  job.bip_one = refs.count == 1 && cube.interleave == Interleave::kBip && job.metric != SPECTRAL_METRIC_SID;
  job.sam_exact = job.metric == SPECTRAL_METRIC_SAM && !refs.raw.empty() && !job.bip_one;
  job.padded = (refs.count + job.nr_micro - 1) / job.nr_micro * job.nr_micro;
  const std::size_t n = std::size_t(job.n);
  const bool exact_all = job.sam_exact && options.reduction == Reduction::kAll;
  if (exact_all) {
    job.unit.assign(std::size_t(job.padded) * n, 0.0);
    job.unit_neg.assign(std::size_t(job.padded) * n, 0.0);
    for (std::size_t r = 0; r < std::size_t(refs.count); ++r)
      for (std::size_t j = 0; j < n; ++j) {
        const double b = double(refs.raw[r * n + j]) / refs.constant[r];  // as spectral_sam_exact_add
        job.unit[r * n + j] = b;
        job.unit_neg[r * n + j] = -b;
      }
  }
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

  WorkPool& pool = calling_thread_pool(std::max(1, ctx.cpu_threads()));
  const int threads = pool.size();
  std::vector<Workspace> ws(static_cast<std::size_t>(threads));
  for (auto& w : ws) {
    w.p.assign(n * kTile, 0.0f);
    if (cube.interleave == Interleave::kBip) w.tmp.assign(n * kTile, 0.0f);
    w.raw.assign(n, 0);
    if (job.metric == SPECTRAL_METRIC_SID) {
      w.lp.assign(n * kTile, 0.0f);
      w.d2.assign(std::size_t(kRefBlock) * kTile, 0.0f);
    }
    if (job.metric == SPECTRAL_METRIC_ED || exact_all) w.pd.assign(n * kTile, 0.0);
    w.d.assign(std::size_t(kRefBlock) * kTile, 0.0f);
    if (job.metric == SPECTRAL_METRIC_ED || exact_all) w.dd.assign(std::size_t(kRefBlock) * kTile, 0.0);
    if (exact_all) w.dd2.assign(std::size_t(kRefBlock) * kTile, 0.0);
    w.top_s.assign(std::size_t(kTile) * job.k, 0.0f);
    w.top_i.assign(std::size_t(kTile) * job.k, -1);
    w.top_k.assign(std::size_t(kTile) * job.k, 0.0);
  }

  std::string isa;
  const TileFn tile_fn = pick_kernel(isa);
  const int tiles_per_line = (cube.samples + kTile - 1) / kTile;
  // Chunks of whole lines: about 16 per cube (a progress update each), and enough tiles to keep every
  // thread busy. Tiles are handed out dynamically, two at a time (each tile writes only its own pixels,
  // so the assignment never changes a result); a chunk ends when its last claimed tile is done.
  int chunk = options.chunk_lines;
  if (chunk <= 0)
    chunk = std::max({1, (cube.lines + 15) / 16, (64 * threads + tiles_per_line - 1) / tiles_per_line});
  for (int y0 = 0; y0 < cube.lines; y0 += chunk) {
    const int y1 = std::min(cube.lines, y0 + chunk);
    const int tiles = (y1 - y0) * tiles_per_line;
    pool.run(tiles, 2, [&](int first, int end, int thread) {
      for (int t = first; t < end; ++t) {
        const int y = y0 + t / tiles_per_line;
        const int x0 = (t % tiles_per_line) * kTile;
        const int np = std::min(kTile, cube.samples - x0);
        tile_fn(job, ws[std::size_t(thread)], y, x0, np);
      }
    });
    if (progress) progress(double(y1) / double(cube.lines));
  }
  result.times.compute_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ctx.log("cpu spectral: " + isa + " kernels, " + std::to_string(threads) + " threads, " + (job.nr_micro == 1 ? "single pass" : "blocked product") +
          ", chunks of " + std::to_string(chunk) + " lines");
}

}  // namespace spectrasift::cpu

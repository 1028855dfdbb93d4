// Spectral matching on CUDA (DESIGN.md "Data flow", issue 4).
//
// Streaming. The cube is cut into chunks of whole lines. For chunk k the context's host copy pool copies the
// chunk's bytes, in their native type and byte order, from the memory-mapped file into pinned staging buffer
// k%4 (the pass of chunk k+1 runs on the workers while the calling thread makes chunk k's CUDA calls, and
// takes the copy-out of finished results along); the copy stream uploads it to device buffer k%2 and the
// compute stream converts and matches it. The staging copy of chunk k+1 and its upload overlap the
// compute of chunk k (two streams, events between them); a buffer is refilled only after the event that
// says its previous contents were consumed. The host copy is the only host pass over the data: BSQ
// chunks gather the used band planes (one run of lines*samples elements per band, the plane pitch apart),
// BIL and BIP chunks are one contiguous run. Nothing is reorganised on the host.
// Packed uploads (16-bit cubes, State::pack_policy): instead of copying, that pass packs a chunk losslessly
// (core/sample_pack.hpp: per block of 64 samples its minimum and the bit planes of the differences), the
// packed bytes are uploaded and unpack_samples_kernel restores the stored samples on the compute stream
// before the chunk's kernels, which see exactly the bytes of a raw upload. Real scenes pack to 50-80 %, so
// fewer bytes cross PCIe; a chunk that packs to more than kPackMaxRatio of its size ends packing for the call.
// By default (PackPolicy::kBalanced) a chunk is packed only while the host is two chunks ahead of the upload
// engine: packing costs the host more than a copy, so it pays only where the host has time to spare.
//
// Paths, by reference count and reduction:
//   one reference              spectral_one_ref_rows (BSQ/BIL small-integer cubes: 4 pixels per thread,
//                              vector loads) or spectral_one_ref: native samples straight into the metric
//   many references, best or   spectral_convert + spectral_best_fp16 (FP16 tensor cores, the best keys kept
//   threshold, tensor cores    per pixel in registers, no score block) + spectral_rescore (exact scores of
//   allowed, ed/sam/scc        the few best candidates): kernels/spectral_best_fp16.cuh; on an sm_90a build
//                              and a compute capability 9.0 GPU its wgmma form, spectral_best_wgmma
//                              (kernels/spectral_best_wgmma.cuh), same candidates contract
//   kAll, or < kGemmMinRefs    spectral_convert + spectral_multi: exact formulas, references tiled in
//                              shared memory
//   many references            spectral_convert + cuBLAS GEMM of the pixels against the references
//   (kBest/kTopK/kThreshold)   (TF32 tensor cores when allowed, else FP32) into a block of scores (96 MiB)
//                              + spectral_select: the kCandidates best GEMM keys per pixel are rescored
//                              exactly with the shared formulas, and the reduction is taken on the exact
//                              scores. The full score cube is never written.
// GEMM keys (higher = better; the per-pixel terms that do not change the order are left out):
//   ed  p.r - |r|^2/2      sam p.r^      scc p.r~      sid (p'/P).log b + log p'.b - sum b log b
// Results are deterministic: no atomics, fixed reduction orders, cuBLAS is run-to-run reproducible.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "backend/cuda/bench_support.hpp"
#include "backend/cuda/check.hpp"
#include "backend/cuda/kernels/spectral.cuh"
#include "backend/cuda/kernels/spectral_best_fp16.cuh"
#include "backend/cuda/kernels/spectral_best_wgmma.cuh"
#include "backend/cuda/kernels/unpack.cuh"
#include "backend/cuda/state.hpp"
#include "core/sample_pack.hpp"
#include "core/spectral_backend.hpp"
#include "spectrasift/error.hpp"

namespace spectrasift::cuda {
namespace {

using namespace kernels;
using detail::PackIsa;
using detail::PackRun;
using detail::SamplePacker;
using Clock = std::chrono::steady_clock;

constexpr int kGemmMinRefs = 3 * kCandidates;        ///< fewer references: the exact spectral_multi path
constexpr int kGemmMaxTopK = kCandidates;            ///< larger k: the exact spectral_multi path
constexpr std::size_t kDefaultChunkBytes = 16u << 20; ///< raw bytes per streamed chunk when chunk_lines == 0
constexpr int kPrepBlock = 64;  ///< references per task of the host-side reference preparation (make_plan)
constexpr std::size_t kPinnedResultMax = 256u << 20; ///< larger results are downloaded straight to pageable memory
constexpr double kPackMaxRatio = 0.9;  ///< a chunk packed larger than this (of its raw bytes) ends packing for the call

double ms_between(cudaEvent_t a, cudaEvent_t b) {
  float ms = 0;
  SPECTRASIFT_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
  return ms;
}
double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}
template <class T> T round_up(T v, T m) { return (v + m - 1) / m * m; }

template <class F> void with_type(SampleType t, F&& f) {
  switch (t) {
    case SampleType::kU8: f(std::integral_constant<int, SPECTRAL_TYPE_U8>{}); break;
    case SampleType::kI16: f(std::integral_constant<int, SPECTRAL_TYPE_I16>{}); break;
    case SampleType::kU16: f(std::integral_constant<int, SPECTRAL_TYPE_U16>{}); break;
    case SampleType::kI32: f(std::integral_constant<int, SPECTRAL_TYPE_I32>{}); break;
    case SampleType::kU32: f(std::integral_constant<int, SPECTRAL_TYPE_U32>{}); break;
    case SampleType::kF32: f(std::integral_constant<int, SPECTRAL_TYPE_F32>{}); break;
    case SampleType::kF64: f(std::integral_constant<int, SPECTRAL_TYPE_F64>{}); break;
    case SampleType::kI64: f(std::integral_constant<int, SPECTRAL_TYPE_I64>{}); break;
    case SampleType::kU64: f(std::integral_constant<int, SPECTRAL_TYPE_U64>{}); break;
    default: throw Error(ErrorCode::kUnsupported, "CUDA spectral matching: unsupported sample type", "cuda");
  }
}
template <class F> void with_metric(Metric m, F&& f) {
  switch (m) {
    case Metric::kEuclidean: f(std::integral_constant<int, SPECTRAL_METRIC_ED>{}); break;
    case Metric::kSpectralAngle: f(std::integral_constant<int, SPECTRAL_METRIC_SAM>{}); break;
    case Metric::kCorrelation: f(std::integral_constant<int, SPECTRAL_METRIC_SCC>{}); break;
    case Metric::kInformationDivergence: f(std::integral_constant<int, SPECTRAL_METRIC_SID>{}); break;
  }
}

int out_bands(const SpectralOptions& o, int refs) {
  switch (o.reduction) {
    case Reduction::kAll: return refs;
    case Reduction::kTopK: return o.top_k;
    default: return 1;
  }
}

/// Everything one call needs on the device, sized for the largest chunk. Buffers come from the
/// context's named pools, so a second call of the same shape allocates nothing.
struct Plan {
  State* st = nullptr;
  const detail::CubeView* cube = nullptr;
  const detail::PreparedReferences* refs = nullptr;
  SpectralOptions opt;
  int n = 0;                  ///< used bands
  int k = 1;                  ///< output bands
  std::size_t es = 0;         ///< bytes per stored element
  bool one_ref = false, gemm = false;
  int chunk_lines = 0, nchunks = 0;
  std::size_t chunk_bytes = 0;    ///< bytes of the largest chunk as it travels
  // references
  int* band_index = nullptr;  ///< used band -> stored band of a chunk (identity for BSQ)
  float* v1 = nullptr;
  float* v2 = nullptr;
  double* constant = nullptr;
  float* gemm_refs = nullptr; ///< R x kpad rows (sid: [log b, b]) minus their mean row (centred)
  float* gemm_w = nullptr;    ///< per reference key offset
  int kdim = 0;               ///< GEMM inner dimension (n, or 2n for sid)
  int kpad = 0;               ///< kdim padded to 4
  int ldc = 0;                ///< score block leading dimension (references padded to 4)
  int sub_pix = 0;            ///< pixels per GEMM score block
  float* scores_block[2] = {nullptr, nullptr};
  bool fused = false;         ///< best/threshold on the fused FP16 kernel (spectral_best_fp16)
  bool wgmma = false;         ///< ... in its wgmma form (spectral_best_wgmma: sm_90a build, CC 9.0 device)
  bool bip_vector = false;    ///< one reference on BIP, every band used in order, pixels 16-byte aligned
  int* ed_ri = nullptr;       ///< one reference, ed: the split form of the reference (OneRef)
  float* ed_rf = nullptr;
  double ed_rf2 = 0;
  bool ed_split = false;
  BestFp16Args best;          ///< its operands
  std::size_t best_smem = 0;  ///< its dynamic shared memory
  RescoreRows rescore;        ///< padded reference rows for the exact rescoring
  // per chunk
  PixelPlanes planes;
  float* x_rows = nullptr;    ///< the GEMM operand, kpad floats per pixel
  // outputs
  bool out_whole = true;      ///< outputs for the whole cube stay on the device until the end
  long long out_stride = 0;   ///< elements between output bands on the device
  float* out_score = nullptr;
  int* out_index = nullptr;
};

/// Samples between the band planes of a BSQ chunk as it travels: padded to 8 so that every plane starts
/// 16-byte aligned for the vector loads of spectral_one_ref_rows.
long long bsq_plane_pitch(const detail::CubeView& c, int lines) { return round_up<long long>((long long)lines * c.samples, 8); }

/// Pixels per thread of the vector-load kernels (at most vmax, a power of two): every run of V samples of a
/// band must be V-aligned: BSQ planes are padded to 8; a BIL row must hold a multiple of V samples.
int vector_pixels(const detail::CubeView& c, int vmax) {
  int v = vmax;
  if (c.interleave == Interleave::kBil)
    while (v > 1 && c.samples % v != 0) v /= 2;
  return v;
}

ChunkLayout layout_of(const detail::CubeView& c, int lines, int n) {
  ChunkLayout l;
  switch (c.interleave) {
    case Interleave::kBsq:  // used band planes only, each padded to a multiple of 8 samples
      l.ls = c.samples; l.ss = 1; l.bs = bsq_plane_pitch(c, lines);
      (void)n;
      break;
    case Interleave::kBil:
      l.ls = (long long)c.bands * c.samples; l.ss = 1; l.bs = c.samples;
      break;
    case Interleave::kBip:
      l.ls = (long long)c.samples * c.bands; l.ss = c.bands; l.bs = 1;
      break;
  }
  return l;
}

/// Bytes of a chunk of `lines` lines as it travels.
std::size_t chunk_travel_bytes(const detail::CubeView& c, int lines, int n, std::size_t es) {
  if (c.interleave == Interleave::kBsq) return std::size_t(bsq_plane_pitch(c, lines)) * std::size_t(n) * es;
  return std::size_t(lines) * std::size_t(c.samples) * es * std::size_t(c.bands);
}

/// The host pieces of chunk [y0, y0+lines) in travel order, copied into `dst`.
void chunk_pieces(const Plan& pl, int y0, int lines, void* dst, std::vector<CopyPiece>& pieces) {
  const auto& c = *pl.cube;
  pieces.clear();
  auto* out = static_cast<std::uint8_t*>(dst);
  if (c.interleave == Interleave::kBsq) {
    const std::size_t run = std::size_t(lines) * c.samples * pl.es;
    const std::size_t pitch = std::size_t(bsq_plane_pitch(c, lines)) * pl.es;
    for (int j = 0; j < pl.n; ++j) {
      const std::size_t b = std::size_t(pl.refs->band_index[j]);
      const std::uint8_t* src = c.data + (b * c.band_stride + std::size_t(y0) * c.line_stride) * pl.es;
      pieces.push_back({out + std::size_t(j) * pitch, src, run});
    }
  } else {
    const std::size_t bytes = std::size_t(lines) * c.line_stride * pl.es;
    pieces.push_back({out, c.data + std::size_t(y0) * c.line_stride * pl.es, bytes});
  }
}

void check_view(const detail::CubeView& c) {
  const std::size_t S = std::size_t(c.samples), B = std::size_t(c.bands), L = std::size_t(c.lines);
  bool ok = false;
  switch (c.interleave) {
    case Interleave::kBsq: ok = c.sample_stride == 1 && c.line_stride == S && c.band_stride == S * L; break;
    case Interleave::kBil: ok = c.sample_stride == 1 && c.band_stride == S && c.line_stride == S * B; break;
    case Interleave::kBip: ok = c.band_stride == 1 && c.sample_stride == B && c.line_stride == S * B; break;
  }
  if (!ok) throw Error(ErrorCode::kInternal, "CUDA spectral matching: cube strides do not match its interleave", "cuda");
}

/// Uploads the references and sizes every buffer. `max_lines`: lines of the largest chunk.
Plan make_plan(State& st, HostCopyPool& pool, const detail::CubeView& cube, const detail::PreparedReferences& refs,
               const SpectralOptions& opt, int max_lines, bool whole_output_required, bool force_exact = false) {
  check_view(cube);
  Plan pl;
  pl.st = &st;
  pl.cube = &cube;
  pl.refs = &refs;
  pl.opt = opt;
  pl.n = refs.used_bands;
  pl.k = out_bands(opt, refs.count);
  pl.es = std::size_t(spectral_sample_size(int(cube.type)));
  pl.one_ref = refs.count == 1;
  pl.gemm = !force_exact && !pl.one_ref && opt.reduction != Reduction::kAll && refs.count >= kGemmMinRefs &&
            (opt.reduction != Reduction::kTopK || opt.top_k <= kGemmMaxTopK);
  pl.fused = pl.gemm && opt.allow_tensor_cores && st.fused_best && refs.metric != Metric::kInformationDivergence &&
             (opt.reduction == Reduction::kBest || opt.reduction == Reduction::kThreshold);
  pl.chunk_lines = std::max(1, std::min(max_lines, cube.lines));
  pl.nchunks = (cube.lines + pl.chunk_lines - 1) / pl.chunk_lines;
  pl.chunk_bytes = chunk_travel_bytes(cube, pl.chunk_lines, pl.n, pl.es);
  const int n = pl.n, R = refs.count;
  const std::size_t chunk_pix = std::size_t(pl.chunk_lines) * cube.samples;
  cudaStream_t s = st.compute;

  // Band indices: BSQ chunks carry the used planes in order.
  std::vector<int> bidx(n);
  for (int j = 0; j < n; ++j) bidx[j] = cube.interleave == Interleave::kBsq ? j : refs.band_index[j];
  if (pl.one_ref && cube.interleave == Interleave::kBip && n == cube.bands && (std::size_t(cube.bands) * pl.es) % 16 == 0) {
    pl.bip_vector = true;
    for (int j = 0; j < n; ++j) pl.bip_vector = pl.bip_vector && bidx[j] == j;
  }
  pl.band_index = st.buffer("spectral.band_index", sizeof(int) * n).as<int>();
  SPECTRASIFT_CUDA_CHECK(cudaMemcpyAsync(pl.band_index, bidx.data(), sizeof(int) * n, cudaMemcpyHostToDevice, s));
  pl.v1 = st.buffer("spectral.v1", sizeof(float) * std::size_t(R) * n).as<float>();
  SPECTRASIFT_CUDA_CHECK(cudaMemcpyAsync(pl.v1, refs.values.data(), sizeof(float) * std::size_t(R) * n,
                                         cudaMemcpyHostToDevice, s));
  if (!refs.values2.empty()) {
    pl.v2 = st.buffer("spectral.v2", sizeof(float) * std::size_t(R) * n).as<float>();
    SPECTRASIFT_CUDA_CHECK(cudaMemcpyAsync(pl.v2, refs.values2.data(), sizeof(float) * std::size_t(R) * n,
                                           cudaMemcpyHostToDevice, s));
  }
  pl.constant = st.buffer("spectral.constant", sizeof(double) * R).as<double>();
  SPECTRASIFT_CUDA_CHECK(cudaMemcpyAsync(pl.constant, refs.constant.data(), sizeof(double) * R,
                                         cudaMemcpyHostToDevice, s));
  if (pl.one_ref && refs.metric == Metric::kEuclidean) {
    // ed's split form r = ri + rf (numeric/spectral_metrics.h), used by the small-integer kernels.
    std::vector<int> ri(n);
    std::vector<float> rf(n);
    pl.ed_split = true;
    for (int j = 0; j < n; ++j) {
      const float r = refs.values[j];
      pl.ed_split = pl.ed_split && spectral_ed_split_ok(r);
      ri[j] = pl.ed_split ? int(std::nearbyint(r)) : 0;
      rf[j] = r - float(ri[j]);
      pl.ed_rf2 += double(rf[j]) * double(rf[j]);
    }
    if (pl.ed_split) {
      pl.ed_ri = st.buffer("spectral.ed_ri", sizeof(int) * n).as<int>();
      pl.ed_rf = st.buffer("spectral.ed_rf", sizeof(float) * n).as<float>();
      SPECTRASIFT_CUDA_CHECK(cudaMemcpyAsync(pl.ed_ri, ri.data(), sizeof(int) * n, cudaMemcpyHostToDevice, s));
      SPECTRASIFT_CUDA_CHECK(cudaMemcpyAsync(pl.ed_rf, rf.data(), sizeof(float) * n, cudaMemcpyHostToDevice, s));
    }
  }

  if (!pl.one_ref) {
    const long long pitch = round_up<long long>((long long)chunk_pix, 32);
    pl.planes.pitch = pitch;
    pl.planes.f = st.buffer("spectral.planes", sizeof(float) * std::size_t(pitch) * n).as<float>();
    pl.planes.sum_p = st.buffer("spectral.sum_p", sizeof(double) * pitch).as<double>();
    pl.planes.sum_p2 = st.buffer("spectral.sum_p2", sizeof(double) * pitch).as<double>();
    pl.planes.sum_plp = st.buffer("spectral.sum_plp", sizeof(double) * pitch).as<double>();
    pl.planes.valid = st.buffer("spectral.valid", std::size_t(pitch)).as<unsigned char>();
  }
  if (pl.gemm) {
    const bool sid = refs.metric == Metric::kInformationDivergence;
    pl.kdim = sid ? 2 * n : n;
    pl.kpad = round_up(pl.kdim, 4);
    pl.ldc = round_up(R, 4);
    // GEMM rows v_r (sid: [log b, b]) and key offsets w_r, so that key_r = x . v_r + w_r ranks like the
    // metric (higher = better). The rows are CENTRED: x . v_r = x . m + x . (v_r - m) with m the mean row,
    // and x . m is the same for every reference of a pixel, so only x . (v_r - m) is computed. The
    // references of a library are alike, |v_r - m| << |v_r|, and the TF32 rounding error, proportional
    // to |x| |v_r - m|, shrinks with it (fewer candidates are needed for the exact rescoring).
    std::vector<double> mean(pl.kpad, 0.0);
    std::vector<float> a(std::size_t(R) * pl.kpad, 0.0f), w(R, 0.0f);
    auto row_value = [&](int r, int j) -> double {
      const std::size_t o = std::size_t(r) * n;
      if (sid) return j < n ? refs.values2[o + j] : refs.values[o + j - n];  // log b pairs with p'/P
      return refs.values[o + j];
    };
    // These host loops (3,000 x 224 references: ~18 ms serial on the H200 machine's host, most of the end
    // to end of a best-of-3000) run on the copy pool, over independent bands (the mean, each summed in
    // reference order) or blocks of references: the same values whatever the number of threads.
    const int rblocks = (R + kPrepBlock - 1) / kPrepBlock;
    auto ref_range = [&](int t, auto&& body) {
      for (int r = t * kPrepBlock; r < std::min(R, (t + 1) * kPrepBlock); ++r) body(r);
    };
    pool.parallel_for((pl.kdim + 15) / 16, [&](int t) {
      for (int j = 16 * t; j < std::min(pl.kdim, 16 * t + 16); ++j) {
        double m = 0;
        for (int r = 0; r < R; ++r) m += row_value(r, j);
        mean[j] = m / R;
      }
    });
    std::vector<double> dnorm(R), rnorm(R);
    pool.parallel_for(rblocks, [&](int t) {
      ref_range(t, [&](int r) {
        double d2 = 0, r2 = 0;
        for (int j = 0; j < pl.kdim; ++j) {
          const double d = row_value(r, j) - mean[j];
          a[std::size_t(r) * pl.kpad + j] = float(d);
          d2 += d * d;
          r2 += row_value(r, j) * row_value(r, j);
        }
        dnorm[r] = std::sqrt(d2);
        rnorm[r] = std::sqrt(r2);
        if (sid) w[r] = float(-refs.constant[r]);
        else if (refs.metric == Metric::kEuclidean) w[r] = float(-0.5 * refs.constant[r]);
      });
    });
    double dmax = 0, wmax = 0, rmax = 0;
    for (int r = 0; r < R; ++r) {
      dmax = std::max(dmax, dnorm[r]);
      rmax = std::max(rmax, rnorm[r]);
      wmax = std::max(wmax, std::abs(double(w[r])));
    }
    // Error bound of a key (ed/sam/scc, whose X rows are the pixel's values): TF32 keeps 10 of float's 23
    // mantissa bits, so each product x_j d_j is off by at most ~2^-10 |x_j d_j| (rounding, or 2^-9 if the
    // hardware truncates), and the sum by 2^-9 |x| |d_r| (Cauchy-Schwarz) plus float accumulation
    // (~K 2^-24, far smaller); the key's own rounding (C + w in float) adds 2^-23 (|x| dmax + |w|). A
    // difference of two keys is off by at most twice that: margin = 2^-7 |x| dmax + 2^-21 (|x| dmax + wmax)
    // keeps a factor 2 in hand. The exact rescoring itself sums its dot product in float (error up to
    // ~K 2^-24 |x| |r|, uncentred), which the margin also covers. sid's X rows are not the pixel's values
    // (no |x| at hand): all its candidates are rescored.
    if (!sid) {
      pl.rescore.margin_a = float(dmax * (std::ldexp(1.0, -7) + std::ldexp(1.0, -21)) +
                                  2.0 * pl.kdim * std::ldexp(1.0, -24) * rmax);
      pl.rescore.margin_b = float(wmax * std::ldexp(1.0, -21));
    }
    // Reference rows padded to 4 floats for the rescoring's 16-byte loads (both many-reference paths).
    const int npad = round_up(n, 4);
    {
      std::vector<float> v1p(std::size_t(R) * npad, 0.0f);
      pool.parallel_for(rblocks, [&](int t) {
        ref_range(t, [&](int r) { std::copy_n(refs.values.data() + std::size_t(r) * n, n, v1p.data() + std::size_t(r) * npad); });
      });
      pl.rescore.npad = npad;
      float* dv1 = st.buffer("spectral.v1pad", sizeof(float) * v1p.size()).as<float>();
      SPECTRASIFT_CUDA_CHECK(cudaMemcpyAsync(dv1, v1p.data(), sizeof(float) * v1p.size(), cudaMemcpyHostToDevice, s));
      pl.rescore.v1 = dv1;
    }
    if (pl.fused) {
      // FP16 operands: the centred rows scaled by s_a = 2^ref_exp (largest |entry| in [2^14, 2^15)), kh
      // = n rounded up to the mma's 16, rpad = R rounded up to a reference tile; padding rows have zero
      // entries and key offset -inf, so they never become candidates.
      BestFp16Args& b = pl.best;
      b.count = R;
      b.kh = round_up(n, 16);
#if defined(SPECTRASIFT_CUDA_WGMMA)
      pl.wgmma = st.fused_wgmma && st.props.major == 9 && st.props.minor == 0 &&
                 best_wgmma_smem(b.kh) <= std::size_t(st.props.sharedMemPerBlockOptin);
#endif
      // spectral_best_wgmma streams tiles of kWgTileN rows stored in its shared-memory (core-matrix)
      // layout; spectral_best_fp16 reads plain rows in tiles of kBestTileN.
      b.rpad = round_up(R, pl.wgmma ? kWgTileN : kBestTileN);
      double amax = 0;
      {
        std::vector<double> bmax(rblocks, 0.0);
        pool.parallel_for(rblocks, [&](int t) {
          ref_range(t, [&](int r) {
            for (int j = 0; j < pl.kdim; ++j) bmax[t] = std::max(bmax[t], double(std::abs(a[std::size_t(r) * pl.kpad + j])));
          });
        });
        for (double v : bmax) amax = std::max(amax, v);
      }
      int e = 0;
      if (amax > 0) std::frexp(amax, &e);
      b.ref_exp = amax > 0 ? 15 - e : 0;
      std::vector<__half> ah(std::size_t(b.rpad) * b.kh, __float2half(0.0f));
      std::vector<float> wp(b.rpad, -INFINITY);
      // Key offsets centred (a constant shift of every key of a pixel keeps the order): the keys' float
      // rounding, and the wgmma form's packing error, scale with |w|.
      double wmean = 0;
      for (int r = 0; r < R; ++r) wmean += w[r];
      wmean /= R;
      double wmax_c = 0;
      for (int r = 0; r < R; ++r) wmax_c = std::max(wmax_c, std::abs(double(w[r]) - wmean));
      const double s_a = std::ldexp(1.0, b.ref_exp);  // a product with a power of two: exact, as ldexp
      pool.parallel_for(rblocks, [&](int t) {
        ref_range(t, [&](int r) {
          for (int j = 0; j < n; ++j) {
            const std::size_t at = pl.wgmma ? std::size_t(r / kWgTileN) * kWgTileN * b.kh + wg_core_index(r % kWgTileN, j, b.kh)
                                            : std::size_t(r) * b.kh + j;
            ah[at] = __float2half_rn(float(double(a[std::size_t(r) * pl.kpad + j]) * s_a));
          }
          wp[r] = float(double(w[r]) - wmean);
        });
      });
      auto* dh = st.buffer("spectral.best_refs", sizeof(__half) * ah.size()).as<__half>();
      SPECTRASIFT_CUDA_CHECK(cudaMemcpyAsync(dh, ah.data(), sizeof(__half) * ah.size(), cudaMemcpyHostToDevice, s));
      b.refs = dh;
      auto* dw = st.buffer("spectral.best_w", sizeof(float) * wp.size()).as<float>();
      SPECTRASIFT_CUDA_CHECK(cudaMemcpyAsync(dw, wp.data(), sizeof(float) * wp.size(), cudaMemcpyHostToDevice, s));
      b.w = dw;
      // Error bound of a key: both operands are rounded to nearest FP16 here (relative error 2^-11 each, so
      // 2^-10 per product; products are exact in the FP32 accumulator, whose sum adds K 2^-23), so a
      // difference of two keys is off by at most ~2^-9 (1 + K 2^-13) |x| dmax, plus the keys' float rounding
      // (2^-22 (|x| dmax + wmax)), the exact rescoring's own float sum (2 K 2^-24 |x| rmax), and the absolute
      // error of pixel values below FP16's normal range after scaling (2^-25 / s_x per element, so
      // 2^-24 sqrt(kh) dmax / s_x). (The TF32 path keeps a 4x looser 2^-7: cuBLAS may truncate.)
      // The wgmma form replaces a key's low key_bits mantissa bits (error < 2^(key_bits - 23) |key|, |key| <=
      // |x| dmax + |w|): twice that for a difference.
      b.key_bits = pl.wgmma ? best_wgmma_key_bits(b.rpad) : 0;
      const double packing = pl.wgmma ? std::ldexp(1.0, b.key_bits - 22) : 0.0;
      b.margin_a = float(dmax * (std::ldexp(1.0, -9) * (1.0 + pl.kdim * std::ldexp(1.0, -13)) + std::ldexp(1.0, -22) + packing) +
                         2.0 * pl.kdim * std::ldexp(1.0, -24) * rmax);
      b.margin_b = float(wmax_c * (std::ldexp(1.0, -22) + packing));
      b.margin_s = float(std::ldexp(std::sqrt(double(b.kh)) * dmax, -24));
      b.cand = st.buffer("spectral.best_cand", sizeof(int) * chunk_pix * kBestCandidates).as<int>();
      b.ncand = st.buffer("spectral.best_ncand", sizeof(int) * chunk_pix).as<int>();
      auto* counters = st.buffer("spectral.best_counters", 2 * sizeof(unsigned)).as<unsigned>();
      b.absmax = counters;
      b.overflows = counters + 1;
      SPECTRASIFT_CUDA_CHECK(cudaMemsetAsync(counters, 0, 2 * sizeof(unsigned), s));
      pl.best_smem = pl.wgmma ? best_wgmma_smem(b.kh) : best_fp16_smem(b.kh);
      if (pl.best_smem > std::size_t(st.props.sharedMemPerBlockOptin)) {
        pl.fused = false;  // too many bands for this GPU's shared memory: the cuBLAS path
      }
    }
    if (!pl.fused) {
      pl.gemm_refs = st.buffer("spectral.gemm_refs", sizeof(float) * a.size()).as<float>();
      SPECTRASIFT_CUDA_CHECK(cudaMemcpyAsync(pl.gemm_refs, a.data(), sizeof(float) * a.size(), cudaMemcpyHostToDevice, s));
      pl.gemm_w = st.buffer("spectral.gemm_w", sizeof(float) * R).as<float>();
      SPECTRASIFT_CUDA_CHECK(cudaMemcpyAsync(pl.gemm_w, w.data(), sizeof(float) * R, cudaMemcpyHostToDevice, s));
      std::vector<float> v2p;
      if (sid) {
        v2p.assign(std::size_t(R) * npad, 0.0f);
        for (int r = 0; r < R; ++r)
          std::copy_n(refs.values2.data() + std::size_t(r) * n, n, v2p.data() + std::size_t(r) * npad);
        float* dv2 = st.buffer("spectral.v2pad", sizeof(float) * v2p.size()).as<float>();
        SPECTRASIFT_CUDA_CHECK(cudaMemcpyAsync(dv2, v2p.data(), sizeof(float) * v2p.size(), cudaMemcpyHostToDevice, s));
        pl.rescore.v2 = dv2;
      }
      pl.x_rows = st.buffer("spectral.x_rows", sizeof(float) * chunk_pix * pl.kpad).as<float>();
      pl.rescore.x = sid ? nullptr : pl.x_rows;  // sid rescoring needs the pixel's values: the planes
      pl.rescore.kpad = pl.kpad;
      std::size_t free_b = 0, total_b = 0;
      SPECTRASIFT_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
      const std::size_t block_bytes = std::min(st.score_block_bytes, free_b / 16);  // two blocks, small GPUs too
      std::size_t sub = block_bytes / (sizeof(float) * std::size_t(pl.ldc));
      sub = std::max<std::size_t>(256, std::min<std::size_t>(sub, chunk_pix));
      pl.sub_pix = int(round_up<std::size_t>(sub, 32));
      for (int i = 0; i < 2; ++i)
        pl.scores_block[i] = st.buffer(i ? "spectral.scores_block1" : "spectral.scores_block0",
                                       sizeof(float) * std::size_t(pl.ldc) * pl.sub_pix).as<float>();
      st.cublas_handle();
    }
  }

  // Outputs: the whole image on the device when it fits comfortably, else one chunk at a time.
  const std::size_t total_pix = std::size_t(cube.samples) * cube.lines;
  const bool with_index = opt.reduction != Reduction::kAll;
  const std::size_t per_pix = sizeof(float) + (with_index ? sizeof(int) : 0);
  std::size_t free_b = 0, total_b = 0;
  // Outputs of up to 64 MiB are kept whole without asking for the free memory (the query takes tens of us).
  const std::size_t out_bytes = per_pix * pl.k * total_pix, small_out = std::size_t(64) << 20;
  if (!whole_output_required && out_bytes > small_out) SPECTRASIFT_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  pl.out_whole = whole_output_required || out_bytes <= small_out || out_bytes <= free_b / 3;
  const std::size_t out_pix = pl.out_whole ? total_pix : chunk_pix;
  pl.out_stride = (long long)out_pix;
  pl.out_score = st.buffer("spectral.out_score", sizeof(float) * out_pix * pl.k).as<float>();
  if (with_index) pl.out_index = st.buffer("spectral.out_index", sizeof(int) * out_pix * pl.k).as<int>();
  return pl;
}

/// Enqueues the matching of one chunk (already on the device) on `s`. Outputs go to the chunk's
/// place in the device output (whole image) or to its start (one chunk at a time).
void compute_chunk(Plan& pl, const void* d_chunk, int y0, int lines, cudaStream_t s) {
  const auto& cube = *pl.cube;
  const auto& refs = *pl.refs;
  const int npix = lines * cube.samples;
  const int blocks = (npix + kBlock - 1) / kBlock;
  CubeConst cc;
  cc.samples = cube.samples;
  cc.npix = npix;
  cc.scale = cube.scale;
  cc.has_ignore = cube.has_ignore ? 1 : 0;
  cc.ignore = float(cube.ignore_value);
  cc.big_endian = cube.big_endian ? 1 : 0;
  const ChunkLayout layout = layout_of(cube, lines, pl.n);

  OutView out;
  const long long off = pl.out_whole ? (long long)y0 * cube.samples : 0;
  out.score = pl.out_score + off;
  out.index = pl.out_index ? pl.out_index + off : nullptr;
  out.stride = pl.out_stride;
  out.k = pl.k;
  out.mode = int(pl.opt.reduction);
  out.threshold = float(pl.opt.threshold);
  if (pl.opt.reduction == Reduction::kTopK && !pl.gemm && !pl.one_ref) {
    // (NaN, -1) everywhere: all bits set is a NaN float and the int -1.
    SPECTRASIFT_CUDA_CHECK(cudaMemset2DAsync(out.score, sizeof(float) * pl.out_stride, 0xff, sizeof(float) * npix, pl.k, s));
    SPECTRASIFT_CUDA_CHECK(cudaMemset2DAsync(out.index, sizeof(int) * pl.out_stride, 0xff, sizeof(int) * npix, pl.k, s));
  }

  if (pl.one_ref) {
    OneRef r;
    r.v1 = pl.v1;
    r.v2 = pl.v2;
    r.band_index = pl.band_index;
    r.n = pl.n;
    r.constant = refs.constant[0];
    r.ri = pl.ed_ri;
    r.rf = pl.ed_rf;
    r.rf2 = pl.ed_rf2;
    r.ed_split = pl.ed_split ? 1 : 0;
    const std::size_t smem = std::size_t(pl.n) * (sizeof(double) + 2 * sizeof(float) + sizeof(int));
    with_type(cube.type, [&](auto T) {
      using U = typename Storage<decltype(T)::value>::type;
      with_metric(refs.metric, [&](auto M) {
        constexpr int kT = decltype(T)::value, kM = decltype(M)::value;
        if constexpr (kOneRefIntegerPath<kT, kM>) {
          // Small integers, no scale: 4 pixels per thread, the same bits as spectral_one_ref (see
          // spectral_one_ref_rows; ed only in its split form). 32-bit element offsets.
          const bool rows_ok = pl.st->one_ref_rows && cc.scale == 1.0f && pl.n <= kOneRefRowsMaxBands &&
                               (refs.metric != Metric::kEuclidean || pl.ed_split) &&
                               pl.chunk_bytes / pl.es < (std::size_t(1) << 31);
          std::size_t smem_rows = std::size_t(pl.n) * (sizeof(float) + 2 * sizeof(int));
          auto launch = [&](auto k_plain, auto k_ignore, long long threads) {
            auto kern = cc.has_ignore ? k_ignore : k_plain;
            if (smem_rows > 48 * 1024)
              SPECTRASIFT_CUDA_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem_rows)));
            kern<<<unsigned((threads + kOneRefRowsBlock - 1) / kOneRefRowsBlock), kOneRefRowsBlock, smem_rows, s>>>(
                static_cast<const U*>(d_chunk), layout, cc, r, out);
          };
          constexpr int V = kOneRefRowsPixels;
          if (rows_ok && pl.bip_vector) {
            // + the stages (10 blocks per SM need ~190 KB of shared memory: ask for the largest carve-out);
            // whole warps of 32 V pixels.
            smem_rows += std::size_t(one_ref_rows_stage_bytes(int(pl.es)));
            for (auto k : {spectral_one_ref_rows<kT, kM, false, kRowsBip>, spectral_one_ref_rows<kT, kM, true, kRowsBip>})
              SPECTRASIFT_CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributePreferredSharedMemoryCarveout,
                                                          int(cudaSharedmemCarveoutMaxShared)));
            launch(spectral_one_ref_rows<kT, kM, false, kRowsBip>, spectral_one_ref_rows<kT, kM, true, kRowsBip>,
                   (npix + 32 * V - 1) / (32 * V) * 32);
            return;
          }
          if (rows_ok && layout.ss == 1) {
            // BSQ (planes padded to 8) or BIL with samples % 4 == 0: flat; other BIL rows: per line, loads of
            // the largest W in {2, 1} that divides samples.
            const int w = vector_pixels(cube, V);
            const long long lined = (long long)(npix / cube.samples) * ((cube.samples + V - 1) / V);
            if (w == V) launch(spectral_one_ref_rows<kT, kM, false, kRowsFlat>, spectral_one_ref_rows<kT, kM, true, kRowsFlat>, (npix + V - 1) / V);
            else if (w == 2) launch(spectral_one_ref_rows<kT, kM, false, kRowsLine, 2>, spectral_one_ref_rows<kT, kM, true, kRowsLine, 2>, lined);
            else launch(spectral_one_ref_rows<kT, kM, false, kRowsLine, 1>, spectral_one_ref_rows<kT, kM, true, kRowsLine, 1>, lined);
            return;
          }
        }
        auto kern = spectral_one_ref<kT, kM>;
        if (smem > 32 * 1024)  // many bands: beyond the default 48 KiB with the static partial sums
          SPECTRASIFT_CUDA_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
        kern<<<(npix + kOneRefPixels - 1) / kOneRefPixels, kBlock, smem, s>>>(static_cast<const U*>(d_chunk), layout, cc,
                                                                            r, out);
      });
    });
    SPECTRASIFT_CUDA_CHECK_LAUNCH();
    return;
  }

  if (pl.fused) SPECTRASIFT_CUDA_CHECK(cudaMemsetAsync(pl.best.absmax, 0, 2 * sizeof(unsigned), s));  // + overflows
  unsigned* absmax = pl.fused ? pl.best.absmax : nullptr;
  with_type(cube.type, [&](auto T) {
    constexpr int kT = decltype(T)::value;
    using U = typename Storage<kT>::type;
    if constexpr (kOneRefIntegerPath<kT, SPECTRAL_METRIC_SAM>) {
      if (layout.ss == 1 && cc.scale == 1.0f && refs.metric != Metric::kInformationDivergence) {
        // BSQ/BIL small integers: V pixels per thread, vector loads, the same bits (see the kernel).
        const int v = vector_pixels(cube, 4);
        auto launch = [&](auto k_plain, auto k_ignore, int vv) {
          auto kern = cc.has_ignore ? k_ignore : k_plain;
          const int threads = (npix + vv - 1) / vv;
          kern<<<(threads + kBlock - 1) / kBlock, kBlock, 0, s>>>(static_cast<const U*>(d_chunk), layout, cc,
                                                                  pl.band_index, pl.n, pl.planes, absmax);
        };
        switch (v) {
          case 4: launch(spectral_convert_rows<kT, 4, false>, spectral_convert_rows<kT, 4, true>, 4); break;
          case 2: launch(spectral_convert_rows<kT, 2, false>, spectral_convert_rows<kT, 2, true>, 2); break;
          default: launch(spectral_convert_rows<kT, 1, false>, spectral_convert_rows<kT, 1, true>, 1); break;
        }
        return;
      }
    }
    spectral_convert<kT><<<blocks, kBlock, 0, s>>>(static_cast<const U*>(d_chunk), layout, cc, pl.band_index, pl.n,
                                                   int(refs.metric), pl.planes, absmax);
  });
  SPECTRASIFT_CUDA_CHECK_LAUNCH();
  RefSet rs;
  rs.v1 = pl.v1;
  rs.v2 = pl.v2;
  rs.constant = pl.constant;
  rs.count = refs.count;
  rs.n = pl.n;

  if (!pl.gemm) {
    const std::size_t smem = sizeof(float) * 2 * kMultiTile * std::size_t(pl.n);
    with_metric(refs.metric, [&](auto M) {
      auto kern = spectral_multi<decltype(M)::value>;
      if (smem > 48 * 1024)
        SPECTRASIFT_CUDA_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
      kern<<<blocks, kBlock, smem, s>>>(pl.planes, npix, rs, out);
    });
    SPECTRASIFT_CUDA_CHECK_LAUNCH();
    return;
  }

  if (pl.fused) {
    // Best/threshold of many references: GEMM keys and candidates in one kernel, then the exact rescoring.
    with_metric(refs.metric, [&](auto M) {
      constexpr int kM = decltype(M)::value;
      if constexpr (kM != SPECTRAL_METRIC_SID) {
        if (pl.wgmma) {
          auto best = spectral_best_wgmma<kM>;
          SPECTRASIFT_CUDA_CHECK(cudaFuncSetAttribute(best, cudaFuncAttributeMaxDynamicSharedMemorySize, int(pl.best_smem)));
          best<<<(npix + kWgPixels - 1) / kWgPixels, kWgThreads, pl.best_smem, s>>>(pl.planes, npix, pl.n, pl.best);
        } else {
          auto best = spectral_best_fp16<kM>;
          SPECTRASIFT_CUDA_CHECK(cudaFuncSetAttribute(best, cudaFuncAttributeMaxDynamicSharedMemorySize, int(pl.best_smem)));
          best<<<(npix + kBestTileM - 1) / kBestTileM, kBestThreads, pl.best_smem, s>>>(pl.planes, npix, pl.n, pl.best);
        }
        SPECTRASIFT_CUDA_CHECK_LAUNCH();
        spectral_rescore<kM><<<(npix + kBlock / kBestCandidates - 1) / (kBlock / kBestCandidates), kBlock, 0, s>>>(pl.planes, npix, rs, pl.rescore,
                                                                                  pl.best.cand, pl.best.ncand, out);
        SPECTRASIFT_CUDA_CHECK_LAUNCH();
      }
    });
    return;
  }

  // Many references: X rows, then per block of sub_pix pixels a GEMM into score block i%2 on `s` and the
  // selection on the aux stream, so that the GEMM of block i+1 overlaps the selection of block i. A score
  // block is overwritten only after the selection that read it (events, no host synchronisation).
  State& st = *pl.st;
  const bool sid = refs.metric == Metric::kInformationDivergence;
  {
    dim3 grid((npix + 31) / 32, (pl.kpad + 31) / 32), block(32, 8);
    spectral_gemm_rows<<<grid, block, 0, s>>>(pl.planes, npix, pl.n, pl.kdim, pl.kpad, sid ? 1 : 0, pl.x_rows);
    SPECTRASIFT_CUDA_CHECK_LAUNCH();
  }
  cublasHandle_t h = st.cublas_handle();
  SPECTRASIFT_CUBLAS_CHECK(cublasSetStream(h, s));
  const float one = 1.0f, zero = 0.0f;
  const cublasComputeType_t ct = pl.opt.allow_tensor_cores ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  // sync events: 0/1 GEMM into block 0/1 done, 2/3 selection of block 0/1 done, 4 aux finished.
  int i = 0;
  for (int q0 = 0; q0 < npix; q0 += pl.sub_pix, ++i) {
    const int b = i % 2;
    const int nsub = std::min(pl.sub_pix, npix - q0);
    if (i >= 2) SPECTRASIFT_CUDA_CHECK(cudaStreamWaitEvent(s, st.sync_event(2 + b), 0));
    // scores (R x nsub, column-major, ldc) = centred refs (kpad x R, column-major)^T * X rows (kpad x nsub)
    SPECTRASIFT_CUBLAS_CHECK(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, refs.count, nsub, pl.kpad, &one, pl.gemm_refs,
                                          CUDA_R_32F, pl.kpad, pl.x_rows + std::size_t(q0) * pl.kpad, CUDA_R_32F,
                                          pl.kpad, &zero, pl.scores_block[b], CUDA_R_32F, pl.ldc, ct,
                                          CUBLAS_GEMM_DEFAULT));
    SPECTRASIFT_CUDA_CHECK(cudaEventRecord(st.sync_event(b), s));
    SPECTRASIFT_CUDA_CHECK(cudaStreamWaitEvent(st.aux, st.sync_event(b), 0));
    const int sblocks = (nsub + (kBlock / 32) - 1) / (kBlock / 32);
    with_metric(refs.metric, [&](auto M) {
      spectral_select<decltype(M)::value><<<sblocks, kBlock, 0, st.aux>>>(pl.scores_block[b], pl.ldc, pl.gemm_w,
                                                                           pl.planes, npix, q0, nsub, rs, pl.rescore, out);
    });
    SPECTRASIFT_CUDA_CHECK_LAUNCH();
    SPECTRASIFT_CUDA_CHECK(cudaEventRecord(st.sync_event(2 + b), st.aux));
  }
  // The chunk is done when the aux stream is: join it back into `s`.
  SPECTRASIFT_CUDA_CHECK(cudaEventRecord(st.sync_event(4), st.aux));
  SPECTRASIFT_CUDA_CHECK(cudaStreamWaitEvent(s, st.sync_event(4), 0));
}

/// Copies the device outputs of pixels [p0, p0+npix) (device offset d0) into the result.
void download(Plan& pl, SpectralResult& result, std::size_t p0, std::size_t npix, std::size_t d0) {
  const std::size_t total = std::size_t(pl.cube->samples) * pl.cube->lines;
  auto& st = *pl.st;
  const bool with_index = pl.out_index != nullptr;
  const std::size_t bytes = npix * pl.k * (sizeof(float) + (with_index ? sizeof(int) : 0));
  if (pl.out_whole && npix == total && bytes <= kPinnedResultMax) {
    // Through a pinned buffer: the device copy runs at full speed, the host copy is parallel.
    auto& pin = st.pinned_buffer("spectral.result", bytes);
    auto* ps = pin.as<float>();
    auto* pi = reinterpret_cast<int*>(ps + npix * pl.k);
    SPECTRASIFT_CUDA_CHECK(cudaMemcpyAsync(ps, pl.out_score, sizeof(float) * npix * pl.k, cudaMemcpyDeviceToHost, st.copy));
    if (with_index)
      SPECTRASIFT_CUDA_CHECK(cudaMemcpyAsync(pi, pl.out_index, sizeof(int) * npix * pl.k, cudaMemcpyDeviceToHost, st.copy));
    SPECTRASIFT_CUDA_CHECK(cudaStreamSynchronize(st.copy));
    std::vector<CopyPiece> pieces{{result.scores.data(), ps, sizeof(float) * npix * pl.k}};
    if (with_index) pieces.push_back({result.index.data(), pi, sizeof(int) * npix * pl.k});
    st.host_pool->copy(pieces);
    return;
  }
  SPECTRASIFT_CUDA_CHECK(cudaMemcpy2D(result.scores.data() + p0, sizeof(float) * total, pl.out_score + d0,
                                      sizeof(float) * pl.out_stride, sizeof(float) * npix, pl.k, cudaMemcpyDeviceToHost));
  if (with_index)
    SPECTRASIFT_CUDA_CHECK(cudaMemcpy2D(result.index.data() + p0, sizeof(int) * total, pl.out_index + d0,
                                        sizeof(int) * pl.out_stride, sizeof(int) * npix, pl.k, cudaMemcpyDeviceToHost));
}

/// Results small enough go through one pinned buffer, chunk by chunk on the download stream as soon as
/// each chunk is computed (overlapping the uploads and computes of the next chunks).
struct PinnedResult {
  bool on = false;
  float* score = nullptr;
  int* index = nullptr;
};

PinnedResult pinned_result(Plan& pl) {
  PinnedResult r;
  const std::size_t total = std::size_t(pl.cube->samples) * pl.cube->lines;
  const bool with_index = pl.out_index != nullptr;
  const std::size_t bytes = total * pl.k * (sizeof(float) + (with_index ? sizeof(int) : 0));
  if (!pl.out_whole || bytes > kPinnedResultMax) return r;
  auto& pin = pl.st->pinned_buffer("spectral.result", bytes);
  r.on = true;
  r.score = pin.as<float>();
  if (with_index) r.index = reinterpret_cast<int*>(r.score + total * pl.k);
  return r;
}

/// Enqueues the download of chunk pixels [p0, p0+npix) (whole-image device output) into the pinned result.
void download_chunk_async(Plan& pl, const PinnedResult& pr, std::size_t p0, std::size_t npix, cudaStream_t s) {
  const std::size_t total = std::size_t(pl.cube->samples) * pl.cube->lines;
  SPECTRASIFT_CUDA_CHECK(cudaMemcpy2DAsync(pr.score + p0, sizeof(float) * total, pl.out_score + p0,
                                           sizeof(float) * pl.out_stride, sizeof(float) * npix, pl.k,
                                           cudaMemcpyDeviceToHost, s));
  if (pr.index)
    SPECTRASIFT_CUDA_CHECK(cudaMemcpy2DAsync(pr.index + p0, sizeof(int) * total, pl.out_index + p0,
                                             sizeof(int) * pl.out_stride, sizeof(int) * npix, pl.k,
                                             cudaMemcpyDeviceToHost, s));
}

void check_result_sizes(const SpectralResult& result, const Plan& pl) {
  const std::size_t total = std::size_t(pl.cube->samples) * pl.cube->lines * pl.k;
  if (result.scores.size() != total || (pl.opt.reduction != Reduction::kAll && result.index.size() != total))
    throw Error(ErrorCode::kInternal, "CUDA spectral matching: result buffers are not sized for the output", "cuda");
}

/// Zero-copy staging (State::register_staging; BIL and BIP, whose chunks are contiguous in the file):
/// the pages of each chunk of the memory-mapped file are page-locked in place with cudaHostRegister and
/// uploaded straight from the page cache, with no host copy. Chunk c locks the pages from the one holding
/// its first byte up to (not including) the one holding chunk c+1's first byte, so that no page is locked
/// twice; the last chunk locks to its end. Everything still locked is released (after the uploads) when
/// this object goes, also when an exception leaves the call.
struct RegisteredChunks {
  State& st;
  bool on;
  std::vector<std::uint8_t*> start;
  std::vector<std::size_t> len;
  std::vector<char> locked;
  RegisteredChunks(State& s, const Plan& pl, bool enable) : st(s), on(enable) {
    if (!on) return;
    const auto& cube = *pl.cube;
    const std::size_t page = 4096, line = cube.line_stride * pl.es;
    auto floor_page = [&](const std::uint8_t* p) {
      return reinterpret_cast<std::uint8_t*>(reinterpret_cast<std::uintptr_t>(p) / page * page);
    };
    for (int c = 0; c < pl.nchunks; ++c) {
      const std::uint8_t* a = cube.data + std::size_t(c) * pl.chunk_lines * line;
      const int nl = std::min(pl.chunk_lines, cube.lines - c * pl.chunk_lines);
      const std::uint8_t* e = a + std::size_t(nl) * line;
      std::uint8_t* pa = floor_page(a);
      std::uint8_t* pe = c + 1 == pl.nchunks ? floor_page(e + page - 1) : floor_page(e);
      start.push_back(pa);
      len.push_back(pe > pa ? std::size_t(pe - pa) : 0);
    }
    locked.assign(start.size(), 0);
  }
  ~RegisteredChunks() {
    if (std::find(locked.begin(), locked.end(), 1) == locked.end()) return;
    cudaStreamSynchronize(st.copy);
    for (std::size_t c = 0; c < locked.size(); ++c)
      if (locked[c]) cudaHostUnregister(start[c]);
  }
  /// Locks chunk c's pages (nothing to do past the last chunk or for an empty range); false when refused.
  bool add(int c) {
    if (c >= int(start.size()) || len[c] == 0 || locked[c]) return true;
    const cudaError_t e = cudaHostRegister(start[c], len[c], cudaHostRegisterReadOnly);
    if (e != cudaSuccess) {
      cudaGetLastError();  // not sticky: clear it
      return false;
    }
    locked[c] = 1;
    return true;
  }
  void remove(int c) {
    if (!locked[c]) return;
    SPECTRASIFT_CUDA_CHECK(cudaHostUnregister(start[c]));
    locked[c] = 0;
  }
  void release_all() {
    if (!on) return;
    SPECTRASIFT_CUDA_CHECK(cudaStreamSynchronize(st.copy));
    for (std::size_t c = 0; c < locked.size(); ++c) remove(int(c));
    on = false;
  }
};

int default_chunk_lines(const detail::CubeView& cube, int n, std::size_t chunk_bytes) {
  const std::size_t line = chunk_travel_bytes(cube, 1, n, std::size_t(spectral_sample_size(int(cube.type))));
  return int(std::max<std::size_t>(1, (chunk_bytes ? chunk_bytes : kDefaultChunkBytes) / std::max<std::size_t>(1, line)));
}

}  // namespace

void spectral_match(detail::ContextImpl& ctx, const detail::CubeView& cube, const detail::PreparedReferences& refs,
                    const SpectralOptions& options, SpectralResult& result, const ProgressFn& progress) {
  const auto t_start = Clock::now();
  State& st = state(ctx);
  st.activate();
  HostCopyPool& pool = st.host_copy_pool(ctx.cpu_threads());
  pool.wake();  // sleeping workers take tens of us to wake: let them spin while the plan is made
  const int lines = options.chunk_lines > 0 ? options.chunk_lines : default_chunk_lines(cube, refs.used_bands, st.stage_chunk_bytes);
  Plan pl = make_plan(st, pool, cube, refs, options, lines, false);
  check_result_sizes(result, pl);
  ctx.log(std::string("cuda spectral: ") + (pl.one_ref ? "one-reference kernel" : pl.gemm ?
          pl.fused ? "fused FP16 tensor-core best + exact rescoring" :
          (options.allow_tensor_cores ? "GEMM (TF32) + exact rescoring" : "GEMM (FP32) + exact rescoring") :
          "exact multi-reference kernel") + ", " + std::to_string(pl.nchunks) + " chunks of " +
          std::to_string(pl.chunk_lines) + " lines");

  RegisteredChunks reg(st, pl, st.register_staging && cube.interleave != Interleave::kBsq);
  // Whole chunk_lines each: smaller first chunks (a ramp of 1/8, 1/4, 1/2 or x1.5 from 2-8 MiB) were
  // slower (bench/NOTES.md steps 24 and 37): the uploads run slower while the host copy chases them.
  const int nchunks = pl.nchunks;
  // Pinned staging: a ring of kStages buffers, so that the host copy runs up to kStages - 1 chunks ahead of
  // the uploads (with two, every copy waited for the upload before last and the DMA engine idled between
  // chunks); device chunks: double buffers. Events say when each may be reused.
  constexpr int kStages = 4;
  // Packed uploads: 16-bit samples, the VBMI + GFNI packer on this processor, copy staging, and chunks within
  // the format's 32-bit offsets. The AVX-512BW packer (2.2-2.5 GB/s per core against 4-9) made end to end
  // slower than raw uploads on the H200 host (bench/NOTES.md step 59), so processors without VBMI + GFNI upload
  // raw, unless the bench knob forces a narrower packer.
  const std::size_t max_packed =
      SamplePacker::max_packed_bytes(pl.chunk_bytes / 2, cube.interleave == Interleave::kBsq ? std::size_t(pl.n) : 1);
  const PackIsa pack_isa = std::min(st.pack_max_isa, SamplePacker::best_isa());
  const bool packer_fast_enough = pack_isa == PackIsa::kAvx512Gfni ||
                                  (st.pack_max_isa < PackIsa::kAvx512Gfni && pack_isa != PackIsa::kScalar);
  bool packing = st.pack_policy != PackPolicy::kNever && pl.es == 2 && !reg.on && packer_fast_enough &&
                 max_packed < (std::size_t(1) << 32);
  SamplePacker packer(cube.type == SampleType::kI16, cube.big_endian, st.pack_max_isa);
  std::vector<PackRun> runs;
  std::size_t raw_bytes_staged = 0, raw_bytes_packed = 0, packed_bytes = 0;
  const std::size_t stage_bytes = packing ? std::max(pl.chunk_bytes, max_packed) : pl.chunk_bytes;
  PinnedBuffer* pin[kStages];
  for (int i = 0; i < kStages; ++i) pin[i] = &st.pinned_buffer("spectral.stage" + std::to_string(i), stage_bytes);
  DeviceBuffer* dev[2] = {&st.buffer("spectral.chunk0", pl.chunk_bytes), &st.buffer("spectral.chunk1", pl.chunk_bytes)};
  DeviceBuffer* devpk[2] = {nullptr, nullptr};
  if (packing) devpk[0] = &st.buffer("spectral.packed0", max_packed), devpk[1] = &st.buffer("spectral.packed1", max_packed);
  // Events per chunk k: 4k upload start, 4k+1 upload end, 4k+2 compute start, 4k+3 compute end; 4 nchunks and
  // 4 nchunks + 1: the bench timeline's zero and the last download's end.
  for (int i = 0; i < 4 * nchunks + 2; ++i) st.event(std::size_t(i));
  // Bench timeline (State::trace_on): host points now, GPU events resolved against a zero event at the end.
  std::vector<std::pair<std::string, double>> marks;
  auto mark = [&](const char* what, int chunk = -1) {  // no string is built unless the trace is on
    if (st.trace_on) marks.emplace_back(chunk < 0 ? std::string(what) : what + std::to_string(chunk), ms_since(t_start));
  };
  if (st.trace_on) {
    SPECTRASIFT_CUDA_CHECK(cudaEventRecord(st.event(4 * std::size_t(nchunks)), st.copy));
    mark("plan made, gpu zero");
  }
  // No wait for the plan's uploads (compute stream): the kernels that use them follow on that stream (the
  // last chunk's on `copy` after an event), and pageable sources are staged before cudaMemcpyAsync returns.
  const PinnedResult pres = pinned_result(pl);
  double read_ms = 0, download_ms = 0;
  std::vector<CopyPiece> pieces;
  if (reg.on) {
    const auto t_read = Clock::now();
    reg.on = reg.add(0);  // refused (no support, or a mapping the driver cannot lock): copy staging
    read_ms += ms_since(t_read);
  }
  // Results through the pinned buffer: the parts of the chunks whose downloads are done (polled before each
  // host pass) are copied out by the pool within the next staging pass, as extra work items, so that they cost
  // the host's critical path a few microseconds instead of ~30 us per chunk on the calling thread (bench/
  // NOTES.md step 56); only the last chunks' parts remain after the loop.
  int results_collected = 0;  // chunks whose results are in `result` or in result_work
  int downloads_enqueued = 0;  // chunks whose download is enqueued: only their events say anything
  std::vector<CopyPiece> result_work;
  // Ordering events of this loop: kLoopEvents + c after chunk c's download, kLoopEvents + nchunks before the
  // last chunk's compute (the ones below kLoopEvents belong to compute_chunk's GEMM path).
  constexpr std::size_t kLoopEvents = 8;
  const std::size_t total_pix = std::size_t(cube.samples) * cube.lines;
  auto chunk_start = [&](int d) { return std::size_t(std::min(d * pl.chunk_lines, cube.lines)) * cube.samples; };
  // Pixels [p0, p0 + np) of every output band, pinned result -> `result`.
  auto result_pieces = [&](std::size_t p0, std::size_t np) {
    std::vector<CopyPiece> v;
    for (int j = 0; j < pl.k; ++j) {
      v.push_back({result.scores.data() + j * total_pix + p0, pres.score + j * total_pix + p0, sizeof(float) * np});
      if (pres.index) v.push_back({result.index.data() + j * total_pix + p0, pres.index + j * total_pix + p0, sizeof(int) * np});
    }
    return v;
  };
  // Chunks [results_collected, upto) whose downloads are done (all of them if wait) -> result_work, in parts of
  // 128 KiB for the pool. Only enqueued downloads count: the event of a later chunk still holds an earlier call's
  // state (or none, which reads as done).
  auto collect_results = [&](int upto, bool wait) {
    const int d0 = results_collected;
    upto = std::min(upto, downloads_enqueued);
    for (; results_collected < upto; ++results_collected) {
      const cudaEvent_t done = st.sync_event(kLoopEvents + std::size_t(results_collected));
      if (wait) SPECTRASIFT_CUDA_CHECK(cudaEventSynchronize(done));
      else if (cudaEventQuery(done) != cudaSuccess) break;
    }
    if (results_collected == d0) return;
    for (const CopyPiece& p : result_pieces(chunk_start(d0), chunk_start(results_collected) - chunk_start(d0)))
      for (std::size_t off = 0; off < p.bytes; off += std::size_t(128) << 10)
        result_work.push_back({static_cast<char*>(p.dst) + off, static_cast<const char*>(p.src) + off,
                               std::min(std::size_t(128) << 10, p.bytes - off)});
  };
  // The host pass of a chunk: staging buffer c % kStages free, the finished results collected, then the copy
  // or the packing (with the results as extra work items) started on the pool; finish_staging() joins it.
  struct Staging {
    int c = -1;
    bool packed = false;
    bool demote = false;
    std::size_t raw = 0, bytes = 0;
    int groups = 0;
    Clock::time_point t0;
  };
  Staging staged;
  auto start_staging = [&](int c) {
    Staging g;
    g.c = c;
    const int y0 = c * pl.chunk_lines;
    const int nl = std::min(pl.chunk_lines, cube.lines - y0);
    if (c >= kStages) SPECTRASIFT_CUDA_CHECK(cudaEventSynchronize(st.event(4 * (c - kStages) + 1)));  // staging buffer uploaded
    if (pres.on) collect_results(c, false);
    g.t0 = Clock::now();
    auto* stage = static_cast<std::uint8_t*>(pin[c % kStages]->ptr);
    chunk_pieces(pl, y0, nl, stage, pieces);
    g.raw = chunk_travel_bytes(cube, nl, pl.n, pl.es);  // BSQ: with the plane padding
    // Pieces of at most 256 KiB, smaller for small chunks so that every thread has some.
    const std::size_t split = std::clamp<std::size_t>(g.raw / (2 * std::size_t(pool.threads())), std::size_t(32) << 10,
                                                      std::size_t(256) << 10);
    // The last chunk's lines are pushed to the shared cache (CLDEMOTE): its upload starts right after the
    // copy, and read out of the copying cores' private caches it ran at half rate (0.21-0.24 ms for 6.6 MB
    // instead of 0.12; bench/NOTES.md step 43). Earlier chunks are pushed out by the next chunk's copy, and
    // demoting every chunk slowed the copy more than it sped up the uploads (step 40).
    g.demote = c + 1 == nchunks && st.demote_last_chunk && !st.stage_streaming;
    // Balanced: chunk c is packed only if the upload of chunk c-2 is still running, i.e. the host is two
    // chunks ahead of the upload engine; otherwise the cheaper raw copy keeps the engine fed. (Upload c-1 is
    // nearly always running: that test packed almost every chunk, which lost to raw uploads on hosts that pack
    // slowly, bench/NOTES.md step 52; a planner predicting the end of the pipeline from measured rates packed
    // less and lost to this rule, step 55.) Either way the device receives the same samples, so the choice,
    // which depends on timing, changes no result.
    g.packed = packing && (st.pack_policy == PackPolicy::kAlways ||
                           (c >= 2 && cudaEventQuery(st.event(4 * (c - 2) + 1)) == cudaErrorNotReady));
    if (g.packed) {
      runs.clear();
      for (const CopyPiece& p : pieces)
        runs.push_back({p.src, std::size_t(static_cast<std::uint8_t*>(p.dst) - stage), p.bytes / 2});
      packer.layout(runs, split / 2);
      g.groups = packer.groups();
      const int items = packer.items();
      const bool demote = g.demote;
      pool.start(items + int(result_work.size()), [&packer, &result_work, items, stage, demote](int i) {
        if (i >= items) {  // a finished chunk's results
          const CopyPiece& p = result_work[std::size_t(i - items)];
          std::memcpy(p.dst, p.src, p.bytes);
          return;
        }
        const auto written = packer.pack(i, stage);
        if (demote) demote_lines(stage + written.first, written.second - written.first);
      });
    } else {
      pieces.insert(pieces.end(), result_work.begin(), result_work.end());
      pool.start_copy(pieces, split, st.stage_streaming ? CopyStores::kStreaming : g.demote ? CopyStores::kDemote : CopyStores::kPlain);
    }
    return g;
  };
  auto finish_staging = [&](Staging& g) {
    pool.finish();
    result_work.clear();
    raw_bytes_staged += g.raw;
    g.bytes = g.raw;
    if (g.packed) {
      if (g.demote) demote_lines(pin[g.c % kStages]->ptr, packer.header_bytes());
      g.bytes = packer.packed_bytes();
      raw_bytes_packed += g.raw;
      packed_bytes += g.bytes;
      if (double(g.bytes) > kPackMaxRatio * double(g.raw)) packing = false;  // this cube does not pack: stop trying
    }
    read_ms += ms_since(g.t0);
    mark(g.packed ? "host packed chunk " : "host copied chunk ", g.c);
  };
  // A pass still running on the workers when a CUDA call throws uses this frame's packer and buffers: it is
  // finished before they go.
  struct FinishPassOnExit {
    HostCopyPool& pool;
    ~FinishPassOnExit() { pool.finish(); }
  } finish_pass_on_exit{pool};
  for (int c = 0; c < nchunks; ++c) {
    const int y0 = c * pl.chunk_lines;
    const int nl = std::min(pl.chunk_lines, cube.lines - y0);
    const int b = c % 2;
    const bool tail = c + 1 == nchunks;
    const void* src = nullptr;
    std::size_t bytes = 0;
    int packed_groups = 0;  // > 0: chunk c travels packed (a packed chunk has at least one group)
    if (reg.on) {
      // Upload c reads its own pages and the first page of chunk c+1: lock c+1 before enqueueing it.
      const auto t_read = Clock::now();
      if (reg.add(c + 1)) {
        src = cube.data + std::size_t(y0) * cube.line_stride * pl.es;
        bytes = std::size_t(nl) * cube.line_stride * pl.es;
      } else {
        reg.release_all();  // fall back to the copy for the rest of the cube
      }
      if (src && pres.on) {  // no staging pass to share: the finished results are copied here
        collect_results(c, false);
        for (const CopyPiece& p : result_work) std::memcpy(p.dst, p.src, p.bytes);
        result_work.clear();
      }
      read_ms += ms_since(t_read);
    }
    if (!src) {
      if (staged.c != c) staged = start_staging(c);  // not started ahead (chunk 0, or registration just failed)
      finish_staging(staged);
      src = pin[c % kStages]->ptr;
      bytes = staged.bytes;
      packed_groups = staged.groups;
    }
    // Chunk c+1's host pass starts on the pool's workers now and runs while this thread makes chunk c's CUDA
    // calls (~35 us per chunk, on the host's critical path when the host, not PCIe, is the limit); it is
    // finished at the top of the next iteration.
    if (!reg.on && c + 1 < nchunks) staged = start_staging(c + 1);
    if (c >= 2) SPECTRASIFT_CUDA_CHECK(cudaStreamWaitEvent(st.copy, st.event(4 * (c - 2) + 3), 0));  // device b consumed
    SPECTRASIFT_CUDA_CHECK(cudaEventRecord(st.event(4 * c), st.copy));
    SPECTRASIFT_CUDA_CHECK(cudaMemcpyAsync(packed_groups > 0 ? devpk[b]->ptr : dev[b]->ptr, src, bytes,
                                           cudaMemcpyHostToDevice, st.copy));
    SPECTRASIFT_CUDA_CHECK(cudaEventRecord(st.event(4 * c + 1), st.copy));
    if (reg.on && c >= 1) {
      // Chunk c-1's pages were read by uploads c-2 and c-1 only.
      const auto t_read = Clock::now();
      SPECTRASIFT_CUDA_CHECK(cudaEventSynchronize(st.event(4 * (c - 1) + 1)));
      reg.remove(c - 1);
      read_ms += ms_since(t_read);
    }
    // The last chunk is computed and downloaded on the upload stream, which has nothing left to upload:
    // no hops between streams at the end (-0.01 to -0.07 ms end to end, bench/NOTES.md step 37).
    // It still waits for everything enqueued on `compute` so far: the plan's uploads and the previous
    // chunk's compute (whose scratch buffers the many-reference paths share).
    cudaStream_t cs = tail ? st.copy : st.compute;
    if (!tail) {
      SPECTRASIFT_CUDA_CHECK(cudaStreamWaitEvent(st.compute, st.event(4 * c + 1), 0));
    } else {
      SPECTRASIFT_CUDA_CHECK(cudaEventRecord(st.sync_event(kLoopEvents + std::size_t(nchunks)), st.compute));
      SPECTRASIFT_CUDA_CHECK(cudaStreamWaitEvent(st.copy, st.sync_event(kLoopEvents + std::size_t(nchunks)), 0));
    }
    SPECTRASIFT_CUDA_CHECK(cudaEventRecord(st.event(4 * c + 2), cs));
    if (packed_groups > 0) {
      unpack_samples_kernel<<<packed_groups, 256, 0, cs>>>(static_cast<const unsigned char*>(devpk[b]->ptr),
                                                           packed_groups, cube.big_endian,
                                                           static_cast<unsigned char*>(dev[b]->ptr));
      SPECTRASIFT_CUDA_CHECK(cudaGetLastError());
    }
    compute_chunk(pl, dev[b]->ptr, y0, nl, cs);
    SPECTRASIFT_CUDA_CHECK(cudaEventRecord(st.event(4 * c + 3), cs));
    if (pres.on) {
      cudaStream_t ds = tail ? cs : st.download;
      if (!tail) SPECTRASIFT_CUDA_CHECK(cudaStreamWaitEvent(st.download, st.event(4 * c + 3), 0));
      download_chunk_async(pl, pres, std::size_t(y0) * cube.samples, std::size_t(nl) * cube.samples, ds);
      SPECTRASIFT_CUDA_CHECK(cudaEventRecord(st.sync_event(kLoopEvents + std::size_t(c)), ds));
      downloads_enqueued = c + 1;
      if (tail && st.trace_on) SPECTRASIFT_CUDA_CHECK(cudaEventRecord(st.event(4 * std::size_t(nchunks) + 1), ds));
    } else if (!pl.out_whole) {
      SPECTRASIFT_CUDA_CHECK(cudaEventSynchronize(st.event(4 * c + 3)));
      const auto t_dl = Clock::now();
      download(pl, result, std::size_t(y0) * cube.samples, std::size_t(nl) * cube.samples, 0);
      download_ms += ms_since(t_dl);
    }
    mark("enqueued chunk ", c);
    if (progress) progress(double(y0 + nl) / cube.lines);
  }
  if (pres.on) {
    // The host ran ahead of the uploads: copy out every chunk but the last while the last one is in flight.
    collect_results(nchunks - 1, true);
    pool.copy(result_work, std::size_t(1) << 17);
    result_work.clear();
  }
  mark("results copied but the last chunk's");
  SPECTRASIFT_CUDA_CHECK(cudaStreamSynchronize(st.compute));
  SPECTRASIFT_CUDA_CHECK(cudaStreamSynchronize(st.copy));
  mark("streams synchronised");
  reg.release_all();
  if (pres.on) {
    const auto t_dl = Clock::now();
    SPECTRASIFT_CUDA_CHECK(cudaStreamSynchronize(st.download));
    const std::size_t p0 = chunk_start(results_collected);
    pool.copy(result_pieces(p0, total_pix - p0), std::size_t(1) << 17);  // the last chunk's part
    download_ms += ms_since(t_dl);
    mark("last results copied");
  } else if (pl.out_whole) {
    const auto t_dl = Clock::now();
    download(pl, result, 0, std::size_t(cube.samples) * cube.lines, 0);
    download_ms += ms_since(t_dl);
  }
  st.last_pack_ratio = raw_bytes_packed ? double(packed_bytes) / double(raw_bytes_packed) : 0.0;
  st.last_packed_share = raw_bytes_staged ? double(raw_bytes_packed) / double(raw_bytes_staged) : 0.0;
  if (raw_bytes_packed)
    ctx.log("cuda spectral: " + std::to_string(raw_bytes_packed >> 10) + " KiB of samples uploaded packed in " +
            std::to_string(packed_bytes >> 10) + " KiB (" + std::to_string(int(100.0 * st.last_pack_ratio + 0.5)) + " %)");
  double upload_ms = 0, compute_ms = 0;
  for (int c = 0; c < nchunks; ++c) {
    upload_ms += ms_between(st.event(4 * c), st.event(4 * c + 1));
    compute_ms += ms_between(st.event(4 * c + 2), st.event(4 * c + 3));
  }
  result.times.read_ms = read_ms;
  result.times.upload_ms = upload_ms;
  result.times.compute_ms = compute_ms;
  result.times.download_ms = download_ms;
  result.times.total_ms = ms_since(t_start);
  if (st.trace_on) {
    mark("times gathered");
    const double zero = marks.front().second;
    const cudaEvent_t z = st.event(4 * std::size_t(nchunks));
    const char* what[4] = {"gpu upload start ", "gpu upload end ", "gpu compute start ", "gpu compute end "};
    for (int c = 0; c < nchunks; ++c)
      for (int e = 0; e < 4; ++e)
        marks.emplace_back(what[e] + std::to_string(c), zero + ms_between(z, st.event(4 * std::size_t(c) + std::size_t(e))));
    if (pres.on) marks.emplace_back("gpu last download end", zero + ms_between(z, st.event(4 * std::size_t(nchunks) + 1)));
    std::stable_sort(marks.begin(), marks.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
    st.trace.clear();
    for (const auto& m : marks) st.trace += m.first + " at " + std::to_string(m.second) + " ms\n";
  }
}

// ---- bench hooks -----------------------------------------------------------------------------------
namespace bench {
namespace {
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}
}  // namespace

double device_copy_gbps(Context& ctx, std::size_t bytes, int reps) {
  State& st = state(ctx.impl());
  st.activate();
  auto& a = st.buffer("bench.copy_a", bytes);
  auto& b = st.buffer("bench.copy_b", bytes);
  SPECTRASIFT_CUDA_CHECK(cudaMemsetAsync(a.ptr, 1, bytes, st.compute));
  std::vector<double> t;
  for (int i = 0; i <= reps; ++i) {
    SPECTRASIFT_CUDA_CHECK(cudaEventRecord(st.event(0), st.compute));
    SPECTRASIFT_CUDA_CHECK(cudaMemcpyAsync(b.ptr, a.ptr, bytes, cudaMemcpyDeviceToDevice, st.compute));
    SPECTRASIFT_CUDA_CHECK(cudaEventRecord(st.event(1), st.compute));
    SPECTRASIFT_CUDA_CHECK(cudaEventSynchronize(st.event(1)));
    if (i > 0) t.push_back(ms_between(st.event(0), st.event(1)));
  }
  return 2.0 * double(bytes) / (median(t) * 1e6);
}

RegisterTiming host_register_timing(Context& ctx, const void* ptr, std::size_t bytes) {
  State& st = state(ctx.impl());
  st.activate();
  RegisterTiming r;
  const std::size_t page = 4096;
  auto* base = reinterpret_cast<std::uint8_t*>(reinterpret_cast<std::uintptr_t>(ptr) / page * page);
  const std::size_t len = round_up<std::size_t>(std::size_t(static_cast<const std::uint8_t*>(ptr) - base) + bytes, page);
  auto t0 = Clock::now();
  cudaError_t e = cudaHostRegister(base, len, cudaHostRegisterReadOnly);
  if (e != cudaSuccess) {
    cudaGetLastError();
    r.error = cudaGetErrorName(e);
    return r;
  }
  r.register_ms = ms_since(t0);
  auto& d = st.buffer("bench.upload", bytes);
  SPECTRASIFT_CUDA_CHECK(cudaEventRecord(st.event(0), st.copy));
  SPECTRASIFT_CUDA_CHECK(cudaMemcpyAsync(d.ptr, ptr, bytes, cudaMemcpyHostToDevice, st.copy));
  SPECTRASIFT_CUDA_CHECK(cudaEventRecord(st.event(1), st.copy));
  SPECTRASIFT_CUDA_CHECK(cudaEventSynchronize(st.event(1)));
  r.upload_ms = ms_between(st.event(0), st.event(1));
  t0 = Clock::now();
  SPECTRASIFT_CUDA_CHECK(cudaHostUnregister(base));
  r.unregister_ms = ms_since(t0);
  return r;
}

void set_register_staging(Context& ctx, bool on) { state(ctx.impl()).register_staging = on; }

void set_score_block_bytes(Context& ctx, std::size_t bytes) { state(ctx.impl()).score_block_bytes = bytes; }

void set_fused_best(Context& ctx, bool on) { state(ctx.impl()).fused_best = on; }

void set_staging(Context& ctx, std::size_t chunk_bytes, bool streaming) {
  State& st = state(ctx.impl());
  st.stage_chunk_bytes = chunk_bytes;
  st.stage_streaming = streaming;
}

void set_fused_wgmma(Context& ctx, bool on) { state(ctx.impl()).fused_wgmma = on; }

void set_demote_last_chunk(Context& ctx, bool on) { state(ctx.impl()).demote_last_chunk = on; }

void set_trace(Context& ctx, bool on) { state(ctx.impl()).trace_on = on; }

std::string last_trace(Context& ctx) { return state(ctx.impl()).trace; }

void set_copy_threads(Context& ctx, int threads) { state(ctx.impl()).copy_threads = std::max(0, threads); }

void set_one_ref_rows(Context& ctx, bool on) { state(ctx.impl()).one_ref_rows = on; }

void set_pack_policy(Context& ctx, int policy) {
  if (policy < 0 || policy > 2) throw Error(ErrorCode::kInvalidArgument, "set_pack_policy: policy " + std::to_string(policy));
  state(ctx.impl()).pack_policy = PackPolicy(policy);
}

double last_pack_ratio(Context& ctx) { return state(ctx.impl()).last_pack_ratio; }

double last_packed_share(Context& ctx) { return state(ctx.impl()).last_packed_share; }

void set_pack_isa(Context& ctx, int isa) {
  if (isa < 0 || isa > int(PackIsa::kAvx512Gfni)) throw Error(ErrorCode::kInvalidArgument, "set_pack_isa: " + std::to_string(isa));
  state(ctx.impl()).pack_max_isa = PackIsa(isa);
}

bool fused_wgmma_available(Context& ctx) {
#if defined(SPECTRASIFT_CUDA_WGMMA)
  const State& st = state(ctx.impl());
  return st.props.major == 9 && st.props.minor == 0;
#else
  (void)ctx;
  return false;
#endif
}

std::size_t device_memory_used_bytes(Context& ctx) {
  State& st = state(ctx.impl());
  st.activate();
  SPECTRASIFT_CUDA_CHECK(cudaDeviceSynchronize());
  std::size_t free_b = 0, total_b = 0;
  SPECTRASIFT_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  return total_b - free_b;
}

unsigned long long fused_overflow_pixels(Context& ctx) {
  State& st = state(ctx.impl());
  st.activate();
  const auto it = st.buffers.find("spectral.best_counters");
  if (it == st.buffers.end()) return 0;
  unsigned c[2] = {0, 0};
  SPECTRASIFT_CUDA_CHECK(cudaMemcpy(c, it->second.ptr, sizeof c, cudaMemcpyDeviceToHost));
  return c[1];
}

double pinned_upload_ms(Context& ctx, std::size_t bytes, int reps) {
  State& st = state(ctx.impl());
  st.activate();
  auto& h = st.pinned_buffer("bench.pinned", bytes);
  std::memset(h.ptr, 1, bytes);
  auto& d = st.buffer("bench.upload", bytes);
  std::vector<double> t;
  for (int i = 0; i <= reps; ++i) {
    SPECTRASIFT_CUDA_CHECK(cudaEventRecord(st.event(0), st.copy));
    SPECTRASIFT_CUDA_CHECK(cudaMemcpyAsync(d.ptr, h.ptr, bytes, cudaMemcpyHostToDevice, st.copy));
    SPECTRASIFT_CUDA_CHECK(cudaEventRecord(st.event(1), st.copy));
    SPECTRASIFT_CUDA_CHECK(cudaEventSynchronize(st.event(1)));
    if (i > 0) t.push_back(ms_between(st.event(0), st.event(1)));
  }
  return median(t);
}

double resident_compute_ms(Context& ctx, const detail::CubeView& cube, const detail::PreparedReferences& refs,
                           const SpectralOptions& options, int reps, SpectralResult* result, bool force_exact) {
  State& st = state(ctx.impl());
  st.activate();
  HostCopyPool& pool = st.host_copy_pool(ctx.impl().cpu_threads());
  Plan pl = make_plan(st, pool, cube, refs, options, cube.lines, true, force_exact);
  auto& pin = st.pinned_buffer("bench.cube", pl.chunk_bytes);
  auto& dev = st.buffer("bench.cube_dev", pl.chunk_bytes);
  std::vector<CopyPiece> pieces;
  chunk_pieces(pl, 0, cube.lines, pin.ptr, pieces);
  pool.copy(pieces, std::size_t(1) << 18, CopyStores::kStreaming);
  SPECTRASIFT_CUDA_CHECK(cudaMemcpyAsync(dev.ptr, pin.ptr, pl.chunk_bytes, cudaMemcpyHostToDevice, st.compute));
  std::vector<double> t;
  for (int i = 0; i <= reps; ++i) {
    SPECTRASIFT_CUDA_CHECK(cudaEventRecord(st.event(0), st.compute));
    compute_chunk(pl, dev.ptr, 0, cube.lines, st.compute);
    SPECTRASIFT_CUDA_CHECK(cudaEventRecord(st.event(1), st.compute));
    SPECTRASIFT_CUDA_CHECK(cudaEventSynchronize(st.event(1)));
    if (i > 0) t.push_back(ms_between(st.event(0), st.event(1)));
  }
  if (result) {
    check_result_sizes(*result, pl);
    download(pl, *result, 0, std::size_t(cube.samples) * cube.lines, 0);
  }
  return median(t);
}

}  // namespace bench
}  // namespace spectrasift::cuda

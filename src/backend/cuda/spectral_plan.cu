// The plan of a CUDA spectral match and the chunk geometry (see spectral_plan.hpp; paths: spectral.cu).
#include "backend/cuda/spectral_plan.hpp"

#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "backend/cuda/check.hpp"
#include "backend/cuda/kernels/spectral_best_wgmma.cuh"

namespace spectrasift::cuda::spectral {

constexpr int kPrepBlock = 64;  ///< references per task of the host-side reference preparation (make_plan)

long long bsq_plane_pitch(const detail::CubeView& c, int lines) { return round_up<long long>((long long)lines * c.samples, 8); }

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

std::size_t chunk_travel_bytes(const detail::CubeView& c, int lines, int n, std::size_t es) {
  if (c.interleave == Interleave::kBsq) return std::size_t(bsq_plane_pitch(c, lines)) * std::size_t(n) * es;
  return std::size_t(lines) * std::size_t(c.samples) * es * std::size_t(c.bands);
}

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

namespace {
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

int out_bands(const SpectralOptions& o, int refs) {
  switch (o.reduction) {
    case Reduction::kAll: return refs;
    case Reduction::kTopK: return o.top_k;
    default: return 1;
  }
}
}  // namespace

Plan make_plan(State& st, HostCopyPool& pool, const detail::CubeView& cube, const detail::PreparedReferences& refs,
               const SpectralOptions& opt, int max_lines, bool whole_output_required) {
  const bool force_exact = st.tuning.force_exact;
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
  pl.fused = pl.gemm && opt.allow_tensor_cores && st.tuning.fused_best && refs.metric != Metric::kInformationDivergence &&
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
  if (!refs.raw.empty()) {
    pl.raw = st.buffer("spectral.raw_refs", sizeof(float) * refs.raw.size()).as<float>();
    SPECTRASIFT_CUDA_CHECK(cudaMemcpyAsync(pl.raw, refs.raw.data(), sizeof(float) * refs.raw.size(),
                                           cudaMemcpyHostToDevice, s));
  }
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
      pl.wgmma = st.tuning.fused_wgmma && st.props.major == 9 && st.props.minor == 0 &&
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
      const std::size_t block_bytes = std::min(st.tuning.score_block_bytes, free_b / 16);  // two blocks, small GPUs too
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

void check_result_sizes(const SpectralResult& result, const Plan& pl) {
  const std::size_t total = std::size_t(pl.cube->samples) * pl.cube->lines * pl.k;
  if (result.scores.size() != total || (pl.opt.reduction != Reduction::kAll && result.index.size() != total))
    throw Error(ErrorCode::kInternal, "CUDA spectral matching: result buffers are not sized for the output", "cuda");
}

int default_chunk_lines(const detail::CubeView& cube, int n, std::size_t chunk_bytes) {
  const std::size_t line = chunk_travel_bytes(cube, 1, n, std::size_t(spectral_sample_size(int(cube.type))));
  return int(std::max<std::size_t>(1, (chunk_bytes ? chunk_bytes : kDefaultChunkBytes) / std::max<std::size_t>(1, line)));
}

}  // namespace spectrasift::cuda::spectral

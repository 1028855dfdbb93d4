// The device work of one chunk and the downloads of a CUDA spectral match (see spectral_compute.hpp).
#include "backend/cuda/spectral_compute.hpp"

#include <algorithm>
#include <vector>

#include "backend/cuda/check.hpp"
#include "backend/cuda/kernels/spectral_best_wgmma.cuh"
#include "backend/cuda/kernels/spectral_gemm_rows.cuh"
#include "backend/cuda/kernels/spectral_one_ref.cuh"
#include "backend/cuda/kernels/spectral_one_ref_rows.cuh"
#include "backend/cuda/kernels/spectral_sam_exact.cuh"

namespace spectrasift::cuda::spectral {

namespace {

/// Where the kernels of a chunk write (OutView of spectral_common.cuh).
OutView chunk_out_view(const Plan& pl, int y0) {
  OutView out;
  const long long off = pl.out_whole ? (long long)y0 * pl.cube->samples : 0;
  out.score = pl.out_score + off;
  out.index = pl.out_index ? pl.out_index + off : nullptr;
  out.stride = pl.out_stride;
  out.k = pl.k;
  out.mode = int(pl.opt.reduction);
  out.threshold = float(pl.opt.threshold);
  return out;
}

/// The scores of one chunk. With `sam_exact` a threshold is not applied here (spectral_sam_exact applies
/// it to the reported score): the kernels write the best entry.
void compute_scores(Plan& pl, const void* d_chunk, int y0, int lines, cudaStream_t s, bool sam_exact) {
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

  OutView out = chunk_out_view(pl, y0);
  if (sam_exact && out.mode == kOutThreshold) out.mode = kOutBest;
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
          const bool rows_ok = pl.st->tuning.one_ref_rows && cc.scale == 1.0f && pl.n <= kOneRefRowsMaxBands &&
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
    if (i >= 2) SPECTRASIFT_CUDA_CHECK(cudaStreamWaitEvent(s, st.spectral_gemm_events[2 + b], 0));
    // scores (R x nsub, column-major, ldc) = centred refs (kpad x R, column-major)^T * X rows (kpad x nsub)
    SPECTRASIFT_CUBLAS_CHECK(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, refs.count, nsub, pl.kpad, &one, pl.gemm_refs,
                                          CUDA_R_32F, pl.kpad, pl.x_rows + std::size_t(q0) * pl.kpad, CUDA_R_32F,
                                          pl.kpad, &zero, pl.scores_block[b], CUDA_R_32F, pl.ldc, ct,
                                          CUBLAS_GEMM_DEFAULT));
    SPECTRASIFT_CUDA_CHECK(cudaEventRecord(st.spectral_gemm_events[b], s));
    SPECTRASIFT_CUDA_CHECK(cudaStreamWaitEvent(st.aux, st.spectral_gemm_events[b], 0));
    const int sblocks = (nsub + (kBlock / 32) - 1) / (kBlock / 32);
    with_metric(refs.metric, [&](auto M) {
      spectral_select<decltype(M)::value><<<sblocks, kBlock, 0, st.aux>>>(pl.scores_block[b], pl.ldc, pl.gemm_w,
                                                                           pl.planes, npix, q0, nsub, rs, pl.rescore, out);
    });
    SPECTRASIFT_CUDA_CHECK_LAUNCH();
    SPECTRASIFT_CUDA_CHECK(cudaEventRecord(st.spectral_gemm_events[2 + b], st.aux));
  }
  // The chunk is done when the aux stream is: join it back into `s`.
  SPECTRASIFT_CUDA_CHECK(cudaEventRecord(st.spectral_gemm_events[4], st.aux));
  SPECTRASIFT_CUDA_CHECK(cudaStreamWaitEvent(s, st.spectral_gemm_events[4], 0));
}

}  // namespace

void compute_chunk(Plan& pl, const void* d_chunk, int y0, int lines, cudaStream_t s) {
  // sam with two or more references: the reported angles are rescored exactly (numeric/spectral_metrics.h).
  const bool sam_exact = pl.raw != nullptr && !pl.one_ref;
  compute_scores(pl, d_chunk, y0, lines, s, sam_exact);
  if (!sam_exact) return;
  const int npix = lines * pl.cube->samples;
  spectral_sam_exact<<<(npix + kBlock - 1) / kBlock, kBlock, 0, s>>>(pl.planes, npix, pl.raw, pl.constant, pl.n,
                                                                      pl.refs->count, chunk_out_view(pl, y0));
  SPECTRASIFT_CUDA_CHECK_LAUNCH();
}

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

}  // namespace spectrasift::cuda::spectral

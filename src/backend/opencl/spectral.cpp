// Spectral matching on OpenCL (DESIGN.md "Spectral matching"): the cube is streamed in chunks of whole
// lines in its native type and byte order, with the upload of chunk k+1 (second in-order queue) overlapping
// the kernels of chunk k; the kernels convert the samples (kernels/spectral_one_ref.cl).
//   one reference:   spectral_one_ref, bandwidth-bound, the reference in __local memory;
//   many references: spectral_prepare (convert + pixel statistics) then spectral_gemm, a tiled product with
//                    the final formula and the reduction fused into its epilogue (kernels/spectral_gemm.cl).
// Results are read back with one rectangular copy per output array and chunk, straight into the BSQ
// result bands. Tile shapes and work-group sizes come from device and kernel queries.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "backend/opencl/state.hpp"
#include "core/spectral_backend.hpp"
#include "core/thread_pool.hpp"
#include "numeric/spectral_metrics.h"
#include "spectrasift/error.hpp"

namespace spectrasift::opencl {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

template <class T> void set_arg(cl_kernel k, cl_uint i, const T& v) {
  SPECTRASIFT_CL_CHECK(clSetKernelArg(k, i, sizeof(T), &v));
}
void set_local_arg(cl_kernel k, cl_uint i, std::size_t bytes) {
  SPECTRASIFT_CL_CHECK(clSetKernelArg(k, i, std::max<std::size_t>(bytes, sizeof(float)), nullptr));
}

std::size_t round_up(std::size_t v, std::size_t m) { return (v + m - 1) / m * m; }

/// spectral_one_ref's `mode`: 0 scores only, 1 score and index, 3 threshold.
int one_ref_mode(Reduction r) {
  return r == Reduction::kAll ? 0 : r == Reduction::kThreshold ? 3 : 1;
}

/// The register/local tiling of the tiled spectral_gemm (kernels/spectral_gemm.cl: WG_X, WG_Y, RP, RR, TK).
struct GemmTiles {
  int wg_x = 8, wg_y = 8, rp = 4, rr = 4, tk = 16;
  std::size_t local_bytes(int metric, bool reduce) const {
    const std::size_t bp = std::size_t(wg_y) * rp, br = std::size_t(wg_x) * rr;
    std::size_t b = (bp + br) * std::size_t(tk) * sizeof(float) * (metric == SPECTRAL_METRIC_SID ? 2 : 1);
    if (reduce) b += bp * (br + 1) * sizeof(float);
    return b;
  }
};

/// Largest tiles that the device's limits allow: a 16x16 work-group with 4x4 pairs per work-item on GPUs,
/// 8x8 on CPU devices (PoCL runs a work-group as loops on one core; small tiles keep them in cache); band
/// tiles shrink until the __local arrays fit (with room for the compiler's own use).
GemmTiles choose_tiles(const State& s, int metric, bool reduce, std::size_t kernel_max_wg) {
  GemmTiles t;
  const std::size_t max_wg = std::min(s.max_work_group, kernel_max_wg);
  int side = s.is_cpu ? 8 : 16;
  while (side > 1 && std::size_t(side) * std::size_t(side) > max_wg) side /= 2;
  t.wg_x = t.wg_y = side;
  t.rp = t.rr = std::min(4, side);  // rp <= wg_x: the first BP work-items merge one pixel each
  t.tk = 32;
  const std::size_t budget = s.local_mem > 1024 ? s.local_mem - 1024 : s.local_mem;
  while (t.tk > 1 && t.local_bytes(metric, reduce) > budget) t.tk /= 2;
  while ((t.rp > 1 || t.rr > 1) && t.local_bytes(metric, reduce) > budget) {
    t.rp = std::max(1, t.rp / 2);
    t.rr = std::max(1, t.rr / 2);
  }
  if (t.local_bytes(metric, reduce) > budget)
    throw Error(ErrorCode::kUnsupported,
                "the OpenCL device has only " + std::to_string(s.local_mem) +
                    " bytes of local memory, too little for the spectral product kernel",
                "opencl");
  return t;
}

std::string gemm_options(const GemmTiles& t, int metric, int keep, bool cpu) {
  std::string o = "-DGEMM_ROWS=0 -DMETRIC=" + std::to_string(metric) + " -DKEEP=" + std::to_string(keep) +
                  " -DWG_X=" + std::to_string(t.wg_x) + " -DWG_Y=" + std::to_string(t.wg_y) +
                  " -DRP=" + std::to_string(t.rp) + " -DRR=" + std::to_string(t.rr) + " -DTK=" + std::to_string(t.tk);
  if (cpu) o += " -DSPECTRASIFT_CPU_DEVICE";
  return o;
}

/// References per register block of the row kernel (CPU devices): 8 accumulators per work-item.
constexpr int kRowsBlock = 8;
/// The transposed reference matrices are padded to a multiple of this (>= any BR and kRowsBlock).
constexpr int kRefPad = 64;

/// One chunk of whole lines: [y0, y0 + lines).
struct Chunk {
  int y0 = 0, lines = 0;
};

}  // namespace

void spectral_match(detail::ContextImpl& ctx, const detail::CubeView& cube, const detail::PreparedReferences& refs,
                    const SpectralOptions& options, SpectralResult& result, const ProgressFn& progress) {
  State& s = state(ctx);
  const auto t_start = Clock::now();
  const int metric = int(refs.metric);
  const int n = refs.used_bands;
  const int count = refs.count;
  const int S = cube.samples;
  const std::size_t es = sample_size(cube.type);
  const std::size_t total_pixels = std::size_t(S) * std::size_t(cube.lines);
  const int kbands = options.reduction == Reduction::kAll ? count
                     : options.reduction == Reduction::kTopK ? options.top_k
                                                              : 1;
  if (result.scores.size() != std::size_t(kbands) * total_pixels ||
      (options.reduction != Reduction::kAll && result.index.size() != std::size_t(kbands) * total_pixels))
    throw Error(ErrorCode::kInternal, "opencl::spectral_match: result buffers are not sized for the reduction", "opencl");
  const bool many = count > 1;

  // ---- chunking: whole lines; 0 = from the device's memory ---------------------------------------------
  const std::size_t line_raw = std::size_t(S) * std::size_t(cube.bands) * es;  // every band travels
  // Device bytes per line of a chunk: 2 raw buffers, and the prepared matrices and outputs.
  std::size_t line_dev = 2 * line_raw + std::size_t(S) * std::size_t(kbands) * 8;
  if (many) line_dev += std::size_t(S) * (std::size_t(n) * 4 * (metric == SPECTRAL_METRIC_SID ? 2 : 1) + 3 * 8 + 4);
  int chunk_lines = options.chunk_lines;
  if (chunk_lines == 0) {
    // ~16 MiB of raw data per chunk (several chunks in flight make the overlap), with every device buffer of
    // a chunk within 1/4 of the device's memory and the raw chunk within its largest allocation.
    const std::size_t target = std::size_t(16) << 20;
    chunk_lines = int(std::max<std::size_t>(1, target / std::max<std::size_t>(line_raw, 1)));
    chunk_lines = int(std::min<std::size_t>(std::size_t(chunk_lines),
                                            std::max<std::size_t>(1, (s.global_mem / 4) / std::max<std::size_t>(line_dev, 1))));
    // The largest single buffer per line: the raw chunk, the score bands, or the prepared matrix.
    const std::size_t line_max_buffer = std::max({line_raw, std::size_t(S) * std::size_t(kbands) * 4,
                                                  many ? std::size_t(S) * std::size_t(n) * 4 : std::size_t(0)});
    const std::size_t alloc_cap = std::max<std::size_t>(1, s.max_alloc / std::max<std::size_t>(line_max_buffer, 1));
    chunk_lines = int(std::min<std::size_t>(std::size_t(chunk_lines), alloc_cap));
  }
  chunk_lines = std::min(chunk_lines, cube.lines);
  if (std::size_t(chunk_lines) * line_raw > s.max_alloc || std::size_t(chunk_lines) * line_dev > s.global_mem)
    throw Error(ErrorCode::kOutOfMemory,
                "a chunk of " + std::to_string(chunk_lines) + " lines (" +
                    std::to_string(std::size_t(chunk_lines) * line_dev >> 20) +
                    " MiB on the device) does not fit the OpenCL device; use fewer chunk lines",
                "opencl");
  std::vector<Chunk> chunks;
  for (int y = 0; y < cube.lines; y += chunk_lines) chunks.push_back({y, std::min(chunk_lines, cube.lines - y)});
  const int pitch = chunk_lines * S;  // pixels of a full chunk: the pitch of every per-pixel device array
  const std::size_t chunk_raw_bytes = std::size_t(chunk_lines) * line_raw;

  // ---- programs and kernels ----------------------------------------------------------------------------
  std::string conv_opts = "-DSAMPLE_TYPE=" + std::to_string(int(cube.type)) +
                          " -DSAMPLE_BIG_ENDIAN=" + std::to_string(cube.big_endian ? 1 : 0) +
                          " -DMETRIC=" + std::to_string(metric);
  // (Decided without regard to `many`, so that spectral_prepare and spectral_one_ref share one program.)
  const std::size_t ref_local_bytes = std::size_t(n) * sizeof(float) * (metric == SPECTRAL_METRIC_SID ? 2 : 1);
  const bool ref_in_local = ref_local_bytes + 1024 <= s.local_mem;
  conv_opts += std::string(" -DREF_IN_LOCAL=") + (ref_in_local ? "1" : "0");
  // Staging through __local memory: on GPUs for bip, where one work-item per pixel would read with a stride
  // of `bands` elements; tiles of bands sized so that stage + reference fit the device's local memory.
  const std::size_t wg_want = s.is_cpu ? 64 : 256;
  int stage_tile = 0;
  if (s.stage_samples == 1 || (s.stage_samples < 0 && !s.is_cpu && cube.interleave == Interleave::kBip)) {
    stage_tile = 32;
    const std::size_t used = (ref_in_local ? ref_local_bytes : 0) + 1024;
    while (stage_tile >= 4 && used + std::size_t(stage_tile) * (wg_want + 1) * sizeof(float) > s.local_mem)
      stage_tile /= 2;
    if (stage_tile < 4) stage_tile = 0;
  }
  conv_opts += " -DSTAGE_TILE=" + std::to_string(stage_tile);
  if (stage_tile > 0) conv_opts += cube.interleave == Interleave::kBip ? " -DSTAGE_BAND_FAST=1" : " -DSTAGE_BAND_FAST=0";
  if (s.is_cpu) conv_opts += " -DSPECTRASIFT_CPU_DEVICE";
  cl_kernel k_conv = s.kernel("spectral_one_ref.cl", many ? "spectral_prepare" : "spectral_one_ref", conv_opts);
  const std::size_t wg_conv = s.work_group_1d(k_conv, wg_want);
  const std::size_t stage_bytes = std::size_t(stage_tile) * (wg_conv + 1) * sizeof(float);

  cl_kernel k_gemm = nullptr;
  GemmTiles tiles;
  const bool rows = many && (s.gemm_variant == 1 || (s.gemm_variant < 0 && s.is_cpu));
  std::size_t wg_rows = 1;
  if (rows) {
    const int keep = options.reduction == Reduction::kAll    ? 0
                     : options.reduction == Reduction::kTopK ? options.top_k
                                                             : 1;
    std::string o = "-DGEMM_ROWS=1 -DMETRIC=" + std::to_string(metric) + " -DKEEP=" + std::to_string(keep) +
                    " -DRR=" + std::to_string(kRowsBlock);
    if (s.is_cpu) o += " -DSPECTRASIFT_CPU_DEVICE";
    k_gemm = s.kernel("spectral_gemm.cl", "spectral_gemm", o);
    wg_rows = s.work_group_1d(k_gemm, s.is_cpu ? 64 : 256);
  } else if (many) {
    const int keep = options.reduction == Reduction::kAll    ? 0
                     : options.reduction == Reduction::kTopK ? options.top_k
                                                             : 1;
    const bool reduce = options.reduction != Reduction::kAll;
    tiles = choose_tiles(s, metric, reduce, s.max_work_group);
    k_gemm = s.kernel("spectral_gemm.cl", "spectral_gemm", gemm_options(tiles, metric, keep, s.is_cpu));
    // The compiled kernel may allow fewer work-items than the device (registers): shrink and rebuild.
    std::size_t kmax = s.limits(k_gemm).work_group_size;
    while (std::size_t(tiles.wg_x) * std::size_t(tiles.wg_y) > kmax) {
      tiles = choose_tiles(s, metric, reduce, std::size_t(tiles.wg_x) * std::size_t(tiles.wg_y) / 2);
      k_gemm = s.kernel("spectral_gemm.cl", "spectral_gemm", gemm_options(tiles, metric, keep, s.is_cpu));
      kmax = s.limits(k_gemm).work_group_size;
    }
  }
  // sam with two or more references: the reported angles are rescored exactly after the product.
  const bool sam_exact = many && !refs.raw.empty();
  cl_kernel k_exact = nullptr;
  std::size_t wg_exact = 1;
  if (sam_exact) {
    const int keep = options.reduction == Reduction::kAll    ? 0
                     : options.reduction == Reduction::kTopK ? options.top_k
                                                             : 1;
    k_exact = s.kernel("spectral_sam_exact.cl", "spectral_sam_exact", "-DKEEP=" + std::to_string(keep));
    wg_exact = s.work_group_1d(k_exact, s.is_cpu ? 64 : 256);
  }
  ctx.log("opencl spectral: " +
          std::string(!many ? "spectral_one_ref" : rows ? "spectral_prepare + spectral_gemm (rows)"
                                                        : "spectral_prepare + spectral_gemm (tiled)") +
          ", chunks of " + std::to_string(chunk_lines) + " lines (" + std::to_string(chunks.size()) +
          "), work-group " + std::to_string(wg_conv) +
          (stage_tile ? ", samples staged in __local tiles of " + std::to_string(stage_tile) + " bands" : std::string()) +
          (many && !rows ? ", product tiles " + std::to_string(tiles.wg_y * tiles.rp) + " px x " +
                      std::to_string(tiles.wg_x * tiles.rr) + " refs x " + std::to_string(tiles.tk) + " bands" +
                      ", work-group " + std::to_string(tiles.wg_x) + "x" + std::to_string(tiles.wg_y)
                : std::string()) +
          (s.host_staging ? ", pinned staging" : ", direct rect uploads") +
          (sam_exact ? ", exact angles (spectral_sam_exact)" : ""));

  // ---- device buffers (named, reused across calls) -----------------------------------------------------
  cl_command_queue q = s.queue;
  cl_command_queue uq = s.transfer_queue();
  cl_mem raw[2] = {s.buffer("spectral.raw0", chunk_raw_bytes, CL_MEM_READ_ONLY),
                   s.buffer("spectral.raw1", chunk_raw_bytes, CL_MEM_READ_ONLY)};
  PinnedBuffer* stage[2] = {nullptr, nullptr};
  if (s.host_staging) {
    stage[0] = &s.pinned("spectral.stage0", chunk_raw_bytes);
    stage[1] = &s.pinned("spectral.stage1", chunk_raw_bytes);
  }
  cl_mem band_index = s.buffer("spectral.band_index", std::size_t(n) * sizeof(int), CL_MEM_READ_ONLY);
  const std::size_t out_s_bytes = std::size_t(kbands) * std::size_t(pitch) * sizeof(float);
  cl_mem out_s = s.buffer("spectral.out_s", out_s_bytes);
  cl_mem out_i = s.buffer("spectral.out_i", options.reduction == Reduction::kAll
                                                ? sizeof(int)
                                                : std::size_t(kbands) * std::size_t(pitch) * sizeof(int));
  // References: one row for the one-reference kernel; transposed [n][rpitch] (zero padded) for the product.
  const bool sid = metric == SPECTRAL_METRIC_SID;
  const int rpitch = many ? int(round_up(std::size_t(count), kRefPad)) : count;
  std::vector<float> r1(std::size_t(n) * rpitch, 0.0f), r2(sid ? std::size_t(n) * rpitch : 1, 0.0f);
  for (int r = 0; r < count; ++r)
    for (int u = 0; u < n; ++u) {
      const std::size_t src = std::size_t(r) * n + u;
      const std::size_t dst = many ? std::size_t(u) * rpitch + r : src;
      r1[dst] = refs.values[src];
      if (sid) r2[dst] = refs.values2[src];
    }
  cl_mem ref1 = s.buffer("spectral.ref1", r1.size() * sizeof(float), CL_MEM_READ_ONLY);
  cl_mem ref2 = s.buffer("spectral.ref2", r2.size() * sizeof(float), CL_MEM_READ_ONLY);
  cl_mem rconst = s.buffer("spectral.rconst", std::size_t(count) * sizeof(double), CL_MEM_READ_ONLY);
  Event setup[4];
  SPECTRASIFT_CL_CHECK(clEnqueueWriteBuffer(q, band_index, CL_FALSE, 0, std::size_t(n) * sizeof(int),
                                            refs.band_index.data(), 0, nullptr, &setup[0].ev));
  SPECTRASIFT_CL_CHECK(clEnqueueWriteBuffer(q, ref1, CL_FALSE, 0, r1.size() * sizeof(float), r1.data(), 0, nullptr,
                                            &setup[1].ev));
  SPECTRASIFT_CL_CHECK(clEnqueueWriteBuffer(q, ref2, CL_FALSE, 0, r2.size() * sizeof(float), r2.data(), 0, nullptr,
                                            &setup[2].ev));
  SPECTRASIFT_CL_CHECK(clEnqueueWriteBuffer(q, rconst, CL_FALSE, 0, std::size_t(count) * sizeof(double),
                                            refs.constant.data(), 0, nullptr, &setup[3].ev));
  cl_mem x1 = nullptr, x2 = nullptr, stats = nullptr, nodata = nullptr;
  if (many) {
    x1 = s.buffer("spectral.x1", std::size_t(n) * pitch * sizeof(float));
    x2 = s.buffer("spectral.x2", sid ? std::size_t(n) * pitch * sizeof(float) : sizeof(float));
    stats = s.buffer("spectral.stats", std::size_t(3) * pitch * sizeof(double));
    nodata = s.buffer("spectral.nodata", std::size_t(pitch) * sizeof(int));
  }
  cl_mem raw_refs = nullptr;
  Event setup_raw;
  if (sam_exact) {
    raw_refs = s.buffer("spectral.raw_refs", refs.raw.size() * sizeof(float), CL_MEM_READ_ONLY);
    SPECTRASIFT_CL_CHECK(clEnqueueWriteBuffer(q, raw_refs, CL_FALSE, 0, refs.raw.size() * sizeof(float),
                                              refs.raw.data(), 0, nullptr, &setup_raw.ev));
  }

  // ---- arguments that do not change between chunks ----------------------------------------------------
  const float scale = cube.scale;
  const int has_ignore = cube.has_ignore ? 1 : 0;
  const float ignore_value = float(cube.ignore_value);
  const float threshold = float(options.threshold);
  if (!many) {
    set_arg(k_conv, 4, S);
    set_arg(k_conv, 6, band_index);
    set_arg(k_conv, 7, n);
    set_arg(k_conv, 8, scale);
    set_arg(k_conv, 9, has_ignore);
    set_arg(k_conv, 10, ignore_value);
    set_arg(k_conv, 11, ref1);
    set_arg(k_conv, 12, ref2);
    set_arg(k_conv, 13, refs.constant[0]);
    set_arg(k_conv, 14, one_ref_mode(options.reduction));
    set_arg(k_conv, 15, threshold);
    set_local_arg(k_conv, 16, ref_in_local ? ref_local_bytes : 0);
    set_arg(k_conv, 17, out_s);
    set_arg(k_conv, 18, out_i);
    set_local_arg(k_conv, 19, stage_bytes);
  } else {
    set_arg(k_conv, 4, S);
    set_arg(k_conv, 6, pitch);
    set_arg(k_conv, 7, band_index);
    set_arg(k_conv, 8, n);
    set_arg(k_conv, 9, scale);
    set_arg(k_conv, 10, has_ignore);
    set_arg(k_conv, 11, ignore_value);
    set_arg(k_conv, 12, x1);
    set_arg(k_conv, 13, x2);
    set_arg(k_conv, 14, stats);
    set_arg(k_conv, 15, nodata);
    set_local_arg(k_conv, 16, stage_bytes);
    set_arg(k_gemm, 0, x1);
    set_arg(k_gemm, 1, x2);
    set_arg(k_gemm, 2, stats);
    set_arg(k_gemm, 3, nodata);
    set_arg(k_gemm, 5, pitch);
    set_arg(k_gemm, 6, n);
    set_arg(k_gemm, 7, ref1);
    set_arg(k_gemm, 8, ref2);
    set_arg(k_gemm, 9, rconst);
    set_arg(k_gemm, 10, count);
    set_arg(k_gemm, 11, rpitch);
    // With the exact rescoring the threshold is applied after it, to the reported score.
    set_arg(k_gemm, 12, options.reduction == Reduction::kThreshold && !sam_exact ? 1 : 0);
    set_arg(k_gemm, 13, threshold);
    set_arg(k_gemm, 14, out_s);
    set_arg(k_gemm, 15, out_i);
  }
  if (sam_exact) {
    set_arg(k_exact, 0, x1);
    set_arg(k_exact, 1, stats);
    set_arg(k_exact, 3, pitch);
    set_arg(k_exact, 4, n);
    set_arg(k_exact, 5, raw_refs);
    set_arg(k_exact, 6, rconst);
    set_arg(k_exact, 7, count);
    set_arg(k_exact, 8, options.reduction == Reduction::kThreshold ? 1 : 0);
    set_arg(k_exact, 9, threshold);
    set_arg(k_exact, 10, out_s);
    set_arg(k_exact, 11, out_i);
  }

  // ---- the stream --------------------------------------------------------------------------------------
  // Slot k % 2 holds chunk k: its staging area and raw buffer are reused by chunk k + 2 once the upload of
  // chunk k (staging) and the last kernel of chunk k (raw buffer) are complete. Kernels and read-backs share
  // the in-order queue q, so the output buffers are never overwritten before they were read.
  std::vector<Event> ev_up(chunks.size()), ev_k1(chunks.size()), ev_k2(chunks.size()), ev_rd_s(chunks.size()),
      ev_rd_i(chunks.size()), ev_k3(chunks.size());
  double read_ms = 0;
  const int threads = std::max(1, ctx.cpu_threads());
  for (std::size_t c = 0; c < chunks.size(); ++c) {
    const Chunk& ch = chunks[c];
    const int slot = int(c % 2);
    const std::size_t npix = std::size_t(ch.lines) * S;
    const std::size_t plane = npix * es;  // bsq: bytes of one band of this chunk
    const std::size_t bytes = std::size_t(ch.lines) * line_raw;
    const std::uint8_t* host = cube.data;
    // The raw buffer of this slot was last read by chunk c - 2's kernel.
    cl_event wait_raw = c >= 2 ? (many ? ev_k2[c - 2].ev : ev_k1[c - 2].ev) : nullptr;
    if (s.host_staging) {
      if (c >= 2) SPECTRASIFT_CL_CHECK(clWaitForEvents(1, &ev_up[c - 2].ev));  // staging slot free again
      const auto t0 = Clock::now();
      auto* dst = static_cast<std::uint8_t*>(stage[slot]->host);
      // The copy into pinned memory (and the page faults of a fresh mapping) is the host's share of the
      // stream: it runs on the context's CPU threads, in pieces of at least 1 MiB, so that it keeps pace
      // with the upload. Each piece is a plain memcpy: the result does not depend on the thread count.
      if (cube.interleave == Interleave::kBsq) {
        const std::uint8_t* src0 = host + std::size_t(ch.y0) * cube.line_stride * es;
        const std::size_t band_bytes = cube.band_stride * es;
        const int nb = cube.bands;
        const auto copy_bands = [&](int b0, int b1, int) {
          for (int b = b0; b < b1; ++b) std::memcpy(dst + std::size_t(b) * plane, src0 + std::size_t(b) * band_bytes, plane);
        };
        if (bytes >= (std::size_t(4) << 20)) {
          WorkPool& pool = calling_thread_pool(threads);
          pool.run(nb, (nb + pool.size() - 1) / pool.size(), copy_bands);
        } else {
          copy_bands(0, nb, 0);
        }
      } else {
        const std::uint8_t* src0 = host + std::size_t(ch.y0) * cube.line_stride * es;
        const std::size_t piece = std::max<std::size_t>(std::size_t(1) << 20, (bytes + threads - 1) / threads);
        const int pieces = int((bytes + piece - 1) / piece);
        calling_thread_pool(threads).run(pieces, 1, [&](int i0, int i1, int) {
          for (int i = i0; i < i1; ++i) {
            const std::size_t off = std::size_t(i) * piece;
            std::memcpy(dst + off, src0 + off, std::min(piece, bytes - off));
          }
        });
      }
      read_ms += ms_since(t0);
      SPECTRASIFT_CL_CHECK(clEnqueueWriteBuffer(uq, raw[slot], CL_FALSE, 0, bytes, dst, wait_raw ? 1 : 0,
                                                wait_raw ? &wait_raw : nullptr, &ev_up[c].ev));
    } else if (cube.interleave == Interleave::kBsq) {
      // One rectangular copy: `bands` rows of `plane` bytes, host rows one band plane apart.
      const std::size_t buf_origin[3] = {0, 0, 0};
      const std::size_t host_origin[3] = {std::size_t(ch.y0) * cube.line_stride * es, 0, 0};
      const std::size_t region[3] = {plane, std::size_t(cube.bands), 1};
      SPECTRASIFT_CL_CHECK(clEnqueueWriteBufferRect(uq, raw[slot], CL_FALSE, buf_origin, host_origin, region, plane, 0,
                                                    cube.band_stride * es, 0, host, wait_raw ? 1 : 0,
                                                    wait_raw ? &wait_raw : nullptr, &ev_up[c].ev));
    } else {
      SPECTRASIFT_CL_CHECK(clEnqueueWriteBuffer(uq, raw[slot], CL_FALSE, 0, bytes,
                                                host + std::size_t(ch.y0) * cube.line_stride * es, wait_raw ? 1 : 0,
                                                wait_raw ? &wait_raw : nullptr, &ev_up[c].ev));
    }
    SPECTRASIFT_CL_CHECK(clFlush(uq));

    // Strides of the chunk as it lies on the device (elements): bil/bip keep the file's; bsq planes are
    // `npix` apart because the rect copy packed this chunk's lines of each band.
    const cl_ulong ls = cube.line_stride, ss = cube.sample_stride;
    const cl_ulong bs = cube.interleave == Interleave::kBsq ? cl_ulong(npix) : cl_ulong(cube.band_stride);
    const int npix_i = int(npix);
    set_arg(k_conv, 0, raw[slot]);
    set_arg(k_conv, 1, ls);
    set_arg(k_conv, 2, ss);
    set_arg(k_conv, 3, bs);
    set_arg(k_conv, 5, npix_i);
    const std::size_t g1 = round_up(npix, wg_conv);
    SPECTRASIFT_CL_CHECK(clEnqueueNDRangeKernel(q, k_conv, 1, nullptr, &g1, &wg_conv, 1, &ev_up[c].ev, &ev_k1[c].ev));
    if (rows) {
      set_arg(k_gemm, 4, npix_i);
      const std::size_t g2 = round_up(npix, wg_rows);
      SPECTRASIFT_CL_CHECK(clEnqueueNDRangeKernel(q, k_gemm, 1, nullptr, &g2, &wg_rows, 0, nullptr, &ev_k2[c].ev));
    } else if (many) {
      set_arg(k_gemm, 4, npix_i);
      const std::size_t bp = std::size_t(tiles.wg_y) * tiles.rp;
      const std::size_t local[2] = {std::size_t(tiles.wg_x), std::size_t(tiles.wg_y)};
      const std::size_t global[2] = {std::size_t(tiles.wg_x) * ((npix + bp - 1) / bp), std::size_t(tiles.wg_y)};
      SPECTRASIFT_CL_CHECK(clEnqueueNDRangeKernel(q, k_gemm, 2, nullptr, global, local, 0, nullptr, &ev_k2[c].ev));
    }
    if (sam_exact) {
      set_arg(k_exact, 2, npix_i);
      const std::size_t g3 = round_up(npix, wg_exact);
      SPECTRASIFT_CL_CHECK(clEnqueueNDRangeKernel(q, k_exact, 1, nullptr, &g3, &wg_exact, 0, nullptr, &ev_k3[c].ev));
    }
    // Read-back: kbands rows of npix values into the BSQ result, rows one result band apart.
    {
      const std::size_t buf_origin[3] = {0, 0, 0};
      const std::size_t host_origin[3] = {std::size_t(ch.y0) * S * sizeof(float), 0, 0};
      const std::size_t region[3] = {npix * sizeof(float), std::size_t(kbands), 1};
      SPECTRASIFT_CL_CHECK(clEnqueueReadBufferRect(q, out_s, CL_FALSE, buf_origin, host_origin, region,
                                                   std::size_t(pitch) * sizeof(float), 0,
                                                   total_pixels * sizeof(float), 0, result.scores.data(), 0, nullptr,
                                                   &ev_rd_s[c].ev));
      if (options.reduction != Reduction::kAll)
        SPECTRASIFT_CL_CHECK(clEnqueueReadBufferRect(q, out_i, CL_FALSE, buf_origin, host_origin, region,
                                                     std::size_t(pitch) * sizeof(int), 0,
                                                     total_pixels * sizeof(int), 0, result.index.data(), 0, nullptr,
                                                     &ev_rd_i[c].ev));
    }
    SPECTRASIFT_CL_CHECK(clFlush(q));
    // At most two chunks in flight: wait for the previous chunk's results, then report progress.
    if (c >= 1) {
      SPECTRASIFT_CL_CHECK(clWaitForEvents(1, &ev_rd_s[c - 1].ev));
      if (progress) progress(double(chunks[c - 1].y0 + chunks[c - 1].lines) / double(cube.lines));
    }
  }
  SPECTRASIFT_CL_CHECK(clFinish(uq));
  SPECTRASIFT_CL_CHECK(clFinish(q));
  if (progress) progress(1.0);

  // ---- stage times from the profiling events -----------------------------------------------------------
  StageTimes& t = result.times;
  t.read_ms += read_ms;
  for (auto& e : setup) t.upload_ms += e.elapsed_ms();
  if (sam_exact) t.upload_ms += setup_raw.elapsed_ms();
  for (std::size_t c = 0; c < chunks.size(); ++c) {
    t.upload_ms += ev_up[c].elapsed_ms();
    t.compute_ms += ev_k1[c].elapsed_ms() + ev_k2[c].elapsed_ms() + ev_k3[c].elapsed_ms();
    t.download_ms += ev_rd_s[c].elapsed_ms() + ev_rd_i[c].elapsed_ms();
  }
  ctx.log("opencl spectral: " + std::to_string(chunks.size()) + " chunk(s) in " + std::to_string(ms_since(t_start)) +
          " ms wall");
}

}  // namespace spectrasift::opencl

// Spectral matching on CUDA (DESIGN.md "Data flow", issue 4): the entry and its streaming loop. The plan
// (path choice, references, buffers, GEMM error bounds) is spectral_plan.cu, the kernels of one chunk
// spectral_compute.cu, the loop's events StreamPipeline (stream_pipeline.hpp), the kernels kernels/*.cuh.
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
// Packed uploads (16-bit cubes, SpectralTuning::pack_policy): instead of copying, that pass packs a chunk losslessly
// (numeric/sample_pack.h: per block of 64 samples its minimum and the bit planes of the differences), the
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
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "backend/cuda/check.hpp"
#include "backend/cuda/host/sample_packer.hpp"
#include "backend/cuda/kernels/unpack.cuh"
#include "backend/cuda/spectral_compute.hpp"
#include "backend/cuda/spectral_plan.hpp"
#include "backend/cuda/state.hpp"
#include "core/spectral_backend.hpp"
#include "spectrasift/error.hpp"

namespace spectrasift::cuda {
namespace {

using namespace spectral;
using detail::PackIsa;
using detail::PackRun;
using detail::SamplePacker;
using Clock = std::chrono::steady_clock;

constexpr double kPackMaxRatio = 0.9;  ///< a chunk packed larger than this (of its raw bytes) ends packing for the call

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

}  // namespace

void spectral_match(detail::ContextImpl& ctx, const detail::CubeView& cube, const detail::PreparedReferences& refs,
                    const SpectralOptions& options, SpectralResult& result, const ProgressFn& progress) {
  const auto t_start = Clock::now();
  State& st = state(ctx);
  st.activate();
  HostCopyPool& pool = st.host_copy_pool(ctx.cpu_threads());
  pool.wake();  // sleeping workers take tens of us to wake: let them spin while the plan is made
  const int lines = options.chunk_lines > 0 ? options.chunk_lines : default_chunk_lines(cube, refs.used_bands, st.tuning.stage_chunk_bytes);
  Plan pl = make_plan(st, pool, cube, refs, options, lines, false);
  check_result_sizes(result, pl);
  ctx.log(std::string("cuda spectral: ") + (pl.one_ref ? "one-reference kernel" : pl.gemm ?
          pl.fused ? "fused FP16 tensor-core best + exact rescoring" :
          (options.allow_tensor_cores ? "GEMM (TF32) + exact rescoring" : "GEMM (FP32) + exact rescoring") :
          "exact multi-reference kernel") + ", " + std::to_string(pl.nchunks) + " chunks of " +
          std::to_string(pl.chunk_lines) + " lines");

  // Whole chunk_lines each: smaller first chunks (a ramp of 1/8, 1/4, 1/2 or x1.5 from 2-8 MiB) were
  // slower (docs/performance/spectral.md, 'Streaming pipeline'): the uploads run slower while the host copy chases them.
  const int nchunks = pl.nchunks;
  // Pinned staging: a ring of kStages buffers, so that the host copy runs up to kStages - 1 chunks ahead of
  // the uploads (with two, every copy waited for the upload before last and the DMA engine idled between
  // chunks); device chunks: double buffers. Events say when each may be reused.
  constexpr int kStages = 4;
  // Packed uploads: 16-bit samples, the VBMI + GFNI packer on this processor, copy staging, and chunks within
  // the format's 32-bit offsets. The AVX-512BW packer (2.2-2.5 GB/s per core against 4-9) made end to end
  // slower than raw uploads on the H200 host (docs/performance/spectral.md, 'Packed uploads'), so processors
  // without VBMI + GFNI upload raw, unless the bench knob forces a narrower packer.
  const std::size_t max_packed =
      SamplePacker::max_packed_bytes(pl.chunk_bytes / 2, cube.interleave == Interleave::kBsq ? std::size_t(pl.n) : 1);
  const PackIsa pack_isa = std::min(st.tuning.pack_max_isa, SamplePacker::best_isa());
  const bool packer_fast_enough = pack_isa == PackIsa::kAvx512Gfni ||
                                  (st.tuning.pack_max_isa < PackIsa::kAvx512Gfni && pack_isa != PackIsa::kScalar);
  bool packing = st.tuning.pack_policy != PackPolicy::kNever && pl.es == 2 && packer_fast_enough &&
                 max_packed < (std::size_t(1) << 32);
  SamplePacker packer(cube.type == SampleType::kI16, cube.big_endian, st.tuning.pack_max_isa);
  std::vector<PackRun> runs;
  std::size_t raw_bytes_staged = 0, raw_bytes_packed = 0, packed_bytes = 0;
  const std::size_t stage_bytes = packing ? std::max(pl.chunk_bytes, max_packed) : pl.chunk_bytes;
  PinnedBuffer* pin[kStages];
  for (int i = 0; i < kStages; ++i) pin[i] = &st.pinned_buffer("spectral.stage" + std::to_string(i), stage_bytes);
  DeviceBuffer* dev[2] = {&st.buffer("spectral.chunk0", pl.chunk_bytes), &st.buffer("spectral.chunk1", pl.chunk_bytes)};
  DeviceBuffer* devpk[2] = {nullptr, nullptr};
  if (packing) devpk[0] = &st.buffer("spectral.packed0", max_packed), devpk[1] = &st.buffer("spectral.packed1", max_packed);
  // The pipeline's events: per chunk upload start/end, compute start/end, download done; the timeline's zero.
  StreamPipeline& pipe = st.spectral_stream;
  pipe.reserve(nchunks);
  // Bench timeline (SpectralTuning::trace_on): host points now, GPU events resolved against a zero event at the end.
  std::vector<std::pair<std::string, double>> marks;
  auto mark = [&](const char* what, int chunk = -1) {  // no string is built unless the trace is on
    if (st.tuning.trace_on) marks.emplace_back(chunk < 0 ? std::string(what) : what + std::to_string(chunk), ms_since(t_start));
  };
  if (st.tuning.trace_on) {
    SPECTRASIFT_CUDA_CHECK(cudaEventRecord(pipe.timeline_zero(nchunks), st.copy));
    mark("plan made, gpu zero");
  }
  // No wait for the plan's uploads (compute stream): the kernels that use them follow on that stream (the
  // last chunk's on `copy` after an event), and pageable sources are staged before cudaMemcpyAsync returns.
  const PinnedResult pres = pinned_result(pl);
  double read_ms = 0, download_ms = 0;
  std::vector<CopyPiece> pieces;
  // Results through the pinned buffer: the parts of the chunks whose downloads are done (polled before each
  // host pass) are copied out by the pool within the next staging pass, as extra work items, so that they cost
  // the host's critical path a few microseconds instead of ~30 us per chunk on the calling thread
  // (docs/performance/spectral.md, 'Streaming pipeline'); only the last chunks' parts remain after the loop.
  int results_collected = 0;  // chunks whose results are in `result` or in result_work
  int downloads_enqueued = 0;  // chunks whose download is enqueued: only their events say anything
  std::vector<CopyPiece> result_work;
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
      const cudaEvent_t done = pipe.downloaded(results_collected);
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
    if (c >= kStages) SPECTRASIFT_CUDA_CHECK(cudaEventSynchronize(pipe.upload_end(c - kStages)));  // staging buffer uploaded
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
    // instead of 0.12; docs/performance/spectral.md, 'Host staging copies'). Earlier chunks are pushed out by the next
    // chunk's copy, and demoting every chunk slowed the copy more than it sped up the uploads (same section).
    g.demote = c + 1 == nchunks && st.tuning.demote_last_chunk;
    // Balanced: chunk c is packed only if the upload of chunk c-2 is still running, i.e. the host is two
    // chunks ahead of the upload engine; otherwise the cheaper raw copy keeps the engine fed. (Upload c-1 is
    // nearly always running: that test packed almost every chunk, which lost to raw uploads on hosts that pack
    // slowly; a planner predicting the end of the pipeline from measured rates packed less and lost to this
    // rule: docs/performance/spectral.md, 'Packed uploads'.) Either way the device receives the same samples,
    // so the choice, which depends on timing, changes no result.
    g.packed = packing && (st.tuning.pack_policy == PackPolicy::kAlways ||
                           (c >= 2 && cudaEventQuery(pipe.upload_end(c - 2)) == cudaErrorNotReady));
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
      pool.start_copy(pieces, split, g.demote ? CopyStores::kDemote : CopyStores::kPlain);
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
    if (staged.c != c) staged = start_staging(c);  // not started ahead (chunk 0)
    finish_staging(staged);
    const void* src = pin[c % kStages]->ptr;
    const std::size_t bytes = staged.bytes;
    const int packed_groups = staged.groups;  // > 0: chunk c travels packed (a packed chunk has at least one group)
    // Chunk c+1's host pass starts on the pool's workers now and runs while this thread makes chunk c's CUDA
    // calls (~35 us per chunk, on the host's critical path when the host, not PCIe, is the limit); it is
    // finished at the top of the next iteration.
    if (c + 1 < nchunks) staged = start_staging(c + 1);
    if (c >= 2) SPECTRASIFT_CUDA_CHECK(cudaStreamWaitEvent(st.copy, pipe.compute_end(c - 2), 0));  // device b consumed
    SPECTRASIFT_CUDA_CHECK(cudaEventRecord(pipe.upload_start(c), st.copy));
    SPECTRASIFT_CUDA_CHECK(cudaMemcpyAsync(packed_groups > 0 ? devpk[b]->ptr : dev[b]->ptr, src, bytes,
                                           cudaMemcpyHostToDevice, st.copy));
    SPECTRASIFT_CUDA_CHECK(cudaEventRecord(pipe.upload_end(c), st.copy));
    // The last chunk is computed and downloaded on the upload stream, which has nothing left to upload:
    // no hops between streams at the end (-0.01 to -0.07 ms end to end, docs/performance/spectral.md,
    // 'Streaming loop').
    // It still waits for everything enqueued on `compute` so far: the plan's uploads and the previous
    // chunk's compute (whose scratch buffers the many-reference paths share).
    cudaStream_t cs = tail ? st.copy : st.compute;
    if (!tail) {
      SPECTRASIFT_CUDA_CHECK(cudaStreamWaitEvent(st.compute, pipe.upload_end(c), 0));
    } else {
      SPECTRASIFT_CUDA_CHECK(cudaEventRecord(pipe.compute_joined(nchunks), st.compute));
      SPECTRASIFT_CUDA_CHECK(cudaStreamWaitEvent(st.copy, pipe.compute_joined(nchunks), 0));
    }
    SPECTRASIFT_CUDA_CHECK(cudaEventRecord(pipe.compute_start(c), cs));
    if (packed_groups > 0) {
      unpack_samples_kernel<<<packed_groups, 256, 0, cs>>>(static_cast<const unsigned char*>(devpk[b]->ptr),
                                                           packed_groups, cube.big_endian,
                                                           static_cast<unsigned char*>(dev[b]->ptr));
      SPECTRASIFT_CUDA_CHECK(cudaGetLastError());
    }
    compute_chunk(pl, dev[b]->ptr, y0, nl, cs);
    SPECTRASIFT_CUDA_CHECK(cudaEventRecord(pipe.compute_end(c), cs));
    if (pres.on) {
      cudaStream_t ds = tail ? cs : st.download;
      if (!tail) SPECTRASIFT_CUDA_CHECK(cudaStreamWaitEvent(st.download, pipe.compute_end(c), 0));
      download_chunk_async(pl, pres, std::size_t(y0) * cube.samples, std::size_t(nl) * cube.samples, ds);
      SPECTRASIFT_CUDA_CHECK(cudaEventRecord(pipe.downloaded(c), ds));
      downloads_enqueued = c + 1;
      if (tail && st.tuning.trace_on) SPECTRASIFT_CUDA_CHECK(cudaEventRecord(pipe.last_download_end(nchunks), ds));
    } else if (!pl.out_whole) {
      SPECTRASIFT_CUDA_CHECK(cudaEventSynchronize(pipe.compute_end(c)));
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
  st.telemetry.last_pack_ratio = raw_bytes_packed ? double(packed_bytes) / double(raw_bytes_packed) : 0.0;
  st.telemetry.last_packed_share = raw_bytes_staged ? double(raw_bytes_packed) / double(raw_bytes_staged) : 0.0;
  if (raw_bytes_packed)
    ctx.log("cuda spectral: " + std::to_string(raw_bytes_packed >> 10) + " KiB of samples uploaded packed in " +
            std::to_string(packed_bytes >> 10) + " KiB (" + std::to_string(int(100.0 * st.telemetry.last_pack_ratio + 0.5)) + " %)");
  double upload_ms = 0, compute_ms = 0;
  for (int c = 0; c < nchunks; ++c) {
    upload_ms += ms_between(pipe.upload_start(c), pipe.upload_end(c));
    compute_ms += ms_between(pipe.compute_start(c), pipe.compute_end(c));
  }
  result.times.read_ms = read_ms;
  result.times.upload_ms = upload_ms;
  result.times.compute_ms = compute_ms;
  result.times.download_ms = download_ms;
  result.times.total_ms = ms_since(t_start);
  if (st.tuning.trace_on) {
    mark("times gathered");
    const double zero = marks.front().second;
    const cudaEvent_t z = pipe.timeline_zero(nchunks);
    const char* what[4] = {"gpu upload start ", "gpu upload end ", "gpu compute start ", "gpu compute end "};
    for (int c = 0; c < nchunks; ++c)
      for (int e = 0; e < 4; ++e)
        marks.emplace_back(what[e] + std::to_string(c), zero + ms_between(z, e == 0 ? pipe.upload_start(c) : e == 1 ? pipe.upload_end(c)
                                                                     : e == 2 ? pipe.compute_start(c) : pipe.compute_end(c)));
    if (pres.on) marks.emplace_back("gpu last download end", zero + ms_between(z, pipe.last_download_end(nchunks)));
    std::stable_sort(marks.begin(), marks.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
    st.telemetry.trace.clear();
    for (const auto& m : marks) st.telemetry.trace += m.first + " at " + std::to_string(m.second) + " ms\n";
  }
}

}  // namespace spectrasift::cuda

// The plan of a CUDA spectral match: which path (one reference, exact multi-reference, fused FP16 tensor-core
// best, cuBLAS GEMM + selection), the references uploaded in the forms that path needs, and every device buffer
// sized for the largest chunk; with the chunk geometry that the plan, the compute and the streaming loop share.
// See spectral.cu for the paths and the data flow.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <type_traits>
#include <vector>

#include "backend/cuda/host_copy.hpp"
#include "backend/cuda/kernels/spectral_best_fp16.cuh"
#include "backend/cuda/state.hpp"
#include "core/spectral_backend.hpp"
#include "spectrasift/error.hpp"

namespace spectrasift::cuda::spectral {

using namespace kernels;

constexpr int kGemmMinRefs = 3 * kCandidates;        ///< fewer references: the exact spectral_multi path
constexpr int kGemmMaxTopK = kCandidates;            ///< larger k: the exact spectral_multi path
constexpr std::size_t kDefaultChunkBytes = 16u << 20; ///< raw bytes per streamed chunk when chunk_lines == 0
constexpr std::size_t kPinnedResultMax = 256u << 20; ///< larger results are downloaded straight to pageable memory

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
  float* raw = nullptr;       ///< sam with two or more references: refs.raw, for spectral_sam_exact
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
long long bsq_plane_pitch(const detail::CubeView& c, int lines);
/// Pixels per thread of the vector-load kernels (at most vmax, a power of two): every run of V samples of a
/// band must be V-aligned: BSQ planes are padded to 8; a BIL row must hold a multiple of V samples.
int vector_pixels(const detail::CubeView& c, int vmax);
ChunkLayout layout_of(const detail::CubeView& c, int lines, int n);
/// Bytes of a chunk of `lines` lines as it travels.
std::size_t chunk_travel_bytes(const detail::CubeView& c, int lines, int n, std::size_t es);
/// The host pieces of chunk [y0, y0+lines) in travel order, copied into `dst`.
void chunk_pieces(const Plan& pl, int y0, int lines, void* dst, std::vector<CopyPiece>& pieces);
/// Uploads the references and sizes every buffer. `max_lines`: lines of the largest chunk. Many references go
/// through the exact multi-reference kernel when st.tuning.force_exact.
Plan make_plan(State& st, HostCopyPool& pool, const detail::CubeView& cube, const detail::PreparedReferences& refs,
               const SpectralOptions& opt, int max_lines, bool whole_output_required);
/// Lines per streamed chunk: `chunk_bytes` of raw data (0: kDefaultChunkBytes), at least one line.
int default_chunk_lines(const detail::CubeView& cube, int n, std::size_t chunk_bytes);
void check_result_sizes(const SpectralResult& result, const Plan& pl);

}  // namespace spectrasift::cuda::spectral

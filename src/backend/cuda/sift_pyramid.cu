// CUDA SIFT scale space and candidates (see sift.hpp): the upload (its copy in sift_upload.cu) and grey
// conversion, the pyramid (upsample or base blur, then one launch per level: the separable blur through a
// shared-memory tile with the downsample and the DoG plane fused in, sift_blur_tiles<R> for radii up to 16,
// sift_blur_dog above) with each octave's extrema on a second branch of its graph, the candidate count read
// back, and the refinement.
#include <algorithm>
#include <array>
#include <cmath>
#include <string>
#include <utility>

#include "backend/cuda/check.hpp"
#include "backend/cuda/kernels/sift_blur.cuh"
#include "backend/cuda/kernels/sift_convert.cuh"
#include "backend/cuda/kernels/sift_extrema.cuh"
#include "backend/cuda/kernels/sift_refine.cuh"
#include "backend/cuda/shared_opt_in.hpp"
#include "backend/cuda/sift.hpp"
#include "backend/cuda/state.hpp"
#include "spectrasift/error.hpp"

namespace spectrasift::cuda {

namespace {

int raw_type(PixelType t) {
  return t == PixelType::kU8 ? kernels::kRawU8 : t == PixelType::kU16 ? kernels::kRawU16 : kernels::kRawF32;
}

unsigned int blocks_for(std::size_t items, unsigned int per_block) {
  return unsigned(std::min<std::size_t>((items + per_block - 1) / per_block, 0x7fffffffu));
}

// sift_extrema's block width and the rows each block walks.
constexpr unsigned kExtremaThreads = 128;
constexpr unsigned kExtremaRowsPerBlock = 8;

// The 32 x 8 thread grid over a w x h plane of the per-pixel kernels.
dim3 plane_grid(int w, int h) { return dim3(blocks_for(std::size_t(w), 32), blocks_for(std::size_t(h), 8)); }
const dim3 kPlaneBlock(32, 8);

// sift_blur_tiles<1> .. sift_blur_tiles<kBlurTilesMaxRadius> (and the round-2 forms sift_blur_tiles_r2<R>, the
// small-plane forms sift_blur_small<R>), indexed by radius - 1.
using BlurTilesKernel = void (*)(kernels::SiftBlurSource, int, int, const float*, float*, float*, float*);
template <int... I>
constexpr std::array<BlurTilesKernel, sizeof...(I)> blur_tiles_kernels(std::integer_sequence<int, I...>) {
  return {&kernels::sift_blur_tiles<I + 1>...};
}
template <int... I>
constexpr std::array<BlurTilesKernel, sizeof...(I)> blur_tiles_r2_kernels(std::integer_sequence<int, I...>) {
  return {&kernels::sift_blur_tiles_r2<I + 1>...};
}
template <int... I>
constexpr std::array<BlurTilesKernel, sizeof...(I)> blur_small_kernels(std::integer_sequence<int, I...>) {
  return {&kernels::sift_blur_small<I + 1>...};
}
constexpr auto kBlurTiles = blur_tiles_kernels(std::make_integer_sequence<int, kernels::kBlurTilesMaxRadius>());
constexpr auto kBlurSmall = blur_small_kernels(std::make_integer_sequence<int, kernels::kBlurTilesMaxRadius>());
constexpr auto kBlurTilesR2 = blur_tiles_r2_kernels(std::make_integer_sequence<int, kernels::kBlurTilesMaxRadius>());

// Dynamic shared memory of sift_blur_dog for an output tile tx x ty and radius r: taps, in, mid.
std::size_t blur_tile_bytes(int tx, int ty, int r) {
  return (std::size_t(r + 1) + std::size_t(2 * ty + 2 * r) * std::size_t(tx + 2 * r)) * sizeof(float);
}

}  // namespace

void SiftStagesCuda::upload(const detail::SiftPlan& plan, const detail::SiftImageView& image) {
  st_.activate();
  const std::size_t bytes = begin_run(plan, image);
  marks_.clear();
  check_memory(plan, bytes);
  prepare(plan);
  mark(kUpload);
  SPECTRASIFT_CUDA_CHECK(cudaMemsetAsync(counters(), 0, kernels::kCounters * sizeof(unsigned int), st_.compute));
  const std::size_t pixels = std::size_t(image.width) * std::size_t(image.height);
  float* grey = static_cast<float*>(buffer("sift.grey", pixels * sizeof(float)));
  bool wait = false;
  if (image.grey_levels) {  // already grey levels: the upload is the grey image
    drop_prefetch();  // the batch prefetches raw images only
    wait = upload_bytes(grey, image.data, bytes);
  } else {
    const unsigned char* raw = raw_input(image, bytes, wait);  // the batch's prefetched copy, or copied now
    kernels::sift_grey<<<plane_grid(image.width, image.height), kPlaneBlock, 0, st_.compute>>>(
        raw, raw_type(image.type), image.channels, image.width, image.height, grey);
    SPECTRASIFT_CUDA_CHECK_LAUNCH();
  }
  if (wait) SPECTRASIFT_CUDA_CHECK(cudaEventSynchronize(copy_done()));
}

// The output tile (TX, TY) of sift_blur_dog (the levels of radius above 16; sift_blur_tiles<R> has its own
// fixed 64 x 32 tile and static shared memory): 64 x 32 (a (32, 8) block, 8 outputs a thread), within the
// device's shared memory per block for the plan's largest radius R (taps, (TY + 2R) + TY rows of TX + 2R
// floats); TY shrinks first, then TX. Above the default 48 KiB the kernel is opted in to more; a device whose
// shared memory cannot hold even a one-pixel tile gets a clear error.
void SiftStagesCuda::size_blur_tiles() {
  const detail::SiftPlan& p = *plan_;
  const int r = *std::max_element(p.tap_radius.begin(), p.tap_radius.end());
  if (r == blur_r_) return;
  const std::size_t avail = shared_memory_per_block();
  int tx = 64, ty = 32;
  while (blur_tile_bytes(tx, ty, r) > avail) {
    if (ty > 1) ty /= 2;
    else if (tx > 1) tx /= 2;
    else
      throw Error(ErrorCode::kUnsupported,
                  "sift: the CUDA device has " + std::to_string(avail) + " bytes of shared memory per block, a " +
                      "Gaussian of radius " + std::to_string(r) + " needs " + std::to_string(blur_tile_bytes(1, 1, r)) +
                      " (sigma or octave_layers too large for this device; use the cpu backend)",
                  "cuda");
  }
  raise_dynamic_shared(kernels::sift_blur_dog, blur_tile_bytes(tx, ty, r));
  blur_tx_ = tx;
  blur_ty_ = ty;
  blur_r_ = r;
}

// One level: dst = blur of the source with kernel `kernel_index`; dog and level0 as sift_blur_dog says.
// Radius 1 .. 16: sift_blur_tiles<radius> (the same bits from registers), or sift_blur_small<radius> where the
// 64 x 32 grid has fewer than two blocks an SM (from 960 x 540 down on the H200; sift_blur_tiles_r2<radius> or
// sift_blur_dog under set_blur_form), else sift_blur_dog. Launched as programmatic dependents of the launch
// before them (Hopper on; set_blur_pdl), so that a small octave's chain of levels does not pay a whole
// launch between two levels.
void SiftStagesCuda::blur(const BlurSource& src, float* dst, int w, int h, int kernel_index, const float* taps,
                          float* dog, float* level0) {
  const detail::SiftPlan& p = *plan_;
  const int r = p.tap_radius[std::size_t(kernel_index)];
  const float* k = taps + p.tap_offset[std::size_t(kernel_index)];
  const dim3 grid(blocks_for(std::size_t(w), unsigned(blur_tx_)), blocks_for(std::size_t(h), unsigned(blur_ty_)));
  const dim3 block(unsigned(std::min(blur_tx_, 32)), unsigned(std::min(blur_ty_, 8)));
  if (grid.y > 65535)
    throw Error(ErrorCode::kUnsupported, "sift: an octave of " + std::to_string(h) + " rows is too tall for the CUDA blur",
                "cuda");
  const kernels::SiftBlurSource s{src.data, src.pitch, src.step};
  // Programmatic dependent launch (kernels/sift_blur.cuh): the level may launch before the one it reads ends.
  cudaLaunchAttribute pdl{};
  pdl.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  pdl.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t launch{};
  launch.stream = st_.compute;
  launch.attrs = &pdl;
  launch.numAttrs = blur_pdl_ && st_.props.major >= 9 ? 1 : 0;
  if (blur_form_ != BlurForm::kRuntimeRadius && r >= 1 && r <= kernels::kBlurTilesMaxRadius) {  // R a constant
    launch.gridDim = dim3(blocks_for(std::size_t(w), unsigned(kernels::kBlurTileW)),
                          blocks_for(std::size_t(h), unsigned(kernels::kBlurTileH)));
    launch.blockDim = dim3(32, 8);
    const bool small = blur_form_ == BlurForm::kTilesSmall &&
                       std::size_t(launch.gridDim.x) * launch.gridDim.y < 2 * std::size_t(st_.props.multiProcessorCount);
    if (small)
      launch.gridDim = dim3(blocks_for(std::size_t(w), unsigned(kernels::kBlurSmallTileW)),
                            blocks_for(std::size_t(h), unsigned(kernels::kBlurSmallTileH)));
    const auto& table = small ? kBlurSmall : blur_form_ == BlurForm::kTilesRound2 ? kBlurTilesR2 : kBlurTiles;
    SPECTRASIFT_CUDA_CHECK(cudaLaunchKernelEx(&launch, table[std::size_t(r - 1)], s, w, h, k, dst, dog, level0));
    return;
  }
  launch.gridDim = grid;
  launch.blockDim = block;
  launch.dynamicSmemBytes = blur_tile_bytes(blur_tx_, blur_ty_, r);
  SPECTRASIFT_CUDA_CHECK(
      cudaLaunchKernelEx(&launch, kernels::sift_blur_dog, s, w, h, k, r, blur_tx_, blur_ty_, dst, dog, level0));
}

// Launches per octave: level 0 (octave 0: the upsample and kernel 0's blur; later octaves: none, the
// downsample is read by level 1's blur, which also writes level 0), then one blur launch per level
// 1 .. S + 2, each also writing the DoG plane below it. So dog() has nothing left to do. Then the octave's
// extrema, forked onto the side stream: they read only this octave's DoG planes, which no later launch
// writes, so they run beside the next octaves' levels (from octave 2 on a chain of small launches that
// leaves most of the GPU idle) instead of after the whole pyramid. The side stream is joined back at the
// end. Only the plan, the blur tile, the five buffers and the capacity enter the launches (no buffer is
// looked up or grown here), so that pyramid() can capture them as a graph.
void SiftStagesCuda::launch_pyramid(const float* grey, float* gauss, float* dog, const float* taps, void* cand,
                                    unsigned cap) {
  const detail::SiftPlan& p = *plan_;
  cudaEvent_t fork = (*ordering_)[3], join = (*ordering_)[4];
  cudaStream_t side = side_stream();
  for (int o = 0; o < p.octaves; ++o) {
    const int w = int(octave_info_[4 * std::size_t(o)]), h = int(octave_info_[4 * std::size_t(o) + 1]);
    const std::size_t plane = std::size_t(w) * std::size_t(h);
    float* g0 = gauss + octave_info_[4 * std::size_t(o) + 2];
    float* d0 = dog + octave_info_[4 * std::size_t(o) + 3];
    if (o == 0) {
      if (p.upsample) {  // the doubled input goes through DoG plane 0, free until level 1's blur writes it
        kernels::sift_upsample<<<plane_grid(w, h), kPlaneBlock, 0, st_.compute>>>(grey, p.input_width, p.input_height, d0);
        SPECTRASIFT_CUDA_CHECK_LAUNCH();
        blur({d0, w, 1}, g0, w, h, 0, taps, nullptr, nullptr);
      } else {
        blur({grey, w, 1}, g0, w, h, 0, taps, nullptr, nullptr);
      }
      blur({g0, w, 1}, g0 + plane, w, h, 1, taps, d0, nullptr);
    } else {
      const long long pw = octave_info_[4 * std::size_t(o - 1)], ph = octave_info_[4 * std::size_t(o - 1) + 1];
      const float* prev_s = gauss + octave_info_[4 * std::size_t(o - 1) + 2] + std::size_t(p.layers) * std::size_t(pw * ph);
      blur({prev_s, pw, 2}, g0 + plane, w, h, 1, taps, d0, g0);  // level 0 = the even pixels of level S before
    }
    for (int i = 2; i < p.levels; ++i)
      blur({g0 + std::size_t(i - 1) * plane, w, 1}, g0 + std::size_t(i) * plane, w, h, i, taps,
           d0 + std::size_t(i - 1) * plane, nullptr);
    SPECTRASIFT_CUDA_CHECK(cudaEventRecord(fork, st_.compute));
    SPECTRASIFT_CUDA_CHECK(cudaStreamWaitEvent(side, fork, 0));
    launch_extrema(o, cand, cap, side);
  }
  SPECTRASIFT_CUDA_CHECK(cudaEventRecord(join, side));
  SPECTRASIFT_CUDA_CHECK(cudaStreamWaitEvent(st_.compute, join, 0));
}

// Octave o's candidates: blocks of 128 columns, each walking kExtremaRowsPerBlock rows (strided by grid.y);
// one block per row and layer made ~390k blocks of 64 threads at 1080p upsampled, bound by block scheduling.
// Octaves too small for the border have none.
void SiftStagesCuda::launch_extrema(int o, void* cand, unsigned cap, cudaStream_t stream) {
  const detail::SiftPlan& p = *plan_;
  const int w = int(octave_info_[4 * std::size_t(o)]), h = int(octave_info_[4 * std::size_t(o) + 1]);
  if (w <= 2 * p.border || h <= 2 * p.border) return;
  const unsigned rows = unsigned(h - 2 * p.border);
  const dim3 grid(blocks_for(std::size_t(w - 2 * p.border), kExtremaThreads),
                  std::min((rows + kExtremaRowsPerBlock - 1) / kExtremaRowsPerBlock, 65535u), unsigned(p.layers));
  kernels::sift_extrema<<<grid, dim3(kExtremaThreads, 1, 1), 0, stream>>>(
      dog_planes(), octave_table(), o, p.border, p.prefilter_threshold, counters(), static_cast<int4*>(cand), cap);
  SPECTRASIFT_CUDA_CHECK_LAUNCH();
}

// The launches of launch_pyramid() as a CUDA graph: captured (relaxed mode: nothing but launches happens
// during the capture) the first time a plan runs on these buffers, then one cudaGraphLaunch per image
// instead of ~6 launches per octave (a launch costs about 5 us on the H200). A new plan (prepare()), a
// moved buffer or a grown candidate capacity captures again. The graph's kernels are exactly the stream's,
// so the results are the same (the candidates' slot order never mattered: select sorts).
void SiftStagesCuda::pyramid() {
  const detail::SiftPlan& p = *plan_;
  if (p.octaves == 0) return;
  mark(kPyramid);
  const float* grey = static_cast<const float*>(
      buffer("sift.grey", std::size_t(p.input_width) * std::size_t(p.input_height) * sizeof(float)));
  float* gauss = levels();
  float* dog = dog_planes();
  const float* taps = static_cast<const float*>(buffer("sift.taps", p.taps.size() * sizeof(float)));
  void* cand = buffer("sift.cand", candidate_capacity_ * sizeof(int4));
  const unsigned cap = unsigned(std::min<std::size_t>(candidate_capacity_, 0xffffffffu));
  (void)octave_table();  // looked up (not grown) by launch_extrema during the capture
  (void)counters();
  const std::array<const void*, 5> used{grey, gauss, dog, taps, cand};
  if (!pyramid_graph_ || pyramid_generation_ != prepared_generation_ || pyramid_buffers_ != used ||
      pyramid_cap_ != cap) {
    if (pyramid_graph_) {
      SPECTRASIFT_CUDA_CHECK(cudaGraphExecDestroy(pyramid_graph_));
      pyramid_graph_ = nullptr;
    }
    SPECTRASIFT_CUDA_CHECK(cudaStreamBeginCapture(st_.compute, cudaStreamCaptureModeRelaxed));
    cudaGraph_t graph = nullptr;
    try {
      launch_pyramid(grey, gauss, dog, taps, cand, cap);
    } catch (...) {
      if (cudaStreamEndCapture(st_.compute, &graph) == cudaSuccess && graph) cudaGraphDestroy(graph);
      throw;
    }
    SPECTRASIFT_CUDA_CHECK(cudaStreamEndCapture(st_.compute, &graph));
    const cudaError_t e = cudaGraphInstantiate(&pyramid_graph_, graph, 0);
    cudaGraphDestroy(graph);
    if (e != cudaSuccess) pyramid_graph_ = nullptr;
    SPECTRASIFT_CUDA_CHECK(e);
    pyramid_generation_ = prepared_generation_;
    pyramid_buffers_ = used;
    pyramid_cap_ = cap;
  }
  SPECTRASIFT_CUDA_CHECK(cudaGraphLaunch(pyramid_graph_, st_.compute));
}

// Fused into pyramid() (each level's blur writes the DoG plane below it): nothing to do, no time recorded.
void SiftStagesCuda::dog() {}

// The candidates were searched in pyramid()'s graph: read back their count (read-back 1). More than the
// buffer holds: grow it and search every octave again on the compute stream (the next image's graph is
// captured with the new capacity).
std::size_t SiftStagesCuda::extrema() {
  const detail::SiftPlan& p = *plan_;
  if (p.octaves == 0) return 0;
  mark(kExtrema);
  read_counters();  // read-back 1: the candidate count
  candidates_ = counters_[kernels::kCountCandidates];
  if (candidates_ > candidate_capacity_) {
    candidate_capacity_ = candidates_;
    ++regrowths_;
    void* cand = buffer("sift.cand", candidate_capacity_ * sizeof(int4));
    const unsigned cap = unsigned(std::min<std::size_t>(candidate_capacity_, 0xffffffffu));
    SPECTRASIFT_CUDA_CHECK(cudaMemsetAsync(counters() + kernels::kCountCandidates, 0, sizeof(unsigned int), st_.compute));
    for (int o = 0; o < p.octaves; ++o) launch_extrema(o, cand, cap, st_.compute);
    read_counters();
    candidates_ = counters_[kernels::kCountCandidates];  // the same count: the search is deterministic
  }
  // The later stages are sized from the count (keypoints_per_candidate_ orientation peaks per candidate; a
  // run with more grows them and runs those stages again in download()).
  keypoint_capacity_ = std::max<std::size_t>(1, std::size_t(std::ceil(double(candidates_) * keypoints_per_candidate_)));
  descriptor_capacity_ = keypoint_capacity_;
  return candidates_;
}

void SiftStagesCuda::refine() {
  const detail::SiftPlan& p = *plan_;
  if (candidates_ == 0) return;
  mark(kRefine);
  const float* scales = static_cast<const float*>(
      buffer("sift.oscale", std::max<std::size_t>(p.octave_scale.size(), 1) * sizeof(float)));
  const auto* cand = static_cast<const int4*>(buffer("sift.cand", candidate_capacity_ * sizeof(int4)));
  auto* refined = static_cast<SiftKeypoint*>(buffer("sift.refined", candidate_capacity_ * sizeof(SiftKeypoint)));
  const kernels::SiftRefineParams params{p.layers,         p.border, p.first_octave, p.contrast_threshold,
                                         p.edge_threshold, p.sigma,  p.output_scale};
  kernels::sift_refine<<<blocks_for(candidates_, 64), 64, 0, st_.compute>>>(
      dog_planes(), octave_table(), scales, cand, counters(), unsigned(candidate_capacity_), params, refined);
  SPECTRASIFT_CUDA_CHECK_LAUNCH();
}

}  // namespace spectrasift::cuda

// CUDA SIFT per-keypoint stages (see sift.hpp): orientations (one block per refined point), select (duplicates,
// cap, mask, canonical order: the rank select for up to 16,384 oriented records, else device sorts and compactions
// of an index array) and descriptors (one block per kept keypoint, or one warp in the staged form).
#include <algorithm>
#include <cmath>
#include <string>

#include "backend/cuda/check.hpp"
#include "backend/cuda/kernels/sift_descriptor.cuh"
#include "backend/cuda/kernels/sift_descriptor_staged.cuh"
#include "backend/cuda/kernels/sift_orientation.cuh"
#include "backend/cuda/kernels/sift_select.cuh"
#include "backend/cuda/kernels/sift_select_buckets.cuh"
#include "backend/cuda/kernels/sift_select_rank.cuh"
#include "backend/cuda/kernels/sift_select_small.cuh"
#include "backend/cuda/kernels/sift_sort.cuh"
#include "backend/cuda/shared_opt_in.hpp"
#include "backend/cuda/sift.hpp"
#include "backend/cuda/state.hpp"
#include "spectrasift/error.hpp"

namespace spectrasift::cuda {

namespace {

std::size_t pow2_at_least(std::size_t n) {
  std::size_t p = 1;
  while (p < n) p <<= 1;
  return p;
}

unsigned int blocks_for(std::size_t items, unsigned int per_block) {
  return unsigned(std::min<std::size_t>((items + per_block - 1) / per_block, 0x7fffffffu));
}

constexpr int kPointThreads = 64;     // threads of the per-keypoint kernels (>= 36: a bin or a cell each)
constexpr int kMaxOriChunk = 1024;    // samples per chunk of sift_orientation
constexpr unsigned kSortThreads = 1024;  // L of sift_sort_local (blocks of 2 L positions)
static_assert(kSortThreads <= unsigned(kernels::kSortLocalMaxThreads));
constexpr unsigned kStepThreads = 256;

// The static shared memory of a kernel (what its dynamic part adds to).
template <class Kernel> std::size_t static_shared(Kernel k) {
  cudaFuncAttributes a{};
  SPECTRASIFT_CUDA_CHECK(cudaFuncGetAttributes(&a, k));
  return a.sharedSizeBytes;
}

// Opts a kernel in to `bytes` of dynamic shared memory when that is above the default 48 KiB (never lowers it).
template <class Kernel> void allow_shared(Kernel k, std::size_t bytes) { raise_dynamic_shared(k, bytes); }

}  // namespace

// Shared-memory sizes of the per-keypoint kernels: windows sized for the plan's largest keypoint sigma
// (sigma 2^((S + 0.5) / S) octave pixels), orientation chunks as large as shared memory allows (up to 1024
// samples); a device that cannot hold them gets a clear error. The block cap: 16 blocks per SM.
void SiftStagesCuda::size_feature_kernels() {
  const detail::SiftPlan& p = *plan_;
  const double sigma_max = double(p.sigma) * std::pow(2.0, (p.layers + 0.5) / p.layers);
  const std::size_t avail = shared_memory_per_block();
  ori_ex_ = 2 * int(std::lround(4.5 * sigma_max) + 2) + 1;
  desc_ex_ = 2 * int(std::lround(3.0 * sigma_max * 1.4142135623730951 * 2.5) + 2) + 1;
  const std::size_t ori_fixed = static_shared(kernels::sift_orientation) + std::size_t(ori_ex_) * sizeof(float);
  const std::size_t ori_room = avail > ori_fixed ? (avail - ori_fixed) / (sizeof(int) + sizeof(float)) : 0;
  ori_chunk_ = int(std::min<std::size_t>(kMaxOriChunk, ori_room) / kPointThreads * kPointThreads);
  const std::size_t desc_need = static_shared(kernels::sift_descriptor) + std::size_t(desc_ex_) * sizeof(float);
  const std::size_t sort_need = static_shared(kernels::sift_sort_local) + 2 * kSortThreads * sizeof(int);
  const std::size_t compact_need = static_shared(kernels::sift_select_compact);
  if (ori_chunk_ == 0 || desc_need > avail || sort_need > avail || compact_need > avail)
    throw Error(ErrorCode::kUnsupported,
                "sift: the CUDA device has " + std::to_string(avail) +
                    " bytes of shared memory per block; the orientation, descriptor and sort kernels need " +
                    std::to_string(ori_fixed + kPointThreads * (sizeof(int) + sizeof(float))) + ", " +
                    std::to_string(desc_need) + " and " + std::to_string(std::max(sort_need, compact_need)) +
                    " (sigma too large for this device; use the cpu backend)",
                "cuda");
  allow_shared(kernels::sift_orientation, std::size_t(ori_chunk_) * (sizeof(int) + sizeof(float)) + std::size_t(ori_ex_) * sizeof(float));
  allow_shared(kernels::sift_descriptor, std::size_t(desc_ex_) * sizeof(float));
  // The staged descriptor form: bands of at least one window row and 128 samples (4 per lane), per warp;
  // where the device cannot hold them, descriptors() runs the walkers (the same bits).
  desc_chunk_ = std::max(desc_ex_, 128);
  const std::size_t staged_dynamic = staged_descriptor_shared();
  constexpr auto kRowsWide = kernels::sift_descriptor_staged<true, kernels::kDescrRowBlocksWide>;
  desc_staged_fits_ = std::max({static_shared(kernels::sift_descriptor_staged<false>),
                                static_shared(kernels::sift_descriptor_staged<true>), static_shared(kRowsWide)}) +
                          staged_dynamic <= avail;
  if (desc_staged_fits_) {
    allow_shared(kernels::sift_descriptor_staged<false>, staged_dynamic);
    allow_shared(kernels::sift_descriptor_staged<true>, staged_dynamic);
    allow_shared(kRowsWide, staged_dynamic);
  }
  // The one-block select (kernels/sift_select_small.cuh) where the device's shared memory holds its records.
  select_small_ = std::size_t(kernels::kSelectSmallShared) + static_shared(kernels::sift_select_small) <= avail;
  if (select_small_) allow_shared(kernels::sift_select_small, std::size_t(kernels::kSelectSmallShared));
  blocks_ = st_.props.multiProcessorCount * 16;
}

void SiftStagesCuda::orientations() {
  if (candidates_ == 0) return;
  mark(kOrientations);
  const auto* refined = static_cast<const SiftKeypoint*>(buffer("sift.refined", candidate_capacity_ * sizeof(SiftKeypoint)));
  auto* kps = static_cast<SiftKeypoint*>(buffer("sift.kp", keypoint_capacity_ * sizeof(SiftKeypoint)));
  const std::size_t shared = std::size_t(ori_chunk_) * (sizeof(int) + sizeof(float)) + std::size_t(ori_ex_) * sizeof(float);
  const unsigned grid = unsigned(std::min<std::size_t>(std::size_t(blocks_), candidates_));
  kernels::sift_orientation<<<grid, kPointThreads, shared, st_.compute>>>(
      levels(), octave_table(), refined, counters(), unsigned(candidate_capacity_), unsigned(keypoint_capacity_), kps,
      ori_chunk_, ori_ex_);
  SPECTRASIFT_CUDA_CHECK_LAUNCH();
}

// Bitonic sort of the index array `order` over the live count in counters[count_slot]
// (kernels/sift_sort.cuh): the launches of host/bitonic_plan.hpp for blocks of 2 L positions in shared
// memory; the wider steps through global memory, two a launch where they can.
void SiftStagesCuda::sort(int* order, int count_slot, int mode) {
  const auto* kps = static_cast<const SiftKeypoint*>(buffer("sift.kp", keypoint_capacity_ * sizeof(SiftKeypoint)));
  unsigned int* count_slots = counters();
  const unsigned cap = unsigned(keypoint_capacity_);
  const std::size_t block = 2 * kSortThreads;
  const unsigned local_grid = unsigned(positions_ / block);
  const std::size_t local_shared = block * sizeof(int);
  const unsigned step_grid =
      std::max(1u, unsigned(std::min<std::size_t>(positions_ / 2, std::size_t(blocks_) * kStepThreads) / kStepThreads));
  bitonic_plan(positions_, block, sort_plan_);
  for (const BitonicLaunch& l : sort_plan_) {
    switch (l.kind) {
      case BitonicLaunch::kLocalAll:
      case BitonicLaunch::kLocalMerge:
        kernels::sift_sort_local<<<local_grid, kSortThreads, local_shared, st_.compute>>>(order, kps, count_slots,
                                                                                          count_slot, cap, l.k, mode);
        break;
      case BitonicLaunch::kStep:
        kernels::sift_sort_step<<<step_grid, kStepThreads, 0, st_.compute>>>(order, kps, count_slots, count_slot, cap,
                                                                             l.k, l.j, mode);
        break;
      case BitonicLaunch::kStep2:
        kernels::sift_sort_step2<<<step_grid, kStepThreads, 0, st_.compute>>>(order, kps, count_slots, count_slot, cap,
                                                                              l.k, l.j, mode);
        break;
    }
    SPECTRASIFT_CUDA_CHECK_LAUNCH();
  }
}

void SiftStagesCuda::compact(const int* in, int in_slot, int out_slot, int* out) {
  const int* keep = static_cast<const int*>(buffer("sift.keep", positions_ * sizeof(int)));
  kernels::sift_select_compact<<<1, kernels::kSelectCompactThreads, 0, st_.compute>>>(
      in, keep, counters(), in_slot, unsigned(keypoint_capacity_), out_slot, out);
  SPECTRASIFT_CUDA_CHECK_LAUNCH();
}

void SiftStagesCuda::select(const Image* mask) {
  if (candidates_ == 0) return;
  mark(kSelect);
  const detail::SiftPlan& p = *plan_;
  // Sort positions: a power of two >= the keypoint capacity, and at least one shared-memory block.
  positions_ = std::max(pow2_at_least(keypoint_capacity_), std::size_t(2 * kSortThreads));
  const auto* kps = static_cast<const SiftKeypoint*>(buffer("sift.kp", keypoint_capacity_ * sizeof(SiftKeypoint)));
  unsigned int* count_slots = counters();
  int* a = static_cast<int*>(buffer("sift.order_a", positions_ * sizeof(int)));
  int* b = static_cast<int*>(buffer("sift.order_b", positions_ * sizeof(int)));
  int* keep = static_cast<int*>(buffer("sift.keep", positions_ * sizeof(int)));
  if (mask) {
    const std::size_t bytes = mask->data.size();
    SPECTRASIFT_CUDA_CHECK(
        cudaMemcpyAsync(buffer("sift.mask", bytes), mask->data.data(), bytes, cudaMemcpyHostToDevice, st_.compute));
    mask_type_ = mask->type == PixelType::kU8 ? 0 : mask->type == PixelType::kU16 ? 1 : 2;
    mask_w_ = mask->width;
    mask_h_ = mask->height;
  }
  const kernels::SiftMask m{static_cast<const unsigned char*>(buffer("sift.mask", 4)), mask_type_, mask_w_, mask_h_};
  const unsigned cap = unsigned(keypoint_capacity_);
  auto* kept = static_cast<SiftKeypoint*>(buffer("sift.kept", keypoint_capacity_ * sizeof(SiftKeypoint)));
  const bool multi_only = select_multi_now_;
  select_multi_now_ = false;
  select_deferred_ = false;
  if (!multi_only) select_guessed_ = false;  // a new run's select (select_again's keeps the run's flag)
  const bool rank = select_form_ == SelectForm::kRank;
  if (select_small_allowed_ && !multi_only && (rank || select_small_)) {
    // The whole stage in one small-count path when the oriented count is small (decided on the device); the
    // launches below then return at once. They are not queued when the buffers cannot hold more records than it
    // takes, nor when the path is queued alone on a guess (set_select_defer; by default when the candidates are
    // at most 2 x its limit: kleiber 1080p upsampled has ~6,500 candidates and 2,411 oriented records, and a
    // capacity that would queue ~22 launches returning at once, ~50 us). A wrong guess costs one more round:
    // download() reads the slot 0 and select_again() has the multi-launch path run.
    std::size_t limit;
    if (rank) {
      limit = kernels::kSelectRankRecords;
      select_rank(cap);
    } else {
      limit = kernels::kSelectSmallPositions;
      // The key prefixes' scale: coordinates (input pixels) times it fall in [0, 2^18).
      const kernels::SiftSelectKeys keys{float(1 << 18) / float(std::max(p.input_width, p.input_height) + 1),
                                         p.layers <= 15 ? 1 : 0};
      kernels::sift_select_small<<<1, kernels::kSelectSmallThreads, std::size_t(kernels::kSelectSmallShared),
                                   st_.compute>>>(kps, count_slots, cap, p.max_features, m, keys, kept);
      SPECTRASIFT_CUDA_CHECK_LAUNCH();
    }
    if (keypoint_capacity_ <= limit) return;
    if (select_defer_ > 0 || (select_defer_ < 0 && candidates_ <= 2 * limit)) {
      select_deferred_ = true;
      select_guessed_ = true;
      return;
    }
  }
  // Above the small-count paths, without a cap: the bucketed rank select (its counts are the rank select's inside
  // buckets); with a cap (a count over every record) or canonical buckets that do not fit the plan, the sorts.
  const int band_bits = sift_canonical_band_bits(p.layers, p.octaves);
  if (select_buckets_ && p.max_features == 0 && p.layers <= 15 && p.octaves <= 31 && band_bits >= 0) {
    select_buckets(cap, m, band_bits);
    return;
  }
  kernels::sift_select_init<<<blocks_for(positions_, 256), 256, 0, st_.compute>>>(a, count_slots, cap, unsigned(positions_));
  SPECTRASIFT_CUDA_CHECK_LAUNCH();
  // 1. duplicates
  sort(a, kernels::kCountOriented, kernels::kOrderDuplicates);
  kernels::sift_select_flags<<<blocks_for(keypoint_capacity_, 256), 256, 0, st_.compute>>>(
      a, kps, count_slots, kernels::kCountOriented, cap, 0, p.max_features, m, keep);
  SPECTRASIFT_CUDA_CHECK_LAUNCH();
  compact(a, kernels::kCountOriented, kernels::kCountUnique, b);
  // 2. the cap (from the response order) and 3. the mask
  if (p.max_features > 0) sort(b, kernels::kCountUnique, kernels::kOrderResponse);
  kernels::sift_select_flags<<<blocks_for(keypoint_capacity_, 256), 256, 0, st_.compute>>>(
      b, kps, count_slots, kernels::kCountUnique, cap, 1, p.max_features, m, keep);
  SPECTRASIFT_CUDA_CHECK_LAUNCH();
  compact(b, kernels::kCountUnique, kernels::kCountKept, a);
  // 4. the canonical order, and the kept records gathered in it
  sort(a, kernels::kCountKept, kernels::kOrderCanonical);
  kernels::sift_select_gather<<<blocks_for(keypoint_capacity_, 256), 256, 0, st_.compute>>>(a, kps, count_slots, cap, kept);
  SPECTRASIFT_CUDA_CHECK_LAUNCH();
}

// The rank select (kernels/sift_select_rank.cuh): keys, duplicates, the cap and the mask (only when there is
// either), the canonical positions. A warp per eight records; the kernels return at once past kSelectRankRecords.
void SiftStagesCuda::select_rank(unsigned cap) {
  const detail::SiftPlan& p = *plan_;
  const kernels::SiftMask m{static_cast<const unsigned char*>(buffer("sift.mask", 4)), mask_type_, mask_w_, mask_h_};
  const auto* kps = static_cast<const SiftKeypoint*>(buffer("sift.kp", keypoint_capacity_ * sizeof(SiftKeypoint)));
  auto* kept = static_cast<SiftKeypoint*>(buffer("sift.kept", keypoint_capacity_ * sizeof(SiftKeypoint)));
  auto* words = static_cast<unsigned int*>(buffer("sift.rank", 3 * keypoint_capacity_ * sizeof(unsigned int)));
  const std::size_t c = keypoint_capacity_;
  const kernels::SiftRankArrays a{words, words + c, words + 2 * c};
  // y times y_scale falls in [0, 2^23): the canonical key's y field; its octave field holds octave + 1 <= 30.
  const kernels::SiftRankKeys keys{float(1 << 23) / float(std::max(p.input_width, p.input_height) + 1),
                                   p.layers <= 15 && p.octaves <= 31 ? 1 : 0};
  const bool cap_or_mask = p.max_features > 0 || m.type >= 0;
  const unsigned grid = blocks_for(keypoint_capacity_, kernels::kSelectRankWarps * kernels::kSelectRankPerWarp);
  const unsigned threads = 32 * kernels::kSelectRankWarps;
  kernels::sift_select_rank_keys<<<blocks_for(keypoint_capacity_, 256), 256, 0, st_.compute>>>(kps, counters(), cap, a);
  SPECTRASIFT_CUDA_CHECK_LAUNCH();
  kernels::sift_select_rank_unique<<<grid, threads, 0, st_.compute>>>(kps, counters(), cap, a, keys, cap_or_mask ? 0 : 1);
  SPECTRASIFT_CUDA_CHECK_LAUNCH();
  if (cap_or_mask) {
    kernels::sift_select_rank_keep<<<grid, threads, 0, st_.compute>>>(kps, counters(), cap, a, keys, p.max_features, m);
    SPECTRASIFT_CUDA_CHECK_LAUNCH();
  }
  kernels::sift_select_rank_place<<<grid, threads, 0, st_.compute>>>(kps, counters(), cap, a, kept);
  SPECTRASIFT_CUDA_CHECK_LAUNCH();
}

// The bucketed rank select (kernels/sift_select_buckets.cuh): seven launches and two memsets, every kernel returning
// at once when a small-count path queued before ran the stage. Buffer "sift.buckets": per bucket kind its counts,
// offsets and cursors (6 x 65,536 + 2 words), then six words a record of the capacity.
void SiftStagesCuda::select_buckets(unsigned cap, const kernels::SiftMask& m, int band_bits) {
  const detail::SiftPlan& p = *plan_;
  constexpr std::size_t B = kernels::kSelectBuckets;
  const std::size_t c = keypoint_capacity_;
  auto* w = static_cast<unsigned int*>(buffer("sift.buckets", (6 * B + 2 + 6 * c) * sizeof(unsigned int)));
  unsigned int* r = w + 6 * B + 2;  // the per-record arrays
  const kernels::SiftBucketArrays a{w,         w + B,     w + 2 * B + 1, w + 3 * B + 1, w + 4 * B + 1, w + 5 * B + 2,
                                    r,         r + c,     r + 2 * c,     r + 3 * c,     r + 4 * c,     r + 5 * c};
  const kernels::SiftBucketPlan plan{float(1 << 23) / float(std::max(p.input_width, p.input_height) + 1), p.layers,
                                     p.octaves, band_bits};
  const auto* kps = static_cast<const SiftKeypoint*>(buffer("sift.kp", keypoint_capacity_ * sizeof(SiftKeypoint)));
  auto* kept = static_cast<SiftKeypoint*>(buffer("sift.kept", keypoint_capacity_ * sizeof(SiftKeypoint)));
  unsigned int* counts = counters();
  const unsigned grid = blocks_for(c, 256);
  SPECTRASIFT_CUDA_CHECK(cudaMemsetAsync(a.d_count, 0, B * sizeof(unsigned int), st_.compute));
  SPECTRASIFT_CUDA_CHECK(cudaMemsetAsync(a.c_count, 0, B * sizeof(unsigned int), st_.compute));
  kernels::sift_select_bucket_keys<<<grid, 256, 0, st_.compute>>>(kps, counts, cap, a);
  SPECTRASIFT_CUDA_CHECK_LAUNCH();
  kernels::sift_select_bucket_scan<<<1, kernels::kSelectBucketScanThreads, 0, st_.compute>>>(
      counts, cap, a.d_count, a.d_offset, a.d_cursor, nullptr);
  SPECTRASIFT_CUDA_CHECK_LAUNCH();
  kernels::sift_select_bucket_fill<<<grid, 256, 0, st_.compute>>>(counts, cap, a.d_bucket, a.d_cursor, a.d_list);
  SPECTRASIFT_CUDA_CHECK_LAUNCH();
  kernels::sift_select_bucket_unique<<<grid, 256, 0, st_.compute>>>(kps, counts, cap, a, plan, m);
  SPECTRASIFT_CUDA_CHECK_LAUNCH();
  kernels::sift_select_bucket_scan<<<1, kernels::kSelectBucketScanThreads, 0, st_.compute>>>(
      counts, cap, a.c_count, a.c_offset, a.c_cursor, counts + kernels::kCountKept);
  SPECTRASIFT_CUDA_CHECK_LAUNCH();
  kernels::sift_select_bucket_fill<<<grid, 256, 0, st_.compute>>>(counts, cap, a.c_bucket, a.c_cursor, a.c_list);
  SPECTRASIFT_CUDA_CHECK_LAUNCH();
  kernels::sift_select_bucket_place<<<grid, 256, 0, st_.compute>>>(kps, counts, cap, a, kept);
  SPECTRASIFT_CUDA_CHECK_LAUNCH();
}

void SiftStagesCuda::descriptors() {
  if (candidates_ == 0) return;
  mark(kDescriptors);
  const detail::SiftPlan& p = *plan_;
  const auto* kept = static_cast<const SiftKeypoint*>(buffer("sift.kept", keypoint_capacity_ * sizeof(SiftKeypoint)));
  auto* desc = static_cast<float*>(buffer("sift.desc", descriptor_capacity_ * kernels::kDescrLen * sizeof(float)));
  const float deg2rad = float(M_PI / 180.0);
  const DescriptorForm form = descriptor_form_in_use();
  if (form != DescriptorForm::kWalkers) {
    // A warp per keypoint, kDescrWarps a block (kernels/sift_descriptor_staged.cuh): the row walk or the box walk.
    const std::size_t warps = kernels::kDescrWarps;
    const unsigned grid = unsigned(
        std::max<std::size_t>(1, std::min<std::size_t>(std::size_t(blocks_), (descriptor_capacity_ + warps - 1) / warps)));
    auto* kernel = form == DescriptorForm::kStagedRows       ? kernels::sift_descriptor_staged<true>
                   : form == DescriptorForm::kStagedRowsWide ? kernels::sift_descriptor_staged<true, kernels::kDescrRowBlocksWide>
                                                             : kernels::sift_descriptor_staged<false>;
    kernel<<<grid, unsigned(32 * warps), staged_descriptor_shared(), st_.compute>>>(
        levels(), octave_table(), kept, counters(), unsigned(descriptor_capacity_), deg2rad, p.root_sift ? 1 : 0,
        desc, desc_ex_, desc_chunk_);
  } else {
    const unsigned grid = unsigned(std::min<std::size_t>(std::size_t(blocks_), descriptor_capacity_));
    kernels::sift_descriptor<<<grid, kPointThreads, std::size_t(desc_ex_) * sizeof(float), st_.compute>>>(
        levels(), octave_table(), kept, counters(), unsigned(descriptor_capacity_), deg2rad, p.root_sift ? 1 : 0,
        desc, desc_ex_);
  }
  SPECTRASIFT_CUDA_CHECK_LAUNCH();
  pack_features();  // for read-back 2 (sift_download.cu)
}

// download(): the block was queued alone on a guess and found more oriented records than its positions (the
// counter slot it sets is 0): the next select() runs the multi-launch path.
bool SiftStagesCuda::select_again() {
  if (!select_deferred_ || counters_[kernels::kCountSelectSmall] != 0) return false;
  select_deferred_ = false;
  select_multi_now_ = true;
  return true;
}

bool SiftStagesCuda::last_select_was_small() const noexcept {
  return (select_form_ == SelectForm::kRank || select_small_) && select_small_allowed_ &&
         counters_[kernels::kCountSelectSmall] == 1;
}

std::size_t SiftStagesCuda::staged_descriptor_shared() const noexcept {
  return std::size_t(kernels::kDescrWarps) * std::size_t(kernels::sift_descriptor_warp_float4s(desc_chunk_, desc_ex_)) *
         sizeof(float4);
}

}  // namespace spectrasift::cuda

// OpenCL SIFT per-keypoint stages (see sift.hpp): orientations (one work-group per refined point), select
// (device sorts and compactions of an index array: duplicates, cap, mask, canonical order; on GPUs first a
// small-count path that does the whole stage when the count is small: the rank select, or the one work-group)
// and descriptors (one work-group per kept keypoint; the staged forms one or four a work-group).
#include <algorithm>
#include <cmath>

#include "backend/opencl/sift.hpp"
#include "numeric/sift_common.h"
#include "numeric/sift_select.h"
#include "spectrasift/error.hpp"

namespace spectrasift::opencl {

namespace {

std::size_t pow2_at_least(std::size_t n) {
  std::size_t p = 1;
  while (p < n) p <<= 1;
  return p;
}

// Slots of the counter buffer (kernels/sift.cl).
constexpr int kCountOriented = 2, kCountUnique = 3, kCountKept = 4;
// Orders of sift_sort_step (kernels/sift_select.cl).
constexpr int kOrderDuplicates = 0, kOrderResponse = 1, kOrderCanonical = 2;
// sift_select_small (kernels/sift_select.cl): the most positions (SIFT_SELECT_SMALL_MAX_POSITIONS, its 13-bit
// index), the most per work-item (SIFT_SELECT_SMALL_PER_MAX), and the fewest worth running it for.
constexpr std::size_t kSelectSmallMaxPositions = 8192, kSelectSmallPerMax = 16, kSelectSmallMinPositions = 2048;
// The rank select (kernels/sift_select_rank.cl): work-items a slice (SIFT_RANK_LANES), records a slice
// (SIFT_RANK_PER_SLICE) and the largest work-group of its slice kernels (SIFT_RANK_GROUP_MAX, the size of their
// local sums).
constexpr std::size_t kRankLanes = 32, kRankPerSlice = 8, kRankGroupMax = 256;

}  // namespace

// Work-group sizes and local-memory chunks of the per-keypoint kernels, from the device: at least 36
// work-items (one per orientation bin / descriptor cell), windows sized for the plan's largest keypoint
// sigma (sigma 2^((S + 0.5) / S) octave pixels), chunks of samples as large as local memory allows (up
// to 1024).
void SiftStagesOpenCL::group_sizes() {
  const detail::SiftPlan& p = *plan_;
  const double sigma_max = double(p.sigma) * std::pow(2.0, (p.layers + 0.5) / p.layers);
  auto fit = [&](cl_kernel k, const char* name, std::size_t ex_cap, std::size_t sample_bytes, std::size_t& local,
                 std::size_t& chunk) {
    local = st_.work_group_1d(k, 64);
    const KernelLimits lim = st_.limits(k);
    const std::size_t fixed = lim.local_mem + ex_cap * sizeof(float);
    const std::size_t avail = st_.local_mem > fixed ? st_.local_mem - fixed : 0;
    chunk = sample_bytes ? std::min<std::size_t>(1024, avail / sample_bytes) / local * local : (avail ? local : 0);
    if (local < 36 || chunk == 0)
      throw Error(ErrorCode::kUnsupported,
                  std::string("sift: the OpenCL device cannot run ") + name + " (" + std::to_string(local) +
                      " work-items allowed, 36 needed; " + std::to_string(st_.local_mem) + " bytes of local memory, " +
                      std::to_string(fixed + local * sample_bytes) + " needed)",
                  "opencl");
  };
  ori_ex_ = 2 * std::size_t(std::lround(4.5 * sigma_max) + 2) + 1;
  // CPU devices: sift_orientation_serial and sift_descriptor_serial, one point per work-item, each with its
  // window weights in local memory.
  auto fit_serial = [&](const char* name, std::size_t ex_cap, std::size_t& local) {
    cl_kernel k = kernel(name);
    local = st_.work_group_1d(k, 16);
    const std::size_t fixed = st_.limits(k).local_mem;
    while (local > 1 && fixed + local * ex_cap * sizeof(float) > st_.local_mem) local /= 2;
    if (fixed + local * ex_cap * sizeof(float) > st_.local_mem)
      throw Error(ErrorCode::kUnsupported, std::string("sift: the OpenCL device has too little local memory for ") + name,
                  "opencl");
  };
  if (st_.is_cpu)
    fit_serial("sift_orientation_serial", ori_ex_, ori_local_);
  else
    fit(kernel("sift_orientation"), "sift_orientation", ori_ex_, sizeof(cl_int) + sizeof(float), ori_local_, ori_chunk_);
  desc_ex_ = 2 * std::size_t(std::lround(3.0 * sigma_max * 1.4142135623730951 * 2.5) + 2) + 1;
  std::size_t no_chunk = 0;
  if (st_.is_cpu) {
    fit_serial("sift_descriptor_serial", desc_ex_, desc_local_);
  } else {
    fit(kernel("sift_descriptor"), "sift_descriptor", desc_ex_, 0, desc_local_, no_chunk);
    // sift_descriptor_staged and sift_descriptor_staged_rows (kernels/sift_descriptor_staged.cl, the box and
    // the row walk): each slice's bands hold at least one window row and 128 samples (4 per work-item), as CUDA's
    // staged form.
    desc_chunk_ = std::max<std::size_t>(desc_ex_, 128);
    desc_staged_fixed_ = 0;
    for (const char* name : {"sift_descriptor_staged", "sift_descriptor_staged_rows"}) {
      cl_kernel ks = kernel(name);
      // CL_KERNEL_LOCAL_MEM_SIZE counts the __local arguments as last set: set them to one element first.
      SPECTRASIFT_CL_CHECK(clSetKernelArg(ks, 8, sizeof(float), nullptr));
      SPECTRASIFT_CL_CHECK(clSetKernelArg(ks, 10, 4 * sizeof(float), nullptr));
      SPECTRASIFT_CL_CHECK(clSetKernelArg(ks, 11, sizeof(cl_int), nullptr));
      SPECTRASIFT_CL_CHECK(clSetKernelArg(ks, 13, sizeof(float), nullptr));
      SPECTRASIFT_CL_CHECK(clSetKernelArg(ks, 14, sizeof(float), nullptr));
      const std::size_t lm = st_.limits(ks).local_mem;
      const std::size_t args = 3 * sizeof(float) + 4 * sizeof(float) + sizeof(cl_int);
      desc_staged_fixed_ = std::max(desc_staged_fixed_, lm > args ? lm - args : 0);  // the larger of the two
    }
  }
  auto pow2_below = [](std::size_t v) {
    std::size_t q = 1;
    while (q * 2 <= v) q *= 2;
    return q;
  };
  compact_local_ = pow2_below(st_.work_group_1d(kernel("sift_select_compact"), 256));
  cl_kernel sl = kernel("sift_sort_local");
  sort_local_ = pow2_below(st_.work_group_1d(sl, 256));
  while (sort_local_ > 1 && st_.limits(sl).local_mem + 2 * sort_local_ * sizeof(cl_int) > st_.local_mem) sort_local_ /= 2;
  cl_uint units = 1;
  SPECTRASIFT_CL_CHECK(clGetDeviceInfo(st_.device, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof units, &units, nullptr));
  groups_ = std::size_t(units) * (st_.is_cpu ? 4 : 16);
}

void SiftStagesOpenCL::orientations() {
  if (candidates_ == 0) return;
  const cl_mem gauss = levels();
  const cl_mem info = octave_table();
  const cl_mem counters = counter_buffer();
  const cl_mem refined = st_.buffer("sift.refined", candidate_capacity_ * sizeof(SiftKeypoint));
  const cl_mem kps = st_.buffer("sift.kp", keypoint_capacity_ * sizeof(SiftKeypoint));
  if (st_.is_cpu) {
    cl_kernel k = kernel("sift_orientation_serial");
    set_args(k, gauss, info, refined, counters, cl_uint(candidate_capacity_), cl_uint(keypoint_capacity_), kps);
    SPECTRASIFT_CL_CHECK(clSetKernelArg(k, 7, ori_local_ * ori_ex_ * sizeof(float), nullptr));
    const cl_int ex_cap = cl_int(ori_ex_);
    SPECTRASIFT_CL_CHECK(clSetKernelArg(k, 8, sizeof ex_cap, &ex_cap));
    // One refined point per work-item over the candidate count (the refined count's bound; work-items past the
    // live count return at once): many small work-groups for PoCL's scheduler to spread over the cores, where a
    // fixed 4 groups per core gave each core whole runs of points of unequal windows.
    const std::size_t g = round_up(candidates_, ori_local_);
    launch(k, 1, &g, &ori_local_, kOrientations);
    flush();
    return;
  }
  cl_kernel k = kernel("sift_orientation");
  set_args(k, gauss, info, refined, counters, cl_uint(candidate_capacity_), cl_uint(keypoint_capacity_), kps);
  SPECTRASIFT_CL_CHECK(clSetKernelArg(k, 7, ori_chunk_ * sizeof(cl_int), nullptr));
  SPECTRASIFT_CL_CHECK(clSetKernelArg(k, 8, ori_chunk_ * sizeof(float), nullptr));
  const cl_int chunk = cl_int(ori_chunk_), ex_cap = cl_int(ori_ex_);
  SPECTRASIFT_CL_CHECK(clSetKernelArg(k, 9, sizeof chunk, &chunk));
  SPECTRASIFT_CL_CHECK(clSetKernelArg(k, 10, ori_ex_ * sizeof(float), nullptr));
  SPECTRASIFT_CL_CHECK(clSetKernelArg(k, 11, sizeof ex_cap, &ex_cap));
  const std::size_t g = std::min(groups_, candidates_) * ori_local_;
  launch(k, 1, &g, &ori_local_, kOrientations);
  flush();  // refine and orientations run while select's launches are queued
}

// Bitonic sort of the index array `order` over the live count in counters[count_slot] (kernels/sift_select.cl):
// blocks of 2 L positions in local memory, the larger steps through global memory.
void SiftStagesOpenCL::sort(cl_mem order, int count_slot, int mode) {
  const cl_mem kps = st_.buffer("sift.kp", keypoint_capacity_ * sizeof(SiftKeypoint));
  const cl_mem counters = counter_buffer();
  const cl_uint cap = cl_uint(keypoint_capacity_);
  cl_kernel local_k = kernel("sift_sort_local"), step = kernel("sift_sort_step");
  const std::size_t l = sort_local_, block = 2 * l;
  const std::size_t g_local = positions_ / 2;
  auto local_pass = [&](std::size_t k_fixed) {
    set_args(local_k, order, kps, counters, count_slot, cap, cl_uint(k_fixed), mode);
    SPECTRASIFT_CL_CHECK(clSetKernelArg(local_k, 7, block * sizeof(cl_int), nullptr));
    launch(local_k, 1, &g_local, &l, kSelect);
  };
  local_pass(0);
  const std::size_t ls = st_.work_group_1d(step, 256);
  const std::size_t gs = std::max(ls, std::min(positions_ / 2, groups_ * ls) / ls * ls);
  for (std::size_t kk = 2 * block; kk <= positions_; kk <<= 1) {
    for (std::size_t j = kk / 2; j >= block; j >>= 1) {
      set_args(step, order, kps, counters, count_slot, cap, cl_uint(kk), cl_uint(j), mode);
      launch(step, 1, &gs, &ls, kSelect);
    }
    local_pass(kk);
  }
}

void SiftStagesOpenCL::compact(cl_mem in, int in_slot, int out_slot, cl_mem out) {
  const cl_mem keep = st_.buffer("sift.keep", positions_ * sizeof(cl_int));
  const cl_mem counters = counter_buffer();
  cl_kernel k = kernel("sift_select_compact");
  set_args(k, in, keep, counters, in_slot, cl_uint(keypoint_capacity_), out_slot, out);
  SPECTRASIFT_CL_CHECK(clSetKernelArg(k, 7, compact_local_ * sizeof(cl_int), nullptr));
  launch(k, 1, &compact_local_, &compact_local_, kSelect);
}

// The positions P of sift_select_small (kernels/sift_select.cl) with the State's switch (by default on GPUs
// only; select() takes it where the rank select is off: State::select_rank 0, or CPU devices with select_small 1)
// and local memory now, or 0 when it is not run: the largest power of two up to 8,192 (its 13-bit record
// index) whose P + L ints (the order's words and the scan of L work-items) fit the device's local memory less
// the kernel's own, and at most 16 positions per work-item. NVIDIA OpenCL's 48 KiB gives 8,192 with L = 1024.
// Below 2,048 positions the one work-group would rarely take the stage (kleiber 1080p has 2,411 oriented
// records), so the multi-launch path alone runs.
std::size_t SiftStagesOpenCL::select_small_positions() {
  const bool on = st_.select_small > 0 || (st_.select_small < 0 && !st_.is_cpu);
  if (!on) return 0;
  cl_kernel k = kernel("sift_select_small");
  if (select_small_fixed_ == ~std::size_t(0)) {
    // CL_KERNEL_LOCAL_MEM_SIZE counts the __local argument as last set: set it to one int first.
    SPECTRASIFT_CL_CHECK(clSetKernelArg(k, 12, sizeof(cl_int), nullptr));
    const std::size_t lm = st_.limits(k).local_mem;
    select_small_fixed_ = lm > sizeof(cl_int) ? lm - sizeof(cl_int) : 0;
  }
  std::size_t l = 1;
  const std::size_t allowed = std::min<std::size_t>(st_.work_group_1d(k, 1024), 1024);
  while (l * 2 <= allowed) l *= 2;
  std::size_t positions = std::min<std::size_t>(kSelectSmallMaxPositions, l * kSelectSmallPerMax);
  while (positions >= kSelectSmallMinPositions &&
         (positions + l) * sizeof(cl_int) + select_small_fixed_ > st_.local_mem)
    positions /= 2;
  if (positions < kSelectSmallMinPositions || positions < l) return 0;
  select_small_local_ = l;
  return positions;
}

// The records the rank select (kernels/sift_select_rank.cl) takes with the State's switches (by default on GPUs
// only; State::select_small 0 turns it off with the one work-group), or 0 when it is not run: SIFT_RANK_MAX_RECORDS
// where its slice kernels allow a work-group of at least one slice of 32 work-items. Their work-group: as many
// slices as the three kernels allow, up to 8 (256 work-items, 64 records).
std::size_t SiftStagesOpenCL::select_rank_records() {
  const bool small = st_.select_small > 0 || (st_.select_small < 0 && !st_.is_cpu);
  const bool rank = st_.select_rank > 0 || (st_.select_rank < 0 && !st_.is_cpu);
  if (!small || !rank) return 0;
  if (rank_local_ == ~std::size_t(0)) {
    std::size_t l = kRankGroupMax;
    for (const char* name : {"sift_select_rank_unique", "sift_select_rank_keep", "sift_select_rank_place"})
      l = std::min(l, st_.work_group_1d(kernel(name), kRankGroupMax));
    rank_local_ = l / kRankLanes * kRankLanes;
  }
  return rank_local_ >= kRankLanes ? std::size_t(SIFT_RANK_MAX_RECORDS) : 0;
}

// The rank select's launches (kernels/sift_select_rank.cl) over at most `bound` records (the host's bound on the
// oriented count): keys, duplicates, the cap and the mask (only when there is either), the canonical positions.
// A slice of 32 work-items per 8 records; the kernels skip their work past SIFT_RANK_MAX_RECORDS. The per-record
// keys are three runs of the keypoint capacity in "sift.rank".
void SiftStagesOpenCL::select_rank(std::size_t bound) {
  const detail::SiftPlan& p = *plan_;
  const cl_mem counters = counter_buffer();
  const cl_mem kps = st_.buffer("sift.kp", keypoint_capacity_ * sizeof(SiftKeypoint));
  const cl_mem kept = st_.buffer("sift.kept", keypoint_capacity_ * sizeof(SiftKeypoint));
  const cl_mem m = st_.buffer("sift.mask", 4);
  const cl_mem words = st_.buffer("sift.rank", 3 * keypoint_capacity_ * sizeof(cl_uint));
  const cl_uint cap = cl_uint(keypoint_capacity_);
  // y times y_scale falls in [0, 2^23): the canonical key's y field; the key only where the layers fit its 4 bits
  // and octave + 1 its 5 (at most 30, below SIFT_RANK_NONE's).
  const float y_scale = float(1 << 23) / float(std::max(p.input_width, p.input_height) + 1);
  const cl_int canonical_key = p.layers <= 15 && p.octaves <= 31 ? 1 : 0;
  const bool cap_or_mask = p.max_features > 0 || mask_type_ >= 0;
  cl_kernel keys = kernel("sift_select_rank_keys");
  set_args(keys, kps, counters, cap, words);
  launch_1d(keys, bound, 256, kSelect);
  const std::size_t records = rank_local_ / kRankLanes * kRankPerSlice;  // a work-group's
  const std::size_t g = (bound + records - 1) / records * rank_local_;
  cl_kernel unique = kernel("sift_select_rank_unique");
  set_args(unique, kps, counters, cap, words, y_scale, canonical_key, cl_int(cap_or_mask ? 0 : 1));
  launch(unique, 1, &g, &rank_local_, kSelect);
  if (cap_or_mask) {
    cl_kernel keep = kernel("sift_select_rank_keep");
    set_args(keep, kps, counters, cap, words, y_scale, canonical_key, p.max_features, m, mask_type_, mask_w_,
             mask_h_);
    launch(keep, 1, &g, &rank_local_, kSelect);
  }
  cl_kernel place = kernel("sift_select_rank_place");
  set_args(place, kps, counters, cap, words, kept);
  launch(place, 1, &g, &rank_local_, kSelect);
}

// The bucketed rank select (kernels/sift_select_buckets.cl): two fills and seven launches over the host's bound on
// the oriented count, every kernel skipping its work when a small-count path queued before ran the stage. Buffer
// "sift.buckets": per bucket kind its counts, offsets and cursors (6 x 65,536 + 2 words), then six words a record
// of the capacity. The scan's single work-group: the largest power of two up to 1024 the kernel allows.
void SiftStagesOpenCL::select_buckets(std::size_t bound, int band_bits) {
  const detail::SiftPlan& p = *plan_;
  constexpr std::size_t B = SIFT_SELECT_BUCKETS;
  const cl_mem counters = counter_buffer();
  const cl_mem kps = st_.buffer("sift.kp", keypoint_capacity_ * sizeof(SiftKeypoint));
  const cl_mem kept = st_.buffer("sift.kept", keypoint_capacity_ * sizeof(SiftKeypoint));
  const cl_mem m = st_.buffer("sift.mask", 4);
  const cl_mem w = st_.buffer("sift.buckets", (6 * B + 2 + 6 * keypoint_capacity_) * sizeof(cl_uint));
  const cl_uint cap = cl_uint(keypoint_capacity_);
  const cl_uint zero = 0;
  for (std::size_t run : {std::size_t(0), 3 * B + 1})  // the duplicate and the canonical counts
    SPECTRASIFT_CL_CHECK(clEnqueueFillBuffer(st_.queue, w, &zero, sizeof zero, run * sizeof(cl_uint), B * sizeof(cl_uint),
                                             0, nullptr, nullptr));
  cl_kernel keys = kernel("sift_select_bucket_keys");
  set_args(keys, kps, counters, cap, w);
  launch_1d(keys, bound, 256, kSelect);
  cl_kernel scan = kernel("sift_select_bucket_scan");
  const std::size_t most = std::min<std::size_t>(1024, st_.work_group_1d(scan, 1024));
  std::size_t l = 1;
  while (l * 2 <= most) l *= 2;
  cl_kernel fill = kernel("sift_select_bucket_fill");
  const auto scan_and_fill = [&](cl_uint kind) {
    set_args(scan, counters, cap, w, kind);
    SPECTRASIFT_CL_CHECK(clSetKernelArg(scan, 4, l * sizeof(cl_uint), nullptr));
    launch(scan, 1, &l, &l, kSelect);
    set_args(fill, counters, cap, w, kind);
    launch_1d(fill, bound, 256, kSelect);
  };
  scan_and_fill(0);
  cl_kernel unique = kernel("sift_select_bucket_unique");
  const float y_scale = float(1 << 23) / float(std::max(p.input_width, p.input_height) + 1);
  set_args(unique, kps, counters, cap, w, y_scale, cl_int(p.layers), cl_int(p.octaves), cl_int(band_bits), m,
           mask_type_, mask_w_, mask_h_);
  launch_1d(unique, bound, 256, kSelect);
  scan_and_fill(1);
  cl_kernel place = kernel("sift_select_bucket_place");
  set_args(place, kps, counters, cap, w, kept);
  launch_1d(place, bound, 256, kSelect);
}

void SiftStagesOpenCL::select(const Image* mask) {
  if (candidates_ == 0) return;
  const detail::SiftPlan& p = *plan_;
  const cl_mem counters = counter_buffer();
  // Sort positions: a power of two >= the keypoint capacity, and at least one local block. CPU devices: >= the
  // live oriented count instead (read back here), so that the sort's stages above it, launches that would
  // return at once (the capacity is 2x the candidates: 9 of the 15 launches of a sort at kleiber 1080p), are
  // not launched; each costs a PoCL dispatch over every core. The device queue runs on the host's own cores,
  // so the wait costs no overlap the GPU path would keep.
  // After select_again(): the oriented count download() just read, the same tight bound.
  std::size_t bound = keypoint_capacity_;
  const bool exact = st_.is_cpu || select_multi_now_;
  if (select_multi_now_) {
    bound = std::min<std::size_t>(std::max<std::size_t>(counters_[kCountOriented], 1), keypoint_capacity_);
  } else if (st_.is_cpu) {
    cl_uint oriented = 0;
    SPECTRASIFT_CL_CHECK(clEnqueueReadBuffer(st_.queue, counters, CL_TRUE, kCountOriented * sizeof(cl_uint),
                                             sizeof oriented, &oriented, 0, nullptr, nullptr));
    bound = std::min<std::size_t>(std::max<std::size_t>(oriented, 1), keypoint_capacity_);
  }
  const bool multi_only = select_multi_now_;
  select_multi_now_ = false;
  select_deferred_ = false;
  oriented_bound_ = bound;
  positions_ = std::max(pow2_at_least(bound), 2 * sort_local_);
  const std::size_t positions = positions_;
  const cl_mem kps = st_.buffer("sift.kp", keypoint_capacity_ * sizeof(SiftKeypoint));
  if (mask) {
    const std::size_t bytes = mask->data.size();
    const cl_mem m = st_.buffer("sift.mask", bytes);
    SPECTRASIFT_CL_CHECK(clEnqueueWriteBuffer(st_.queue, m, CL_TRUE, 0, bytes, mask->data.data(), 0, nullptr, nullptr));
    mask_type_ = mask->type == PixelType::kU8 ? 0 : mask->type == PixelType::kU16 ? 1 : 2;
    mask_w_ = mask->width;
    mask_h_ = mask->height;
  }
  const cl_mem m = st_.buffer("sift.mask", 4);
  const cl_uint cap = cl_uint(keypoint_capacity_);
  const cl_mem kept = st_.buffer("sift.kept", keypoint_capacity_ * sizeof(SiftKeypoint));
  // The small-count path and the most records it takes (0: none): the rank select, else the one work-group.
  std::size_t small = 0;
  bool rank = false;
  if (!multi_only) {
    small = select_rank_records();
    rank = small != 0;
    if (!rank) small = select_small_positions();
  }
  select_rank_queued_ = false;
  if (small && !(exact && bound > small)) {
    // The whole stage in the small-count path when the oriented count is at most `small` (decided on the
    // device, which sets counters[SIFT_COUNT_SELECT_SMALL]); the launches below then return at once. They are
    // not queued when the host's bound on the count is within `small` (the keypoint capacity; on CPU devices the
    // count read back), nor when it queues the path alone on a guess (State::select_small_defer; by default
    // when the candidates are at most 2 x small: at kleiber 1080p upsampled 6,528 candidates give 2,427
    // oriented records, and the capacity 13,056 would queue 48 launches that return at once, each a launch's
    // fixed cost on NVIDIA). A wrong guess costs one more round: download() reads the slot 0, and
    // select_again() has the multi-launch path run on the count read.
    if (rank) {
      select_rank(bound);
      select_rank_queued_ = true;
    } else {
      // The one work-group. The key prefixes' scale: coordinates (input pixels) times it fall in [0, 2^19); the
      // canonical prefix only where layers fit 4 bits.
      cl_kernel k = kernel("sift_select_small");
      const float coord_scale = float(1 << 19) / float(std::max(p.input_width, p.input_height) + 1);
      set_args(k, kps, counters, cap, cl_uint(small), p.max_features, m, mask_type_, mask_w_, mask_h_, coord_scale,
               cl_int(p.layers <= 15 ? 1 : 0), kept);
      SPECTRASIFT_CL_CHECK(clSetKernelArg(k, 12, (small + select_small_local_) * sizeof(cl_int), nullptr));
      launch(k, 1, &select_small_local_, &select_small_local_, kSelect);
    }
    const bool defer = st_.select_small_defer > 0 || (st_.select_small_defer < 0 && candidates_ <= 2 * small);
    if (bound <= small || defer) {
      select_deferred_ = bound > small;
      flush();
      return;
    }
  }
  // Without a cap, the bucketed rank select (State::select_buckets; its counts are the rank select's inside
  // buckets); with a cap (a count over every record) or canonical buckets that do not fit the plan, the sorts.
  const int band_bits = sift_canonical_band_bits(p.layers, p.octaves);
  const bool buckets = st_.select_buckets > 0 || (st_.select_buckets < 0 && st_.is_cpu);
  if (buckets && p.max_features == 0 && p.layers <= 15 && p.octaves <= 31 && band_bits >= 0) {
    select_buckets(bound, band_bits);
    flush();
    return;
  }
  // The multi-launch path's buffers (created only when it is queued).
  const cl_mem a = st_.buffer("sift.order_a", positions * sizeof(cl_int));
  const cl_mem b = st_.buffer("sift.order_b", positions * sizeof(cl_int));
  const cl_mem keep = st_.buffer("sift.keep", positions * sizeof(cl_int));
  cl_kernel init = kernel("sift_select_init");
  set_args(init, a, counters, cap, cl_uint(positions));
  launch_1d(init, positions, 256, kSelect);
  // 1. duplicates
  sort(a, kCountOriented, kOrderDuplicates);
  cl_kernel flags = kernel("sift_select_flags");
  set_args(flags, a, kps, counters, kCountOriented, cap, 0, p.max_features, m, mask_type_, mask_w_, mask_h_, keep);
  launch_1d(flags, keypoint_capacity_, 256, kSelect);
  compact(a, kCountOriented, kCountUnique, b);
  // 2. the cap (from the response order) and 3. the mask
  if (p.max_features > 0) sort(b, kCountUnique, kOrderResponse);
  set_args(flags, b, kps, counters, kCountUnique, cap, 1, p.max_features, m, mask_type_, mask_w_, mask_h_, keep);
  launch_1d(flags, keypoint_capacity_, 256, kSelect);
  compact(b, kCountUnique, kCountKept, a);
  // 4. the canonical order, and the kept records gathered in it
  sort(a, kCountKept, kOrderCanonical);
  cl_kernel gather = kernel("sift_select_gather");
  set_args(gather, a, kps, counters, cap, kept);
  launch_1d(gather, keypoint_capacity_, 256, kSelect);
  flush();
}

// download(): the small-count path was queued alone on a guess and found more oriented records than it takes
// (its counter slot is 0): the next select() runs the multi-launch path, sized to the count just read.
bool SiftStagesOpenCL::select_again() {
  if (!select_deferred_ || counters_[SIFT_COUNT_SELECT_SMALL] != 0) return false;
  select_deferred_ = false;
  select_multi_now_ = true;
  return true;
}

bool SiftStagesOpenCL::desc_staged_fits(const char* name, std::size_t local) {
  return st_.work_group_1d(kernel(name), local) == local &&
         desc_staged_fixed_ + desc_staged_local_bytes(local) <= st_.local_mem;
}

void SiftStagesOpenCL::descriptors() {
  if (candidates_ == 0) return;
  const detail::SiftPlan& p = *plan_;
  const cl_mem gauss = levels();
  const cl_mem info = octave_table();
  const cl_mem counters = counter_buffer();
  const cl_mem kept = st_.buffer("sift.kept", keypoint_capacity_ * sizeof(SiftKeypoint));
  const cl_mem desc = st_.buffer("sift.desc", descriptor_capacity_ * Features::kDescriptorSize * sizeof(float));
  const float deg2rad = float(M_PI / 180.0);
  const cl_int root = p.root_sift ? 1 : 0;
  // GPUs: the staged form's row walk in work-groups of 32 (one keypoint each; the default, State::
  // descriptor_variant -1 or 3) or 128 (4), or its box walk in work-groups of 32 (2) or of 128 (four keypoints in
  // lockstep, 1), where the device allows it, else the walkers (the same bits). On the H200 through NVIDIA OpenCL
  // the 32-wide row walk was the fastest at every count (docs/performance/sift.md, "The OpenCL row walk").
  const int variant = st_.descriptor_variant < 0 ? 3 : st_.descriptor_variant;
  const std::size_t staged_local = st_.is_cpu                    ? 0
                                   : variant == 1 || variant == 4 ? 128
                                   : variant == 2 || variant == 3 ? 32
                                                                  : 0;
  const char* staged_name = variant == 3 || variant == 4 ? "sift_descriptor_staged_rows" : "sift_descriptor_staged";
  desc_staged_used_ = staged_local && desc_staged_fits(staged_name, staged_local) ? staged_local : 0;
  desc_row_walk_used_ = desc_staged_used_ && (variant == 3 || variant == 4);
  if (desc_staged_used_) {
    // local / 32 kept keypoints a work-group (kernels/sift_descriptor_staged.cl); at most the groups_ cap, and
    // no more groups than the capacity's bound needs (those past the kept count return at once).
    cl_kernel k = kernel(staged_name);
    set_args(k, gauss, info, kept, counters, cl_uint(descriptor_capacity_), deg2rad, root, desc);
    const std::size_t local = desc_staged_used_, slices = local / 32;
    static_assert(kDescStagedAcc == (SIFT_DESCR_HIST_BINS + 2) * SIFT_DESCR_WIDTH * SIFT_DESCR_WIDTH &&
                  kDescStagedLen == SIFT_DESCR_WIDTH * SIFT_DESCR_WIDTH * SIFT_DESCR_HIST_BINS);
    // The local arguments as desc_staged_local_bytes counts them: per slice ex, records, codes, accumulator and
    // output row; the records and codes kDescStagedPad more (the row walk's loads past a band's end).
    const std::size_t recs = slices * desc_chunk_ + kDescStagedPad;
    SPECTRASIFT_CL_CHECK(clSetKernelArg(k, 8, slices * desc_ex_ * sizeof(float), nullptr));
    const cl_int ex_cap = cl_int(desc_ex_), chunk = cl_int(desc_chunk_);
    SPECTRASIFT_CL_CHECK(clSetKernelArg(k, 9, sizeof ex_cap, &ex_cap));
    SPECTRASIFT_CL_CHECK(clSetKernelArg(k, 10, recs * 4 * sizeof(float), nullptr));
    SPECTRASIFT_CL_CHECK(clSetKernelArg(k, 11, recs * sizeof(cl_int), nullptr));
    SPECTRASIFT_CL_CHECK(clSetKernelArg(k, 12, sizeof chunk, &chunk));
    SPECTRASIFT_CL_CHECK(clSetKernelArg(k, 13, slices * kDescStagedAcc * sizeof(float), nullptr));
    SPECTRASIFT_CL_CHECK(clSetKernelArg(k, 14, slices * kDescStagedLen * sizeof(float), nullptr));
    const std::size_t groups = std::max<std::size_t>(1, std::min(groups_, (descriptor_capacity_ + slices - 1) / slices));
    const std::size_t g = groups * local;
    launch(k, 1, &g, &local, kDescriptors);
    return;
  }
  cl_kernel k = kernel(st_.is_cpu ? "sift_descriptor_serial" : "sift_descriptor");
  set_args(k, gauss, info, kept, counters, cl_uint(descriptor_capacity_), deg2rad, root, desc);
  SPECTRASIFT_CL_CHECK(clSetKernelArg(k, 8, (st_.is_cpu ? desc_local_ : 1) * desc_ex_ * sizeof(float), nullptr));
  const cl_int ex_cap = cl_int(desc_ex_);
  SPECTRASIFT_CL_CHECK(clSetKernelArg(k, 9, sizeof ex_cap, &ex_cap));
  // CPU devices: one kept keypoint per work-item up to the oriented count that select() read back (the kept
  // count's bound; the work-items past the kept count return at once, each a PoCL dispatch share).
  const std::size_t g =
      st_.is_cpu ? round_up(std::min(descriptor_capacity_, oriented_bound_), desc_local_) : groups_ * desc_local_;
  launch(k, 1, &g, &desc_local_, kDescriptors);
}

}  // namespace spectrasift::opencl

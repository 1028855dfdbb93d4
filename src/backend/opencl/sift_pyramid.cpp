// OpenCL SIFT scale space and candidates (see sift.hpp): the pyramid (upsample or base blur, separable
// blurs in local-memory tiles that also write the DoG planes, smaller tiles for the small planes, downsample; on
// GPUs the trailing small octaves in one launch), the extrema with their count read back, and the refinement.
#include <algorithm>
#include <cmath>

#include "backend/opencl/sift.hpp"
#include "spectrasift/error.hpp"

namespace spectrasift::opencl {

namespace {

// sift_blur_tiles (kernels/sift_blur.cl): built per radius up to this one, output tile 64 x 32, work-group
// 32 x 8, local memory for the staged source ((32 + 2R) rows of 64 + 2A, A = R rounded up to 4) and the
// vertical pass (32 rows of max(65 + 2R, 68)).
constexpr int kTilesMaxRadius = 16;
constexpr std::size_t kTilesW = 64, kTilesH = 32, kTilesGroupX = 32, kTilesGroupY = 8;
// sift_blur_small_tiles (the same program): output tile 32 x 16, the same work-group; local memory
// (16 + 2R) (32 + 2R) + 16 (33 + 2R) floats, 16 KiB at R = 16.
constexpr std::size_t kSmallTilesW = 32, kSmallTilesH = 16;
std::size_t tiles_local_bytes(int r) {
  const std::size_t a = (std::size_t(r) + 3) / 4 * 4;
  const std::size_t mid_pitch = std::max<std::size_t>(kTilesW + 2 * std::size_t(r) + 1, kTilesW + 4);
  return ((kTilesH + 2 * std::size_t(r)) * (kTilesW + 2 * a) + kTilesH * mid_pitch) * sizeof(float);
}

// Whether the blur takes the tiled GPU forms (sift_blur_tiles / sift_blur) rather than the row kernels.
bool tiled_blur(const State& st) {
  return st.blur_variant == 0 || st.blur_variant == 2 || (st.blur_variant < 0 && !st.is_cpu);
}

// sift_blur_small_octaves (kernels/sift_blur.cl) takes an octave whose plane has at most this many pixels:
// its one work-group computes every pixel of every level serially in rounds of N work-items, which at this
// size still costs less than the octave's downsample and blur launches (~8 us each on NVIDIA, whatever the
// size) it replaces.
constexpr std::size_t kSmallOctaveMaxPlane = 16384;
constexpr std::size_t kSmallOctaveMaxGroup = 1024;

}  // namespace

// The blur tile (TX, TY) of sift_blur: up to 32 x 8 work-items, within the kernel's work-group limit and the
// device's local memory for the plan's largest radius R ((TY + 2R) + TY rows of TX + 2R floats); TY shrinks
// first, then TX. A device whose local memory cannot hold even a one-pixel tile gets a clear error. Then
// sift_blur_tiles for each radius of the plan up to 16 that the device can run (a 32 x 8 work-group and its
// local memory); the other radii take sift_blur.
void SiftStagesOpenCL::size_blur_tiles() {
  const detail::SiftPlan& p = *plan_;
  const int r = *std::max_element(p.tap_radius.begin(), p.tap_radius.end());
  blur_tiles_.assign(std::size_t(kTilesMaxRadius) + 1, nullptr);
  blur_small_tiles_.assign(std::size_t(kTilesMaxRadius) + 1, nullptr);
  for (const int ri : p.tap_radius) {
    if (ri < 1 || ri > kTilesMaxRadius || st_.max_work_group < kTilesGroupX * kTilesGroupY ||
        tiles_local_bytes(ri) > st_.local_mem)
      continue;
    const std::string radius = options_ + " -DSIFT_BLUR_R=" + std::to_string(ri);
    cl_kernel kt = st_.kernel("sift_blur.cl", "sift_blur_tiles", radius);
    const KernelLimits lim = st_.limits(kt);
    if (lim.work_group_size >= kTilesGroupX * kTilesGroupY && lim.local_mem <= st_.local_mem)
      blur_tiles_[std::size_t(ri)] = kt;
    cl_kernel ks = st_.kernel("sift_blur.cl", "sift_blur_small_tiles", radius);
    const KernelLimits lims = st_.limits(ks);
    if (lims.work_group_size >= kTilesGroupX * kTilesGroupY && lims.local_mem <= st_.local_mem)
      blur_small_tiles_[std::size_t(ri)] = ks;
  }
  if (r == blur_r_) return;
  cl_kernel kb = kernel("sift_blur");
  const KernelLimits lim = st_.limits(kb);
  const std::size_t wg = std::min(lim.work_group_size, st_.max_work_group);
  const std::size_t avail = st_.local_mem > lim.local_mem ? st_.local_mem - lim.local_mem : 0;
  std::size_t tx = 32, ty = 8;
  while (tx * ty > wg || blur_tile_bytes(tx, ty, r) > avail) {
    if (ty > 1) ty /= 2;
    else if (tx > 1) tx /= 2;
    else
      throw Error(ErrorCode::kUnsupported,
                  "sift: the OpenCL device has " + std::to_string(avail) + " bytes of local memory for the blur, a " +
                      "Gaussian of radius " + std::to_string(r) + " needs " + std::to_string(blur_tile_bytes(1, 1, r)) +
                      " (sigma or octave_layers too large for this device; use the cpu backend)",
                  "opencl");
  }
  blur_tx_ = tx;
  blur_ty_ = ty;
  blur_r_ = r;
}

void SiftStagesOpenCL::blur(cl_mem src, cl_mem dst, std::size_t src_off, std::size_t dst_off, int w, int h,
                            int kernel_index, cl_long dog_off) {
  const detail::SiftPlan& p = *plan_;
  const int r = p.tap_radius[std::size_t(kernel_index)];
  const int tap_off = p.tap_offset[std::size_t(kernel_index)];
  const cl_mem taps = st_.buffer("sift.taps", p.taps.size() * sizeof(float));
  const cl_long so = cl_long(src_off), dof = cl_long(dst_off);
  const cl_mem dog = st_.buffer("sift.dog", p.dog_floats * sizeof(float));
  if (!tiled_blur(st_)) {  // sift_blur_rows (see sift_blur.cl): a work-item per row, L padded lines in local memory
    cl_kernel kr = kernel("sift_blur_rows");
    const std::size_t line_bytes = (std::size_t(w) + 2 * std::size_t(r)) * sizeof(float);
    const std::size_t fixed = st_.limits(kr).local_mem;
    std::size_t lines = st_.work_group_1d(kr, 4);
    while (lines > 1 && fixed + lines * line_bytes > st_.local_mem) lines /= 2;
    if (fixed + lines * line_bytes > st_.local_mem)
      throw Error(ErrorCode::kUnsupported,
                  "sift: the OpenCL device has " + std::to_string(st_.local_mem) + " bytes of local memory, the blur of a " +
                      std::to_string(w) + "-pixel row needs " + std::to_string(fixed + line_bytes) + " (use the cpu backend)",
                  "opencl");
    set_args(kr, src, dst, so, dof, w, h, taps, tap_off, r);
    SPECTRASIFT_CL_CHECK(clSetKernelArg(kr, 9, lines * line_bytes, nullptr));
    SPECTRASIFT_CL_CHECK(clSetKernelArg(kr, 10, sizeof(cl_mem), &dog));
    SPECTRASIFT_CL_CHECK(clSetKernelArg(kr, 11, sizeof(cl_long), &dog_off));
    const std::size_t g = round_up(std::size_t(h), lines);
    launch(kr, 1, &g, &lines, kPyramid);
    return;
  }
  if (st_.blur_variant != 2 && std::size_t(r) < blur_tiles_.size() && blur_tiles_[std::size_t(r)]) {
    // The small planes in 32 x 16 tiles (State::small_tiles): where the 64 x 32 grid has fewer than two
    // work-groups a compute unit, a level costs one work-group's chain whatever the plane's size.
    const std::size_t groups = (round_up(std::size_t(w), kTilesW) / kTilesW) * (round_up(std::size_t(h), kTilesH) / kTilesH);
    const bool small = blur_small_tiles_[std::size_t(r)] &&
                       (st_.small_tiles == 1 ||
                        ((st_.small_tiles == 2 || st_.small_tiles == -1) && groups < 2 * st_.compute_units));
    const std::size_t tw = small ? kSmallTilesW : kTilesW, th = small ? kSmallTilesH : kTilesH;
    cl_kernel kt = small ? blur_small_tiles_[std::size_t(r)] : blur_tiles_[std::size_t(r)];
    set_args(kt, src, dst, so, dof, w, h, taps, tap_off, dog, dog_off);
    const std::size_t l[2] = {kTilesGroupX, kTilesGroupY};
    const std::size_t g[2] = {round_up(std::size_t(w), tw) / tw * kTilesGroupX,
                              round_up(std::size_t(h), th) / th * kTilesGroupY};
    launch(kt, 2, g, l, kPyramid);
    return;
  }
  const std::size_t l[2] = {blur_tx_, blur_ty_};
  const std::size_t g[2] = {round_up(std::size_t(w), blur_tx_), round_up(std::size_t(h), blur_ty_)};
  cl_kernel kb = kernel("sift_blur");
  set_args(kb, src, dst, so, dof, w, h, taps, tap_off, r);
  const std::size_t cols = blur_tx_ + 2 * std::size_t(r);
  SPECTRASIFT_CL_CHECK(clSetKernelArg(kb, 9, (blur_ty_ + 2 * std::size_t(r)) * cols * sizeof(float), nullptr));
  SPECTRASIFT_CL_CHECK(clSetKernelArg(kb, 10, blur_ty_ * cols * sizeof(float), nullptr));
  SPECTRASIFT_CL_CHECK(clSetKernelArg(kb, 11, sizeof(cl_mem), &dog));
  SPECTRASIFT_CL_CHECK(clSetKernelArg(kb, 12, sizeof(cl_long), &dog_off));
  launch(kb, 2, g, l, kPyramid);
}

// The first octave of the trailing ones that sift_blur_small_octaves computes in one launch, or p.octaves
// when none: the longest suffix of octaves 1 .. (never octave 0, which has the upsample or the base blur) whose
// planes have at most kSmallOctaveMaxPlane pixels and fit local memory three times with the taps (the planes
// shrink with o: the first one decides). On NVIDIA OpenCL (48 KiB of local memory) that is planes of up to
// ~4000 pixels (60 x 33 at 1080p upsampled, not 120 x 67).
int SiftStagesOpenCL::small_octaves_first() {
  const detail::SiftPlan& p = *plan_;
  const bool on = tiled_blur(st_) && (st_.small_octaves > 0 || (st_.small_octaves < 0 && !st_.is_cpu));
  if (!on || p.octaves < 2) return p.octaves;
  if (small_fixed_local_ == ~std::size_t(0)) {
    // CL_KERNEL_LOCAL_MEM_SIZE counts the __local arguments as last set (a previous launch's planes): set both
    // to one float first, and take what the kernel needs besides them (none declared; what the driver adds).
    cl_kernel k = kernel("sift_blur_small_octaves");
    SPECTRASIFT_CL_CHECK(clSetKernelArg(k, 11, sizeof(float), nullptr));
    SPECTRASIFT_CL_CHECK(clSetKernelArg(k, 12, sizeof(float), nullptr));
    const std::size_t lm = st_.limits(k).local_mem;
    small_fixed_local_ = lm > 2 * sizeof(float) ? lm - 2 * sizeof(float) : 0;
  }
  // 64 bytes of slack: a driver may align each __local argument (the fixed part was measured with 4-byte ones).
  const std::size_t used = small_fixed_local_ + 64;
  const std::size_t avail = st_.local_mem > used ? st_.local_mem - used : 0;
  const std::size_t taps = p.taps.size() * sizeof(float);
  int first = p.octaves;
  for (int o = p.octaves - 1; o >= 1; --o) {
    const std::size_t plane = std::size_t(octave_info_[4 * std::size_t(o)]) * std::size_t(octave_info_[4 * std::size_t(o) + 1]);
    if (plane > kSmallOctaveMaxPlane || 3 * plane * sizeof(float) + taps > avail) break;
    first = o;
  }
  return first;
}

// Octaves first .. p.octaves - 1 (level 0 from octave first - 1's level S, every level and DoG plane) in one
// launch of one work-group (kernels/sift_blur.cl).
void SiftStagesOpenCL::blur_small_octaves(int first) {
  const detail::SiftPlan& p = *plan_;
  cl_kernel k = kernel("sift_blur_small_octaves");
  const cl_mem gauss = levels();
  const cl_mem dog = st_.buffer("sift.dog", p.dog_floats * sizeof(float));
  const cl_mem taps = st_.buffer("sift.taps", p.taps.size() * sizeof(float));
  const cl_mem table = st_.buffer("sift.tap_table", 2 * std::size_t(p.levels) * sizeof(cl_int));
  const cl_int cap = cl_int(octave_info_[4 * std::size_t(first)] * octave_info_[4 * std::size_t(first) + 1]);
  set_args(k, gauss, dog, octave_table(), taps, table, cl_int(p.taps.size()), first, p.octaves, p.layers, p.levels,
           cap);
  SPECTRASIFT_CL_CHECK(clSetKernelArg(k, 11, 3 * std::size_t(cap) * sizeof(float), nullptr));
  SPECTRASIFT_CL_CHECK(clSetKernelArg(k, 12, p.taps.size() * sizeof(float), nullptr));
  const std::size_t n = st_.work_group_1d(k, kSmallOctaveMaxGroup);
  launch(k, 1, &n, &n, kPyramid);
}

void SiftStagesOpenCL::pyramid() {
  const detail::SiftPlan& p = *plan_;
  if (p.octaves == 0) return;
  if (st_.is_cpu && tiled_blur(st_)) size_blur_tiles();  // a test's choice (prepare() sizes them on GPUs)
  const cl_mem grey = st_.buffer("sift.grey", std::size_t(p.input_width) * std::size_t(p.input_height) * sizeof(float));
  const cl_mem gauss = levels();
  const cl_mem dog = st_.buffer("sift.dog", p.dog_floats * sizeof(float));
  const int small = small_octaves_first();  // octaves small .. p.octaves - 1 in one launch
  small_from_ = small;
  for (int o = 0; o < small; ++o) {
    const int w = int(octave_info_[4 * std::size_t(o)]), h = int(octave_info_[4 * std::size_t(o) + 1]);
    const std::size_t plane = std::size_t(w) * std::size_t(h);
    const std::size_t g0 = std::size_t(octave_info_[4 * std::size_t(o) + 2]);
    if (o == 0) {
      if (p.upsample) {  // the doubled input goes through the first DoG plane, free until level 1 writes it
        cl_kernel k = kernel("sift_upsample");
        set_args(k, grey, p.input_width, p.input_height, dog);
        launch_2d(k, std::size_t(w), std::size_t(h), kPyramid);
        blur(dog, gauss, 0, g0, w, h, 0);
      } else {
        blur(grey, gauss, 0, g0, w, h, 0);
      }
    } else {
      const std::size_t prev = std::size_t(octave_info_[4 * std::size_t(o - 1) + 2]);
      const int pw = int(octave_info_[4 * std::size_t(o - 1)]), ph = int(octave_info_[4 * std::size_t(o - 1) + 1]);
      const cl_long src_off = cl_long(prev + std::size_t(p.layers) * std::size_t(pw) * std::size_t(ph));
      const cl_long dst_off = cl_long(g0);
      cl_kernel k = kernel("sift_downsample");
      set_args(k, gauss, src_off, pw, dst_off, w, h);
      launch_2d(k, std::size_t(w), std::size_t(h), kPyramid);
    }
    // Level i and, in the same launch, DoG plane i - 1 = level i - level i - 1 (the octave's DoG).
    const cl_long d0 = cl_long(octave_info_[4 * std::size_t(o) + 3]);
    for (int i = 1; i < p.levels; ++i)
      blur(gauss, gauss, g0 + std::size_t(i - 1) * plane, g0 + std::size_t(i) * plane, w, h, i,
           d0 + cl_long(i - 1) * cl_long(plane));
    if (o == 0) flush();  // the largest octave runs while the others are queued
  }
  if (small < p.octaves) blur_small_octaves(small);
  flush();
}

// The DoG planes are written by the blurs of pyramid() (sift_blur.cl): nothing left to launch.
void SiftStagesOpenCL::dog() {}

std::size_t SiftStagesOpenCL::extrema() {
  const detail::SiftPlan& p = *plan_;
  if (p.octaves == 0) return 0;
  const cl_mem dog = st_.buffer("sift.dog", p.dog_floats * sizeof(float));
  const cl_mem info = octave_table();
  const cl_mem counters = counter_buffer();
  // CPU devices take the row-run form (kernels/sift_extrema.cl), GPUs a work-item per column walking every
  // kExtremaRowsPerGroup-th row.
  constexpr std::size_t kRun = 64;  // SIFT_EXTREMA_RUN
  constexpr std::size_t kExtremaRowsPerGroup = 8;
  cl_kernel k = kernel(st_.is_cpu ? "sift_extrema_rows" : "sift_extrema");
  const std::size_t lx = st_.work_group_1d(k, st_.is_cpu ? 64 : 128);
  const std::size_t l[3] = {lx, 1, 1};
  // GPUs: an octave whose launch has fewer work-groups than this would leave most of the device idle for a
  // launch's latency; it and the smaller octaves after it go in one launch (sift_extrema loops over them).
  const std::size_t split = st_.extrema_split_groups ? st_.extrema_split_groups : 2 * st_.compute_units;
  for (int attempt = 0; attempt < 2; ++attempt) {
    const cl_mem cand = st_.buffer("sift.cand", candidate_capacity_ * sizeof(cl_int4));
    const cl_uint cap = cl_uint(candidate_capacity_);
    for (int o = 0; o < p.octaves; ++o) {
      const int w = int(octave_info_[4 * std::size_t(o)]), h = int(octave_info_[4 * std::size_t(o) + 1]);
      if (w <= 2 * p.border || h <= 2 * p.border) continue;
      const std::size_t cols = std::size_t(w - 2 * p.border), rows = std::size_t(h - 2 * p.border);
      const std::size_t g[3] = {round_up(st_.is_cpu ? (cols + kRun - 1) / kRun : cols, lx),
                                st_.is_cpu ? rows : std::min<std::size_t>((rows + kExtremaRowsPerGroup - 1) / kExtremaRowsPerGroup, 65535),
                                std::size_t(p.layers)};
      if (st_.is_cpu) {
        set_args(k, dog, info, o, p.border, p.prefilter_threshold, counters, cand, cap);
        launch(k, 3, g, l, kExtrema);
        continue;
      }
      const bool rest = g[0] / lx * g[1] * g[2] < split;  // this octave and the later (smaller) ones
      set_args(k, dog, info, o, rest ? p.octaves : o + 1, p.border, p.prefilter_threshold, counters, cand, cap);
      launch(k, 3, g, l, kExtrema);
      if (rest) break;
    }
    cl_uint count = 0;  // read-back 1: the candidate count
    SPECTRASIFT_CL_CHECK(clEnqueueReadBuffer(st_.queue, counters, CL_TRUE, 0, sizeof count, &count, 0, nullptr, nullptr));
    candidates_ = count;
    if (count <= candidate_capacity_) break;
    // More candidates than the buffer holds: grow it and search again.
    candidate_capacity_ = count;
    ++regrowths_;
    const cl_uint zero = 0;
    SPECTRASIFT_CL_CHECK(clEnqueueFillBuffer(st_.queue, counters, &zero, sizeof zero, 0, sizeof zero, 0, nullptr, nullptr));
  }
  // The later stages are sized from the count (keypoints_per_candidate_ orientation peaks per candidate; a run
  // with more grows them and runs those stages again in download()).
  keypoint_capacity_ = std::max<std::size_t>(1, std::size_t(std::ceil(double(candidates_) * keypoints_per_candidate_)));
  descriptor_capacity_ = keypoint_capacity_;
  return candidates_;
}

void SiftStagesOpenCL::refine() {
  const detail::SiftPlan& p = *plan_;
  if (candidates_ == 0) return;
  const cl_mem dog = st_.buffer("sift.dog", p.dog_floats * sizeof(float));
  const cl_mem info = octave_table();
  const cl_mem os = st_.buffer("sift.oscale", std::max<std::size_t>(p.octave_scale.size(), 1) * sizeof(float));
  const cl_mem counters = counter_buffer();
  const cl_mem cand = st_.buffer("sift.cand", candidate_capacity_ * sizeof(cl_int4));
  const cl_mem refined = st_.buffer("sift.refined", candidate_capacity_ * sizeof(SiftKeypoint));
  cl_kernel k = kernel("sift_refine");
  set_args(k, dog, info, os, cand, counters, cl_uint(candidate_capacity_), p.layers, p.border, p.first_octave,
           p.contrast_threshold, p.edge_threshold, p.sigma, p.output_scale, refined);
  launch_1d(k, candidates_, 64, kRefine);
}

}  // namespace spectrasift::opencl

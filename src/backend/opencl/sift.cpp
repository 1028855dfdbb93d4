// OpenCL SIFT (see sift.hpp): construction, memory checks, launches and the counters' read-back (the
// download sequence is core/sift_device_stages.cpp's). The upload / grey stage is in sift_upload.cpp; the
// pyramid, DoG, extrema and refinement launches in sift_pyramid.cpp; orientations, select and descriptors in
// sift_features.cpp; the features' read-back in sift_download.cpp.
#include "backend/opencl/sift.hpp"

#include <string>
#include <vector>

#include "numeric/sift_keypoint.h"
#include "spectrasift/error.hpp"

namespace spectrasift::opencl {

namespace {

constexpr const char* kProgram = "sift.cl";

std::string mib(std::size_t bytes) { return std::to_string((bytes + (1u << 20) - 1) >> 20) + " MiB"; }

std::string device_name(cl_device_id d) {
  std::size_t n = 0;
  clGetDeviceInfo(d, CL_DEVICE_NAME, 0, nullptr, &n);
  std::string s(n, '\0');
  clGetDeviceInfo(d, CL_DEVICE_NAME, n, s.data(), nullptr);
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}

}  // namespace

SiftStagesOpenCL::SiftStagesOpenCL(detail::ContextImpl& ctx) : SiftDeviceStages(ctx), st_(state(ctx)) {
  cl_device_fp_config single = 0, dbl = 0;
  SPECTRASIFT_CL_CHECK(clGetDeviceInfo(st_.device, CL_DEVICE_SINGLE_FP_CONFIG, sizeof single, &single, nullptr));
  clGetDeviceInfo(st_.device, CL_DEVICE_DOUBLE_FP_CONFIG, sizeof dbl, &dbl, nullptr);  // 0 without doubles
  fp64_ = dbl != 0;
  // Divisions and square roots rounded as on the host where the device can (the refinement, the atan2
  // polynomial and the descriptor's normalisation then give the CPU backend's bits).
  if (single & CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT) options_ = "-cl-fp32-correctly-rounded-divide-sqrt";
}

cl_kernel SiftStagesOpenCL::kernel(const char* name) { return st_.kernel(kProgram, name, options_); }

void SiftStagesOpenCL::launch(cl_kernel k, cl_uint dims, const std::size_t* global, const std::size_t* local,
                              Stage stage) {
  for (cl_uint d = 0; d < dims; ++d)
    if (global[d] == 0) return;
  Event ev;
  SPECTRASIFT_CL_CHECK(
      clEnqueueNDRangeKernel(st_.queue, k, dims, nullptr, global, local, 0, nullptr, profile_run_ ? &ev.ev : nullptr));
  if (profile_run_) events_.emplace_back(int(stage), std::move(ev));
}

void SiftStagesOpenCL::launch_1d(cl_kernel k, std::size_t items, std::size_t want_local, Stage stage) {
  const std::size_t l = st_.work_group_1d(k, want_local);
  const std::size_t g = round_up(items, l);
  launch(k, 1, &g, &l, stage);
}

void SiftStagesOpenCL::launch_2d(cl_kernel k, std::size_t x, std::size_t y, Stage stage) {
  // Rows of up to 64 work-items (fewer when the kernel allows fewer); the driver may not pick for us
  // because the global size is rounded up to the work-group shape.
  const std::size_t lx = st_.work_group_1d(k, 64);
  const std::size_t l[2] = {lx, 1};
  const std::size_t g[2] = {round_up(x, lx), y};
  launch(k, 2, g, l, stage);
}

void SiftStagesOpenCL::check_memory(const detail::SiftPlan& p, std::size_t input_bytes) const {
  const std::size_t in_plane = std::size_t(p.input_width) * std::size_t(p.input_height);
  const std::size_t kp_cap = keypoint_estimate(p);
  struct Need { const char* what; std::size_t bytes; };
  const Need needs[] = {
      {"the image upload", input_bytes},
      {"the grey image", in_plane * sizeof(float)},
      {"the Gaussian levels", p.gauss_floats * sizeof(float)},
      {"the DoG planes", p.dog_floats * sizeof(float)},
      {"the blur temporary", (p.octave_shape.empty() ? 0 : std::size_t(p.octave_shape[0].width) * std::size_t(p.octave_shape[0].height)) * sizeof(float)},
      {"the keypoint records", kp_cap * sizeof(SiftKeypoint)},
  };
  std::size_t total = 0;
  for (const Need& n : needs) {
    total += n.bytes;
    if (n.bytes > st_.max_alloc)
      throw Error(ErrorCode::kOutOfMemory,
                  "sift: a " + std::to_string(p.input_width) + " x " + std::to_string(p.input_height) + " image needs " +
                      mib(n.bytes) + " for " + n.what + " on the OpenCL device '" + device_name(st_.device) +
                      "', which allows at most " + mib(st_.max_alloc) + " per buffer (CL_DEVICE_MAX_MEM_ALLOC_SIZE)" +
                      (p.upsample ? "; upsample = false needs a quarter of it" : ""),
                  "opencl");
  }
  if (total > st_.global_mem)
    throw Error(ErrorCode::kOutOfMemory,
                "sift: a " + std::to_string(p.input_width) + " x " + std::to_string(p.input_height) + " image needs " +
                    mib(total) + " on the OpenCL device '" + device_name(st_.device) + "', which has " +
                    mib(st_.global_mem) + " of global memory",
                "opencl");
}

// Per-plan state: the octave table, the taps and the buffer sizes (again only when the plan changes).
void SiftStagesOpenCL::prepare(const detail::SiftPlan& p, const detail::SiftImageView& image) {
  const bool colour_needs_double = !image.grey_levels && image.channels >= 3 && image.type != PixelType::kU8;
  if ((colour_needs_double || p.root_sift) && !fp64_)
    throw Error(ErrorCode::kUnsupported,
                std::string("sift: ") + (p.root_sift ? "RootSIFT" : "16-bit and float colour images") +
                    " need double precision, which the OpenCL device '" + device_name(st_.device) +
                    "' does not have (no cl_khr_fp64); convert the image to grey or 8 bits first, or use the cpu "
                    "backend",
                "opencl");
  // Prepared for this plan, and the shared tables were not written since by another stages object.
  if (prepared_for(p) && st_.sift_tables_generation == tables_generation_) return;
  size_from_plan(p);
  const cl_mem info = octave_table();
  SPECTRASIFT_CL_CHECK(clEnqueueWriteBuffer(st_.queue, info, CL_TRUE, 0, octave_info_.size() * sizeof(cl_long),
                                            octave_info_.data(), 0, nullptr, nullptr));
  const std::vector<float> scales = octave_scales(p);
  const cl_mem os = st_.buffer("sift.oscale", scales.size() * sizeof(float));
  SPECTRASIFT_CL_CHECK(
      clEnqueueWriteBuffer(st_.queue, os, CL_TRUE, 0, scales.size() * sizeof(float), scales.data(), 0, nullptr, nullptr));
  const cl_mem taps = st_.buffer("sift.taps", p.taps.size() * sizeof(float));
  SPECTRASIFT_CL_CHECK(
      clEnqueueWriteBuffer(st_.queue, taps, CL_TRUE, 0, p.taps.size() * sizeof(float), p.taps.data(), 0, nullptr, nullptr));
  // Kernel i's (offset, radius) in the taps, for sift_blur_small_octaves.
  std::vector<cl_int> table;
  for (int i = 0; i < p.levels; ++i)
    table.insert(table.end(), {cl_int(p.tap_offset[std::size_t(i)]), cl_int(p.tap_radius[std::size_t(i)])});
  const cl_mem tt = st_.buffer("sift.tap_table", table.size() * sizeof(cl_int));
  SPECTRASIFT_CL_CHECK(
      clEnqueueWriteBuffer(st_.queue, tt, CL_TRUE, 0, table.size() * sizeof(cl_int), table.data(), 0, nullptr, nullptr));
  if (!st_.is_cpu) size_blur_tiles();  // CPU devices blur without tiles
  group_sizes();
  mark_prepared(p);
  tables_generation_ = ++st_.sift_tables_generation;
}

cl_mem SiftStagesOpenCL::levels() { return st_.buffer("sift.gauss", plan_->gauss_floats * sizeof(float)); }
cl_mem SiftStagesOpenCL::octave_table() { return st_.buffer("sift.info", octave_info_.size() * sizeof(cl_long)); }
cl_mem SiftStagesOpenCL::counter_buffer() { return st_.buffer("sift.counters", sizeof counters_); }

void SiftStagesOpenCL::read_counters() {
  SPECTRASIFT_CL_CHECK(clEnqueueReadBuffer(st_.queue, counter_buffer(), CL_TRUE, 0,
                                           sizeof counters_, counters_.data(), 0, nullptr, nullptr));
}

void SiftStagesOpenCL::finish_profile() {
  if (!profile_run_) return;
  SPECTRASIFT_CL_CHECK(clFinish(st_.queue));
  for (const auto& [stage, ev] : events_) stage_ms_[std::size_t(stage)] += ev.elapsed_ms();
  events_.clear();
  if (upload_first_.ev && staged_last_.ev) {  // a staged upload: from its first write's start to its last's end
    cl_ulong start = 0, end = 0;
    SPECTRASIFT_CL_CHECK(
        clGetEventProfilingInfo(upload_first_.ev, CL_PROFILING_COMMAND_START, sizeof start, &start, nullptr));
    SPECTRASIFT_CL_CHECK(clGetEventProfilingInfo(staged_last_.ev, CL_PROFILING_COMMAND_END, sizeof end, &end, nullptr));
    stage_ms_[kUpload] += double(end - start) * 1e-6;
  }
  upload_first_.reset();
  log_stage_times("opencl");
}

// The slots a run's feature stages fill: oriented, unique, kept and the one-work-group select's flag.
void SiftStagesOpenCL::clear_feature_counters() {
  static_assert(SIFT_COUNT_SELECT_SMALL == SIFT_COUNT_ORIENTED + 3, "the slots cleared are contiguous");
  const cl_uint zero = 0;
  SPECTRASIFT_CL_CHECK(clEnqueueFillBuffer(st_.queue, counter_buffer(), &zero, sizeof zero,
                                           SIFT_COUNT_ORIENTED * sizeof zero, 4 * sizeof zero, 0, nullptr, nullptr));
}

std::unique_ptr<detail::SiftStages> make_sift_stages(detail::ContextImpl& ctx) {
  return std::make_unique<SiftStagesOpenCL>(ctx);
}

std::unique_ptr<detail::SiftStages> State::make_sift_stages(detail::ContextImpl& ctx) {
  return opencl::make_sift_stages(ctx);
}

}  // namespace spectrasift::opencl

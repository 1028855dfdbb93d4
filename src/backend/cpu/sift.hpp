// CPU SIFT (OpenCV 4.6 compatible): the SIFT stages of core/sift_backend.hpp on the host.
//
// Fused stages, for memory: pyramid(), dog() and refine() do nothing; extrema() runs them, octave by octave:
// it builds the octave's Gaussian levels with the DoG planes fused into the blur (sift_pyramid.cpp), then
// scans the DoG planes for candidates and refines each one at once (sift_extrema.cpp). Only the levels
// 1..S of every octave (which orientations and descriptors read) outlive their octave; the DoG planes and
// levels 0, S + 1, S + 2 live while their octave is scanned. Memory for a W x H input (upsampled): about
// 11 planes of 4WH floats, instead of about 4/3 (2S + 5) for the whole pyramid and DoG.
// orientations(), select() and descriptors() are separate passes over the records.
//
// Threads (the calling thread's WorkPool, core/thread_pool.hpp): every pass runs over chunks (rows, (layer, row) pairs or
// records) and each chunk writes only its own outputs; the records of each chunk are kept apart and joined in
// chunk order, so every intermediate list is in the same order for any thread count.
//
// ISA: the hot loops are called through the SiftKernels picked in upload() (sift_kernels.hpp): AVX2 or
// baseline builds, same bits.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "backend/cpu/sift_kernels.hpp"
#include "core/sift_backend.hpp"
#include "core/thread_pool.hpp"
#include "numeric/sift_keypoint.h"

namespace spectrasift::cpu {

/// A float image with its own buffer, reused when a later image of at most the same size comes.
struct SiftPlane {
  int w = 0;
  int h = 0;
  std::size_t capacity = 0;
  std::unique_ptr<float[]> buffer;  // uninitialised on purpose: every pixel is written before it is read

  void resize(int width, int height);
  float* row(int y) noexcept { return buffer.get() + std::size_t(y) * std::size_t(w); }
  const float* row(int y) const noexcept { return buffer.get() + std::size_t(y) * std::size_t(w); }
};

/// The select stage on a list of oriented records (numeric/sift_select.h's rules: duplicates, the cap of
/// max_features (0: none), the mask when given, the canonical order), in place: SiftStagesCpu::select's work,
/// and the reference the device paths are tested against.
void select_records(std::vector<SiftKeypoint>& records, int max_features, const Image* mask);

class SiftStagesCpu final : public detail::SiftStages {
 public:
  explicit SiftStagesCpu(detail::ContextImpl& ctx) : ctx_(ctx) {}

  void upload(const detail::SiftPlan& plan, const detail::SiftImageView& image) override;
  void pyramid() override {}  // fused into extrema() (see the file comment)
  void dog() override {}      // fused into extrema()
  std::size_t extrema() override;
  void refine() override {}   // fused into extrema()
  void orientations() override;
  void select(const Image* mask) override;
  void descriptors() override;
  void download(Features& out, detail::SiftCounts& counts) override;

  // ---- read access for tests (valid after the stage that fills them) ----
  /// Gaussian level `layer` (1..S) of pyramid index `octave_index` (after extrema()).
  const SiftPlane& gauss(int octave_index, int layer) const {
    return gauss_[std::size_t(octave_index)][std::size_t(layer - 1)];
  }
  /// The refined records (after extrema()) or the keypoint records (after orientations(), select()).
  const std::vector<SiftKeypoint>& refined() const noexcept { return refined_; }
  const std::vector<SiftKeypoint>& keypoints() const noexcept { return keypoints_; }
  const std::vector<float>& descriptor_values() const noexcept { return descriptors_; }
  /// The ISA level of the kernels picked by the last upload().
  CpuIsa kernel_isa() const noexcept { return kernels_.isa; }

 private:
  void build_octave_base(int octave, WorkPool& pool);    // sift_pyramid.cpp
  void build_octave_levels(int octave, WorkPool& pool);  // sift_pyramid.cpp
  void scan_octave(int octave, WorkPool& pool);          // sift_extrema.cpp
  WorkPool& pool();  // the calling thread's pool with the context's thread count

  detail::ContextImpl& ctx_;
  const detail::SiftPlan* plan_ = nullptr;
  SiftKernels kernels_ = pick_sift_kernels();   // re-picked by upload() (the test cap may have changed)
  const float* grey_ = nullptr;                 // the grey input: the caller's buffer or converted_
  std::vector<float> converted_;                // the grey conversion of a non-grey input
  std::vector<std::vector<SiftPlane>> gauss_;   // [octave][layer - 1], layers 1..S
  std::vector<SiftPlane> dog_;                  // S + 2 planes, the DoG of the octave being scanned
  SiftPlane base_;                              // level 0 of the octave being built
  SiftPlane upper_;                             // level S + 1 of the octave being built
  std::vector<std::vector<SiftKeypoint>> chunk_out_;  // per-chunk records of one pass, joined in chunk order
  std::vector<std::size_t> chunk_candidates_;          // per-chunk candidate counts of one octave
  std::vector<SiftKeypoint> refined_;           // after extrema(): refined points, angle 0
  std::vector<SiftKeypoint> keypoints_;         // after orientations(): one per peak; select() filters them
  std::vector<float> descriptors_;              // after descriptors(): 128 per keypoint
  detail::SiftCounts counts_;
};

}  // namespace spectrasift::cpu

// CPU SIFT orientation stage (notes §7): the 36-bin histogram of every refined point on the Gaussian level of
// its layer, at its integer position, and one keypoint record per peak (numeric/sift_orientation.h). Each
// bin is summed in sample order, the determinism rule that the device kernels follow too.
// The per-sample loop is sift_kernels.inc's orientation_row.

#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/sift.hpp"
#include "numeric/sift_orientation.h"

namespace spectrasift::cpu {

namespace {

// Per-thread scratch of an orientation window.
struct Scratch {
  std::vector<float> ex, wrow, mag2;
  std::vector<int> bin;
};

// Smoothed 36-bin orientation histogram around integer (c, r) of img; returns its maximum.
float orientation_histogram(const SiftKernels& kern, const SiftPlane& img, int c, int r, int radius, float sigma,
                            float* hist, Scratch& s) {
  const float scale = sift_orientation_window_scale(sigma);
  const std::size_t side = std::size_t(2 * radius + 1);
  if (s.wrow.size() < side) {
    s.wrow.resize(side);
    s.mag2.resize(side);
    s.bin.resize(side);
  }
  // exp(-(i^2 + j^2) / (2 s^2)) = w(i) w(j): 2 radius + 1 exponentials instead of (2 radius + 1)^2.
  s.ex.resize(side);
  for (int i = -radius; i <= radius; ++i) s.ex[std::size_t(i + radius)] = sift_window_weight(i, scale);
  const int x_lo = std::max(c - radius, 1), x_hi = std::min(c + radius, img.w - 2);
  const int n = x_hi - x_lo + 1;
  float raw[SIFT_ORI_HIST_BINS] = {};
  if (n > 0) {
    for (int i = -radius; i <= radius; ++i) {
      const int y = r + i;
      if (y <= 0 || y >= img.h - 1) continue;
      const float wi = s.ex[std::size_t(i + radius)];
      for (int t = 0; t < n; ++t) s.wrow[std::size_t(t)] = wi * s.ex[std::size_t(x_lo + t - c + radius)];
      kern.orientation_row(img.row(y - 1), img.row(y), img.row(y + 1), x_lo, n, s.wrow.data(), s.bin.data(),
                      s.mag2.data(), raw);
    }
  }
  return sift_orientation_smooth(raw, hist);
}

}  // namespace

void SiftStagesCpu::orientations() {
  const int count = int(refined_.size());
  const int chunk = 32;
  const int chunks = (count + chunk - 1) / chunk;
  if (chunk_out_.size() < std::size_t(chunks)) chunk_out_.resize(std::size_t(chunks));
  pool().run(count, chunk, [&](int i0, int i1, int) {
    auto& out = chunk_out_[std::size_t(i0 / chunk)];
    out.clear();
    thread_local Scratch scratch;
    float hist[SIFT_ORI_HIST_BINS];
    for (int i = i0; i < i1; ++i) {
      SiftKeypoint kp = refined_[std::size_t(i)];
      const float scl_octv = kp.sigma_octave;
      const float omax = orientation_histogram(kernels_, gauss(kp.octave_index, kp.layer), kp.c, kp.r,
                                               sift_round(SIFT_ORI_RADIUS * scl_octv), SIFT_ORI_SIG_FCTR * scl_octv,
                                               hist, scratch);
      const float mag_thr = omax * SIFT_ORI_PEAK_RATIO;
      for (int j = 0; j < SIFT_ORI_HIST_BINS; ++j) {
        if (!sift_orientation_is_peak(hist, j, mag_thr)) continue;
        kp.angle = sift_orientation_peak_angle(hist, j);
        out.push_back(kp);
      }
    }
  });
  keypoints_.clear();
  for (int k = 0; k < chunks; ++k)
    keypoints_.insert(keypoints_.end(), chunk_out_[std::size_t(k)].begin(), chunk_out_[std::size_t(k)].end());
  counts_.oriented = keypoints_.size();
}

}  // namespace spectrasift::cpu

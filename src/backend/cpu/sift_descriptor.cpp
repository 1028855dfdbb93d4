// CPU SIFT descriptor stage (notes §8): the 4 x 4 x 8 descriptor of every selected keypoint on the Gaussian
// level of its layer (numeric/sift_descriptor.h), each accumulator entry summed in sample order (the
// determinism rule that the device kernels follow too), then RootSIFT when the plan asks for it.
// The per-sample loops are sift_kernels.inc's descriptor_row and descriptor_accumulate_row.

#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/sift.hpp"
#include "numeric/sift_descriptor.h"
#include "spectrasift/error.hpp"

namespace spectrasift::cpu {

namespace {

// Per-thread scratch of a descriptor window.
struct Scratch {
  std::vector<float> a, b, c, d, ex;
  std::vector<int> bin;
  void reserve(std::size_t n) {
    if (a.size() >= n) return;
    a.resize(n); b.resize(n); c.resize(n); d.resize(n); bin.resize(n);
  }
};

}  // namespace

void SiftStagesCpu::descriptors() {
  const int count = int(keypoints_.size());
  const int d = SIFT_DESCR_WIDTH, nb = SIFT_DESCR_HIST_BINS;
  const bool root_sift = plan_->root_sift;
  descriptors_.resize(keypoints_.size() * Features::kDescriptorSize);
  pool().run(count, 8, [&](int idx0, int idx1, int) {
    thread_local Scratch s;
    float hist[SIFT_DESCR_HIST_LEN];
    for (int idx = idx0; idx < idx1; ++idx) {
      const SiftKeypoint& kp = keypoints_[std::size_t(idx)];
      const int oct = kp.octave;
      const float scale = oct >= 0 ? 1.0f / float(1 << oct) : float(1 << -oct);
      const float size = kp.size * scale;
      const float ptx = kp.x * scale, pty = kp.y * scale;
      const SiftPlane& img = gauss(kp.octave_index, kp.layer);
      float ori = 360.0f - kp.angle;
      if (std::abs(ori - 360.0f) < SIFT_FLT_EPSILON) ori = 0.0f;
      const float scl = size * 0.5f;
      // Sample grid (notes §8), with OpenCV's float operation order.
      const int cx = sift_round(ptx), cy = sift_round(pty);
      float cos_t = std::cos(ori * float(M_PI / 180.0));
      float sin_t = std::sin(ori * float(M_PI / 180.0));
      const float bins_per_deg = float(nb) / 360.0f;
      const float exp_scale = -1.0f / (float(d * d) * 0.5f);
      const float hist_width = SIFT_DESCR_SCL_FCTR * scl;
      int radius = sift_round(hist_width * 1.4142135623730951f * float(d + 1) * 0.5f);
      radius = std::min(radius, int(std::sqrt(double(img.w) * img.w + double(img.h) * img.h)));
      cos_t /= hist_width;
      sin_t /= hist_width;
      const std::size_t side = std::size_t(2 * radius + 1);
      s.reserve(side);
      // exp(-(u^2 + v^2) / 8) with u^2 + v^2 = (i^2 + j^2) / hw^2: separable in i and j.
      s.ex.resize(side);
      const float inv_hw2 = 1.0f / (hist_width * hist_width);
      for (int i = -radius; i <= radius; ++i)
        s.ex[std::size_t(i + radius)] = std::exp(float(i * i) * inv_hw2 * exp_scale);
      std::fill(hist, hist + SIFT_DESCR_HIST_LEN, 0.0f);
      auto inside = [&](int j, float fi) {
        const float fj = float(j);
        const float rbin = fj * sin_t + fi * cos_t + 2.0f - 0.5f;
        const float cbin = fj * cos_t - fi * sin_t + 2.0f - 0.5f;
        return rbin > -1 && rbin < d && cbin > -1 && cbin < d;
      };
      for (int i = -radius; i <= radius; ++i) {
        const int y = cy + i;
        if (y <= 0 || y >= img.h - 1) continue;
        const float fi = float(i);
        // rbin and cbin are monotone in j (a float product by a constant is monotone), so the samples
        // of this row inside the grid form one run [j_lo, j_hi]: find its ends with the exact test.
        // An estimate in double from the linear bounds, then corrected with the exact float test, so the
        // row costs a few tests instead of O(radius).
        const int lim_lo = std::max(-radius, 1 - cx), lim_hi = std::min(radius, img.w - 2 - cx);
        double lo = lim_lo, hi = lim_hi;
        const double s_ = sin_t, c_ = cos_t, di = fi;
        // -2.5 < j s + i c < 2.5 (rows of cells) and -2.5 < j c - i s < 2.5 (columns of cells)
        if (s_ > 0) { lo = std::max(lo, (-2.5 - di * c_) / s_); hi = std::min(hi, (2.5 - di * c_) / s_); }
        if (s_ < 0) { lo = std::max(lo, (2.5 - di * c_) / s_); hi = std::min(hi, (-2.5 - di * c_) / s_); }
        if (c_ > 0) { lo = std::max(lo, (-2.5 + di * s_) / c_); hi = std::min(hi, (2.5 + di * s_) / c_); }
        if (c_ < 0) { lo = std::max(lo, (2.5 + di * s_) / c_); hi = std::min(hi, (-2.5 + di * s_) / c_); }
        // The exact first and last samples lie within a step of the estimates (the float bins differ from
        // the real ones by far less than a column step): search two steps around them.
        const int g_lo = int(std::floor(std::clamp(lo, double(lim_lo - 3), double(lim_hi + 3)))) + 1;
        const int g_hi = int(std::ceil(std::clamp(hi, double(lim_lo - 3), double(lim_hi + 3)))) - 1;
        int j_lo = std::max(g_lo - 2, lim_lo);
        const int j_lo_end = std::min(g_lo + 2, lim_hi);
        while (j_lo <= j_lo_end && !inside(j_lo, fi)) ++j_lo;
        if (j_lo > j_lo_end) continue;  // no sample of this row is inside the grid
        int j_hi = std::min(g_hi + 2, lim_hi);
        while (j_hi > j_lo && !inside(j_hi, fi)) --j_hi;
        if (j_lo > j_hi) continue;
        const int n = j_hi - j_lo + 1;
        kernels_.descriptor_row(img.row(y - 1), img.row(y), img.row(y + 1), cx, j_lo, n, fi, cos_t, sin_t, ori, bins_per_deg,
                       s.bin.data(), s.a.data(), s.b.data(), s.c.data(), s.d.data());
        kernels_.descriptor_accumulate_row(hist, s.bin.data(), s.a.data(), s.b.data(), s.c.data(), s.d.data(),
                                  s.ex[std::size_t(i + radius)], s.ex.data() + (j_lo + radius), n);
      }
      float* row = descriptors_.data() + std::size_t(idx) * Features::kDescriptorSize;
      sift_descriptor_finalize(hist, row);
      if (root_sift) sift_descriptor_root(row);
    }
  });
}

}  // namespace spectrasift::cpu

// CPU SIFT scale space: the doubled (or plain) base image, incremental Gaussian blurs with fused
// difference of Gaussians, and nearest-even downsampling between octaves (notes §2-3).
//
// Blur: separable, rows computed independently (chunks of rows on the WorkPool). For one output
// row the vertical pass sums the 2R+1 source rows into a padded temporary row (one contiguous
// multiply-add per tap pair, which g++ vectorises at -O3), the padding is filled by BORDER_REFLECT_101,
// and the horizontal pass folds the symmetric tap pairs the same way (the passes are in sift_kernels.inc).
// Each output value is computed by the same sequence of float operations whatever the vector width, so
// results do not depend on the ISA build or the thread count.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/sift.hpp"

namespace spectrasift::cpu {

void SiftPlane::resize(int width, int height) {
  w = width;
  h = height;
  const std::size_t n = std::size_t(width) * std::size_t(height);
  if (n > capacity) {
    buffer.reset(new float[n]);
    capacity = n;
  }
}

namespace {

// Index of position p in a line of len samples under BORDER_REFLECT_101 (…c b | a b c…), reflecting as
// often as needed for lines shorter than the kernel.
int reflect101(int p, int len) noexcept {
  if (len == 1) return 0;
  while (p < 0 || p >= len) p = p < 0 ? -p : 2 * len - 2 - p;
  return p;
}

// Rows per work chunk: planes of up to 64k pixels are one chunk (run by the calling thread alone: waking a
// worker costs more than it saves); larger ones give each thread about 8 chunks.
int rows_per_chunk(int w, int h, const WorkPool& pool) {
  if (long(w) * long(h) <= (1L << 16)) return std::max(h, 1);
  return std::max(1, h / (8 * pool.size()));
}

// Blurs src (w x h, stride w) with the half kernel k[0..r]. dst receives the blurred image when not null;
// dog receives blurred - src when not null.
void blur(const SiftKernels& kern, const float* src, int w, int h, const float* k, int r, float* dst, float* dog,
          WorkPool& pool) {
  pool.run(h, rows_per_chunk(w, h, pool), [&](int y0, int y1, int) {
    thread_local std::vector<float> tmp, out_row;
    thread_local std::vector<const float*> rows;
    tmp.resize(std::size_t(w + 2 * r));
    if (!dst) out_row.resize(std::size_t(w));
    rows.resize(std::size_t(2 * r + 2));
    for (int y = y0; y < y1; ++y) {
      for (int i = 1; i <= r; ++i) {
        rows[std::size_t(2 * i - 2)] = src + std::size_t(reflect101(y - i, h)) * w;
        rows[std::size_t(2 * i - 1)] = src + std::size_t(reflect101(y + i, h)) * w;
      }
      float* t = tmp.data() + r;
      const float* center = src + std::size_t(y) * w;
      kern.vertical_pass(t, center, rows.data(), k, r, w);
      for (int i = 1; i <= r; ++i) {
        t[-i] = t[reflect101(-i, w)];
        t[w - 1 + i] = t[reflect101(w - 1 + i, w)];
      }
      float* out = dst ? dst + std::size_t(y) * w : out_row.data();
      kern.horizontal_pass(out, t, k, r, w);
      if (dog) kern.subtract_row(dog + std::size_t(y) * w, out, center, w);
    }
  });
}

// One input row upsampled x2 with half-pixel bilinear weights (0.25, 0.75), edges replicated.
void upsample_row(const float* in, int w, float* out) {
  out[0] = in[0];
  for (int k = 1; k < w; ++k) out[2 * k] = in[k - 1] * 0.25f + in[k] * 0.75f;
  for (int k = 0; k + 1 < w; ++k) out[2 * k + 1] = in[k] * 0.75f + in[k + 1] * 0.25f;
  out[2 * w - 1] = in[w - 1];
}

// The input doubled in both directions: output pixel X samples input (X + 0.5) / 2 - 0.5 (OpenCV's
// INTER_LINEAR with half-pixel centres); this puts doubled pixel 2k at input k - 0.25 (notes §10).
void upsample(const SiftKernels& kern, const float* in, int w, int h, SiftPlane& out, WorkPool& pool) {
  const int w2 = 2 * w, h2 = 2 * h;
  out.resize(w2, h2);
  pool.run(h2, rows_per_chunk(w2, h2, pool), [&](int y0, int y1, int) {
    thread_local std::vector<float> ra, rb;
    ra.resize(std::size_t(w2));
    rb.resize(std::size_t(w2));
    for (int y = y0; y < y1; ++y) {
      const int k = y / 2;
      float* o = out.row(y);
      if (y == 0 || y == h2 - 1) {
        upsample_row(in + std::size_t(k) * w, w, o);
        continue;
      }
      // even rows 2k: 0.25 row k-1 + 0.75 row k; odd rows 2k+1: 0.75 row k + 0.25 row k+1
      const int ya = (y % 2 == 0) ? k - 1 : k;
      const float wa = (y % 2 == 0) ? 0.25f : 0.75f;
      upsample_row(in + std::size_t(ya) * w, w, ra.data());
      upsample_row(in + std::size_t(ya + 1) * w, w, rb.data());
      kern.blend_rows(o, ra.data(), wa, rb.data(), 1.0f - wa, w2);
    }
  });
}

}  // namespace

void SiftStagesCpu::build_octave_base(int octave, WorkPool& pool) {
  const detail::SiftPlan& p = *plan_;
  if (octave > 0) {
    // Level 0 of octave o+1 = the even pixels of level S of octave o.
    const SiftPlane& src = gauss_[std::size_t(octave - 1)][std::size_t(p.layers - 1)];
    base_.resize(src.w / 2, src.h / 2);
    pool.run(base_.h, rows_per_chunk(base_.w, base_.h, pool), [&](int y0, int y1, int) {
      for (int y = y0; y < y1; ++y) {
        const float* in = src.row(2 * y);
        float* out = base_.row(y);
        for (int x = 0; x < base_.w; ++x) out[x] = in[2 * x];
      }
    });
    return;
  }
  // Kernel 0 takes the input, assumed blurred by 0.5 px already (1 px once doubled), to sigma.
  const int w = p.input_width, h = p.input_height;
  if (p.upsample) {
    upsample(kernels_, grey_, w, h, dog_[0], pool);
    base_.resize(dog_[0].w, dog_[0].h);
    blur(kernels_, dog_[0].buffer.get(), dog_[0].w, dog_[0].h, p.kernel(0), p.tap_radius[0], base_.buffer.get(),
         nullptr, pool);
  } else {
    base_.resize(w, h);
    blur(kernels_, grey_, w, h, p.kernel(0), p.tap_radius[0], base_.buffer.get(), nullptr, pool);
  }
}

void SiftStagesCpu::build_octave_levels(int octave, WorkPool& pool) {
  const detail::SiftPlan& p = *plan_;
  const int s = p.layers;
  const int w = base_.w, h = base_.h;
  auto& g = gauss_[std::size_t(octave)];
  for (auto& plane : g) plane.resize(w, h);
  upper_.resize(w, h);
  for (auto& d : dog_) d.resize(w, h);
  // level i (1..S+2) = blur(level i-1, kernel i); DoG i-1 = level i - level i-1.
  for (int i = 1; i <= s + 2; ++i) {
    const float* src = i == 1 ? base_.buffer.get()
                       : i - 1 <= s ? g[std::size_t(i - 2)].buffer.get()
                                    : upper_.buffer.get();
    float* dst = i <= s ? g[std::size_t(i - 1)].buffer.get() : i == s + 1 ? upper_.buffer.get() : nullptr;
    blur(kernels_, src, w, h, p.kernel(i), p.tap_radius[std::size_t(i)], dst, dog_[std::size_t(i - 1)].buffer.get(),
         pool);
  }
}

}  // namespace spectrasift::cpu

// CPU SIFT scale space: the doubled (or plain) base image, incremental Gaussian blurs with fused
// difference of Gaussians, and nearest-even downsampling between octaves (notes §2-3).
//
// Blur: separable, rows computed independently (chunks of rows on the SiftThreadPool). For one output
// row the vertical pass sums the 2R+1 source rows into a padded temporary row (one contiguous
// multiply-add per tap pair, which g++ vectorises at -O3), the padding is filled by BORDER_REFLECT_101,
// and the horizontal pass folds the symmetric tap pairs the same way. Each output value is computed by the same sequence of float
// operations whatever the vector width, so results do not depend on the ISA clone or the thread count.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/sift.hpp"
#include "backend/cpu/sift_isa.hpp"

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

// Both passes work on blocks of kBlock columns held in a local accumulator, so that the compiler knows
// that the output does not alias the inputs and vectorises the tap loop.
constexpr int kBlock = 256;

// out[x] = k0 * c[x] + sum_i k_i * (rows[2i-2][x] + rows[2i-1][x]); rows holds the pairs (y - i, y + i).
SIFT_CLONES SIFT_NO_JAM void vertical_pass(float* out, const float* c, const float* const* rows, const float* k, int r,
                                           int w) {
  float acc[kBlock];
  const float k0 = k[0];
  for (int x0 = 0; x0 < w; x0 += kBlock) {
    const int n = std::min(kBlock, w - x0);
    for (int x = 0; x < n; ++x) acc[x] = k0 * c[x0 + x];
    int i = 1;
    // Two taps per sweep (the same left-to-right summation as one tap at a time). Written out because
    // g++'s own unroll-and-jam of this loop pair produces scalar code.
    for (; i + 1 <= r; i += 2) {
      const float* a = rows[2 * i - 2] + x0;
      const float* b = rows[2 * i - 1] + x0;
      const float* a2 = rows[2 * i] + x0;
      const float* b2 = rows[2 * i + 1] + x0;
      const float ki = k[i], ki2 = k[i + 1];
      for (int x = 0; x < n; ++x) acc[x] = (acc[x] + ki * (a[x] + b[x])) + ki2 * (a2[x] + b2[x]);
    }
    for (; i <= r; ++i) {
      const float* a = rows[2 * i - 2] + x0;
      const float* b = rows[2 * i - 1] + x0;
      const float ki = k[i];
      for (int x = 0; x < n; ++x) acc[x] += ki * (a[x] + b[x]);
    }
    for (int x = 0; x < n; ++x) out[x0 + x] = acc[x];
  }
}

// out[x] = k0 * t[x] + sum_i k_i * (t[x - i] + t[x + i]); t is padded by r on both sides.
SIFT_CLONES SIFT_NO_JAM void horizontal_pass(float* out, const float* t, const float* k, int r, int w) {
  float acc[kBlock];
  const float k0 = k[0];
  for (int x0 = 0; x0 < w; x0 += kBlock) {
    const int n = std::min(kBlock, w - x0);
    const float* tb = t + x0;
    for (int x = 0; x < n; ++x) acc[x] = k0 * tb[x];
    int i = 1;
    for (; i + 1 <= r; i += 2) {
      const float* a = tb - i;
      const float* b = tb + i;
      const float* a2 = tb - i - 1;
      const float* b2 = tb + i + 1;
      const float ki = k[i], ki2 = k[i + 1];
      for (int x = 0; x < n; ++x) acc[x] = (acc[x] + ki * (a[x] + b[x])) + ki2 * (a2[x] + b2[x]);
    }
    for (; i <= r; ++i) {
      const float* a = tb - i;
      const float* b = tb + i;
      const float ki = k[i];
      for (int x = 0; x < n; ++x) acc[x] += ki * (a[x] + b[x]);
    }
    for (int x = 0; x < n; ++x) out[x0 + x] = acc[x];
  }
}

SIFT_CLONES void subtract_row(float* __restrict d, const float* __restrict a, const float* __restrict b, int w) {
  for (int x = 0; x < w; ++x) d[x] = a[x] - b[x];
}

// Rows per work chunk: planes of up to 64k pixels are one chunk (run by the calling thread alone: waking a
// worker costs more than it saves); larger ones give each thread about 8 chunks.
int rows_per_chunk(int w, int h, const SiftThreadPool& pool) {
  if (long(w) * long(h) <= (1L << 16)) return std::max(h, 1);
  return std::max(1, h / (8 * pool.size()));
}

// Blurs src (w x h, stride w) with the half kernel k[0..r]. dst receives the blurred image when not null;
// dog receives blurred - src when not null.
void blur(const float* src, int w, int h, const float* k, int r, float* dst, float* dog, SiftThreadPool& pool) {
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
      vertical_pass(t, center, rows.data(), k, r, w);
      for (int i = 1; i <= r; ++i) {
        t[-i] = t[reflect101(-i, w)];
        t[w - 1 + i] = t[reflect101(w - 1 + i, w)];
      }
      float* out = dst ? dst + std::size_t(y) * w : out_row.data();
      horizontal_pass(out, t, k, r, w);
      if (dog) subtract_row(dog + std::size_t(y) * w, out, center, w);
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

SIFT_CLONES void blend_rows(float* __restrict out, const float* __restrict a, float wa, const float* __restrict b,
                            float wb, int w) {
  for (int x = 0; x < w; ++x) out[x] = a[x] * wa + b[x] * wb;
}

// The input doubled in both directions: output pixel X samples input (X + 0.5) / 2 - 0.5 (OpenCV's
// INTER_LINEAR with half-pixel centres); this puts doubled pixel 2k at input k - 0.25 (notes §10).
void upsample(const float* in, int w, int h, SiftPlane& out, SiftThreadPool& pool) {
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
      blend_rows(o, ra.data(), wa, rb.data(), 1.0f - wa, w2);
    }
  });
}

}  // namespace

void SiftStagesCpu::build_octave_base(int octave, SiftThreadPool& pool) {
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
    upsample(grey_, w, h, dog_[0], pool);
    base_.resize(dog_[0].w, dog_[0].h);
    blur(dog_[0].buffer.get(), dog_[0].w, dog_[0].h, p.kernel(0), p.tap_radius[0], base_.buffer.get(), nullptr, pool);
  } else {
    base_.resize(w, h);
    blur(grey_, w, h, p.kernel(0), p.tap_radius[0], base_.buffer.get(), nullptr, pool);
  }
}

void SiftStagesCpu::build_octave_levels(int octave, SiftThreadPool& pool) {
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
    blur(src, w, h, p.kernel(i), p.tap_radius[std::size_t(i)], dst, dog_[std::size_t(i - 1)].buffer.get(), pool);
  }
}

}  // namespace spectrasift::cpu

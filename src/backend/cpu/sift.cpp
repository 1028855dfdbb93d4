// CPU SIFT: extrema scan, sub-pixel refinement, orientation and descriptors (notes §4-8). The per-element
// formulas come from src/numeric/sift_*.h so that the GPU backends compute the same numbers.
//
// Threads (SiftThreadPool, see sift_parallel.hpp): the scan runs over chunks of (layer, row) pairs and
// collects keypoints in per-thread lists; descriptors run over chunks of keypoints, each writing its own
// row. Every keypoint is computed from the pyramid alone, so the set of results does not depend on the
// thread count or scheduling; the caller sorts it into the canonical order.
//
// Let g++ if-convert and vectorise the per-sample loops (the selects of the polynomial atan2): with
// no-trapping-math a select may compute both arms. It changes no result; fast-math stays off. Set for
// the whole file (before any include) so that every inline function here is compiled with the same
// options and can be inlined into the loops. (sqrt stays in the scalar loops: with math-errno, which a
// pragma cannot turn off for the builtin, g++ does not vectorise it.)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif

#include <algorithm>
#include <any>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "backend/cpu/sift.hpp"
#include "numeric/sift_descriptor.h"
#include "numeric/sift_orientation.h"
#include "numeric/sift_refine.h"
#include "spectrasift/error.hpp"

// Not under ThreadSanitizer: the ifunc resolver of target_clones is instrumented and runs during
// relocation, before the TSan runtime is up (every program crashed at start in the tsan build).
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) && !defined(__SANITIZE_THREAD__)
#define SIFT_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define SIFT_CLONES
#endif

namespace spectrasift::cpu {

namespace {

// Stage 1 of the extremum test: flags[c] = 1 where the DoG value v = c1[c] passes |v| > thr and is
// >= (v > 0) or <= (v < 0) its 8 neighbours in its own layer (vectorised); c0, c1, c2 are rows r-1, r, r+1.
SIFT_CLONES void extrema_flags(const float* __restrict c0, const float* __restrict c1, const float* __restrict c2,
                               int begin, int end, float thr, std::uint8_t* __restrict flags) {
  for (int c = begin; c < end; ++c) {
    const float v = c1[c];
    float mx = c1[c - 1], mn = c1[c - 1];
#define SIFT_UPD(a)             \
  {                             \
    const float t_ = (a);       \
    mx = mx > t_ ? mx : t_;     \
    mn = mn < t_ ? mn : t_;     \
  }
    SIFT_UPD(c1[c + 1]) SIFT_UPD(c0[c - 1]) SIFT_UPD(c0[c]) SIFT_UPD(c0[c + 1])
    SIFT_UPD(c2[c - 1]) SIFT_UPD(c2[c]) SIFT_UPD(c2[c + 1])
#undef SIFT_UPD
    flags[c] = std::uint8_t(int((v > thr) & (v >= mx)) | int((v < -thr) & (v <= mn)));
  }
}

// Stage 2 for a flagged value: the 18 neighbours in the layers below and above (non-strict, as OpenCV).
bool extremum_across_layers(const SiftPlane& prv, const SiftPlane& nxt, int r, int c, float v) {
  for (const SiftPlane* p : {&prv, &nxt}) {
    for (int dy = -1; dy <= 1; ++dy) {
      const float* row = p->row(r + dy);
      for (int dx = -1; dx <= 1; ++dx) {
        const float t = row[c + dx];
        if (v > 0 ? v < t : v > t) return false;
      }
    }
  }
  return true;
}

// One row of an orientation window, x = x0 .. x0 + n - 1: histogram bin and squared magnitude of the
// gradient (vectorised), then the weighted magnitudes added to raw[36] in order (scalar).
SIFT_CLONES void orientation_row(const float* __restrict up, const float* __restrict mid, const float* __restrict dn,
                                 int x0, int n, const float* __restrict wrow, int* __restrict bin,
                                 float* __restrict mag2, float* __restrict raw) {
  for (int t = 0; t < n; ++t) {
    const int x = x0 + t;
    const float dx = mid[x + 1] - mid[x - 1];
    const float dy = up[x] - dn[x];
    bin[t] = sift_orientation_bin(sift_atan2_deg(dy, dx));
    mag2[t] = dx * dx + dy * dy;
  }
  for (int t = 0; t < n; ++t) raw[bin[t]] += wrow[t] * std::sqrt(mag2[t]);
}

// One row i of a descriptor window, for the columns j = j0 .. j0 + n - 1 that are all inside the
// grid (vectorised): accumulator index of the integer bins and the fractions, with OpenCV's float
// operation order, and the squared gradient magnitude.
SIFT_CLONES void descriptor_row(const float* __restrict up, const float* __restrict mid, const float* __restrict dn,
                                int cx, int j0, int n, float fi, float cos_t, float sin_t, float ori_kp,
                                float bins_per_deg, int* __restrict ibin, float* __restrict rf, float* __restrict cf,
                                float* __restrict of, float* __restrict mag2) {
  const int nb = SIFT_DESCR_HIST_BINS;
  for (int t = 0; t < n; ++t) {
    const int j = j0 + t;
    const int x = cx + j;
    const float fj = float(j);
    const float c_rot = fj * cos_t - fi * sin_t;
    const float r_rot = fj * sin_t + fi * cos_t;
    const float dx = mid[x + 1] - mid[x - 1];
    const float dy = up[x] - dn[x];
    float f0, f1, f2;
    const int r0 = sift_descriptor_split(r_rot + 2.0f - 0.5f, &f0);
    const int c0 = sift_descriptor_split(c_rot + 2.0f - 0.5f, &f1);
    int o0 = sift_descriptor_split((sift_atan2_deg(dy, dx) - ori_kp) * bins_per_deg, &f2);
    o0 = o0 < 0 ? o0 + nb : o0;
    o0 = o0 >= nb ? o0 - nb : o0;
    rf[t] = f0;
    cf[t] = f1;
    of[t] = f2;
    ibin[t] = ((r0 + 1) * (SIFT_DESCR_WIDTH + 2) + c0 + 1) * (nb + 2) + o0;  // as in sift_descriptor_accumulate_at
    mag2[t] = dx * dx + dy * dy;
  }
}

// Trilinear accumulation of n samples (weights wi * wj[t]) into the descriptor histogram, in sample
// order (scalar: the 8 targets of a sample may be shared with the next one). The arithmetic is that of
// sift_descriptor_accumulate_at with the index precomputed.
SIFT_CLONES void descriptor_accumulate_row(float* hist, const int* ibin, const float* rf, const float* cf,
                                           const float* of, const float* mag2, float wi, const float* wj, int n) {
  const int d = SIFT_DESCR_WIDTH, nb = SIFT_DESCR_HIST_BINS;
  for (int t = 0; t < n; ++t) {
    const float mag = std::sqrt(mag2[t]) * (wi * wj[t]);
    const float v_r1 = mag * rf[t], v_r0 = mag - v_r1;
    const float v_rc11 = v_r1 * cf[t], v_rc10 = v_r1 - v_rc11;
    const float v_rc01 = v_r0 * cf[t], v_rc00 = v_r0 - v_rc01;
    const float v_rco111 = v_rc11 * of[t], v_rco110 = v_rc11 - v_rco111;
    const float v_rco101 = v_rc10 * of[t], v_rco100 = v_rc10 - v_rco101;
    const float v_rco011 = v_rc01 * of[t], v_rco010 = v_rc01 - v_rco011;
    const float v_rco001 = v_rc00 * of[t], v_rco000 = v_rc00 - v_rco001;
    float* h = hist + ibin[t];
    h[0] += v_rco000;
    h[1] += v_rco001;
    h[nb + 2] += v_rco010;
    h[nb + 3] += v_rco011;
    h[(d + 2) * (nb + 2)] += v_rco100;
    h[(d + 2) * (nb + 2) + 1] += v_rco101;
    h[(d + 3) * (nb + 2)] += v_rco110;
    h[(d + 3) * (nb + 2) + 1] += v_rco111;
  }
}

// Per-thread scratch of the orientation and descriptor windows.
struct Scratch {
  std::vector<float> a, b, c, d, ex;
  std::vector<int> bin;
  void reserve(std::size_t n) {
    if (a.size() >= n) return;
    a.resize(n); b.resize(n); c.resize(n); d.resize(n); bin.resize(n);
  }
};

// The DoG neighbourhood n[27] of (r, c) in layer l (see sift_refine.h).
void gather27(const std::vector<SiftPlane>& dog, int l, int r, int c, float* n) {
  for (int k = 0; k < 3; ++k) {
    const SiftPlane& p = dog[std::size_t(l - 1 + k)];
    for (int dy = 0; dy < 3; ++dy) {
      const float* row = p.row(r - 1 + dy);
      for (int dx = 0; dx < 3; ++dx) n[k * 9 + dy * 3 + dx] = row[c - 1 + dx];
    }
  }
}

// Smoothed 36-bin orientation histogram around integer (c, r) of img (notes §7); returns its maximum.
float orientation_histogram(const SiftPlane& img, int c, int r, int radius, float sigma, float* hist, Scratch& s) {
  const float expf_scale = -1.0f / (2.0f * sigma * sigma);
  const std::size_t side = std::size_t(2 * radius + 1);
  s.reserve(side);
  // exp(-(i^2 + j^2) / (2 s^2)) = e(i) e(j): 2 radius + 1 exponentials instead of (2 radius + 1)^2.
  s.ex.resize(side);
  for (int i = -radius; i <= radius; ++i) s.ex[std::size_t(i + radius)] = std::exp(float(i * i) * expf_scale);
  const int x_lo = std::max(c - radius, 1), x_hi = std::min(c + radius, img.w - 2);
  const int n = x_hi - x_lo + 1;
  float raw[SIFT_ORI_HIST_BINS] = {};
  if (n > 0) {
    float* wrow = s.c.data();
    for (int i = -radius; i <= radius; ++i) {
      const int y = r + i;
      if (y <= 0 || y >= img.h - 1) continue;
      const float wi = s.ex[std::size_t(i + radius)];
      for (int t = 0; t < n; ++t) wrow[t] = wi * s.ex[std::size_t(x_lo + t - c + radius)];
      orientation_row(img.row(y - 1), img.row(y), img.row(y + 1), x_lo, n, wrow, s.bin.data(), s.b.data(), raw);
    }
  }
  return sift_orientation_smooth(raw, hist);
}

}  // namespace

std::vector<Keypoint> SiftPlan::detect(const ImageF& gray, const SiftOptions& options, int threads) {
  options_ = options;
  const int s = options.octave_layers;
  first_octave_ = options.upsample ? -1 : 0;
  const int base_w = options.upsample ? 2 * gray.width : gray.width;
  const int base_h = options.upsample ? 2 * gray.height : gray.height;
  octaves_ = int(std::lround(std::log(double(std::min(base_w, base_h))) / std::log(2.0) - 2.0)) - first_octave_;
  if (octaves_ <= 0) return {};
  // Incremental sigmas: level i (total sigma * k^i) from level i-1.
  level_sigma_.assign(std::size_t(s + 3), options.sigma);
  level_kernel_.assign(std::size_t(s + 3), {});
  const double k = std::pow(2.0, 1.0 / s);
  for (int i = 1; i < s + 3; ++i) {
    const double prev = std::pow(k, double(i - 1)) * options.sigma;
    const double total = prev * k;
    level_sigma_[std::size_t(i)] = std::sqrt(total * total - prev * prev);
    level_kernel_[std::size_t(i)] = sift_gaussian_half_kernel(level_sigma_[std::size_t(i)]);
  }
  gauss_.resize(std::size_t(octaves_));
  for (auto& g : gauss_) g.resize(std::size_t(s));
  dog_.resize(std::size_t(s + 2));

  SiftThreadPool& workers = pool(threads);
  std::vector<std::vector<Keypoint>> per_thread(std::size_t(workers.size()));
  for (int o = 0; o < octaves_; ++o) {
    build_octave_base(gray, o, workers);
    build_octave_levels(o, workers);
    scan_octave(o, per_thread, workers);
  }
  std::size_t total = 0;
  for (const auto& v : per_thread) total += v.size();
  std::vector<Keypoint> all;
  all.reserve(total);
  for (const auto& v : per_thread) all.insert(all.end(), v.begin(), v.end());
  return all;
}

SiftThreadPool& SiftPlan::pool(int threads) const {
  threads = std::max(threads, 1);
  if (!pool_ || pool_->size() != threads) pool_ = std::make_unique<SiftThreadPool>(threads);
  return *pool_;
}

void SiftPlan::scan_octave(int o, std::vector<std::vector<Keypoint>>& per_thread, SiftThreadPool& pool) const {
  const int s = options_.octave_layers;
  const int w = dog_[0].w, h = dog_[0].h;
  const int border = SIFT_IMG_BORDER;
  if (w <= 2 * border || h <= 2 * border) return;
  const float thr = float(std::floor(0.5 * options_.contrast_threshold / s * 255.0));
  const float contrast_threshold = float(options_.contrast_threshold);
  const float edge_threshold = float(options_.edge_threshold);
  const float sigma = float(options_.sigma);
  const int rows = h - 2 * border;
  const int tasks = s * rows;
  const float octave_scale = float(1 << o);
  const bool rescale = first_octave_ < 0;
  // One chunk (the calling thread alone) for small octaves, else 16 rows per chunk.
  const int chunk = std::int64_t(w) * h * s <= (1 << 16) ? tasks : 16;
  pool.run(tasks, chunk, [&](int task0, int task1, int thread) {
    auto& out = per_thread[std::size_t(thread)];
    thread_local std::vector<std::uint8_t> flags;
    thread_local Scratch scratch;
    flags.resize(static_cast<std::size_t>(w) + 8);
    float n[27];
    float hist[SIFT_ORI_HIST_BINS];
    for (int task = task0; task < task1; ++task) {
      const int layer0 = 1 + task / rows;
      const int r0 = border + task % rows;
      const SiftPlane& prv = dog_[std::size_t(layer0 - 1)];
      const SiftPlane& cur = dog_[std::size_t(layer0)];
      const SiftPlane& nxt = dog_[std::size_t(layer0 + 1)];
      extrema_flags(cur.row(r0 - 1), cur.row(r0), cur.row(r0 + 1), border, w - border, thr, flags.data());
      const float* cur_row = cur.row(r0);
      for (int c0 = border; c0 < w - border; ++c0) {
        if ((c0 & 7) == 0 && c0 + 8 <= w - border) {  // skip eight unflagged columns at once
          std::uint64_t word;
          std::memcpy(&word, flags.data() + c0, 8);
          if (word == 0) {
            c0 += 7;
            continue;
          }
        }
        if (!flags[std::size_t(c0)] || !extremum_across_layers(prv, nxt, r0, c0, cur_row[c0])) continue;
        // Sub-pixel refinement (notes §5).
        int layer = layer0, r = r0, c = c0;
        float off[3] = {0, 0, 0}, g[3];
        int step = 0;
        bool ok = true;
        for (; step < SIFT_MAX_INTERP_STEPS; ++step) {
          gather27(dog_, layer, r, c, n);
          sift_refine_step(n, off, g);
          if (std::abs(off[2]) < 0.5f && std::abs(off[1]) < 0.5f && std::abs(off[0]) < 0.5f) break;
          const float big = float(INT_MAX / 3);
          if (std::abs(off[2]) > big || std::abs(off[1]) > big || std::abs(off[0]) > big) {
            ok = false;
            break;
          }
          c += sift_round(off[0]);
          r += sift_round(off[1]);
          layer += sift_round(off[2]);
          if (layer < 1 || layer > s || c < border || c >= w - border || r < border || r >= h - border) {
            ok = false;
            break;
          }
        }
        if (!ok || step >= SIFT_MAX_INTERP_STEPS) continue;
        gather27(dog_, layer, r, c, n);
        const float contr = sift_refine_contrast(n, off);
        if (std::abs(contr) * float(s) < contrast_threshold) continue;
        if (!sift_refine_edge_ok(n, edge_threshold)) continue;
        const float xc = off[0], xr = off[1], xi = off[2];
        Keypoint kp;
        kp.x = (float(c) + xc) * octave_scale;
        kp.y = (float(r) + xr) * octave_scale;
        kp.size = sigma * std::pow(2.0f, (float(layer) + xi) / float(s)) * octave_scale * 2.0f;
        kp.response = std::abs(contr);
        kp.octave = o + first_octave_;
        kp.layer = layer;
        kp.layer_offset = xi;
        // Orientation (notes §7) on the Gaussian level of the final layer, at the integer position.
        const float scl_octv = kp.size * 0.5f / octave_scale;
        const float omax = orientation_histogram(gauss_[std::size_t(o)][std::size_t(layer - 1)], c, r,
                                                 sift_round(SIFT_ORI_RADIUS * scl_octv),
                                                 SIFT_ORI_SIG_FCTR * scl_octv, hist, scratch);
        const float mag_thr = omax * SIFT_ORI_PEAK_RATIO;
        if (rescale) {  // OpenCV reports octave -1 values in input pixels: x 0.5
          kp.x *= 0.5f;
          kp.y *= 0.5f;
          kp.size *= 0.5f;
        }
        for (int j = 0; j < SIFT_ORI_HIST_BINS; ++j) {
          if (!sift_orientation_is_peak(hist, j, mag_thr)) continue;
          kp.angle = sift_orientation_peak_angle(hist, j);
          out.push_back(kp);
        }
      }
    }
  });
}

void SiftPlan::describe(const std::vector<Keypoint>& keypoints, float* out, int threads) const {
  const int count = int(keypoints.size());
  const int d = SIFT_DESCR_WIDTH, nb = SIFT_DESCR_HIST_BINS;
  for (const Keypoint& kp : keypoints) {
    const int o = kp.octave - first_octave_;
    if (o < 0 || o >= octaves_ || kp.layer < 1 || kp.layer > options_.octave_layers)
      throw Error(ErrorCode::kInternal, "sift: keypoint octave/layer outside the pyramid of the last detect()", "cpu");
  }
  pool(threads).run(count, 8, [&](int idx0, int idx1, int) {
    thread_local Scratch s;
    float hist[SIFT_DESCR_HIST_LEN];
    for (int idx = idx0; idx < idx1; ++idx) {
      const Keypoint& kp = keypoints[std::size_t(idx)];
      const int oct = kp.octave;
      const float scale = oct >= 0 ? 1.0f / float(1 << oct) : float(1 << -oct);
      const float size = kp.size * scale;
      const float ptx = kp.x * scale, pty = kp.y * scale;
      const int o = oct - first_octave_;
      const SiftPlane& img = gauss_[std::size_t(o)][std::size_t(kp.layer - 1)];
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
        descriptor_row(img.row(y - 1), img.row(y), img.row(y + 1), cx, j_lo, n, fi, cos_t, sin_t, ori, bins_per_deg,
                       s.bin.data(), s.a.data(), s.b.data(), s.c.data(), s.d.data());
        descriptor_accumulate_row(hist, s.bin.data(), s.a.data(), s.b.data(), s.c.data(), s.d.data(),
                                  s.ex[std::size_t(i + radius)], s.ex.data() + (j_lo + radius), n);
      }
      sift_descriptor_finalize(hist, out + std::size_t(idx) * Features::kDescriptorSize);
    }
  });
}

SiftPlan& sift_plan(detail::ContextImpl& ctx) {
  auto& slot = ctx.plans["sift.cpu"];
  if (!slot.has_value()) slot = std::make_shared<SiftPlan>();
  return *std::any_cast<std::shared_ptr<SiftPlan>&>(slot);
}

}  // namespace spectrasift::cpu

// CPU SIFT extrema stage, with the pyramid, DoG and refinement stages fused into it (see sift.hpp): per
// octave, build the levels and DoG planes, then scan the DoG layers 1..S for candidates
// (numeric/sift_extrema.h) and refine each one at once (numeric/sift_refine.h, notes §5).
//
// Let g++ if-convert and vectorise the per-sample loops: with no-trapping-math a select may compute both
// arms. It changes no result; fast-math stays off. Set for the whole file (before any include) so that
// every inline function here is compiled with the same options and can be inlined into the loops.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "backend/cpu/sift.hpp"
#include "core/context_impl.hpp"
#include "numeric/sift_extrema.h"
#include "numeric/sift_refine.h"

namespace spectrasift::cpu {

namespace {

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

}  // namespace

std::size_t SiftStagesCpu::extrema() {
  const detail::SiftPlan& p = *plan_;
  gauss_.resize(std::size_t(p.octaves));
  for (auto& g : gauss_) g.resize(std::size_t(p.layers));
  dog_.resize(std::size_t(p.dog_levels));
  refined_.clear();
  counts_.candidates = 0;
  WorkPool& workers = pool();
  for (int o = 0; o < p.octaves; ++o) {
    build_octave_base(o, workers);
    build_octave_levels(o, workers);
    scan_octave(o, workers);
    // Progress by area: octave o has a quarter of the pixels of octave o - 1.
    ctx_.report_progress((1.0 - std::pow(0.25, o + 1)) / (1.0 - std::pow(0.25, p.octaves)));
  }
  counts_.refined = refined_.size();
  return counts_.candidates;
}

void SiftStagesCpu::scan_octave(int o, WorkPool& pool) {
  const detail::SiftPlan& p = *plan_;
  const int s = p.layers;
  const int w = dog_[0].w, h = dog_[0].h;
  const int border = p.border;
  if (w <= 2 * border || h <= 2 * border) return;
  const float thr = p.prefilter_threshold;
  const float contrast_threshold = p.contrast_threshold;
  const float edge_threshold = p.edge_threshold;
  const float sigma = p.sigma;
  const int rows = h - 2 * border;
  const int tasks = s * rows;
  const float octave_scale = p.octave_scale[std::size_t(o)];
  const float output_scale = p.output_scale;
  // One chunk (the calling thread alone) for small octaves, else 16 rows per chunk.
  const int chunk = std::int64_t(w) * h * s <= (1 << 16) ? tasks : 16;
  const int chunks = (tasks + chunk - 1) / chunk;
  if (chunk_out_.size() < std::size_t(chunks)) chunk_out_.resize(std::size_t(chunks));
  chunk_candidates_.assign(std::size_t(chunks), 0);
  pool.run(tasks, chunk, [&](int task0, int task1, int) {
    auto& out = chunk_out_[std::size_t(task0 / chunk)];
    std::size_t candidates = 0;
    out.clear();
    thread_local std::vector<std::uint8_t> flags;
    flags.resize(static_cast<std::size_t>(w) + 8);
    float n[27];
    for (int task = task0; task < task1; ++task) {
      const int layer0 = 1 + task / rows;
      const int r0 = border + task % rows;
      const SiftPlane& prv = dog_[std::size_t(layer0 - 1)];
      const SiftPlane& cur = dog_[std::size_t(layer0)];
      const SiftPlane& nxt = dog_[std::size_t(layer0 + 1)];
      kernels_.extrema_flags(cur.row(r0 - 1), cur.row(r0), cur.row(r0 + 1), border, w - border, thr, flags.data());
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
        if (!flags[std::size_t(c0)] || !sift_extremum_across_layers(prv.row(r0) + c0, nxt.row(r0) + c0, w, cur_row[c0]))
          continue;
        ++candidates;
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
        SiftKeypoint kp{};
        kp.x = (float(c) + xc) * octave_scale;
        kp.y = (float(r) + xr) * octave_scale;
        kp.size = sigma * std::pow(2.0f, (float(layer) + xi) / float(s)) * octave_scale * 2.0f;
        kp.response = std::abs(contr);
        kp.octave = o + p.first_octave;
        kp.octave_index = o;
        kp.layer = layer;
        kp.layer_offset = xi;
        kp.r = r;
        kp.c = c;
        kp.sigma_octave = kp.size * 0.5f / octave_scale;  // before the octave -1 rescale
        kp.x *= output_scale;  // OpenCV reports octave -1 values in input pixels
        kp.y *= output_scale;
        kp.size *= output_scale;
        out.push_back(kp);
      }
    }
    chunk_candidates_[std::size_t(task0 / chunk)] = candidates;
  });
  for (int k = 0; k < chunks; ++k) {
    counts_.candidates += chunk_candidates_[std::size_t(k)];
    refined_.insert(refined_.end(), chunk_out_[std::size_t(k)].begin(), chunk_out_[std::size_t(k)].end());
  }
}

}  // namespace spectrasift::cpu

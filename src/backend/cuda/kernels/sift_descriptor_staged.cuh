// sift_descriptor_staged.cuh — the staged form of the descriptor kernel (numeric/sift_descriptor.h, 'The staged
// form'): the same descriptors as the walkers of sift_descriptor.cuh, bit for bit, with each sample computed
// once instead of once per cell it feeds. SiftStagesCuda::set_descriptor_form picks the form
// (backend/cuda/sift.hpp): kStaged is sift_descriptor_staged<false> (the box walk), kStagedRows
// sift_descriptor_staged<true> (the row walk).
//
// The fixed reduction order of DESIGN.md: every accumulator entry is the float sum of its shares in sample
// order (rows ascending, then columns), as the CPU backend adds them, without float atomics. One warp per
// keypoint, staged: the window is taken in bands of whole rows; the 32 lanes compute each sample of the band
// once (bins, gradient, atan2, weight) into a record in shared memory; after __syncwarp, lane t (t < 16) owns
// the 10 entries of inner cell t (a column of the warp's shared accumulator: a dynamic index without the 8-way
// select of a register array) and walks its part of the band in sample order, adding the two shares each record
// gives its cell. Then the two norms in the CPU's index order by lane 0, and the rest of the finalisation by
// all lanes. Warps are independent: no block-wide barrier. The window's extent and bands are
// sift_descriptor_bands' (the grid's bounding square, off the plane's outer ring).
//
// The two walks (issue 19; an ncu profile of the box walk on the H200 found the kernel bound by the latency of
// each keypoint's serial chain, 63 % of its instructions in the owners' loop with its 14-instruction decode):
// - box walk (kRowWalk false): records (sift_descriptor_stage_sample) hold the cell as ((r0 + 1) (d + 2) +
//   c0 + 1) n + o0; the owner walks every column of its box (sift_descriptor_owner_box) and decodes each record
//   (sift_descriptor_cell_shares: divisions by n and d + 2), ~40 % of them missing its cell.
// - row walk (kRowWalk true): a lane first loads the pixel differences of all its samples of the band
//   (kDescrLoads of them, in flight together) and then computes them (sift_descriptor_row_record); the records
//   hold the cell decoded (sift_descriptor_row_code), the owner's test is a subtraction and a mask
//   (sift_descriptor_row_shares), and in each row of its box the owner visits only the columns where a record's
//   floor cell can be one of its 2 x 2 (sift_descriptor_row_cols), so nearly every visited record hits; it adds
//   two records' shares a step (sift_descriptor_owner_add2). The same records pass the exact test and every entry
//   gets the same additions in the same order: the same bits.
//
// ptxas 13.0 on sm_90 drops the negation of max(max(a, -b), c) (and min): no integer negation may feed a
// max/min chain here (the helpers' comment in numeric/sift_descriptor.h; the ctest
// cuda_ptx_has_no_negated_min_max_chain checks the PTX).
#pragma once

#include "backend/cuda/kernels/sift_descriptor.cuh"

namespace spectrasift::cuda::kernels {

constexpr int kDescrWarps = 4;                                        // keypoints per block
constexpr int kDescrOwners = SIFT_DESCR_WIDTH * SIFT_DESCR_WIDTH;     // inner cells, a lane each
constexpr int kDescrAcc = (SIFT_DESCR_HIST_BINS + 2) * kDescrOwners;  // their entries
constexpr int kDescrLoads = 4;  // row walk: samples whose pixels a lane loads before computing them (128 a warp)
// Row walk: blocks an SM in the launch bounds, as the box walk's: 64 registers; ptxas spills ~13 values around each
// band (not in the owners' loop); kDescrRowBlocksWide (80 registers) spills only in the per-keypoint setup but
// holds 24 warps an SM (SiftStagesCuda's DescriptorForm::kStagedRowsWide, the default: 4-11 % faster on the H200).
constexpr int kDescrRowBlocks = 8;
constexpr int kDescrRowBlocksWide = 6;

// The dynamic shared memory of one warp, in float4 units: recs[chunk] (rf, cf, of, mag), codes[chunk],
// ex[ex_cap] (the window weights).
__host__ __device__ inline int sift_descriptor_warp_float4s(int chunk, int ex_cap) {
  return (5 * chunk + ex_cap + 3) / 4;
}

// sift_descriptor_staged: grid G (the host's cap on blocks), block 32 kDescrWarps threads; warp w of block g
// takes kept keypoints g kDescrWarps + w, + G kDescrWarps, ... (the live count is read on the device). Dynamic
// shared memory (host-sized): kDescrWarps sift_descriptor_warp_float4s(chunk, ex_cap) float4s, with ex_cap >= 2R
// + 1 for the plan's largest window radius R and chunk >= ex_cap (a band holds at least one window row).
// deg2rad = float(pi / 180) from the host. Launch bounds: 8 blocks (32 warps) an SM (the row walk:
// kMinBlocks: kDescrRowBlocks or kDescrRowBlocksWide). kRowWalk: the row walk (above), else the box walk.
template <bool kRowWalk, int kMinBlocks = (kRowWalk ? kDescrRowBlocks : 8)>
__global__ void __launch_bounds__(32 * kDescrWarps, kMinBlocks)
    sift_descriptor_staged(const float* gauss, const long long* info, const SiftKeypoint* kps,
                           const unsigned int* counters, unsigned int capacity, float deg2rad, int root_sift,
                           float* descriptors, int ex_cap, int chunk) {
  extern __shared__ float4 sift_descriptor_smem[];
  __shared__ float acc_all[kDescrWarps][kDescrAcc];  // entry e of inner cell t at [e * 16 + t]
  __shared__ float out_all[kDescrWarps][kDescrLen];
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
  float4* recs = sift_descriptor_smem + warp * sift_descriptor_warp_float4s(chunk, ex_cap);
  int* codes = reinterpret_cast<int*>(recs + chunk);
  float* ex = reinterpret_cast<float*>(codes + chunk);
  float* acc = acc_all[warp];
  float* out = out_all[warp];
  const int d = SIFT_DESCR_WIDTH;
  const unsigned int count = min(counters[kCountKept], capacity);
  for (unsigned int p = blockIdx.x * kDescrWarps + warp; p < count; p += gridDim.x * kDescrWarps) {
    const SiftKeypoint kp = kps[p];
    const SiftDescriptorFrame f = sift_descriptor_frame(kp, info, deg2rad, ex_cap);
    const float* img = sift_level_of(gauss, info, kp);
    for (int k = lane; k <= 2 * f.radius; k += 32) ex[k] = sift_descriptor_weight(f, k - f.radius);
    const SiftDescriptorBands w = sift_descriptor_bands(f, chunk);
    const int qr = lane / d + 1, qc = lane % d + 1;  // the inner cell of owner lane < 16
    int i_lo, i_hi, j_lo, j_hi;
    sift_descriptor_owner_box(f, w, qr, qc, &i_lo, &i_hi, &j_lo, &j_hi);
    const int key = sift_descriptor_owner_key(qr, qc);                  // row walk
    const SiftDescriptorRowSpan span = sift_descriptor_row_span(f, qr, qc);  // row walk
    for (int k = lane; k < kDescrAcc; k += 32) acc[k] = 0.0f;
    __syncwarp();
    for (int band = 0; band < w.bands; ++band) {
      const int i0 = w.i_first + band * w.rows;
      const int n = min(w.rows, w.i_last - i0 + 1) * w.width;  // >= 1
      if constexpr (kRowWalk) {
        // Phase A: the pixel differences of the lane's next kDescrLoads samples first (every sample of a band lies
        // off the plane's outer ring, so its four neighbours are in the plane; a lane past the band's end loads
        // the last sample again), so that their loads are in flight together; then the records.
        for (int base = 0; base < n; base += 32 * kDescrLoads) {
          float dx[kDescrLoads], dy[kDescrLoads];
#pragma unroll
          for (int u = 0; u < kDescrLoads; ++u) {
            const int s = min(base + 32 * u + lane, n - 1);
            sift_descriptor_diffs(f, img, i0 + s / w.width, w.j_first + s % w.width, &dx[u], &dy[u]);
          }
#pragma unroll
          for (int u = 0; u < kDescrLoads; ++u) {
            const int s = base + 32 * u + lane;
            if (s >= n) break;
            float rf = 0.0f, cf = 0.0f, of = 0.0f, mag = 0.0f;
            codes[s] = sift_descriptor_row_record_local(f, ex, i0 + s / w.width, w.j_first + s % w.width, dx[u], dy[u],
                                                        &rf, &cf, &of, &mag);
            recs[s] = make_float4(rf, cf, of, mag);
          }
        }
      } else {
        for (int s = lane; s < n; s += 32) {
          float rf = 0.0f, cf = 0.0f, of = 0.0f, mag = 0.0f;
          codes[s] = sift_descriptor_stage_sample_local(f, img, ex, i0 + s / w.width, w.j_first + s % w.width, &rf,
                                                        &cf, &of, &mag);
          recs[s] = make_float4(rf, cf, of, mag);
        }
      }
      __syncwarp();
      // Phase B: the owner's box in this band, in sample order (no lane past 15 has rows to walk).
      const int r_lo = max(i_lo, i0);
      const int r_hi = lane < kDescrOwners ? min(i_hi, i0 + w.rows - 1) : r_lo - 1;
      for (int i = r_lo; i <= r_hi; ++i) {
        const int s_row = (i - i0) * w.width - w.j_first;
        if constexpr (kRowWalk) {
          int jl, jh;
          sift_descriptor_row_cols(span, i, j_lo, j_hi, &jl, &jh);
          if (jl > jh) continue;
          // Two records a step (sift_descriptor_owner_add2: one load-add-store chain for both), software-pipelined:
          // the next two records are loaded before these two's shares are added. Loads run up to 3 records past jh,
          // at most past the band's last record (n - 1) into the warp's own codes and ex (chunk >= 12, ex_cap >= 3):
          // nothing writes there during phase B, and a record past jh counts as a miss (its o0 unread).
          const int* cp = codes + s_row + jl;
          const float4* rp = recs + s_row + jl;
          int code_a = cp[0], code_b = cp[1];
          float4 ra = rp[0], rb = rp[1];
#pragma unroll 2
          for (int j = jl; j <= jh; j += 2) {
            cp += 2;
            rp += 2;
            const int code_na = cp[0], code_nb = cp[1];
            const float4 rna = rp[0], rnb = rp[1];
            int oa = 0, ob = 0;
            float sa0 = 0.0f, sa1 = 0.0f, sb0 = 0.0f, sb1 = 0.0f;
            const int hit_a = sift_descriptor_row_shares(key, code_a, ra.x, ra.y, ra.z, ra.w, &oa, &sa0, &sa1);
            const int hit_b =
                sift_descriptor_row_shares(key, code_b, rb.x, rb.y, rb.z, rb.w, &ob, &sb0, &sb1) && j + 1 <= jh;
            // the owner's column of the accumulator: no other lane touches it
            sift_descriptor_owner_add2_local(acc + lane, kDescrOwners, hit_a, oa, sa0, sa1, hit_b, ob, sb0, sb1);
            code_a = code_na;
            code_b = code_nb;
            ra = rna;
            rb = rnb;
          }
        } else {
          for (int j = j_lo; j <= j_hi; ++j) {
            const float4 r = recs[s_row + j];
            int o0 = 0;
            float s0 = 0.0f, s1 = 0.0f;
            if (!sift_descriptor_cell_shares(codes[s_row + j], qr, qc, r.x, r.y, r.z, r.w, &o0, &s0, &s1)) continue;
            acc[o0 * kDescrOwners + lane] += s0;  // the owner's column: no other lane touches it
            acc[(o0 + 1) * kDescrOwners + lane] += s1;
          }
        }
      }
      __syncwarp();  // the records are rewritten by the next band
    }
    for (int k = lane; k < kDescrLen; k += 32) out[k] = sift_descriptor_inner_entry_local(acc, k);
    __syncwarp();
    float scale = 0.0f;
    if (lane == 0) scale = sift_descriptor_clip_local(out, sift_descriptor_norm2_local(out));
    __syncwarp();
    scale = __shfl_sync(0xffffffffu, scale, 0);
    float* row = descriptors + size_t(p) * kDescrLen;
    for (int k = lane; k < kDescrLen; k += 32) {
      const float v = sift_descriptor_byte(out[k], scale);
      out[k] = v;
      if (!root_sift) row[k] = v;
    }
    __syncwarp();
    if (root_sift && lane == 0) {
      sift_descriptor_root(out);
      for (int k = 0; k < kDescrLen; ++k) row[k] = out[k];
    }
    __syncwarp();  // out and the records are rewritten by the next keypoint
  }
}

}  // namespace spectrasift::cuda::kernels

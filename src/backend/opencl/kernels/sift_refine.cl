/* sift_refine.cl — sub-pixel refinement, contrast and edge tests of the candidates (numeric/sift_refine.h).
 * (Part of the sift.cl program.) */

/* sift_refine: global >= the candidate count, any work-group size; one work-item per candidate:
 * numeric/sift_refine.h's sift_refine_candidate; an accepted point takes a slot of the refined counter and
 * writes its record. */
__kernel void sift_refine(__global const float* dog, __global const long* info, __global const float* octave_scale,
                          __global const int4* candidates, __global volatile uint* counters, uint capacity,
                          int layers, int border, int first_octave, float contrast_threshold, float edge_threshold,
                          float sigma, float output_scale, __global SiftKeypoint* refined) {
  const uint id = get_global_id(0);
  const uint count = min(counters[SIFT_COUNT_CANDIDATES], capacity);
  if (id >= count) return;
  const int4 cand = candidates[id];
  const SiftRefineParams p = {layers, border, first_octave, contrast_threshold, edge_threshold, sigma, output_scale};
  SiftKeypoint kp;
  if (!sift_refine_candidate(dog, info, octave_scale, cand.x, cand.y, cand.z, cand.w, p, &kp)) return;
  const uint slot = atomic_inc(&counters[SIFT_COUNT_REFINED]);
  if (slot < capacity) refined[slot] = kp;
}

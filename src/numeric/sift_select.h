/* sift_select.h — the rules of the select stage (notes §9), as comparisons on SiftKeypoint records, so that
 * a device sorts and filters with exactly the host's rules. The stage applies, in this order:
 *   1. duplicates (OpenCV's removeDuplicatedSorted): sort by sift_duplicate_before, then drop every record
 *      for which sift_is_duplicate(previous kept record, record);
 *   2. the cap (OpenCV's retainBest): with more than max_features records, cut = the max_features-th largest
 *      response; keep the records with sift_response_kept(response, cut) (ties at the cut are all kept, so
 *      the set is decided by response alone, never by arrival order);
 *   3. the mask (OpenCV's runByPixelsMask): keep a record when the mask pixel at (sift_mask_coord(x, width),
 *      sift_mask_coord(y, height)) is non-zero;
 *   4. the canonical order: sort by sift_canonical_before (octave, layer, y, x, angle, then the rest).
 * The records are passed by value (no pointer, so no address space to choose). */
#ifndef SPECTRASIFT_NUMERIC_SIFT_SELECT_H
#define SPECTRASIFT_NUMERIC_SIFT_SELECT_H

#include "sift_keypoint.h"

/* OpenCV's packed octave field octave & 255 | layer << 8 | round((xi + 0.5) * 255) << 16, used only as a
 * tie-breaker of the duplicate order. */
SPECTRASIFT_FN int sift_packed_octave(SiftKeypoint k) {
  return (k.octave & 255) | (k.layer << 8) | (sift_round((k.layer_offset + 0.5f) * 255.0f) & 255) << 16;
}

/* The order of removeDuplicatedSorted: x, y ascending, size descending, angle ascending, response and packed
 * octave descending; then layer_offset, r, c ascending, which OpenCV leaves to its sort but which makes the
 * order total here, so that the record kept among duplicates never depends on the input order. */
SPECTRASIFT_FN int sift_duplicate_before(SiftKeypoint a, SiftKeypoint b) {
  if (a.x != b.x) return a.x < b.x;
  if (a.y != b.y) return a.y < b.y;
  if (a.size != b.size) return a.size > b.size;
  if (a.angle != b.angle) return a.angle < b.angle;
  if (a.response != b.response) return a.response > b.response;
  const int pa = sift_packed_octave(a), pb = sift_packed_octave(b);
  if (pa != pb) return pa > pb;
  if (a.layer_offset != b.layer_offset) return a.layer_offset < b.layer_offset;
  if (a.r != b.r) return a.r < b.r;
  return a.c < b.c;
}

/* 1 when b duplicates a (equal position, size and angle); b is then dropped. */
SPECTRASIFT_FN int sift_is_duplicate(SiftKeypoint a, SiftKeypoint b) {
  return a.x == b.x && a.y == b.y && a.size == b.size && a.angle == b.angle;
}

/* 1 when a response survives the cap at cut (the max_features-th largest response). */
SPECTRASIFT_FN int sift_response_kept(float response, float cut) { return response >= cut; }

/* The mask pixel of a coordinate: int(v + 0.5) (truncation, as OpenCV), clamped to 0..size-1. */
SPECTRASIFT_FN int sift_mask_coord(float v, int size) {
  const int p = (int)(v + 0.5f);
  return p < 0 ? 0 : (p > size - 1 ? size - 1 : p);
}

/* The canonical order of the output: octave, layer, y, x, angle, then size, response and layer_offset so
 * that the order is total on the public fields. */
SPECTRASIFT_FN int sift_canonical_before(SiftKeypoint a, SiftKeypoint b) {
  if (a.octave != b.octave) return a.octave < b.octave;
  if (a.layer != b.layer) return a.layer < b.layer;
  if (a.y != b.y) return a.y < b.y;
  if (a.x != b.x) return a.x < b.x;
  if (a.angle != b.angle) return a.angle < b.angle;
  if (a.size != b.size) return a.size < b.size;
  if (a.response != b.response) return a.response < b.response;
  return a.layer_offset < b.layer_offset;
}

#endif /* SPECTRASIFT_NUMERIC_SIFT_SELECT_H */

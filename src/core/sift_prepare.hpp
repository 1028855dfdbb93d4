// The host-side step before SIFT (SiftOptions::stretch and ::nodata): the intensity stretch of 16-bit and
// low-contrast images and the nodata mask. Core runs it before the backend stages; with the default options it
// does nothing and the image goes to the backend as it is.
#pragma once

#include "spectrasift/sift.hpp"
#include "spectrasift/types.hpp"

namespace spectrasift::detail {

struct PreparedSiftInput {
  bool stretched = false;  ///< true: SIFT runs on `grey` (grey levels 0..255) instead of the image
  ImageF grey;
  bool has_mask = false;   ///< true: SIFT uses `mask` (the caller's mask and the nodata mask combined)
  Image mask;              ///< U8, 255 = detect, 0 = masked out
  double low = 0, high = 0;  ///< the grey values mapped to 0 and 255 when stretched
};

/// The stretch and mask `options` ask for on `image` (U8/U16/F32, 1..4 channels; nodata compared per channel
/// in the image's own values), `mask` being the caller's mask or null.
PreparedSiftInput prepare_sift_input(const Image& image, const SiftOptions& options, const Image* mask);
/// The same on a grey float image (nodata compared to the grey values).
PreparedSiftInput prepare_sift_input(const ImageF& grey, const SiftOptions& options, const Image* mask);

}  // namespace spectrasift::detail

// The device work of one chunk of a CUDA spectral match (the kernels of the plan's path), and the downloads of
// the results (see spectral.cu for the data flow).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "backend/cuda/spectral_plan.hpp"

namespace spectrasift::cuda::spectral {

/// Enqueues the matching of one chunk (already on the device) on `s`. Outputs go to the chunk's
/// place in the device output (whole image) or to its start (one chunk at a time).
void compute_chunk(Plan& pl, const void* d_chunk, int y0, int lines, cudaStream_t s);

/// Copies the device outputs of pixels [p0, p0+npix) (device offset d0) into the result.
void download(Plan& pl, SpectralResult& result, std::size_t p0, std::size_t npix, std::size_t d0);

/// Results small enough go through one pinned buffer, chunk by chunk on the download stream as soon as
/// each chunk is computed (overlapping the uploads and computes of the next chunks).
struct PinnedResult {
  bool on = false;
  float* score = nullptr;
  int* index = nullptr;
};

/// The pinned result buffer of a call, when the outputs stay whole on the device and fit kPinnedResultMax.
PinnedResult pinned_result(Plan& pl);

/// Enqueues the download of chunk pixels [p0, p0+npix) (whole-image device output) into the pinned result.
void download_chunk_async(Plan& pl, const PinnedResult& pr, std::size_t p0, std::size_t npix, cudaStream_t s);

}  // namespace spectrasift::cuda::spectral

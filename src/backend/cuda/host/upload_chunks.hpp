// The staged upload's split (backend/upload_chunks.hpp, shared with the OpenCL backend) under the CUDA
// backend's names.
#pragma once

#include "backend/upload_chunks.hpp"

namespace spectrasift::cuda {

using detail::ByteRange;
using detail::kStagedUploadMin;
using detail::split_upload;

}  // namespace spectrasift::cuda

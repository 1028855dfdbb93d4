// OpenCL bilinear warp (BackendImpl::warp) on the device, kernels/warp.cl: one work-item per output pixel
// with the per-pixel maths of numeric/warp.h, so the output is the CPU backend's bit for bit. The moving
// image is uploaded in its own type, the output read back once; both buffers are named and reused.
#include <algorithm>
#include <string>

#include "backend/opencl/sift.hpp"
#include "backend/opencl/state.hpp"
#include "spectrasift/error.hpp"

namespace spectrasift::opencl {

namespace {

/// The build options of warp.cl for a sample type.
std::string warp_options(PixelType t) {
  switch (t) {
    case PixelType::kU8:
      return "-DWARP_T=uchar -DWARP_MAX=255.0";
    case PixelType::kU16:
      return "-DWARP_T=ushort -DWARP_MAX=65535.0";
    case PixelType::kF32:
      return "-DWARP_T=float -DWARP_FLOAT";
  }
  return {};
}

/// A 2-D work-group for the warp: 16 x 16 where the kernel allows it, else the largest square below.
void warp_group(const State& st, cl_kernel k, std::size_t local[2]) {
  const std::size_t limit = st.limits(k).work_group_size;
  std::size_t side = 16;
  while (side > 1 && side * side > limit) side /= 2;
  local[0] = side;
  local[1] = side;
}

}  // namespace

Image State::warp(const Image& moving, const std::array<double, 9>& inverse, int fixed_w, int fixed_h, int) {
  Image out = Image::allocate(fixed_w, fixed_h, moving.channels, moving.type);
  const std::size_t in_bytes = moving.data.size(), out_bytes = out.data.size();
  if (std::max(in_bytes, out_bytes) > max_alloc)
    throw Error(ErrorCode::kOutOfMemory,
                "warping: an image of " + std::to_string(std::max(in_bytes, out_bytes)) +
                    " bytes is larger than the OpenCL device allows in one buffer (" + std::to_string(max_alloc) +
                    " bytes); use --backend cpu",
                "opencl");
  cl_kernel k = kernel("warp.cl", "warp_bilinear", warp_options(moving.type));
  const cl_mem src = buffer("warp.src", in_bytes, CL_MEM_READ_ONLY);
  const cl_mem dst = buffer("warp.dst", out_bytes, CL_MEM_WRITE_ONLY);
  SPECTRASIFT_CL_CHECK(
      clEnqueueWriteBuffer(queue, src, CL_FALSE, 0, in_bytes, moving.data.data(), 0, nullptr, nullptr));
  set_args(k, src, cl_int(moving.width), cl_int(moving.height), cl_int(moving.channels), dst, cl_int(fixed_w),
           cl_int(fixed_h), inverse[0], inverse[1], inverse[2], inverse[3], inverse[4], inverse[5], inverse[6],
           inverse[7], inverse[8]);
  std::size_t local[2];
  warp_group(*this, k, local);
  const std::size_t global[2] = {round_up(std::size_t(fixed_w), local[0]), round_up(std::size_t(fixed_h), local[1])};
  SPECTRASIFT_CL_CHECK(clEnqueueNDRangeKernel(queue, k, 2, nullptr, global, local, 0, nullptr, nullptr));
  SPECTRASIFT_CL_CHECK(clEnqueueReadBuffer(queue, dst, CL_TRUE, 0, out_bytes, out.data.data(), 0, nullptr, nullptr));
  return out;
}

}  // namespace spectrasift::opencl

// Image warping through a model: argument checks and the dispatch to the backend's warp (backend/*/warp.*:
// on the device for the GPU backends, the CPU backend's bits; warp_image without a Context runs on the CPU).
#include <algorithm>

#include "core/context_impl.hpp"
#include "core/linalg.hpp"
#include "core/dispatch.hpp"
#include "spectrasift/error.hpp"
#include "spectrasift/geometry.hpp"

namespace spectrasift {

namespace {
void check_warp(const Image& moving, const std::array<double, 9>& matrix, int fixed_w, int fixed_h) {
  if (moving.empty()) throw Error(ErrorCode::kInvalidArgument, "warp_image: the moving image is empty");
  if (moving.data.size() != moving.pixel_count() * std::size_t(moving.channels) * bytes_per_sample(moving.type))
    throw Error(ErrorCode::kInvalidArgument, "warp_image: the moving image's data size does not match its shape");
  if (fixed_w <= 0 || fixed_h <= 0)
    throw Error(ErrorCode::kInvalidArgument, "warp_image: the output size must be positive");
  if (!geometry::all_finite(matrix)) throw Error(ErrorCode::kInvalidArgument, "warp_image: the matrix is not finite");
}
}  // namespace

Image warp_image(const Image& moving, const std::array<double, 9>& matrix, int fixed_w, int fixed_h) {
  check_warp(moving, matrix, fixed_w, fixed_h);
  return detail::host_backend().warp(moving, invert_model(matrix), fixed_w, fixed_h, 0);
}

Image warp_image(Context& ctx, const Image& moving, const std::array<double, 9>& matrix, int fixed_w, int fixed_h) {
  const detail::ContextUse use(ctx.impl(), "warp_image");
  check_warp(moving, matrix, fixed_w, fixed_h);
  return detail::backend_for(ctx.impl(), detail::Operation::kWarp)
      .warp(moving, invert_model(matrix), fixed_w, fixed_h, ctx.impl().cpu_threads());
}

Image warp_coverage(int moving_w, int moving_h, const std::array<double, 9>& matrix, int fixed_w, int fixed_h) {
  Image ones = Image::allocate(moving_w, moving_h, 1, PixelType::kU8);
  std::fill(ones.data.begin(), ones.data.end(), std::uint8_t(255));
  return warp_image(ones, matrix, fixed_w, fixed_h);
}

}  // namespace spectrasift

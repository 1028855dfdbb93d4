#include "core/limits.hpp"

#include "spectrasift/error.hpp"

namespace spectrasift::detail {

std::string pixel_limit_message(std::uint64_t width, std::uint64_t height, std::uint64_t limit) {
  std::uint64_t pixels = 0;
  const bool overflow = __builtin_mul_overflow(width, height, &pixels);
  return std::to_string(width) + " x " + std::to_string(height) + " = " +
         (overflow ? std::string("more than 2^64") : std::to_string(pixels)) + " pixels exceeds the limit of " +
         std::to_string(limit) +
         " pixels (raise it with --max-pixels N or SPECTRASIFT_MAX_PIXELS; ImageLimits::max_pixels / "
         "ContextOptions::max_pixels in the library; 0 = no limit)";
}

void check_pixel_limit(const std::string& prefix, std::uint64_t width, std::uint64_t height, std::uint64_t limit) {
  if (limit == 0) return;
  std::uint64_t pixels = 0;
  if (__builtin_mul_overflow(width, height, &pixels) || pixels > limit)
    throw Error(ErrorCode::kOutOfMemory, prefix + pixel_limit_message(width, height, limit));
}

}  // namespace spectrasift::detail

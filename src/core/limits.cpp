#include "core/limits.hpp"

#include <unistd.h>

#include <cstdio>
#include <limits>

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

std::uint64_t memory_budget(std::uint64_t max_memory) {
  if (max_memory != 0) return max_memory;
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return std::numeric_limits<std::uint64_t>::max();  // unknown: no limit
  return std::uint64_t(pages) * std::uint64_t(page) / 2;
}

std::string human_bytes(std::uint64_t bytes) {
  const char* units[] = {"bytes", "KB", "MB", "GB", "TB", "PB", "EB"};
  double v = double(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 6) {
    v /= 1024.0;
    ++u;
  }
  char b[32];
  std::snprintf(b, sizeof b, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return b;
}

void check_memory_budget(const std::string& what, std::uint64_t need, std::uint64_t max_memory,
                         const std::string& how_to_lower) {
  const std::uint64_t budget = memory_budget(max_memory);
  if (need <= budget) return;
  throw Error(ErrorCode::kOutOfMemory,
              what + " needs about " + human_bytes(need) + " of working memory, more than the budget of " +
                  human_bytes(budget) + (max_memory == 0 ? " (half of the physical memory)" : "") + "; " +
                  how_to_lower + ", or raise the budget with --max-memory BYTES (ContextOptions::max_memory)");
}

}  // namespace spectrasift::detail

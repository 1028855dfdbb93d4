#include "core/limits.hpp"

#include <unistd.h>

#include <cctype>
#include <charconv>
#include <cstdio>
#include <limits>

#include "backend/backend.hpp"
#include "spectrasift/error.hpp"
#include "spectrasift/options.hpp"

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

std::uint64_t memory_budget(std::uint64_t max_memory, const DeviceMemory* device) {
  if (max_memory != 0) return max_memory;
  if (device && device->total != 0) return device->total;
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
                         const std::string& how_to_lower, const DeviceMemory* device, std::uint64_t largest_buffer) {
  const bool on_device = device && device->total != 0;
  if (on_device && device->max_allocation != 0 && largest_buffer > device->max_allocation)
    throw Error(ErrorCode::kOutOfMemory, what + " needs a single buffer of " + human_bytes(largest_buffer) +
                                             " on the device, which allows at most " +
                                             human_bytes(device->max_allocation) +
                                             " per buffer (CL_DEVICE_MAX_MEM_ALLOC_SIZE); " + how_to_lower);
  const std::uint64_t budget = memory_budget(max_memory, device);
  if (need <= budget) return;
  std::string which;
  if (max_memory == 0)
    which = !on_device ? " (half of the physical memory)"
            : device->available < device->total ? " (the device's memory; " + human_bytes(device->available) + " free now)"
                                                : " (the device's memory)";
  throw Error(ErrorCode::kOutOfMemory,
              what + " needs about " + human_bytes(need) + " of working memory" + (on_device ? " on the device" : "") +
                  ", more than the budget of " + human_bytes(budget) + which + "; " + how_to_lower +
                  ", or raise the budget with --max-memory BYTES or SPECTRASIFT_MAX_MEMORY (ContextOptions::max_memory)");
}

}  // namespace spectrasift::detail

namespace spectrasift {

std::uint64_t parse_memory_size(const std::string& text) {
  if (text == "none") return std::numeric_limits<std::uint64_t>::max();
  std::string digits = text;
  std::uint64_t unit = 1;
  if (!digits.empty()) {
    const char s = char(std::toupper(static_cast<unsigned char>(digits.back())));
    const std::string suffixes = "KMGT";
    if (const auto i = suffixes.find(s); i != std::string::npos) {
      unit = std::uint64_t(1) << (10 * (i + 1));
      digits.pop_back();
    }
  }
  // Digits only (std::from_chars takes no '+', spaces or exponent, and refuses values beyond 64 bits).
  std::uint64_t v = 0, bytes = 0;
  const char* end = digits.data() + digits.size();
  const auto [next, ec] = std::from_chars(digits.data(), end, v);
  if (digits.empty() || ec != std::errc() || next != end || v == 0 || __builtin_mul_overflow(v, unit, &bytes))
    throw Error(ErrorCode::kInvalidArgument,
                "'" + text + "' is not a memory size (BYTES > 0 with an optional K, M, G or T suffix, or none)");
  return bytes;
}

std::uint64_t host_memory_budget(const ContextOptions& options) { return detail::memory_budget(options.max_memory); }

}  // namespace spectrasift

// Size limits on inputs (issue 5, "resource limits"): the one message every check against a pixel limit
// gives, so that each of them names the limit and how to raise it in the same words; and the memory budget
// of a job (issue 21, item 2), checked against an estimate before anything of the job's size is allocated.
#pragma once

#include <cstdint>
#include <string>

namespace spectrasift::detail {

/// "W x H = N pixels exceeds the limit of L pixels (raise it with --max-pixels N or SPECTRASIFT_MAX_PIXELS;
/// ImageLimits::max_pixels / ContextOptions::max_pixels in the library; 0 = no limit)".
std::string pixel_limit_message(std::uint64_t width, std::uint64_t height, std::uint64_t limit);

/// Throws Error(kOutOfMemory, prefix + pixel_limit_message(...)) when limit != 0 and width * height
/// exceeds it (a product that overflows 64 bits exceeds every limit). `prefix` names the input, e.g.
/// "photo.png: image of ". Called before anything of the input's size is allocated.
void check_pixel_limit(const std::string& prefix, std::uint64_t width, std::uint64_t height, std::uint64_t limit);

struct DeviceMemory;  // backend/backend.hpp

/// The budget in bytes that ContextOptions::max_memory gives: itself; or, for 0, the device's memory for a job
/// on a GPU backend (`device` not null and device->total != 0), else half of the physical memory.
std::uint64_t memory_budget(std::uint64_t max_memory, const DeviceMemory* device = nullptr);

/// "1.5 GB", "820 MB", "12 KB": a byte count for messages.
std::string human_bytes(std::uint64_t bytes);

/// Throws Error(kOutOfMemory) when `need` bytes exceed memory_budget(max_memory, device): "<what> needs about N
/// of working memory, more than the budget of B (<which>); <how_to_lower>, or raise the budget with
/// --max-memory BYTES (ContextOptions::max_memory)". On a device with a largest allocation, also when
/// `largest_buffer` exceeds it (whatever the budget: the device cannot make that buffer). Called before the
/// job allocates.
void check_memory_budget(const std::string& what, std::uint64_t need, std::uint64_t max_memory,
                         const std::string& how_to_lower, const DeviceMemory* device = nullptr,
                         std::uint64_t largest_buffer = 0);

}  // namespace spectrasift::detail

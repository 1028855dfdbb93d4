// Size limits on inputs (issue 5, "resource limits"): the one message every check against a pixel limit
// gives, so that each of them names the limit and how to raise it in the same words.
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

}  // namespace spectrasift::detail

// Fuzz target: image decoding through read_image (PNG, JPEG, PGM/PPM P2/P3/P5/P6 and, with libtiff,
// TIFF; the format comes from the first bytes), then the grey conversion SIFT applies.
// A pixel limit of 2^22 keeps a decoded image under ~64 MiB so that the fuzzer's RSS limit measures
// leaks, not legitimate large images; the limit itself is part of what is fuzzed (checked before allocation).
#include <cstdint>

#include "fuzz_common.hpp"
#include "spectrasift/error.hpp"
#include "spectrasift/io.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace spectrasift;
  const auto path = fuzz::write_file("input.img", data, size);
  try {
    ImageLimits limits;
    limits.max_pixels = std::uint64_t(1) << 22;
    const Image img = read_image(path, limits);
    // Invariants a caller relies on: the buffer holds exactly width * height * channels samples.
    if (img.width <= 0 || img.height <= 0 || img.channels < 1 || img.channels > 4 ||
        img.data.size() != std::size_t(img.width) * img.height * img.channels * bytes_per_sample(img.type))
      __builtin_trap();
    const ImageF g = to_gray_float(img);
    if (g.width != img.width || g.height != img.height) __builtin_trap();
  } catch (const Error&) {
    // Malformed input must end here: a clear error, never a crash.
  }
  return 0;
}

// Fuzz target: ENVI cube opening and value reads. The input is "HEADER TEXT\n%%DATA%%\nDATA BYTES":
// the header goes to cube.hdr and the bytes to cube.img; open_envi must check the header against the
// data file's size (never trust the header) and every value read must stay inside the mapping.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "fuzz_common.hpp"
#include "spectrasift/envi.hpp"
#include "spectrasift/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace spectrasift;
  const auto [hdr_text, bytes] = fuzz::split_input(data, size);
  const auto hdr = fuzz::write_file("cube.hdr", hdr_text.data(), hdr_text.size());
  fuzz::write_file("cube.img", bytes.data(), bytes.size());
  try {
    const EnviCube cube = open_envi(hdr, std::uint64_t(1) << 24);
    const EnviHeader& h = cube.header();
    const std::uint64_t elements = std::uint64_t(h.samples) * std::uint64_t(h.lines) * std::uint64_t(h.bands);
    if (cube.data_bytes() != elements * sample_size(h.data_type)) __builtin_trap();
    // Every value when the cube is small, otherwise the corners and a diagonal (a full pass on a large
    // cube would only slow the fuzzer down; the strides are the same).
    volatile double sink = 0;
    if (elements <= 4096) {
      for (int y = 0; y < h.lines; ++y)
        for (int x = 0; x < h.samples; ++x)
          for (int b = 0; b < h.bands; ++b) sink = sink + cube.value(y, x, b);
    } else {
      for (int y : {0, h.lines - 1})
        for (int x : {0, h.samples - 1})
          for (int b : {0, h.bands - 1}) sink = sink + cube.value(y, x, b);
      const int n = std::min({h.lines, h.samples, h.bands, 256});
      for (int i = 0; i < n; ++i) sink = sink + cube.value(i, i, i);
    }
    // Out-of-range reads are errors, not reads.
    try {
      sink = sink + cube.value(h.lines, 0, 0);
      __builtin_trap();
    } catch (const Error&) {
    }
  } catch (const Error&) {
  }
  return 0;
}

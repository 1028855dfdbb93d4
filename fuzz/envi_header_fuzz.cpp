// Fuzz target: ENVI header parsing (read_envi_header), then formatting the parsed header again and
// parsing that (a header we write must read back with the same dimensions and type).
#include <cstdint>

#include "fuzz_common.hpp"
#include "spectrasift/envi.hpp"
#include "spectrasift/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace spectrasift;
  const auto path = fuzz::write_file("cube.hdr", data, size);
  EnviHeader h;
  try {
    h = read_envi_header(path);
  } catch (const Error&) {
    return 0;
  }
  if (h.samples < 1 || h.lines < 1 || h.bands < 1) __builtin_trap();
  // Round trip of what we write (format_envi_header) back through the parser.
  const std::string text = format_envi_header(h);
  const auto again_path = fuzz::write_file("again.hdr", text.data(), text.size());
  try {
    const EnviHeader again = read_envi_header(again_path);
    if (again.samples != h.samples || again.lines != h.lines || again.bands != h.bands ||
        again.data_type != h.data_type || again.interleave != h.interleave || again.big_endian != h.big_endian)
      __builtin_trap();
  } catch (const Error&) {
    // A header that parses but whose re-formatted text does not (e.g. names with braces or commas) is a
    // writer limitation, reported as an Error by the reader; not a memory-safety issue.
  }
  return 0;
}

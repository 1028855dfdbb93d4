// Fuzz target: spectral libraries. The first input byte picks the reader: even -> CSV (read_csv_library
// on the rest), odd -> ENVI .sli (read_envi_library; the rest is "HEADER\n%%DATA%%\nDATA" as in
// envi_cube_fuzz). Both must give count * bands spectra values and count names, or an Error.
#include <cstdint>

#include "fuzz_common.hpp"
#include "spectrasift/envi.hpp"
#include "spectrasift/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace spectrasift;
  if (size < 1) return 0;
  const bool envi = data[0] & 1;
  try {
    SpectralLibrary lib;
    if (envi) {
      const auto [hdr_text, bytes] = fuzz::split_input(data + 1, size - 1);
      fuzz::write_file("lib.hdr", hdr_text.data(), hdr_text.size());
      const auto sli = fuzz::write_file("lib.sli", bytes.data(), bytes.size());
      lib = read_envi_library(sli);
    } else {
      const auto csv = fuzz::write_file("lib.csv", data + 1, size - 1);
      lib = read_csv_library(csv);
    }
    if (lib.count < 1 || lib.bands < 1 || lib.spectra.size() != std::size_t(lib.count) * lib.bands ||
        lib.names.size() != std::size_t(lib.count) ||
        (!lib.wavelength.empty() && lib.wavelength.size() != std::size_t(lib.bands)))
      __builtin_trap();
  } catch (const Error&) {
  }
  return 0;
}

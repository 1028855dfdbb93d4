// spectrasift/envi.hpp — ENVI cubes and spectral libraries.
// A cube is read lazily: open_envi() parses and checks the header against the data file's size and
// memory-maps the data; values are converted from their native type (and byte order) only by the
// backend that consumes them, chunk by chunk.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace spectrasift {

class OutputSet;  // io.hpp

/// ENVI "data type" codes that are supported (complex 6 and 9 are rejected with a clear error).
enum class SampleType : std::uint8_t {
  kU8 = 1, kI16 = 2, kI32 = 3, kF32 = 4, kF64 = 5, kU16 = 12, kU32 = 13, kI64 = 14, kU64 = 15
};
std::size_t sample_size(SampleType t) noexcept;
const char* to_string(SampleType t) noexcept;
/// One sample at `sample` converted to double (byte order handled).
double sample_value(const void* sample, SampleType type, bool big_endian) noexcept;

enum class Interleave : std::uint8_t { kBsq, kBil, kBip };
const char* to_string(Interleave i) noexcept;

/// The parsed header. Keys are matched case-insensitively; values in braces may span lines.
struct EnviHeader {
  int samples = 0;                 ///< columns (x)
  int lines = 0;                   ///< rows (y)
  int bands = 0;
  SampleType data_type = SampleType::kF32;
  Interleave interleave = Interleave::kBsq;
  bool big_endian = false;         ///< "byte order" = 1
  std::uint64_t header_offset = 0; ///< bytes to skip at the start of the data file
  std::string file_type = "ENVI Standard";
  std::vector<double> wavelength;  ///< empty when absent
  std::string wavelength_units;
  std::vector<double> fwhm;
  std::vector<int> bbl;            ///< bad band list: 1 = good, 0 = bad; empty = all good
  std::optional<double> data_ignore_value;
  std::optional<double> reflectance_scale_factor;
  std::vector<std::string> band_names;
  std::vector<std::string> spectra_names;  ///< spectral libraries
  std::string description;
  /// Every key as written (lower-cased key -> raw value text without braces), including the above,
  /// so that writers can copy "map info", "coordinate system string", ... to their outputs.
  std::map<std::string, std::string> fields;
};

/// Parses a header file. Missing required keys (samples, lines, bands, data type), unknown data
/// types, complex types and malformed values throw Error(kBadFormat) naming the file and the key.
EnviHeader read_envi_header(const std::filesystem::path& hdr_path);

/// Finds the data file of a header: the header's name without extension, or with .img, .dat,
/// .raw, .bsq, .bil, .bip, .sli (lower or upper case). Throws Error(kIo) listing what was tried.
std::filesystem::path find_envi_data_file(const std::filesystem::path& hdr_path);

/// An opened cube: header plus a read-only memory map of its data file (size checked against the
/// header). Move-only. Element (line y, sample x, band b) is at element offset
/// y * line_stride() + x * sample_stride() + b * band_stride() from data().
class EnviCube {
 public:
  EnviCube() = default;
  EnviCube(EnviCube&&) noexcept;
  EnviCube& operator=(EnviCube&&) noexcept;
  ~EnviCube();

  const EnviHeader& header() const noexcept { return header_; }
  const std::filesystem::path& header_path() const noexcept { return header_path_; }
  const std::filesystem::path& data_path() const noexcept { return data_path_; }
  const std::uint8_t* data() const noexcept { return data_; }  ///< first sample (after the header offset)
  std::size_t data_bytes() const noexcept { return data_bytes_; }
  std::size_t line_stride() const noexcept;    ///< elements
  std::size_t sample_stride() const noexcept;  ///< elements
  std::size_t band_stride() const noexcept;    ///< elements
  /// One value converted to double (byte order handled), for tests and small reads.
  double value(int line, int sample, int band) const;
  /// Throws Error(kIo) when the data file shrank while it was mapped: the reads past its new end saw
  /// zeros instead of ending the process with SIGBUS. Call it after reading the data.
  void check_intact() const;

 private:
  friend EnviCube open_envi(const std::filesystem::path&, std::uint64_t);
  EnviHeader header_;
  std::filesystem::path header_path_, data_path_;
  const std::uint8_t* data_ = nullptr;
  void* map_ = nullptr;
  std::size_t map_bytes_ = 0;
  std::size_t data_bytes_ = 0;
  int guard_ = -1;  ///< io/mapping_guard.hpp handle of the mapping
};

/// Opens a cube from its header path (or from the data file path when a .hdr sits beside it).
/// max_pixels: samples * lines limit checked before mapping (0 = none).
EnviCube open_envi(const std::filesystem::path& path, std::uint64_t max_pixels = 0);

/// Writes a float32 BSQ cube (little-endian) with its header: band names, and "description", "map info",
/// "coordinate system string", "projection info" copied from `like` when given; wavelength/units/fwhm
/// only when `like` has the same number of bands (otherwise they would describe other bands).
/// bands_data holds bands * lines * samples floats, band after band. NaN marks no-data and is
/// declared as "data ignore value = nan" is not portable, so no ignore value is written for floats.
void write_envi_f32(const std::filesystem::path& hdr_path, int samples, int lines,
                    const std::vector<std::string>& band_names, const float* bands_data,
                    const EnviHeader* like = nullptr);
/// The same for an int32 classification-like band set (ENVI data type 3).
void write_envi_i32(const std::filesystem::path& hdr_path, int samples, int lines,
                    const std::vector<std::string>& band_names, const std::int32_t* bands_data,
                    const EnviHeader* like = nullptr);

/// Writes any cube: the header text of `header` (samples, lines, bands, data type, interleave, byte
/// order, header offset 0, wavelength/units, fwhm, bbl, data ignore value, reflectance scale factor, band
/// names, spectra names, description, and "map info" / "coordinate system string" / "projection info"
/// from header.fields) and `bytes` bytes of data exactly as given (already in that layout and byte order).
/// The data file is the header path with .hdr replaced by .img (a path without .hdr gets ".hdr" added for
/// the header and is itself the data file). Both files go through AtomicOutput: no partial output.
/// (Added with the implementation; the writers above use it.)
void write_envi_raw(const std::filesystem::path& hdr_path, const EnviHeader& header, const void* bytes,
                    std::size_t size);
/// The three writers above, writing into an OutputSet (io.hpp) instead: the data file and the header become
/// two outputs of the set and appear only with the set's commit(), together with the set's other outputs.
void write_envi_raw(OutputSet& outputs, const std::filesystem::path& hdr_path, const EnviHeader& header,
                    const void* bytes, std::size_t size);
void write_envi_f32(OutputSet& outputs, const std::filesystem::path& hdr_path, int samples, int lines,
                    const std::vector<std::string>& band_names, const float* bands_data,
                    const EnviHeader* like = nullptr);
void write_envi_i32(OutputSet& outputs, const std::filesystem::path& hdr_path, int samples, int lines,
                    const std::vector<std::string>& band_names, const std::int32_t* bands_data,
                    const EnviHeader* like = nullptr);
/// The header text that write_envi_raw writes (for tests and tools).
std::string format_envi_header(const EnviHeader& header);

/// Reference spectra: count spectra of `bands` values each (row-major), with names and, when
/// known, the wavelengths of their samples.
struct SpectralLibrary {
  int count = 0;
  int bands = 0;
  std::vector<float> spectra;       ///< count * bands
  std::vector<std::string> names;   ///< count names
  std::vector<double> wavelength;   ///< bands wavelengths, empty when unknown
  std::string wavelength_units;
  std::vector<double> fwhm;
};

/// ENVI spectral library (.sli + .hdr: one spectrum per line, samples = bands, "spectra names").
SpectralLibrary read_envi_library(const std::filesystem::path& path);
/// CSV: a header row; first column wavelength (header "wavelength", any case), one named column per
/// spectrum. Throws Error(kBadFormat) naming the file and line for ragged rows or non-numbers.
SpectralLibrary read_csv_library(const std::filesystem::path& path);
/// Dispatch on extension (.csv) or content.
SpectralLibrary read_library(const std::filesystem::path& path);

}  // namespace spectrasift

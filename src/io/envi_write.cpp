// ENVI writers: the header text and cubes written as one output set (data file first, header second).
#include <sstream>
#include <string>
#include <vector>

#include "io/envi_text.hpp"
#include "io/temp_files.hpp"
#include "spectrasift/envi.hpp"
#include "spectrasift/error.hpp"
#include "spectrasift/io.hpp"

namespace spectrasift {

namespace fs = std::filesystem;
using namespace envi_text;

// ---- writers -------------------------------------------------------------------------------------------

std::string format_envi_header(const EnviHeader& h) {
  std::ostringstream o;
  o << "ENVI\n";
  o << "description = {" << (h.description.empty() ? "written by spectrasift" : h.description) << "}\n";
  o << "samples = " << h.samples << "\nlines = " << h.lines << "\nbands = " << h.bands << "\n";
  o << "header offset = 0\n";
  o << "file type = " << (h.file_type.empty() ? "ENVI Standard" : h.file_type) << "\n";
  o << "data type = " << int(h.data_type) << "\n";
  o << "interleave = " << to_string(h.interleave) << "\n";
  o << "byte order = " << (h.big_endian ? 1 : 0) << "\n";
  for (const char* key : {"map info", "coordinate system string", "projection info"}) {
    auto it = h.fields.find(key);
    if (it != h.fields.end()) o << key << " = {" << it->second << "}\n";
  }
  if (!h.wavelength_units.empty()) o << "wavelength units = " << h.wavelength_units << "\n";
  if (!h.wavelength.empty()) o << "wavelength = " << brace_list(h.wavelength) << "\n";
  if (!h.fwhm.empty()) o << "fwhm = " << brace_list(h.fwhm) << "\n";
  if (!h.bbl.empty()) o << "bbl = " << brace_list(h.bbl) << "\n";
  if (h.data_ignore_value) o << "data ignore value = " << format_number(*h.data_ignore_value) << "\n";
  if (h.reflectance_scale_factor)
    o << "reflectance scale factor = " << format_number(*h.reflectance_scale_factor) << "\n";
  if (!h.band_names.empty()) o << "band names = " << brace_list(h.band_names) << "\n";
  if (!h.spectra_names.empty()) o << "spectra names = " << brace_list(h.spectra_names) << "\n";
  return o.str();
}

namespace {

void write_file(const fs::path& path, const void* bytes, std::size_t size) {
  io_detail::write_file_atomically(path, bytes, size);  // a set's temporary: written in place, named as the user's file
}

void check_names(const std::vector<std::string>& names) {
  for (const auto& n : names)
    if (n.find_first_of(",{}") != std::string::npos)
      throw Error(ErrorCode::kInvalidArgument, "band name '" + n + "' contains ',', '{' or '}', which ENVI cannot hold");
}

EnviHeader output_header(int samples, int lines, const std::vector<std::string>& band_names, SampleType type,
                         const EnviHeader* like) {
  if (samples <= 0 || lines <= 0 || band_names.empty())
    throw Error(ErrorCode::kInvalidArgument, "ENVI output needs samples, lines and at least one band name");
  check_names(band_names);
  EnviHeader h;
  h.samples = samples;
  h.lines = lines;
  h.bands = int(band_names.size());
  h.data_type = type;
  h.interleave = Interleave::kBsq;
  h.band_names = band_names;
  if (like) {
    h.description = like->description;
    for (const char* key : {"map info", "coordinate system string", "projection info"})
      if (auto it = like->fields.find(key); it != like->fields.end()) h.fields[key] = it->second;
    // Wavelengths describe bands: they are copied only when the output has the input's bands.
    if (like->bands == h.bands) {
      h.wavelength = like->wavelength;
      h.wavelength_units = like->wavelength_units;
      h.fwhm = like->fwhm;
    } else if (!like->wavelength_units.empty()) {
      h.fields["wavelength units"] = like->wavelength_units;
    }
  }
  return h;
}

}  // namespace

void write_envi_raw(OutputSet& outputs, const fs::path& hdr_path, const EnviHeader& header, const void* bytes,
                    std::size_t size) {
  fs::path hdr = hdr_path, data = hdr_path;
  if (lower(hdr_path.extension().string()) == ".hdr") {
    data.replace_extension(".img");
  } else {
    hdr += ".hdr";
  }
  const std::size_t need = std::size_t(header.samples) * std::size_t(header.lines) * std::size_t(header.bands) *
                           sample_size(header.data_type);
  if (size != need)
    throw Error(ErrorCode::kInvalidArgument, hdr.string() + ": " + std::to_string(size) +
                                                 " bytes given for a cube of " + std::to_string(need) + " bytes");
  // Data first, header second: the set renames them in this order, and a failed header rename removes the
  // data file again (no data file without its header).
  write_file(outputs.add(data), bytes, size);
  const std::string text = format_envi_header(header);
  write_file(outputs.add(hdr), text.data(), text.size());
}

void write_envi_raw(const fs::path& hdr_path, const EnviHeader& header, const void* bytes, std::size_t size) {
  OutputSet outputs;
  write_envi_raw(outputs, hdr_path, header, bytes, size);
  outputs.commit();
}

void write_envi_f32(OutputSet& outputs, const fs::path& hdr_path, int samples, int lines,
                    const std::vector<std::string>& band_names, const float* bands_data, const EnviHeader* like) {
  const EnviHeader h = output_header(samples, lines, band_names, SampleType::kF32, like);
  write_envi_raw(outputs, hdr_path, h, bands_data, std::size_t(samples) * lines * band_names.size() * sizeof(float));
}

void write_envi_i32(OutputSet& outputs, const fs::path& hdr_path, int samples, int lines,
                    const std::vector<std::string>& band_names, const std::int32_t* bands_data,
                    const EnviHeader* like) {
  EnviHeader h = output_header(samples, lines, band_names, SampleType::kI32, like);
  write_envi_raw(outputs, hdr_path, h, bands_data,
                 std::size_t(samples) * lines * band_names.size() * sizeof(std::int32_t));
}

void write_envi_f32(const fs::path& hdr_path, int samples, int lines, const std::vector<std::string>& band_names,
                    const float* bands_data, const EnviHeader* like) {
  OutputSet outputs;
  write_envi_f32(outputs, hdr_path, samples, lines, band_names, bands_data, like);
  outputs.commit();
}

void write_envi_i32(const fs::path& hdr_path, int samples, int lines, const std::vector<std::string>& band_names,
                    const std::int32_t* bands_data, const EnviHeader* like) {
  OutputSet outputs;
  write_envi_i32(outputs, hdr_path, samples, lines, band_names, bands_data, like);
  outputs.commit();
}

}  // namespace spectrasift

// ENVI headers, memory-mapped cubes, writers and spectral libraries (.sli and CSV).
//
// Header grammar as ENVI and Spectral Python read it: the first line is "ENVI"; then "key = value" lines;
// a value that starts with '{' runs to the matching '}' and may span lines; lines starting with ';' are
// comments; keys are compared case-insensitively with runs of blanks collapsed ("Data  Type" = "data type").
#include "spectrasift/envi.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>

#include "core/limits.hpp"
#include "io/envi_text.hpp"
#include "io/mapping_guard.hpp"
#include "spectrasift/error.hpp"
#include "spectrasift/io.hpp"

namespace spectrasift {

namespace fs = std::filesystem;

std::size_t sample_size(SampleType t) noexcept {
  switch (t) {
    case SampleType::kU8: return 1;
    case SampleType::kI16: case SampleType::kU16: return 2;
    case SampleType::kI32: case SampleType::kU32: case SampleType::kF32: return 4;
    case SampleType::kF64: case SampleType::kI64: case SampleType::kU64: return 8;
  }
  return 0;
}

const char* to_string(SampleType t) noexcept {
  switch (t) {
    case SampleType::kU8: return "uint8";
    case SampleType::kI16: return "int16";
    case SampleType::kI32: return "int32";
    case SampleType::kF32: return "float32";
    case SampleType::kF64: return "float64";
    case SampleType::kU16: return "uint16";
    case SampleType::kU32: return "uint32";
    case SampleType::kI64: return "int64";
    case SampleType::kU64: return "uint64";
  }
  return "?";
}

const char* to_string(Interleave i) noexcept {
  switch (i) {
    case Interleave::kBsq: return "bsq";
    case Interleave::kBil: return "bil";
    case Interleave::kBip: return "bip";
  }
  return "?";
}

using namespace envi_text;

EnviHeader read_envi_header(const fs::path& hdr_path) {
  const std::string text = read_text(hdr_path);
  std::istringstream in(text);
  std::string line;
  int line_no = 0;
  // The magic: first non-blank line is "ENVI" (a UTF-8 byte order mark is tolerated).
  bool magic = false;
  while (std::getline(in, line)) {
    ++line_no;
    std::string t = trim(line);
    if (t.rfind("\xEF\xBB\xBF", 0) == 0) t = t.substr(3);
    if (t.empty()) continue;
    magic = (t == "ENVI");
    break;
  }
  if (!magic) bad(hdr_path, "not an ENVI header (the first line must be 'ENVI')");

  EnviHeader h;
  while (std::getline(in, line)) {
    ++line_no;
    std::string t = trim(line);
    if (t.empty() || t[0] == ';') continue;
    const auto eq = t.find('=');
    if (eq == std::string::npos)
      bad(hdr_path, "line " + std::to_string(line_no) + ": expected 'key = value', got '" + t + "'");
    const std::string key = normalise_key(t.substr(0, eq));
    if (key.empty()) bad(hdr_path, "line " + std::to_string(line_no) + ": empty key");
    std::string value = trim(t.substr(eq + 1));
    if (!value.empty() && value[0] == '{') {
      const int start = line_no;
      // Only the line just appended is searched for '}': linear in the value's length (searching the whole
      // value each time made a 2-million-line list take 45 s).
      bool closed = value.find('}') != std::string::npos;
      while (!closed) {
        if (!std::getline(in, line))
          bad(hdr_path, "line " + std::to_string(start) + ": '{' of '" + key + "' is never closed");
        ++line_no;
        value += '\n';
        value += line;
        closed = line.find('}') != std::string::npos;
      }
      const auto close = value.rfind('}');
      if (!trim(value.substr(close + 1)).empty())
        bad(hdr_path, "line " + std::to_string(line_no) + ": text after '}' of '" + key + "'");
      value = trim(value.substr(1, close - 1));
      std::replace(value.begin(), value.end(), '\n', ' ');
      std::replace(value.begin(), value.end(), '\r', ' ');
    }
    h.fields[key] = value;
  }

  auto get = [&](const char* key) -> const std::string* {
    auto it = h.fields.find(key);
    return it == h.fields.end() ? nullptr : &it->second;
  };
  auto required = [&](const char* key) -> const std::string& {
    const auto* v = get(key);
    if (!v) bad(hdr_path, std::string("required key '") + key + "' is missing");
    return *v;
  };
  constexpr long long kMaxDim = std::numeric_limits<int>::max();
  h.samples = int(integer(hdr_path, "samples", required("samples"), 1, kMaxDim));
  h.lines = int(integer(hdr_path, "lines", required("lines"), 1, kMaxDim));
  h.bands = int(integer(hdr_path, "bands", required("bands"), 1, kMaxDim));
  {
    const std::string& dt = required("data type");
    const long long code = integer(hdr_path, "data type", dt, std::numeric_limits<int>::min(), kMaxDim);
    switch (code) {
      case 1: case 2: case 3: case 4: case 5: case 12: case 13: case 14: case 15:
        h.data_type = SampleType(code);
        break;
      case 6: case 9:
        throw Error(ErrorCode::kUnsupported, hdr_path.string() + ": 'data type = " + std::to_string(code) +
                                                 "' is complex (" + (code == 6 ? "2 x float32" : "2 x float64") +
                                                 "); complex cubes are not supported");
      default:
        bad(hdr_path, "'data type = " + std::to_string(code) +
                          "' is not an ENVI data type (1, 2, 3, 4, 5, 12, 13, 14, 15 are supported)");
    }
  }
  if (const auto* v = get("interleave")) {
    const std::string i = lower(trim(*v));
    if (i == "bsq") h.interleave = Interleave::kBsq;
    else if (i == "bil") h.interleave = Interleave::kBil;
    else if (i == "bip") h.interleave = Interleave::kBip;
    else bad(hdr_path, "'interleave = " + *v + "' is not bsq, bil or bip");
  }
  if (const auto* v = get("byte order")) h.big_endian = integer(hdr_path, "byte order", *v, 0, 1) == 1;
  if (const auto* v = get("header offset"))
    h.header_offset = std::uint64_t(integer(hdr_path, "header offset", *v, 0, std::numeric_limits<long long>::max()));
  if (const auto* v = get("file type")) h.file_type = *v;
  if (const auto* v = get("description")) h.description = *v;
  // Spectral libraries run their spectral axis along the samples.
  const int spectral_len = is_library(h) ? h.samples : h.bands;
  auto check_len = [&](const char* key, std::size_t n) {
    if (n != std::size_t(spectral_len))
      bad(hdr_path, std::string("'") + key + "' has " + std::to_string(n) + " values, but the cube has " +
                        std::to_string(spectral_len) + (is_library(h) ? " samples" : " bands"));
  };
  if (const auto* v = get("wavelength")) {
    h.wavelength = number_list(hdr_path, "wavelength", *v);
    check_len("wavelength", h.wavelength.size());
  }
  if (const auto* v = get("wavelength units")) h.wavelength_units = trim(*v);
  if (const auto* v = get("fwhm")) {
    h.fwhm = number_list(hdr_path, "fwhm", *v);
    check_len("fwhm", h.fwhm.size());
  }
  if (const auto* v = get("bbl")) {
    for (double b : number_list(hdr_path, "bbl", *v)) {
      if (b != 0.0 && b != 1.0) bad(hdr_path, "'bbl' holds " + format_number(b) + " (only 0 and 1 are allowed)");
      h.bbl.push_back(int(b));
    }
    check_len("bbl", h.bbl.size());
  }
  if (const auto* v = get("data ignore value")) h.data_ignore_value = number(hdr_path, "data ignore value", *v);
  if (const auto* v = get("reflectance scale factor")) {
    const double f = number(hdr_path, "reflectance scale factor", *v);
    if (!(f > 0.0) || !std::isfinite(f))
      bad(hdr_path, "'reflectance scale factor = " + trim(*v) + "' must be a positive number");
    h.reflectance_scale_factor = f;
  }
  if (const auto* v = get("band names")) h.band_names = split_list(*v);
  if (const auto* v = get("spectra names")) h.spectra_names = split_list(*v);
  return h;
}

fs::path find_envi_data_file(const fs::path& hdr_path) {
  fs::path base = hdr_path;
  if (lower(base.extension().string()) == ".hdr") base.replace_extension();
  std::vector<fs::path> tried;
  std::error_code ec;
  auto try_path = [&](const fs::path& p) {
    tried.push_back(p);
    return fs::is_regular_file(p, ec);
  };
  if (try_path(base)) return base;
  for (const char* ext : {".img", ".dat", ".raw", ".bsq", ".bil", ".bip", ".sli"}) {
    for (bool upper : {false, true}) {
      std::string e = ext;
      if (upper) for (auto& c : e) c = char(std::toupper(static_cast<unsigned char>(c)));
      fs::path p = base;
      p += e;
      if (try_path(p)) return p;
    }
  }
  std::string list;
  for (const auto& p : tried) list += (list.empty() ? "" : ", ") + p.filename().string();
  throw Error(ErrorCode::kIo, hdr_path.string() + ": no data file found beside the header (tried " + list + ")");
}

// ---- EnviCube ----------------------------------------------------------------------------------------

namespace {

void release_mapping(void* map, std::size_t bytes, int guard) {
  io_detail::unguard_mapping(guard);
  if (map) ::munmap(map, bytes);
}

}  // namespace

EnviCube::EnviCube(EnviCube&& o) noexcept { *this = std::move(o); }

EnviCube& EnviCube::operator=(EnviCube&& o) noexcept {
  if (this != &o) {
    release_mapping(map_, map_bytes_, guard_);
    header_ = std::move(o.header_);
    header_path_ = std::move(o.header_path_);
    data_path_ = std::move(o.data_path_);
    data_ = o.data_;
    map_ = o.map_;
    map_bytes_ = o.map_bytes_;
    data_bytes_ = o.data_bytes_;
    guard_ = o.guard_;
    o.guard_ = -1;
    o.data_ = nullptr;
    o.map_ = nullptr;
    o.map_bytes_ = o.data_bytes_ = 0;
  }
  return *this;
}

EnviCube::~EnviCube() { release_mapping(map_, map_bytes_, guard_); }

void EnviCube::check_intact() const {
  if (!io_detail::mapping_faulted(guard_)) return;
  std::error_code ec;
  const auto now = fs::file_size(data_path_, ec);
  throw Error(ErrorCode::kIo, data_path_.string() + ": the file shrank while it was read (" +
                                  (ec ? std::string("now unreadable") : std::to_string(now) + " bytes now") + ", " +
                                  std::to_string(data_bytes_) + " bytes of data declared by " +
                                  header_path_.string() + ")");
}

std::size_t EnviCube::line_stride() const noexcept {
  const std::size_t s = std::size_t(header_.samples), b = std::size_t(header_.bands);
  return header_.interleave == Interleave::kBsq ? s : s * b;  // bsq: next line of the band; bil/bip: a whole line
}
std::size_t EnviCube::sample_stride() const noexcept {
  return header_.interleave == Interleave::kBip ? std::size_t(header_.bands) : 1;
}
std::size_t EnviCube::band_stride() const noexcept {
  switch (header_.interleave) {
    case Interleave::kBsq: return std::size_t(header_.samples) * std::size_t(header_.lines);
    case Interleave::kBil: return std::size_t(header_.samples);
    case Interleave::kBip: return 1;
  }
  return 1;
}

namespace {

template <class T>
T load_as(const std::uint8_t* p, bool big_endian) {
  std::uint8_t b[sizeof(T)];
  std::memcpy(b, p, sizeof(T));
  if (big_endian) std::reverse(b, b + sizeof(T));
  T v;
  std::memcpy(&v, b, sizeof(T));
  return v;
}

}  // namespace

double sample_value(const void* sample, SampleType type, bool big_endian) noexcept {
  const auto* p = static_cast<const std::uint8_t*>(sample);
  const bool be = big_endian;
  switch (type) {
    case SampleType::kU8: return *p;
    case SampleType::kI16: return load_as<std::int16_t>(p, be);
    case SampleType::kU16: return load_as<std::uint16_t>(p, be);
    case SampleType::kI32: return load_as<std::int32_t>(p, be);
    case SampleType::kU32: return load_as<std::uint32_t>(p, be);
    case SampleType::kF32: return load_as<float>(p, be);
    case SampleType::kF64: return load_as<double>(p, be);
    case SampleType::kI64: return double(load_as<std::int64_t>(p, be));
    case SampleType::kU64: return double(load_as<std::uint64_t>(p, be));
  }
  return 0;
}

double EnviCube::value(int line, int sample, int band) const {
  if (line < 0 || line >= header_.lines || sample < 0 || sample >= header_.samples || band < 0 || band >= header_.bands)
    throw Error(ErrorCode::kInvalidArgument, header_path_.string() + ": element (line " + std::to_string(line) +
                                                 ", sample " + std::to_string(sample) + ", band " +
                                                 std::to_string(band) + ") is outside the cube");
  const std::size_t e = std::size_t(line) * line_stride() + std::size_t(sample) * sample_stride() +
                        std::size_t(band) * band_stride();
  return sample_value(data_ + e * sample_size(header_.data_type), header_.data_type, header_.big_endian);
}

EnviCube open_envi(const fs::path& path, std::uint64_t max_pixels) {
  // A header path, or a data file with its header beside it (NAME.hdr or NAME.ext.hdr).
  fs::path hdr = path;
  std::error_code ec;
  if (lower(path.extension().string()) != ".hdr") {
    fs::path a = path, b = path;
    a += ".hdr";
    b.replace_extension(".hdr");
    fs::path c = path;
    c.replace_extension(".HDR");
    if (fs::is_regular_file(a, ec)) hdr = a;
    else if (fs::is_regular_file(b, ec)) hdr = b;
    else if (fs::is_regular_file(c, ec)) hdr = c;
    else throw Error(ErrorCode::kIo, path.string() + ": no ENVI header beside it (tried " + a.filename().string() +
                                         ", " + b.filename().string() + ")");
  }
  if (!fs::exists(hdr, ec)) throw Error(ErrorCode::kIo, hdr.string() + ": no such file");
  EnviCube cube;
  cube.header_ = read_envi_header(hdr);
  cube.header_path_ = hdr;
  const EnviHeader& h = cube.header_;
  const std::uint64_t pixels = std::uint64_t(h.samples) * std::uint64_t(h.lines);
  detail::check_pixel_limit(hdr.string() + ": cube of ", std::uint64_t(h.samples), std::uint64_t(h.lines), max_pixels);
  cube.data_path_ = lower(path.extension().string()) == ".hdr" ? find_envi_data_file(hdr) : path;
  // Expected size, with overflow checks (dimensions are each < 2^31).
  std::uint64_t data_bytes = 0, total = 0;
  if (__builtin_mul_overflow(pixels, std::uint64_t(h.bands) * sample_size(h.data_type), &data_bytes) ||
      __builtin_add_overflow(data_bytes, h.header_offset, &total))
    bad(hdr, "the declared cube size overflows 64 bits");

  const int fd = ::open(cube.data_path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    throw Error(ErrorCode::kIo, cube.data_path_.string() + ": cannot open (" + std::strerror(errno) + ")");
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    throw Error(ErrorCode::kIo, cube.data_path_.string() + ": cannot stat (" + std::strerror(err) + ")");
  }
  const std::uint64_t have = std::uint64_t(st.st_size);
  if (have < total) {
    ::close(fd);
    bad(cube.data_path_, "holds " + std::to_string(have) + " bytes, but its header " + hdr.string() + " declares " +
                             std::to_string(h.samples) + " samples x " + std::to_string(h.lines) + " lines x " +
                             std::to_string(h.bands) + " bands of " + to_string(h.data_type) +
                             (h.header_offset ? " after a header offset of " + std::to_string(h.header_offset) : "") +
                             " = " + std::to_string(total) + " bytes (data file too small)");
  }
  // Map from the page that holds the header offset; data_ points to the first sample.
  const std::uint64_t page = std::uint64_t(::sysconf(_SC_PAGESIZE));
  const std::uint64_t map_start = h.header_offset / page * page;
  const std::size_t map_bytes = std::size_t(total - map_start);
  void* m = ::mmap(nullptr, map_bytes, PROT_READ, MAP_PRIVATE, fd, off_t(map_start));
  const int map_err = errno;
  ::close(fd);
  if (m == MAP_FAILED)
    throw Error(ErrorCode::kIo, cube.data_path_.string() + ": cannot memory-map " + std::to_string(map_bytes) +
                                    " bytes (" + std::strerror(map_err) + ")");
  ::madvise(m, map_bytes, MADV_SEQUENTIAL);
  cube.map_ = m;
  cube.map_bytes_ = map_bytes;
  cube.guard_ = io_detail::guard_mapping(m, map_bytes);
  cube.data_ = static_cast<const std::uint8_t*>(m) + (h.header_offset - map_start);
  cube.data_bytes_ = std::size_t(data_bytes);
  return cube;
}

// ---- spectral libraries ---------------------------------------------------------------------------------

SpectralLibrary read_envi_library(const fs::path& path) {
  EnviCube c = open_envi(path);
  const EnviHeader& h = c.header();
  if (h.bands != 1)
    bad(c.header_path(), "a spectral library has 1 band (one spectrum per line), this header declares " +
                             std::to_string(h.bands));
  SpectralLibrary lib;
  lib.count = h.lines;
  lib.bands = h.samples;
  lib.spectra.resize(std::size_t(lib.count) * lib.bands);
  const double scale = h.reflectance_scale_factor ? 1.0 / *h.reflectance_scale_factor : 1.0;
  for (int i = 0; i < lib.count; ++i)
    for (int b = 0; b < lib.bands; ++b) lib.spectra[std::size_t(i) * lib.bands + b] = float(c.value(i, b, 0) * scale);
  if (!h.spectra_names.empty() && int(h.spectra_names.size()) != lib.count)
    bad(c.header_path(), "'spectra names' has " + std::to_string(h.spectra_names.size()) + " names for " +
                             std::to_string(lib.count) + " spectra");
  for (int i = 0; i < lib.count; ++i)
    lib.names.push_back(h.spectra_names.empty() ? "spectrum " + std::to_string(i + 1) : h.spectra_names[i]);
  // The header parser checks these lengths against the samples only when 'file type' says "ENVI Spectral
  // Library"; read as a library, the spectral axis is the samples whatever the file type says (found by
  // library_fuzz: a damaged file type let one wavelength through for 4 samples).
  for (const auto& [key, list] : {std::pair<const char*, const std::vector<double>*>{"wavelength", &h.wavelength},
                                  {"fwhm", &h.fwhm}})
    if (!list->empty() && list->size() != std::size_t(lib.bands))
      bad(c.header_path(), std::string("'") + key + "' has " + std::to_string(list->size()) +
                               " values, but the spectral library has " + std::to_string(lib.bands) +
                               " samples (its spectral axis)");
  lib.wavelength = h.wavelength;
  lib.wavelength_units = h.wavelength_units;
  lib.fwhm = h.fwhm;
  return lib;
}

SpectralLibrary read_csv_library(const fs::path& path) {
  const std::string text = read_text(path);
  std::istringstream in(text);
  std::string line;
  int line_no = 0;
  std::vector<std::string> head;
  while (std::getline(in, line)) {
    ++line_no;
    if (!trim(line).empty()) {
      head = split_csv_row(line);  // a quoted name may hold a comma
      break;
    }
  }
  if (head.empty()) bad(path, "empty CSV file (expected a header row)");
  // First column "wavelength" (any case; "wavelength (nm)" gives the units) or a spectrum of its own.
  SpectralLibrary lib;
  const std::string first = lower(trim(head[0]));
  const bool has_wl = first.rfind("wavelength", 0) == 0;
  if (has_wl) {
    const auto a = first.find('('), b = first.find(')');
    if (a != std::string::npos && b != std::string::npos && b > a) lib.wavelength_units = trim(first.substr(a + 1, b - a - 1));
  }
  const std::size_t first_spectrum = has_wl ? 1 : 0;
  if (head.size() <= first_spectrum) bad(path, "line 1: no spectrum column after the wavelength column");
  for (std::size_t i = first_spectrum; i < head.size(); ++i) {
    const std::string n = trim(head[i]);
    lib.names.push_back(n.empty() ? "spectrum " + std::to_string(i - first_spectrum + 1) : n);
  }
  lib.count = int(lib.names.size());
  std::vector<std::vector<float>> columns(lib.names.size());
  while (std::getline(in, line)) {
    ++line_no;
    if (trim(line).empty() || trim(line)[0] == '#') continue;
    const auto cells = split_csv_row(line);
    if (cells.size() != head.size())
      bad(path, "line " + std::to_string(line_no) + ": " + std::to_string(cells.size()) + " values, the header has " +
                    std::to_string(head.size()) + " columns");
    for (std::size_t i = 0; i < cells.size(); ++i) {
      auto v = to_number(cells[i]);
      if (!v) bad(path, "line " + std::to_string(line_no) + ", column " + std::to_string(i + 1) + ": '" + cells[i] +
                            "' is not a number");
      if (i < first_spectrum) lib.wavelength.push_back(*v);
      else columns[i - first_spectrum].push_back(float(*v));
    }
  }
  lib.bands = int(columns[0].size());
  if (lib.bands == 0) bad(path, "no data rows");
  lib.spectra.resize(std::size_t(lib.count) * lib.bands);
  for (int s = 0; s < lib.count; ++s)
    std::copy(columns[s].begin(), columns[s].end(), lib.spectra.begin() + std::ptrdiff_t(s) * lib.bands);
  return lib;
}

SpectralLibrary read_library(const fs::path& path) {
  const std::string ext = lower(path.extension().string());
  if (ext == ".csv" || ext == ".txt") return read_csv_library(path);
  if (ext == ".hdr" || ext == ".sli") return read_envi_library(path);
  // By content: an ENVI library has a header beside it; otherwise try CSV.
  std::error_code ec;
  fs::path h = path;
  h += ".hdr";
  fs::path h2 = path;
  h2.replace_extension(".hdr");
  if (fs::exists(h, ec) || fs::exists(h2, ec)) return read_envi_library(path);
  return read_csv_library(path);
}

}  // namespace spectrasift

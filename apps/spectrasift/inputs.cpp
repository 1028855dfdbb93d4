#include "inputs.hpp"

#include <glob.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <map>
#include <optional>
#include <set>

#include "spectrasift/error.hpp"

namespace spectrasift::cli {

namespace fs = std::filesystem;

std::vector<std::string> expand_inputs(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  for (const std::string& a : args) {
    std::error_code ec;
    if (fs::exists(a, ec) || a.find_first_of("*?[") == std::string::npos) {
      out.push_back(a);
      continue;
    }
    glob_t g{};
    const int rc = ::glob(a.c_str(), 0, nullptr, &g);
    std::vector<std::string> found;
    if (rc == 0)
      for (std::size_t i = 0; i < g.gl_pathc; ++i) found.emplace_back(g.gl_pathv[i]);
    ::globfree(&g);
    if (found.empty()) throw Error(ErrorCode::kIo, a + ": no file matches this pattern");
    std::sort(found.begin(), found.end());
    out.insert(out.end(), found.begin(), found.end());
  }
  return out;
}

std::string lower_extension(const fs::path& p) {
  std::string e = p.extension().string();
  std::transform(e.begin(), e.end(), e.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return e;
}

namespace {

bool image_extension(const fs::path& p) {
  static const std::set<std::string> known{".png", ".jpg", ".jpeg", ".pgm", ".ppm", ".pnm", ".pbm", ".tif", ".tiff"};
  return known.count(lower_extension(p)) != 0;
}

}  // namespace

std::vector<std::string> expand_image_inputs(const std::vector<std::string>& args, bool* any_directory) {
  std::vector<std::string> out;
  if (any_directory) *any_directory = false;
  for (const std::string& a : expand_inputs(args)) {
    std::error_code ec;
    if (!fs::is_directory(a, ec)) {
      out.push_back(a);
      continue;
    }
    if (any_directory) *any_directory = true;
    std::vector<std::string> found;
    // The non-throwing increment: an error while listing is reported below (Error kIo naming the folder),
    // never as a std::filesystem::filesystem_error.
    for (fs::directory_iterator it(a, ec), end; !ec && it != end; it.increment(ec)) {
      std::error_code fe;
      if (it->is_regular_file(fe) && image_extension(it->path())) found.push_back(it->path().string());
    }
    if (ec) throw Error(ErrorCode::kIo, a + ": cannot list the folder (" + ec.message() + ")");
    if (found.empty())
      throw Error(ErrorCode::kIo, a + ": the folder holds no image (.png, .jpg, .jpeg, .pgm, .ppm, .pnm, .pbm, .tif, .tiff)");
    std::sort(found.begin(), found.end());
    out.insert(out.end(), found.begin(), found.end());
  }
  return out;
}

std::vector<fs::path> outputs_in_dir(const fs::path& dir, const std::vector<std::string>& inputs,
                                     const std::string& suffix) {
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
    throw Error(ErrorCode::kInvalidArgument,
                dir.string() + ": with several inputs each output option names a folder (one file per input)");
  fs::create_directories(dir, ec);
  if (ec) throw Error(ErrorCode::kIo, dir.string() + ": cannot create the folder (" + ec.message() + ")");
  std::vector<fs::path> out;
  std::set<fs::path> seen;
  for (const std::string& in : inputs) {
    out.push_back(dir / (fs::path(in).stem().string() + suffix));
    if (!seen.insert(out.back()).second)
      throw Error(ErrorCode::kInvalidArgument, "two inputs would both write " + out.back().string() +
                                                   " (inputs with the same name in different folders: run them apart)");
  }
  return out;
}

std::pair<int, int> parse_size(const std::string& text) {
  const auto fail = [&] {
    return Error(ErrorCode::kInvalidArgument, "--size '" + text + "' is not WxH (two positive integers, e.g. 1024x768)");
  };
  const char* p = text.data();
  const char* const end = p + text.size();
  int w = 0, h = 0;
  auto r = std::from_chars(p, end, w);
  if (r.ec != std::errc() || r.ptr == p || r.ptr == end || (*r.ptr != 'x' && *r.ptr != 'X')) throw fail();
  p = r.ptr + 1;
  r = std::from_chars(p, end, h);
  if (r.ec != std::errc() || r.ptr == p || r.ptr != end || w <= 0 || h <= 0) throw fail();
  return {w, h};
}

bool gdal_dataset_name(const std::string& name) {
  std::error_code ec;
  return gdal_supported() && name.find(':') != std::string::npos && !fs::exists(name, ec);
}

RasterInput read_raster_input(const std::string& path, int band, std::uint64_t max_pixels) {
  ImageLimits limits;
  limits.max_pixels = max_pixels;
  RasterInput in;
  if (band > 0 && !gdal_supported())
    throw Error(ErrorCode::kUnsupported, path + ": --band reads through GDAL, and this build has none: install "
                                                "libgdal-dev (scripts/setup-debian.sh) and rebuild spectrasift");
  std::optional<Error> ours;  // our decoders' refusal, when GDAL is asked next
  if (band == 0 && !gdal_dataset_name(path)) {
    try {
      in.image = read_image(path, limits);
    } catch (const Error& e) {
      if (e.code() != ErrorCode::kBadFormat && e.code() != ErrorCode::kUnsupported) throw;
      if (!gdal_supported())
        throw Error(e.code(), std::string(e.what()) + " (other raster formats, GeoTIFF among them, are read through "
                                                      "GDAL: install libgdal-dev and rebuild spectrasift)");
      ours = e;
    }
  }
  if (band > 0 || in.image.empty()) {
    GeoImage g;
    try {
      g = read_raster_image(path, band, limits);
    } catch (const Error& e) {
      // A file neither reads: our decoders' message first (it names the format they saw), then GDAL's.
      if (!ours || e.code() != ErrorCode::kBadFormat) throw;
      throw Error(ours->code(), std::string(ours->what()) + "; GDAL cannot read it either");
    }
    in.image = std::move(g.image);
    in.georef = std::move(g.georef);
    in.through_gdal = true;
    return in;
  }
  in.georef = read_georeference(path);
  return in;
}

void add_stretch_options(CLI::App& sub, SiftOptions& o) {
  o.stretch = SiftOptions::Stretch::kAuto;
  const std::map<std::string, SiftOptions::Stretch> names{{"auto", SiftOptions::Stretch::kAuto},
                                                          {"none", SiftOptions::Stretch::kNone},
                                                          {"percentile", SiftOptions::Stretch::kPercentile}};
  sub.add_option("--stretch", o.stretch,
                 "intensity stretch before SIFT: auto (16-bit and float images whose 1st..99th percentile range spans "
                 "less than half of the grey range are stretched to it; 8-bit ones never), percentile (always), none "
                 "(default auto)")
      ->transform(CLI::CheckedTransformer(names, CLI::ignore_case));
  sub.add_option_function<std::vector<double>>(
         "--stretch-percent",
         [&o](const std::vector<double>& v) {
           o.stretch_low = v[0];
           o.stretch_high = v[1];
         },
         "LOW,HIGH: the percentiles mapped to black and white by the stretch (default 1,99)")
      ->expected(2)
      ->delimiter(',');
}

CLI::Option* add_descriptor_type_option(CLI::App& sub, SiftOptions& o, const std::string& default_text) {
  // A name checked by CLI11 (a usage error names the choices), then mapped: parse_descriptor_type never throws here.
  return sub
      .add_option_function<std::string>(
          "--descriptor-type", [&o](const std::string& name) { o.descriptor_type = parse_descriptor_type(name); },
          "descriptor element type, OpenCV's descriptorType: f32 (float32, CV_32F) or u8 (bytes, CV_8U: the same "
          "integer values in a quarter of the memory, without a GPU's conversion to floats; not with --root-sift) " +
              default_text)
      ->check(CLI::IsMember({"f32", "u8"}, CLI::ignore_case));
}

void check_descriptor_type(const SiftOptions& o) {
  if (o.root_sift && o.descriptor_type == DescriptorType::kU8)
    throw Error(ErrorCode::kInvalidArgument,
                "--root-sift needs --descriptor-type f32 (RootSIFT values are not integers 0..255, bytes cannot hold them)");
}

}  // namespace spectrasift::cli

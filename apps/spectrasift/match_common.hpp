// Pieces shared by `spectrasift match` and `spectrasift register`: SIFT options on the command line,
// reading an input as an image or a feature file, and writing several outputs all-or-nothing.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cli.hpp"
#include "inputs.hpp"
#include "spectrasift/error.hpp"
#include "spectrasift/io.hpp"
#include "spectrasift/sift.hpp"

namespace spectrasift::cli {

/// The SIFT options a matching command takes (same names and defaults as `spectrasift sift`, but for
/// --descriptor-type: see resolve_descriptor_type); `band`, when given, gets --band. Returns --descriptor-type.
inline CLI::Option* add_sift_options(CLI::App& sub, SiftOptions& o, int* band = nullptr) {
  sub.add_option("--max-features", o.max_features, "keep the N strongest features per image, 0 = all (default 0)");
  sub.add_option("--contrast-threshold", o.contrast_threshold, "SIFT contrast threshold (default 0.04)");
  sub.add_option("--edge-threshold", o.edge_threshold, "SIFT edge threshold (default 10)");
  sub.add_option("--octave-layers", o.octave_layers, "SIFT layers per octave (default 3)");
  sub.add_option("--sigma", o.sigma, "SIFT base blur in pixels (default 1.6)");
  sub.add_flag("--root-sift", o.root_sift, "use RootSIFT descriptors (default off)");
  CLI::Option* type = add_descriptor_type_option(
      sub, o,
      "(default here u8 on a GPU backend, f32 on the CPU backend or with --root-sift: these features are only "
      "matched, and u8 gives the same matches)");
  add_stretch_options(sub, o);
  if (band)
    sub.add_option("--band", *band, "read band N (1-based) of each image through GDAL (default: the whole image by our "
                                    "decoders, or GDAL's first band for other rasters)")
        ->check(integer_in(1, 1 << 20));
  return type;
}

/// A matching command's descriptor type when --descriptor-type was not given, for a context on `backend`: u8 on a
/// GPU backend (the same values and matches as floats, a quarter of the host memory, no conversion to floats),
/// f32 with --root-sift (its values need floats) and on the CPU backend (its SIFT makes floats and its matcher
/// takes floats: bytes would be two conversions).
inline void resolve_descriptor_type(SiftOptions& o, const CLI::Option* given, Backend backend) {
  if (given && given->count() == 0)
    o.descriptor_type = o.root_sift || backend == Backend::kCpu ? DescriptorType::kF32 : DescriptorType::kU8;
}

/// One input of a matching command: its features, and the image when the input was an image.
struct FeatureInput {
  std::filesystem::path path;
  Features features;
  Image image;
  GeoReference georef;  ///< where the image is on the ground (read_raster_input)
  bool through_gdal = false;
  bool from_image = false;
  double read_ms = 0;
  double sift_ms = 0;

  /// The image's size: the image's, else the one the feature file records (0 when it records none).
  int width() const { return from_image ? image.width : features.image_width; }
  int height() const { return from_image ? image.height : features.image_height; }
  /// {"path", "width", "height", "features", "kind", "descriptor_type"}: how every command's JSON describes an
  /// input (descriptor_type: the features' own, from --descriptor-type or the feature file).
  nlohmann::json describe() const {
    nlohmann::json j = {{"path", path.string()},
                        {"width", width()},
                        {"height", height()},
                        {"features", features.size()},
                        {"kind", from_image ? "image" : "features"},
                        {"descriptor_type", to_string(features.descriptor_type)}};
    if (georef.georeferenced()) j["georeferenced"] = true;
    return j;
  }
};

/// The image SIFT runs on: 8-bit colour files are read again as grey the way cv2.imread(IMREAD_GRAYSCALE)
/// makes it (ReadMode::kGray: a JPEG's luma plane), so that the keypoints are OpenCV's; others as read.
inline Image sift_input(const std::filesystem::path& path, const Image& image, std::uint64_t max_pixels) {
  if (image.channels == 1 || image.type != PixelType::kU8) return image;
  ImageLimits limits;
  limits.max_pixels = max_pixels;
  return read_image(path, ReadMode::kGray, limits);
}

/// Reads `path` as an image and runs SIFT on it; when the file is not an image it is read as a
/// feature file (.key, .json or .bin, recognised by its content). Images come through read_raster_input
/// (band `band`, 0 = as our decoders read it); a nodata value of the raster is masked out of detection.
inline FeatureInput load_input(Context& ctx, const std::filesystem::path& path, const SiftOptions& sift,
                               bool require_image, int band = 0) {
  if (!gdal_dataset_name(path.string())) require_input_file(path);
  FeatureInput in;
  in.path = path;
  auto t0 = std::chrono::steady_clock::now();
  try {
    RasterInput r = read_raster_input(path.string(), band, ctx.options().max_pixels);
    in.image = std::move(r.image);
    in.georef = std::move(r.georef);
    in.through_gdal = r.through_gdal;
    in.from_image = true;
  } catch (const Error& e) {
    if (e.code() != ErrorCode::kBadFormat && e.code() != ErrorCode::kUnsupported) throw;
    if (require_image) throw;
    try {
      in.features = read_features(path);
    } catch (const Error& e2) {
      throw Error(e2.code(), path.string() + ": neither an image (" + e.what() + ") nor a feature file (" +
                                 e2.what() + ")");
    }
  }
  in.read_ms = ms_since(t0);
  if (in.from_image) {
    t0 = std::chrono::steady_clock::now();
    SiftOptions options = sift;
    if (in.georef.nodata) options.nodata = in.georef.nodata;
    in.features = detect_and_compute(
        ctx, in.through_gdal ? in.image : sift_input(path, in.image, ctx.options().max_pixels), options);
    in.sift_ms = ms_since(t0);
  }
  return in;
}

/// Lower-case extension of a path (".png").
inline std::string lower_extension(const std::filesystem::path& p) {
  std::string e = p.extension().string();
  std::transform(e.begin(), e.end(), e.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return e;
}

/// Throws Error(kInvalidArgument) unless `p` names a PNG or (when supported) TIFF file.
inline void check_image_output(const std::filesystem::path& p, const char* option) {
  const std::string e = lower_extension(p);
  if (e == ".png") return;
  if (e == ".tif" || e == ".tiff") {
    if (!tiff_supported())
      throw Error(ErrorCode::kUnsupported, p.string() + ": this build has no TIFF support (" + option +
                                               "); write a .png instead");
    return;
  }
  throw Error(ErrorCode::kInvalidArgument,
              p.string() + ": " + option + " must end in .png" + (tiff_supported() ? ", .tif or .tiff" : ""));
}

/// The library's OutputSet (io.hpp: every output under a temporary name, all renamed together by
/// commit(), none left behind by a failure) with writers for the images and text files of these commands.
class OutputSet : public spectrasift::OutputSet {
 public:
  PngOptions png;  ///< how add_image writes .png files
  void add_image(const std::filesystem::path& target, const Image& image) {
    const std::filesystem::path temp = add(target);
    if (lower_extension(target) == ".png") write_png(temp, image, png);
    else write_tiff(temp, image);
  }
  void add_text(const std::filesystem::path& target, const std::string& text) {
    std::ofstream f(add(target), std::ios::binary);
    f << text;
    f.flush();
    if (!f) throw Error(ErrorCode::kIo, target.string() + ": cannot write");
  }
};

}  // namespace spectrasift::cli

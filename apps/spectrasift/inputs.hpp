// Several inputs in one process (`sift IMAGE...`, `register FIXED MOVING...`): glob patterns expanded,
// and the name of each input's output when there are several.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "spectrasift/georef.hpp"
#include "spectrasift/sift.hpp"

namespace spectrasift::cli {

/// The inputs as given, with every argument that names no file and holds a wildcard (*, ? or [) expanded
/// as a glob pattern (sorted; for a pattern quoted past the shell, or a shell that leaves it as is).
/// Throws Error(kIo) for a pattern that matches nothing.
std::vector<std::string> expand_inputs(const std::vector<std::string>& args);

/// The extension of p in lower case, with its dot (".png"), or "".
std::string lower_extension(const std::filesystem::path& p);

/// expand_inputs, and every argument that names a folder replaced by the image files in it
/// (not its subfolders) in name order: the extensions our decoders read, .png .jpg .jpeg .pgm .ppm .pnm .pbm
/// .tif .tiff in any case; other files are skipped. Throws Error(kIo) for a folder that holds no image.
/// `any_directory` (when given) says whether an argument was a folder.
std::vector<std::string> expand_image_inputs(const std::vector<std::string>& args, bool* any_directory);

/// With several inputs, input `input`'s output in the folder `dir`: dir / (stem of input + suffix), e.g.
/// ("feat", "scenes/a.png", ".key") -> "feat/a.key". The folder is created. Throws
/// Error(kInvalidArgument) when two inputs would get the same name.
std::vector<std::filesystem::path> outputs_in_dir(const std::filesystem::path& dir,
                                                  const std::vector<std::string>& inputs, const std::string& suffix);

/// Parses "WxH" (two positive integers) for --size; throws Error(kInvalidArgument) quoting the text.
std::pair<int, int> parse_size(const std::string& text);

/// An image input and where it is on the ground.
struct RasterInput {
  Image image;
  GeoReference georef;        ///< from GDAL (any file it opens, also one our decoders read); empty without GDAL
  bool through_gdal = false;  ///< the pixels came through GDAL (one band), not our decoders
};

/// Reads an image input. The pixels: our decoders (PNG, JPEG, PNM, TIFF by libtiff) read the file when they can
/// and no band is asked for (band 0), so that existing inputs keep their pixels; GDAL reads everything else, and
/// band N (1-based) of any raster when `band` > 0. The georeferencing comes from GDAL in both cases. Without
/// GDAL a file our decoders do not read keeps their error (code kBadFormat or kUnsupported) with a hint on how to
/// get GDAL; band > 0 is then Error(kUnsupported).
RasterInput read_raster_input(const std::string& path, int band, std::uint64_t max_pixels);

/// True when `name` is not a file but may be a GDAL dataset name (a subdataset such as NETCDF:"f.nc":var).
bool gdal_dataset_name(const std::string& name);

/// Adds --stretch and --stretch-percent (SiftOptions::stretch, stretch_low/high) to a SIFT command and sets the
/// command line's default, auto.
void add_stretch_options(CLI::App& sub, SiftOptions& o);

/// Adds --descriptor-type f32|u8 (SiftOptions::descriptor_type; default f32, as OpenCV's descriptorType, for
/// `sift`); default_text ends its help. Returns the option (whether it was given: Option::count()).
CLI::Option* add_descriptor_type_option(CLI::App& sub, SiftOptions& o, const std::string& default_text = "(default f32)");
/// The command line's word for SiftOptions::check()'s RootSIFT + u8 refusal: Error(kInvalidArgument) naming
/// the two options. Called before any work, so that the command leaves no output.
void check_descriptor_type(const SiftOptions& o);

}  // namespace spectrasift::cli

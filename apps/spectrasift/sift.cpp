// `spectrasift sift IMAGE...`: SIFT keypoints and descriptors of one image, written as a feature file
// (Lowe's .key, JSON or binary) and optionally drawn on the image. Several images (or folders of them) run
// through the library's batch call (sift.hpp), consecutive images of one size a batch at a time.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>

#include "cli.hpp"
#include "inputs.hpp"
#include "report.hpp"
#include "spectrasift/draw.hpp"
#include "spectrasift/error.hpp"
#include "spectrasift/io.hpp"
#include "spectrasift/sift.hpp"

namespace spectrasift::cli {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

const char* format_name(FeatureFormat f) {
  switch (f) {
    case FeatureFormat::kKey: return "key";
    case FeatureFormat::kJson: return "json";
    case FeatureFormat::kBinary: return "bin";
  }
  return "?";
}

/// The mask as SIFT wants it: one U8 channel, 255 where keypoints are allowed. Any image is accepted;
/// a pixel is "allowed" when its grey value (to_gray_float) is not zero.
Image normalise_mask(const fs::path& path, const Image& mask, int width, int height) {
  if (mask.width != width || mask.height != height)
    throw Error(ErrorCode::kInvalidArgument, path.string() + ": the mask is " + std::to_string(mask.width) + "x" +
                                                 std::to_string(mask.height) + ", the image " + std::to_string(width) +
                                                 "x" + std::to_string(height));
  if (mask.channels == 1 && mask.type == PixelType::kU8) return mask;
  const ImageF g = to_gray_float(mask);
  Image out = Image::allocate(width, height, 1, PixelType::kU8);
  for (std::size_t i = 0; i < g.data.size(); ++i) out.data[i] = g.data[i] != 0.0f ? 255 : 0;
  return out;
}

struct SiftCliOptions {
  std::vector<std::string> images;
  std::string output;
  std::string format;
  std::string mask;
  std::string draw;
  SiftOptions sift;
  bool no_upsample = false;
  int band = 0;  ///< --band: read this band through GDAL (0: as our decoders read the file)
};

/// What is printed for one image (the summary line, or its --json object).
struct ImageReport {
  const std::string& path;
  const Image* image;  ///< as read
  std::size_t features;
  const std::string& output;
  const std::string& draw;
  double read_ms, sift_ms, write_ms, total_ms;
  const nlohmann::json* batch;  ///< with several images: {"index", "images"} of its batch call; else null
};

void report_image(Context& ctx, const SiftCliOptions& o, const GlobalOptions& g, const SiftOptions& so,
                  std::optional<FeatureFormat> format, const ImageReport& r) {
  const Image& image = *r.image;
  if (g.verbose)
    std::fprintf(stderr, "spectrasift: %zu keypoints in %.1f ms; written in %.1f ms\n", r.features, r.sift_ms,
                 r.write_ms);
  if (g.json) {
    nlohmann::json j = context_json("sift", ctx);
    j["device_index"] = ctx.device().index;
    j["image"] = {{"path", r.path},          {"width", image.width},
                  {"height", image.height},      {"channels", image.channels},
                  {"type", to_string(image.type)}, {"features", r.features}};
    j["times_ms"] = {{"read", r.read_ms}, {"sift", r.sift_ms}, {"write", r.write_ms}, {"total", r.total_ms}};
    if (r.batch) j["batch"] = *r.batch;
    j["output"] = r.output.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.output);
    j["format"] = format && !r.output.empty() ? nlohmann::json(format_name(*format)) : nlohmann::json(nullptr);
    j["draw"] = r.draw.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.draw);
    j["options"] = {{"octave_layers", so.octave_layers},
                    {"sigma", so.sigma},
                    {"contrast_threshold", so.contrast_threshold},
                    {"edge_threshold", so.edge_threshold},
                    {"upsample", so.upsample},
                    {"max_features", so.max_features},
                    {"root_sift", so.root_sift},
                    {"descriptor_type", to_string(so.descriptor_type)},
                    {"mask", o.mask.empty() ? nlohmann::json(nullptr) : nlohmann::json(o.mask)}};
    print_json(j);
  } else {
    std::printf("%s: %dx%d, %zu keypoints, %.1f ms", r.path.c_str(), image.width, image.height, r.features, r.sift_ms);
    if (!r.output.empty())
      std::printf(" -> %s (%s%s)", r.output.c_str(), format_name(*format),
                  so.descriptor_type == DescriptorType::kU8 ? ", u8 descriptors" : "");
    std::printf("\n");
    std::fflush(stdout);
  }
}

/// Writes one image's outputs, both or none: under temporary names, renamed only when both are complete.
void write_outputs(const GlobalOptions& g, const Image& image, const Features& features, const std::string& output,
                   const std::string& draw, std::optional<FeatureFormat> format) {
  OutputSet files;
  if (!output.empty()) write_features(files.add(output), features, *format);
  if (!draw.empty()) {
    const Image picture = draw_keypoints(image, features);
    if (lower_extension(draw) == ".png") write_png(files.add(draw), picture, g.png_options());
    else write_tiff(files.add(draw), picture);
  }
  files.commit();
}

/// An image read for SIFT (read_sift_image).
struct LoadedImage {
  std::size_t input = 0;  ///< its index in the command's inputs
  Image image;            ///< as read (drawn by --draw)
  Image grey;             ///< 8-bit colour: the file's grey, which SIFT runs on; else empty
  std::optional<double> nodata;
  double read_ms = 0;
  const Image& sift_input() const { return grey.empty() ? image : grey; }
};

/// Reads one image as SIFT takes it (sift_one and the batch): the raster, its nodata and, for 8-bit colour,
/// the file's grey as cv2.imread(IMREAD_GRAYSCALE) makes it (a JPEG's luma plane), which SIFT runs on so
/// that the keypoints are OpenCV's (the colour image is kept for --draw). `mask` (one image): the --mask
/// image is read after it, at its size, within its read time; the verbose line comes last.
LoadedImage read_sift_image(const Context& ctx, const SiftCliOptions& o, const GlobalOptions& g,
                            const std::string& path, std::size_t input, std::optional<Image>* mask = nullptr) {
  const auto t = Clock::now();
  if (!gdal_dataset_name(path)) require_input_file(path);
  ImageLimits limits;
  limits.max_pixels = ctx.options().max_pixels;
  RasterInput raster = read_raster_input(path, o.band, limits.max_pixels);
  LoadedImage li;
  li.input = input;
  li.image = std::move(raster.image);
  if (li.image.channels > 1 && li.image.type == PixelType::kU8) li.grey = read_image(path, ReadMode::kGray, limits);
  li.nodata = raster.georef.nodata;
  if (mask && !o.mask.empty())
    *mask = normalise_mask(o.mask, read_image(o.mask, limits), li.image.width, li.image.height);
  li.read_ms = ms_since(t);
  if (g.verbose)
    std::fprintf(stderr, "spectrasift: sift on %s; %s %dx%d, %d channel(s), %s; read in %.1f ms\n",
                 ctx.describe().c_str(), path.c_str(), li.image.width, li.image.height, li.image.channels,
                 to_string(li.image.type), li.read_ms);
  return li;
}

/// One image's job: read, SIFT, write its outputs (all or none), print its result.
/// `bar` shows the whole command; this image covers [progress0, progress1] of it.
void sift_one(Context& ctx, const SiftCliOptions& o, const GlobalOptions& g, const SiftOptions& so,
              const std::string& image_path, const std::string& output, const std::string& draw,
              std::optional<FeatureFormat> format, Progress& bar, double progress0, double progress1) {
  const auto t_total = Clock::now();
  const std::string name = fs::path(image_path).filename().string();
  const auto stage = [&](const char* what, double f) {
    bar.stage(std::string(what) + " " + name, progress0 + f * (progress1 - progress0));
  };
  stage("read", 0.0);
  std::optional<Image> mask;
  const LoadedImage li = read_sift_image(ctx, o, g, image_path, 0, &mask);
  const Image& image = li.image;

  stage("sift", 0.1);
  // The library reports the extraction's progress (per stage and octave), the bar draws it.
  ctx.set_progress(bar.within(progress0 + 0.1 * (progress1 - progress0), progress0 + 0.9 * (progress1 - progress0)));
  auto t = Clock::now();
  SiftOptions options = so;
  if (li.nodata) options.nodata = li.nodata;  // a raster's nodata is masked out
  const Features features = detect_and_compute(ctx, li.sift_input(), options, mask ? &*mask : nullptr);
  const double sift_ms = ms_since(t);

  // Both outputs are written under temporary names and renamed only when both are complete.
  ctx.set_progress({});
  stage("write", 0.9);
  t = Clock::now();
  write_outputs(g, image, features, output, draw, format);
  const double write_ms = ms_since(t);
  bar.clear();

  report_image(ctx, o, g, so, format, ImageReport{image_path, &image, features.size(), output, draw, li.read_ms, sift_ms,
                                                  write_ms, ms_since(t_total), nullptr});
}

std::string format_extension(FeatureFormat f) { return std::string(".") + format_name(f); }

/// Images read ahead of one batch call (decoded images held at once: 8 colour 1080p ones are 50 MB).
constexpr std::size_t kBatchImages = 8;

/// Whether b can run in a's batch call: the same size and the same nodata (NaN equal to NaN).
bool same_batch(const LoadedImage& a, const LoadedImage& b) {
  const auto same_nodata = [](const std::optional<double>& x, const std::optional<double>& y) {
    if (!x || !y) return !x && !y;
    return *x == *y || (std::isnan(*x) && std::isnan(*y));
  };
  return a.image.width == b.image.width && a.image.height == b.image.height && same_nodata(a.nodata, b.nodata);
}

/// The library's error for an image of a batch call ("sift: images[k]: ..."), for the command's report: the
/// image's path instead of its index.
Error batch_image_error(const std::string& path, const Error& e) {
  std::string what = e.what();
  if (what.rfind("sift: images[", 0) == 0) {
    const std::size_t end = what.find("]: ");
    if (end != std::string::npos) what = "sift: " + what.substr(end + 3);
  }
  return Error(e.code(), path + ": " + what, e.backend(), e.native_status());
}

/// The command with several images. Consecutive images of one size (and nodata) are read, up to kBatchImages,
/// then run through the library's batch call, whose callback writes each image's outputs (both or none) and
/// prints its result as soon as its features are back. An image that fails (reading, SIFT, writing) is
/// reported with its path and leaves no output; the others go on, and the exit code is the worst one (as
/// for_each_input). The bar covers every image; times_ms.sift of an image is the time from the previous
/// image's features (or the start of its batch call) to its own.
int run_sift_batch(Context& ctx, const SiftCliOptions& o, const GlobalOptions& g, const SiftOptions& so,
                   const std::vector<std::string>& images, const std::vector<std::string>& outputs,
                   const std::vector<std::string>& draws, std::optional<FeatureFormat> format, Progress& bar) {
  int worst = 0;
  const auto fail = [&](std::size_t input, const Error& e) {
    worst = std::max(worst, report_input_error("sift", "image", images[input], g.json, bar, e));
  };
  const double share = 1.0 / double(images.size());
  ImageLimits limits;
  limits.max_pixels = ctx.options().max_pixels;
  std::vector<LoadedImage> group;
  const auto finish_image = [&](const LoadedImage& li, const Features& f, double sift_ms, std::size_t index,
                                std::size_t count) {
    const auto t = Clock::now();
    write_outputs(g, li.image, f, outputs[li.input], draws[li.input], format);
    const double write_ms = ms_since(t);
    bar.clear();
    const nlohmann::json batch = {{"index", index}, {"images", count}};
    report_image(ctx, o, g, so, format,
                 ImageReport{images[li.input], &li.image, f.size(), outputs[li.input], draws[li.input], li.read_ms,
                             sift_ms, write_ms, li.read_ms + sift_ms + write_ms, &batch});
  };
  const auto run_group = [&] {
    if (group.empty()) return;
    std::optional<Image> mask;
    try {
      if (!o.mask.empty())
        mask = normalise_mask(o.mask, read_image(o.mask, limits), group[0].image.width, group[0].image.height);
    } catch (const Error& e) {
      for (const LoadedImage& li : group) fail(li.input, batch_image_error(images[li.input], e));
      group.clear();
      return;
    }
    SiftOptions options = so;
    options.nodata = group[0].nodata;  // a raster's nodata is masked out
    std::size_t start = 0;
    while (start < group.size()) {  // after an image's error, the rest of the group in a new call
      std::vector<ImageView> views;
      for (std::size_t k = start; k < group.size(); ++k) {
        const Image& im = group[k].sift_input();
        views.push_back(ImageView{im.data.data(), im.width, im.height, im.channels, im.type});
      }
      bar.stage("sift " + fs::path(images[group[start].input]).filename().string(), double(group[start].input) * share);
      ctx.set_progress(bar.within(double(group[start].input) * share, double(group.back().input + 1) * share));
      std::size_t running = start;  // the image the call works on
      auto t = Clock::now();
      try {
        detect_and_compute(ctx, views, options, mask ? &*mask : nullptr, [&](std::size_t k, Features&& f) {
          const double sift_ms = ms_since(t);
          const LoadedImage& li = group[start + k];
          running = start + k + 1;
          try {
            finish_image(li, f, sift_ms, k, views.size());
          } catch (const Error& e) {
            fail(li.input, e);
          }
          t = Clock::now();
        });
        start = group.size();
      } catch (const Error& e) {
        ctx.set_progress({});
        fail(group[running].input, batch_image_error(images[group[running].input], e));
        start = running + 1;
      }
      ctx.set_progress({});
    }
    group.clear();
  };
  for (std::size_t i = 0; i < images.size(); ++i) {
    bar.stage("read " + fs::path(images[i]).filename().string(), double(i) * share);
    LoadedImage li;
    try {
      li = read_sift_image(ctx, o, g, images[i], i);
    } catch (const Error& e) {
      run_group();  // the images before it first, so that the results come in the inputs' order
      fail(i, e);
      continue;
    }
    if (!group.empty() && !same_batch(group[0], li)) run_group();
    group.push_back(std::move(li));
    if (group.size() == kBatchImages) run_group();
  }
  run_group();
  return worst;
}

int run_sift(const SiftCliOptions& o, const GlobalOptions& g) {
  // Everything that can be checked without work is checked first, so a bad option costs nothing.
  bool folder = false;  // a folder's images are several, even when it holds one
  const std::vector<std::string> images = expand_image_inputs(o.images, &folder);
  const bool several = images.size() > 1 || folder;
  if (!several && !gdal_dataset_name(images[0])) require_input_file(images[0]);
  if (!o.mask.empty()) require_input_file(o.mask);
  SiftOptions so = o.sift;
  so.upsample = !o.no_upsample;
  check_descriptor_type(so);
  so.check();
  std::optional<FeatureFormat> format;
  if (!o.format.empty()) format = parse_feature_format(o.format);
  else if (several) format = FeatureFormat::kBinary;
  else if (!o.output.empty()) format = feature_format_from_path(o.output);
  if (!o.format.empty() && o.output.empty())
    throw Error(ErrorCode::kInvalidArgument, "--format needs an output file (-o FILE)");
  if (!several && !o.output.empty() && fs::is_directory(o.output))
    throw Error(ErrorCode::kInvalidArgument, o.output + ": is a directory (-o needs a file name)");
  if (!o.draw.empty() && !several) {
    const std::string e = lower_extension(o.draw);
    if (e != ".png" && e != ".tif" && e != ".tiff")
      throw Error(ErrorCode::kInvalidArgument, o.draw + ": --draw writes .png (or .tif/.tiff) files");
    if ((e == ".tif" || e == ".tiff") && !tiff_supported())
      throw Error(ErrorCode::kUnsupported, o.draw + ": this build has no libtiff, use a .png file");
  }
  // With several images, -o and --draw name folders: DIR/<image stem>.<format> and DIR/<stem>_keypoints.png.
  std::vector<std::string> outputs(images.size(), o.output), draws(images.size(), o.draw);
  if (several) {
    if (!o.output.empty()) {
      const auto names = outputs_in_dir(o.output, images, format_extension(*format));
      for (std::size_t i = 0; i < names.size(); ++i) outputs[i] = names[i].string();
    }
    if (!o.draw.empty()) {
      const auto names = outputs_in_dir(o.draw, images, "_keypoints.png");
      for (std::size_t i = 0; i < names.size(); ++i) draws[i] = names[i].string();
    }
  }

  Context ctx(g.context_options());  // one Context (and so one plan) for every image
  Progress bar("sift", !g.quiet);
  if (!several) {
    sift_one(ctx, o, g, so, images[0], outputs[0], draws[0], format, bar, 0.0, 1.0);
    return 0;
  }
  return run_sift_batch(ctx, o, g, so, images, outputs, draws, format, bar);
}

}  // namespace

void add_sift_command(CLI::App& app, GlobalOptions& g, Action& action) {
  // Owned by the subcommand's callback, which lives as long as the app; CLI11 writes into its fields.
  auto opts = std::make_shared<SiftCliOptions>();
  SiftCliOptions& o = *opts;
  auto* sub = app.add_subcommand("sift", "detect SIFT keypoints and compute their descriptors for one or more images");
  sub->add_option("IMAGE", o.images, "input image(s): PNG, JPEG, PGM/PPM or TIFF (8/16-bit, float), and any raster GDAL "
                                     "reads (first band, or --band); colour is made "
                                     "grey with OpenCV's weights. Several (a quoted glob, or a folder: its images in name order) share one "
                                     "Context and run in batches of consecutive images of one size; an image that "
                                     "fails is reported with its path, leaves no output, and the others go on "
                                     "(exit code: the worst)")
      ->required();
  sub->add_option("-o,--output", o.output,
                  "feature file to write; without it only a summary is printed. Format from --format or the "
                  "extension: .key/.sift = Lowe's text, .json = JSON, anything else = binary. With several images: "
                  "a folder, DIR/<image stem>.bin (or .key/.json by --format). u8 descriptors (--descriptor-type u8) "
                  "are written as bytes in binary files (version 2), with \"descriptor_type\":\"u8\" in JSON");
  sub->add_option("--format", o.format, "feature file format: key, json or bin (default: from the -o extension)");
  sub->add_option("--mask", o.mask,
                  "image of the same size; keypoints are kept only where it is not zero (default: none)");
  sub->add_option("--max-features", o.sift.max_features,
                  "keep the N strongest keypoints by response, ties at the cut included; 0 = all (default 0)");
  sub->add_option("--octave-layers", o.sift.octave_layers, "scale levels per octave searched for extrema, 1..10 (default 3)");
  sub->add_option("--sigma", o.sift.sigma, "blur of the base level in pixels of the first octave (default 1.6)");
  sub->add_option("--contrast-threshold", o.sift.contrast_threshold,
                  "minimum |DoG| * layers in units of the grey range; larger = fewer features (default 0.04)");
  sub->add_option("--edge-threshold", o.sift.edge_threshold,
                  "maximum principal-curvature ratio; smaller = fewer edge-like features (default 10)");
  sub->add_flag("--no-upsample", o.no_upsample,
                "start at the input resolution instead of the doubled image (default: doubled, like OpenCV)");
  sub->add_flag("--root-sift", o.sift.root_sift, "write RootSIFT descriptors (L1-normalised square roots, x512; "
                "the .key format rounds every descriptor value to an integer 0..255)");
  add_descriptor_type_option(*sub, o.sift);
  add_stretch_options(*sub, o.sift);
  sub->add_option("--band", o.band, "read band N (1-based) of the image through GDAL (default: the image as our "
                                    "decoders read it, or GDAL's first band for other rasters)")
      ->check(integer_in(1, 1 << 20));
  sub->add_option("--draw", o.draw, "also write a .png with the keypoints drawn (circle of radius size/2, line "
                                    "for the orientation); with several images: a folder, DIR/<stem>_keypoints.png");
  g.add_json_option(*sub, "print one JSON object per image: image (path, size, features), backend, device, times_ms, "
                          "options (descriptor_type...)");
  g.add_backend_options(*sub);
  g.add_png_option(*sub);
  sub->callback([opts, &g, &action] { action = [opts, &g] { return run_sift(*opts, g); }; });
}

}  // namespace spectrasift::cli

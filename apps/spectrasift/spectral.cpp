// `spectrasift spectral`: every pixel of an ENVI cube against one or many reference spectra.
//
//   spectrasift spectral CUBE.hdr --metric sam|ed|scc|sid (--ref-pixel X,Y ...|--ref-mask FILE|--library FILE)
//       -o OUT.hdr [--best|--top K|--threshold T] [--png PICTURE.png] [--backend B] [--device N] [--json]
//       [--chunk-lines N]
//
// Outputs: OUT.hdr + OUT.img, float32 BSQ scores (one band per reference; or the best / k best scores);
// with --best, --top and --threshold also OUT_index.hdr + OUT_index.img, int32 reference indices
// (0-based, -1 = no data or rejected). The outputs are one OutputSet: every file is written under a
// temporary name first and all are renamed at the end, so a failure leaves none of them.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <limits>
#include <optional>

#include "cli.hpp"
#include "inputs.hpp"
#include "report.hpp"
#include "spectrasift/draw.hpp"
#include "spectrasift/error.hpp"
#include "spectrasift/georef.hpp"
#include "spectrasift/io.hpp"
#include "spectrasift/spectral.hpp"

namespace spectrasift::cli {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

struct SpectralArgs {
  std::string cube;
  std::string metric = "sam";
  std::vector<std::string> ref_pixels;
  std::string ref_mask;
  std::string library;
  std::string output;
  bool best = false;
  int top = 0;
  double threshold = std::numeric_limits<double>::quiet_NaN();
  std::string png;
  int chunk_lines = 0;
  bool no_tensor_cores = false;
};

bool is_envi_path(const fs::path& p) {
  std::string ext = p.extension().string();
  for (auto& c : ext) c = char(std::tolower(static_cast<unsigned char>(c)));
  if (ext == ".hdr") return true;
  fs::path h = p;
  h += ".hdr";
  fs::path h2 = p;
  h2.replace_extension(".hdr");
  std::error_code ec;
  return fs::exists(h, ec) || fs::exists(h2, ec);
}

/// The mask as one byte per pixel (nonzero = selected): an ENVI single-band cube or an image.
std::vector<std::uint8_t> read_mask(const fs::path& path, const CubeRef& cube, std::uint64_t max_pixels) {
  const int w = cube.samples, h = cube.lines;
  std::vector<std::uint8_t> mask(std::size_t(w) * h, 0);
  auto size_error = [&](int mw, int mh) {
    return Error(ErrorCode::kInvalidArgument, path.string() + ": the mask is " + std::to_string(mw) + " x " +
                                                  std::to_string(mh) + ", the cube " + std::to_string(w) + " x " +
                                                  std::to_string(h));
  };
  if (is_envi_path(path)) {
    const EnviCube m = open_envi(path, max_pixels);
    if (m.header().bands != 1)
      throw Error(ErrorCode::kInvalidArgument, path.string() + ": a mask has one band, this cube has " +
                                                   std::to_string(m.header().bands));
    if (m.header().samples != w || m.header().lines != h) throw size_error(m.header().samples, m.header().lines);
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x) mask[std::size_t(y) * w + x] = m.value(y, x, 0) != 0.0;
    return mask;
  }
  ImageLimits limits;
  limits.max_pixels = max_pixels;
  const Image img = read_image(path, limits);
  if (img.width != w || img.height != h) throw size_error(img.width, img.height);
  const std::size_t bps = bytes_per_sample(img.type);
  for (std::size_t i = 0; i < mask.size(); ++i) {
    const std::uint8_t* px = img.data.data() + i * img.channels * bps;  // the first channel decides
    bool nz = false;
    if (img.type == PixelType::kF32) {
      float v;
      std::memcpy(&v, px, sizeof v);
      nz = v != 0.0f;
    } else {
      for (std::size_t b = 0; b < bps; ++b) nz = nz || px[b] != 0;
    }
    mask[i] = nz;
  }
  return mask;
}

/// The references as the cube's bands see them (a library is resampled when both carry wavelengths).
/// `envi` is the ENVI cube behind `cube` (null for a raster read through GDAL).
SpectralLibrary load_references(const SpectralArgs& a, const CubeRef& cube, const EnviCube* envi,
                                std::uint64_t max_pixels, bool verbose) {
  const int sources = int(!a.ref_pixels.empty()) + int(!a.ref_mask.empty()) + int(!a.library.empty());
  if (sources != 1)
    throw Error(ErrorCode::kInvalidArgument, "give exactly one of --ref-pixel (repeatable), --ref-mask or --library");
  if (!a.ref_pixels.empty()) {
    std::vector<std::pair<int, int>> xy;
    for (const auto& s : a.ref_pixels) xy.push_back(parse_pixel_xy(s));
    return envi ? reference_from_pixels(*envi, xy) : reference_from_pixels(cube, xy);
  }
  if (!a.ref_mask.empty()) {
    require_input_file(a.ref_mask);
    const std::vector<std::uint8_t> mask = read_mask(a.ref_mask, cube, max_pixels);
    const std::string name = "mask " + fs::path(a.ref_mask).stem().string();
    return envi ? reference_from_mask(*envi, mask, name) : reference_from_mask(cube, mask, name);
  }
  require_input_file(a.library);
  SpectralLibrary lib = read_library(a.library);
  const std::vector<double>& wavelength = envi ? envi->header().wavelength : cube.wavelength;
  const std::vector<double> no_fwhm;
  const std::vector<double>& fwhm = envi ? envi->header().fwhm : no_fwhm;
  const bool same_axis = lib.bands == cube.bands && (lib.wavelength.empty() || wavelength.empty() ||
                                                     lib.wavelength == wavelength);
  if (same_axis) return lib;
  if (!lib.wavelength.empty() && !wavelength.empty()) {
    if (verbose)
      std::cerr << "[spectrasift] resampling " << lib.count << " spectra from " << lib.bands << " to " << cube.bands
                << " bands (Gaussian band responses)\n";
    return resample_library(lib, wavelength, fwhm);
  }
  throw Error(ErrorCode::kInvalidArgument, a.library + ": the library has " + std::to_string(lib.bands) +
                                               " bands and the cube " + std::to_string(cube.bands) +
                                               "; resampling needs wavelengths in both");
}

fs::path index_path(const fs::path& out) {
  fs::path p = out;
  std::string stem = p.stem().string();
  p.replace_filename(stem + "_index" + p.extension().string());
  return p;
}

/// Heat map of band 0 of the scores with a colour bar, or a class map of band 0 of the indices with a legend.
Image make_map(const SpectralResult& r, const SpectralOptions& o, const std::vector<std::string>& names) {
  const int w = r.samples, h = r.lines;
  // Small scenes are enlarged so that the legend text stays readable next to them.
  const int zoom = std::max(1, std::min(8, 400 / std::max(w, h)));
  const int W = w * zoom, H = h * zoom;
  const std::size_t npix = std::size_t(w) * h;
  if (r.reduction == Reduction::kAll) {
    ImageF band;
    band.width = W;
    band.height = H;
    band.data.resize(std::size_t(W) * H);
    float lo = std::numeric_limits<float>::infinity(), hi = -lo;
    for (std::size_t i = 0; i < npix; ++i)
      if (std::isfinite(r.scores[i])) {
        lo = std::min(lo, r.scores[i]);
        hi = std::max(hi, r.scores[i]);
      }
    if (!(lo <= hi)) lo = hi = 0;
    for (int y = 0; y < H; ++y)
      for (int x = 0; x < W; ++x) band.at(x, y) = r.scores[std::size_t(y / zoom) * w + x / zoom];
    // Lower is better for ed/sam/sid: reverse the scale so that good matches are bright.
    const bool hib = higher_is_better(o.metric);
    Image map = apply_colormap(band, hib ? lo : hi, hib ? hi : lo, Colormap::kViridis, colors::kBlack);
    const int bar_area = 120;
    Image canvas = blank_rgb(W + bar_area, std::max(H, 160), colors::kBlack);
    for (int y = 0; y < H; ++y)
      std::memcpy(canvas.data.data() + std::size_t(y) * canvas.row_bytes(), map.data.data() + std::size_t(y) * map.row_bytes(),
                  map.row_bytes());
    const char* units[] = {"ed", "sam (rad)", "scc", "sid"};
    const std::string title = std::string(units[int(o.metric)]) + (hib ? " high=good" : " low=good");
    draw_colorbar(canvas, W + 12, 24, 16, std::max(H, 160) - 40, Colormap::kViridis, hib ? lo : hi, hib ? hi : lo,
                  title, 5, colors::kWhite, 1);
    return canvas;
  }
  // Class map: colour of the reference index, black for -1, legend of names with their colours.
  const int shown = std::min<int>(int(names.size()), 24);
  int legend_w = 0;
  for (int i = 0; i < shown; ++i)
    legend_w = std::max(legend_w, text_width(std::to_string(i) + " " + names[i].substr(0, 24), 1));
  legend_w = std::max(legend_w, text_width("-1 no data / rejected", 1)) + 24;
  const int legend_h = (shown + 2) * (kGlyphHeight + 4) + 8;
  Image canvas = blank_rgb(W + legend_w + 8, std::max(H, legend_h), colors::kBlack);
  for (int y = 0; y < H; ++y)
    for (int x = 0; x < W; ++x) {
      const int idx = r.index[std::size_t(y / zoom) * w + x / zoom];
      if (idx >= 0) blend_pixel(canvas, x, y, distinct_color(std::size_t(idx)), 1.0f);
    }
  int ly = 6;
  for (int i = 0; i < shown; ++i, ly += kGlyphHeight + 4) {
    fill_rect(canvas, W + 8, ly, 10, kGlyphHeight, distinct_color(std::size_t(i)));
    draw_text(canvas, W + 22, ly, std::to_string(i) + " " + names[i].substr(0, 24), colors::kWhite, 1);
  }
  if (int(names.size()) > shown) {
    draw_text(canvas, W + 22, ly, "... " + std::to_string(names.size() - shown) + " more", colors::kWhite, 1);
    ly += kGlyphHeight + 4;
  }
  draw_rect(canvas, W + 8, ly, 10, kGlyphHeight, colors::kWhite, 1);
  draw_text(canvas, W + 22, ly, "-1 no data / rejected", colors::kWhite, 1);
  return canvas;
}

/// The heat map or class map with a title: the metric, the reference(s) and the cube's file name.
Image make_picture(const SpectralResult& r, const SpectralOptions& o, const std::vector<std::string>& names,
                   const std::string& cube) {
  const char* metric[] = {"Euclidean distance", "Spectral angle (rad)", "Spectral correlation",
                          "Spectral information divergence"};
  std::string title = metric[int(o.metric)];
  if (r.reduction == Reduction::kAll) {
    title += " to '" + (names.empty() ? std::string("?") : names[0]) + "'";
    if (names.size() > 1) title += " (reference 1 of " + std::to_string(names.size()) + ")";
  } else {
    title[0] = char(std::tolower(static_cast<unsigned char>(title[0])));
    title = (r.reduction == Reduction::kThreshold ? "Best match within " + std::to_string(o.threshold).substr(0, 8) + " by "
                                                  : std::string("Best match by ")) +
            title + ", " + std::to_string(names.size()) + " reference" + (names.size() == 1 ? "" : "s");
  }
  return add_title(make_map(r, o, names), title + "\n" + std::filesystem::path(cube).filename().string());
}

/// The --png picture is refused before the job when it cannot be made (issue 21, item 2: a 2^24 x 1 cube took
/// 8 GB before libpng refused its width): an upper bound of make_picture's canvas (the map, a legend or colour
/// bar beside it, at least 384 pixels high, a title above) must fit PNG's side limit as libpng writes it, and
/// its buffers (the map as floats and colours, the canvas and its titled copy) the memory budget.
void check_picture_size(int samples, int lines, const ContextOptions& co) {
  constexpr std::uint64_t kPngMaxSide = 1000000;  // libpng's default user limit (PNG_USER_WIDTH_MAX / _HEIGHT_MAX)
  const int zoom = std::max(1, std::min(8, 400 / std::max(samples, lines)));
  const std::uint64_t w = std::uint64_t(samples) * zoom, h = std::uint64_t(lines) * zoom;
  const std::uint64_t cw = w + 256, ch = std::max<std::uint64_t>(h, 384) + 64;
  const std::uint64_t bytes = 7 * w * h + 6 * cw * ch;
  const std::string shape = std::to_string(samples) + " x " + std::to_string(lines);
  if (cw > kPngMaxSide || ch > kPngMaxSide)
    throw Error(ErrorCode::kOutOfMemory, "--png: the picture of a " + shape + " cube would be " + std::to_string(cw) +
                                             " x " + std::to_string(ch) + " pixels, over PNG's " +
                                             std::to_string(kPngMaxSide) +
                                             " pixels a side (libpng); leave out --png or cut the cube into tiles");
  if (bytes > host_memory_budget(co))
    throw Error(ErrorCode::kOutOfMemory, "--png: the picture of a " + shape + " cube needs about " +
                                             std::to_string(bytes >> 20) + " MB, more than the memory budget of " +
                                             std::to_string(host_memory_budget(co) >> 20) +
                                             " MB; leave out --png, cut the cube into tiles or raise --max-memory");
}

/// True when -o names a GeoTIFF (.tif/.tiff).
bool geotiff_output(const SpectralArgs& a) {
  std::string ext = fs::path(a.output).extension().string();
  for (auto& c : ext) c = char(std::tolower(static_cast<unsigned char>(c)));
  return ext == ".tif" || ext == ".tiff";
}

/// The output format follows the extension: ENVI for .hdr (OUT.hdr + OUT.img), GeoTIFF for .tif/.tiff (refused
/// with a clear message in a build without GDAL, rather than written as ENVI bytes under a TIFF name); any other
/// name is a usage error.
void check_output_names(const SpectralArgs& a) {
  std::string ext = fs::path(a.output).extension().string();
  for (auto& c : ext) c = char(std::tolower(static_cast<unsigned char>(c)));
  if (geotiff_output(a) && !gdal_supported())
    throw Error(ErrorCode::kUnsupported, a.output + ": GeoTIFF output needs GDAL, and this build has none: install "
                                         "libgdal-dev (scripts/setup-debian.sh) and rebuild spectrasift, or write ENVI "
                                         "instead: -o OUT.hdr (+ OUT.img), which GDAL and QGIS read");
  if (ext != ".hdr" && !geotiff_output(a))
    throw Error(ErrorCode::kInvalidArgument, a.output + ": -o must name an ENVI header (OUT.hdr; the data goes to OUT.img) "
                                                        "or a GeoTIFF (OUT.tif)");
  if (!a.png.empty()) {
    std::string pe = fs::path(a.png).extension().string();
    for (auto& c : pe) c = char(std::tolower(static_cast<unsigned char>(c)));
    if (pe != ".png") throw Error(ErrorCode::kInvalidArgument, a.png + ": --png writes a .png file");
  }
}

/// -o OUT.tif: the scores as a float32 GeoTIFF (nodata NaN) and, with a reduction, the indices as OUT_index.tif
/// (int32, nodata -1), both with the cube's geotransform and CRS.
void write_geotiff_outputs(OutputSet& files, const SpectralArgs& a, const SpectralResult& r,
                           const std::vector<std::string>& band_names, GeoReference georef) {
  RasterBands scores;
  scores.data = r.scores.data();
  scores.type = SampleType::kF32;
  scores.width = r.samples;
  scores.height = r.lines;
  scores.bands = r.k;
  scores.band_names = band_names;
  georef.nodata = std::numeric_limits<double>::quiet_NaN();
  write_geotiff(files.add(a.output), scores, georef);
  if (r.index.empty()) return;
  RasterBands index = scores;
  index.data = r.index.data();
  index.type = SampleType::kI32;
  index.band_names.clear();
  for (int i = 0; i < r.k; ++i)
    index.band_names.push_back(r.k == 1 ? "best reference index" : "reference index rank " + std::to_string(i + 1));
  georef.nodata = -1;
  write_geotiff(files.add(index_path(a.output)), index, georef);
}

int run_spectral(const SpectralArgs& a, const GlobalOptions& g) {
  const auto t_start = Clock::now();
  const bool envi_input = is_envi_path(a.cube);
  if (envi_input || !gdal_dataset_name(a.cube)) require_input_file(a.cube);
  if (a.output.empty()) throw Error(ErrorCode::kInvalidArgument, "-o OUT.hdr is required");
  check_output_names(a);
  SpectralOptions o;
  o.metric = parse_metric(a.metric);
  const int reductions = int(a.best) + int(a.top > 0) + int(!std::isnan(a.threshold));
  if (reductions > 1) throw Error(ErrorCode::kInvalidArgument, "give at most one of --best, --top and --threshold");
  if (a.best) o.reduction = Reduction::kBest;
  if (a.top > 0) {
    o.reduction = Reduction::kTopK;
    o.top_k = a.top;
  }
  if (!std::isnan(a.threshold)) {
    o.reduction = Reduction::kThreshold;
    o.threshold = a.threshold;
  }
  o.chunk_lines = a.chunk_lines;
  o.allow_tensor_cores = !a.no_tensor_cores;
  o.check();

  const ContextOptions co = g.context_options();
  Context ctx(co);
  const auto t_read = Clock::now();
  // ENVI cubes through our reader (memory-mapped, checked); every other raster through GDAL, into memory.
  if (!envi_input && !gdal_supported())
    throw Error(ErrorCode::kUnsupported, a.cube + ": not an ENVI cube (no .hdr beside it); other rasters (GeoTIFF, "
                                                  "HDF, NetCDF, ...) are read through GDAL, and this build has none: "
                                                  "install libgdal-dev (scripts/setup-debian.sh) and rebuild spectrasift");
  std::optional<EnviCube> envi;
  std::optional<RasterCube> raster;
  if (envi_input) envi = open_envi(a.cube, co.max_pixels);
  else raster = read_raster_cube(a.cube, co.max_pixels);
  const CubeRef view = envi ? cube_ref(*envi) : raster->ref();
  if (!a.png.empty()) check_picture_size(view.samples, view.lines, co);
  const SpectralLibrary refs = load_references(a, view, envi ? &*envi : nullptr, co.max_pixels, g.verbose);
  const double read_ms = ms_since(t_read);

  Progress bar("spectral", !g.quiet);
  const auto progress = [&bar](double f) { bar.update(f); };
  SpectralResult r = envi ? spectral_match(ctx, *envi, refs, o, progress) : spectral_match(ctx, view, refs, o, progress);
  bar.done();
  r.times.read_ms = read_ms;

  // Outputs.
  const auto t_write = Clock::now();
  const fs::path out = a.output;
  std::vector<std::string> names = refs.names;
  for (int i = int(names.size()); i < refs.count; ++i) names.push_back("reference " + std::to_string(i + 1));
  for (auto& n : names)  // ENVI lists cannot hold these characters
    for (auto& c : n)
      if (c == ',' || c == '{' || c == '}') c = ' ';
  std::vector<std::string> band_names;
  const std::string m = to_string(o.metric);
  if (o.reduction == Reduction::kAll) {
    for (const auto& n : names) band_names.push_back(m + " " + n);
  } else if (r.k == 1) {
    band_names.push_back(m + " of the best reference" + (o.reduction == Reduction::kThreshold ? " (threshold)" : ""));
  } else {
    for (int i = 0; i < r.k; ++i) band_names.push_back(m + " rank " + std::to_string(i + 1));
  }
  // Every output goes to a temporary name first; they are renamed together at the end (all or none).
  OutputSet files;
  if (geotiff_output(a)) {
    write_geotiff_outputs(files, a, r, band_names, envi ? read_georeference(envi->data_path().string()) : raster->georef());
  } else if (o.reduction != Reduction::kAll) {
    const fs::path idx_path = index_path(out);
    std::vector<std::string> idx_names;
    for (int i = 0; i < r.k; ++i)
      idx_names.push_back(r.k == 1 ? "best reference index" : "reference index rank " + std::to_string(i + 1));
    EnviHeader like = envi ? envi->header() : EnviHeader{};
    if (raster) put_envi_georeference(raster->georef(), like);
    std::string desc = "spectrasift spectral " + m + " of " + fs::path(a.cube).filename().string() +
                       ": reference indices (0-based; -1 = no data or rejected):";
    for (std::size_t i = 0; i < names.size(); ++i) desc += " " + std::to_string(i) + " = " + names[i] + ";";
    like.description = desc;
    write_envi_i32(files, idx_path, r.samples, r.lines, idx_names, r.index.data(), &like);
  }
  if (!geotiff_output(a)) {
    EnviHeader like = envi ? envi->header() : EnviHeader{};
    if (raster) put_envi_georeference(raster->georef(), like);  // a GDAL cube's georeferencing, as ENVI keeps it
    like.description = "spectrasift spectral " + m + " scores of " + fs::path(a.cube).filename().string();
    write_envi_f32(files, out, r.samples, r.lines, band_names, r.scores.data(), &like);
  }
  if (!a.png.empty()) write_png(files.add(a.png), make_picture(r, o, names, a.cube), g.png_options());
  files.commit();
  std::vector<std::string> outputs;  // the headers and the picture, as before (not the .img data files)
  if (o.reduction != Reduction::kAll) outputs.push_back(index_path(out).string());
  outputs.push_back(out.string());
  if (!a.png.empty()) outputs.push_back(a.png);
  r.times.write_ms = ms_since(t_write);
  const double total_ms = ms_since(t_start);

  std::size_t matched = 0, nodata = 0;
  const std::size_t npix = std::size_t(r.samples) * r.lines;
  for (std::size_t i = 0; i < npix; ++i) {
    if (std::isnan(r.scores[i])) ++nodata;
    if (!r.index.empty() && r.index[i] >= 0) ++matched;
  }
  if (g.json) {
    nlohmann::json j = context_json("spectral", ctx);
    j["cube"] = a.cube;
    j["metric"] = m;
    const char* red[] = {"all", "best", "top", "threshold"};
    j["reduction"] = red[int(o.reduction)];
    j["references"] = r.references;
    j["reference_names"] = names;
    j["pixels"] = npix;
    j["samples"] = r.samples;
    j["lines"] = r.lines;
    j["bands"] = view.bands;
    j["pixels_without_score"] = nodata;  // NaN in the first score band: no data, or rejected by --threshold
    if (!r.index.empty()) j["matched_pixels"] = matched;
    j["outputs"] = outputs;
    j["times_ms"] = {{"read", r.times.read_ms},       {"upload", r.times.upload_ms}, {"compute", r.times.compute_ms},
                     {"download", r.times.download_ms}, {"write", r.times.write_ms},   {"match_total", r.times.total_ms},
                     {"total", total_ms}};
    print_json(j);
  } else {
    std::printf("%s: %d x %d pixels, %d reference(s), metric %s on %s\n", a.cube.c_str(), r.samples, r.lines,
                r.references, m.c_str(), ctx.describe().c_str());
    std::printf("times (ms): read %.2f  upload %.2f  compute %.2f  download %.2f  write %.2f  total %.2f\n",
                r.times.read_ms, r.times.upload_ms, r.times.compute_ms, r.times.download_ms, r.times.write_ms, total_ms);
    if (!r.index.empty()) std::printf("%zu of %zu pixels matched (%zu no data or rejected)\n", matched, npix, nodata);
    for (const auto& p : outputs) std::printf("wrote %s\n", p.c_str());
  }
  return 0;
}

}  // namespace

void add_spectral_command(CLI::App& app, GlobalOptions& g, Action& action) {
  auto args = std::make_shared<SpectralArgs>();
  auto* sub = app.add_subcommand("spectral", "match every pixel of an ENVI cube against reference spectra (ed, sam, scc, sid)");
  sub->add_option("cube", args->cube,
                  "the cube: an ENVI header (CUBE.hdr; the data file is found beside it), or any raster GDAL reads, "
                  "every band (multiband GeoTIFF, HDF/NetCDF subdatasets in GDAL's syntax)")
      ->required();
  sub->add_option("--metric", args->metric, "ed | sam | scc | sid (default sam)")
      ->check(CLI::IsMember({"ed", "sam", "scc", "sid"}, CLI::ignore_case));
  sub->add_option("--ref-pixel", args->ref_pixels, "reference spectrum at pixel X,Y (0-based; repeatable: one reference each)")
      ->check(CLI::Validator(
          [](std::string& s) {
            try {
              parse_pixel_xy(s);
              return std::string();
            } catch (const Error&) {  // CLI11 puts the option name in front
              return "'" + s + "' is not X,Y (two integers, e.g. 12,40)";
            }
          },
          "X,Y"));
  sub->add_option("--ref-mask", args->ref_mask,
                  "the mean spectrum of the nonzero pixels of a mask: PNG/PGM image or ENVI single-band file of the cube's size");
  sub->add_option("--library", args->library,
                  "reference library: ENVI .sli (+ .hdr) or CSV (wavelength column, one named column per spectrum); "
                  "resampled onto the cube's wavelengths when both have them");
  sub->add_option("-o,--output", args->output,
                  "output ENVI header OUT.hdr (+ OUT.img; OUT_index.hdr with --best/--top/--threshold), or a GeoTIFF "
                  "OUT.tif (tiled, DEFLATE, nodata NaN; OUT_index.tif int32 with nodata -1) with the cube's "
                  "georeferencing (needs GDAL)")
      ->required();
  auto* best = sub->add_flag("--best", args->best, "keep the best reference per pixel (index + score)");
  auto* top = sub->add_option("--top", args->top, "keep the K best references per pixel, best first")
                  ->check(integer_in(1, std::numeric_limits<int>::max()));
  auto* thr = sub->add_option("--threshold", args->threshold,
                              "like --best, but pixels whose best score fails T get index -1 (sam/ed/sid: score <= T; scc: score >= T)")
                  ->check(finite_number());
  best->excludes(top)->excludes(thr);
  top->excludes(thr);
  sub->add_option("--png", args->png, "picture: heat map of the first score band with a colour bar, or a class map with a legend");
  sub->add_option("--chunk-lines", args->chunk_lines, "lines per streamed chunk (default 0: chosen from the device)")
      ->check(CLI::NonNegativeNumber);
  sub->add_flag("--no-tensor-cores", args->no_tensor_cores, "CUDA: plain FP32 for many references (no TF32)");
  g.add_backend_options(*sub);
  g.add_png_option(*sub);
  g.add_json_option(*sub, "print the stage times (read, upload, compute, download, write), backend and counts as JSON");
  sub->callback([args, &g, &action] { action = [args, &g] { return run_spectral(*args, g); }; });
}

}  // namespace spectrasift::cli

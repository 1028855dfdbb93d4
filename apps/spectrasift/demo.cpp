// `spectrasift demo`: the three jobs of spectrasift on the bundled sample data (data/), with pictures.
//   1. SIFT on data/box.png                        -> keypoints.png
//   2. register data/box.png onto box_in_scene.png -> matches.png, warped.png, overlay.png
//   3. spectral angle of every pixel of the bundled hyperspectral scene against the mean spectrum of
//      its target pixels                           -> spectral_sam.hdr/.img, spectral_sam.png
//   4. (with GDAL) register two overlapping crops of the bundled Landsat scene on the ground
//                                                  -> geo_fixed.tif, geo_moving.tif, geo_warped.tif, geo_gcps.vrt,
//                                                     geo_matches.geojson
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <numeric>

#include "cli.hpp"
#include "register_geo.hpp"
#include "report.hpp"
#include "spectrasift/draw.hpp"
#include "spectrasift/error.hpp"
#include "spectrasift/geometry.hpp"
#include "spectrasift/georef.hpp"
#include "spectrasift/io.hpp"
#include "spectrasift/match.hpp"
#include "spectrasift/sift.hpp"
#include "spectrasift/spectral.hpp"

namespace spectrasift::cli {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

void save_png(const fs::path& path, const Image& image) {
  AtomicOutput out(path);
  write_png(out.temp_path(), image);
  out.commit();
}

/// The bundled hyperspectral scene: the first data/*.hdr that has a "<name>_targets.hdr" beside it.
fs::path find_scene(const fs::path& data) {
  std::vector<fs::path> found;
  for (const auto& e : fs::directory_iterator(data)) {
    const auto p = e.path();
    if (p.extension() != ".hdr") continue;
    const std::string stem = p.stem().string();
    if (stem.size() > 8 && stem.compare(stem.size() - 8, 8, "_targets") == 0) continue;
    if (fs::exists(data / (stem + "_targets.hdr"))) found.push_back(p);
  }
  if (found.empty()) throw Error(ErrorCode::kIo, data.string() + ": no hyperspectral scene with a _targets map found");
  std::sort(found.begin(), found.end());
  return found.front();
}

/// Area under the ROC curve of `score` (higher = more target-like) against a 0/1 truth map; NaN scores
/// are ranked last. Ties get half credit (Mann-Whitney U).
double roc_auc(const std::vector<float>& score, const std::vector<std::uint8_t>& truth) {
  std::vector<std::size_t> order(score.size());
  std::iota(order.begin(), order.end(), 0);
  auto key = [&](std::size_t i) { return std::isnan(score[i]) ? -INFINITY : score[i]; };
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return key(a) < key(b); });
  double pos = 0, neg = 0, rank_sum = 0;
  for (std::size_t i = 0; i < order.size();) {
    std::size_t j = i;
    while (j < order.size() && key(order[j]) == key(order[i])) ++j;
    const double mid_rank = 0.5 * double(i + 1 + j);  // 1-based average rank of the tie group
    for (std::size_t k = i; k < j; ++k)
      if (truth[order[k]]) rank_sum += mid_rank;
    i = j;
  }
  for (auto t : truth) (t ? pos : neg) += 1;
  if (pos == 0 || neg == 0) return NAN;
  return (rank_sum - pos * (pos + 1) / 2) / (pos * neg);
}

/// The folder of this executable (Linux: /proc/self/exe), empty when unknown.
fs::path executable_dir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : exe.parent_path();
}

/// The sample data: --data, else $SPECTRASIFT_DATA_DIR, else BIN/../share/spectrasift/data (an install, and
/// the build tree, which copies data/ there), else BIN/data (a moved copy with its data beside it).
fs::path find_data(const std::string& option) {
  if (!option.empty()) return option;
  std::vector<fs::path> tried;
  if (const char* env = std::getenv("SPECTRASIFT_DATA_DIR"); env && *env) tried.emplace_back(env);
  if (const fs::path bin = executable_dir(); !bin.empty()) {
    tried.push_back(bin.parent_path() / "share" / "spectrasift" / "data");
    tried.push_back(bin / "data");
  }
  std::error_code ec;
  for (const fs::path& d : tried)
    if (fs::exists(d / "box.png", ec)) return d;
  std::string list;
  for (const fs::path& d : tried) list += (list.empty() ? "" : ", ") + d.string();
  throw Error(ErrorCode::kIo, "the demo's sample data was not found (looked in: " + list +
                                  "); give its folder with --data DIR (the repository's data/)");
}

/// The positions of matched keypoints: pm in the query (MOVING), pf in the train set (FIXED).
void matched_points(const Features& fm, const Features& ff, const std::vector<Match>& matches, std::vector<Point2>& pm,
                    std::vector<Point2>& pf) {
  for (const auto& m : matches) {
    pm.push_back({fm.keypoints[std::size_t(m.query)].x, fm.keypoints[std::size_t(m.query)].y});
    pf.push_back({ff.keypoints[std::size_t(m.train)].x, ff.keypoints[std::size_t(m.train)].y});
  }
}

/// The window (x0, y0, w, h) of a one-channel U8 image.
Image crop(const Image& im, int x0, int y0, int w, int h) {
  Image c = Image::allocate(w, h, 1, PixelType::kU8);
  for (int y = 0; y < h; ++y)
    std::copy_n(im.data.data() + std::size_t(y0 + y) * im.width + x0, w, c.data.data() + std::size_t(y) * w);
  return c;
}

/// 4. A georeferenced job: two overlapping 200 x 200 crops of the bundled Landsat 7 scene (band 4), registered; the
/// offset found against the one their geotransforms give, the residuals on the ground, and the outputs a GIS opens.
void demo_georeferenced(Context& ctx, const fs::path& data, const fs::path& out, nlohmann::json& report,
                        const std::function<void(const std::string&)>& say) {
  const fs::path scene = data / "olinda_l7.tif";
  if (!gdal_supported()) {
    say("4. georef    skipped: this build has no GDAL (install libgdal-dev and rebuild spectrasift)");
    return;
  }
  std::error_code ec;
  if (!fs::exists(scene, ec)) {
    say("4. georef    skipped: " + scene.string() + " is not in the data folder");
    return;
  }
  ImageLimits limits;
  limits.max_pixels = ctx.options().max_pixels;
  const GeoImage band = read_raster_image(scene.string(), 4, limits);
  const int x0 = 37, y0 = 21, size = 200;
  const Image fixed = crop(band.image, 0, 0, size, size), moving = crop(band.image, x0, y0, size, size);
  const GeoReference gf = band.georef.window(0, 0), gm = band.georef.window(x0, y0);
  const auto t0 = Clock::now();
  const Features ff = detect_and_compute(ctx, fixed), fm = detect_and_compute(ctx, moving);
  const auto matches = match_features(ctx, fm, ff);
  std::vector<Point2> pm, pf;
  matched_points(fm, ff, matches, pm, pf);
  RansacOptions ro;
  ro.model = GeometryModel::kSimilarity;
  const ModelEstimate est = estimate_model(ctx, pm, pf, ro);
  if (!est.found) throw Error(ErrorCode::kNoModel, "demo: no model found between the two crops of " + scene.string());
  const double ms = ms_since(t0);
  const MapModel map = map_model(gm, gf, est.matrix, pm, pf, est.inlier_mask);
  const auto write = [](const fs::path& p, const auto& writer) {
    AtomicOutput o(p);
    writer(o.temp_path());
    o.commit();
  };
  write(out / "geo_fixed.tif", [&](const fs::path& t) { write_geotiff(t, fixed, gf); });
  write(out / "geo_moving.tif", [&](const fs::path& t) { write_geotiff(t, moving, gm); });
  write(out / "geo_warped.tif",
        [&](const fs::path& t) { write_geotiff(t, warp_image(ctx, moving, est.matrix, size, size), gf); });
  write(out / "geo_gcps.vrt", [&](const fs::path& t) {
    write_gcp_vrt(t, out / "geo_gcps.vrt", (out / "geo_moving.tif").string(),
                  control_points(gf, est.matrix, pm, pf, est.inlier_mask, true), gf.crs_wkt);
  });
  write(out / "geo_matches.geojson", [&](const fs::path& t) {
    write_control_points_geojson(t, control_points(gf, est.matrix, pm, pf, est.inlier_mask, false), gf.crs_wkt);
  });
  char line[640];
  std::snprintf(line, sizeof line,
                "4. georef    two %dx%d crops of %s (band 4, %s): offset %.3f, %.3f px (geotransforms: %d, %d), %d inliers, "
                "residuals rms %.2f m on the ground, %.1f ms -> %s, %s, %s, %s",
                size, size, scene.filename().c_str(), map.unit.name.c_str(), est.matrix[2], est.matrix[5], x0, y0,
                est.inliers, map.rms * map.unit.metres, ms, (out / "geo_warped.tif").c_str(), (out / "geo_fixed.tif").c_str(),
                (out / "geo_gcps.vrt").c_str(), (out / "geo_matches.geojson").c_str());
  say(line);
  report["georeferenced"] = {{"scene", scene.string()},  {"offset_px", {est.matrix[2], est.matrix[5]}},
                             {"expected_offset_px", {x0, y0}}, {"inliers", est.inliers},
                             {"map", map.to_json()},     {"times_ms", {{"total", ms}}}};
}

struct DemoOptions {
  std::string out = "demo-out";
  std::string data;
};

int run_demo(const DemoOptions& o, const GlobalOptions& g) {
  const fs::path data = find_data(o.data);
  const fs::path out = o.out;
  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec) throw Error(ErrorCode::kIo, out.string() + ": cannot create the output folder (" + ec.message() + ")");
  Context ctx(g.context_options());
  nlohmann::json report = context_json("demo", ctx);
  report["data"] = data.string();
  auto say = [&](const std::string& line) {
    if (!g.json) std::cout << line << std::endl;
  };
  say("spectrasift demo on " + ctx.describe() + "; data from " + data.string() + ", pictures in " + out.string());

  // 1. SIFT on one image.
  const fs::path moving_path = data / "box.png", fixed_path = data / "box_in_scene.png";
  ImageLimits limits;
  limits.max_pixels = ctx.options().max_pixels;
  const Image moving = read_image(moving_path, limits);
  const Image fixed = read_image(fixed_path, limits);
  auto t0 = Clock::now();
  const Features fm = detect_and_compute(ctx, moving);
  const double sift_ms = ms_since(t0);
  save_png(out / "keypoints.png", draw_keypoints(moving, fm));
  char line[512];
  std::snprintf(line, sizeof line, "1. SIFT      %s (%dx%d): %zu keypoints in %.1f ms -> %s", moving_path.filename().c_str(),
                moving.width, moving.height, fm.size(), sift_ms, (out / "keypoints.png").c_str());
  say(line);
  report["sift"] = {{"image", {{"path", moving_path.string()}, {"width", moving.width}, {"height", moving.height},
                               {"features", fm.size()}}},
                    {"times_ms", {{"total", sift_ms}}}};

  // 2. Register the object onto the scene.
  t0 = Clock::now();
  const Features ff = detect_and_compute(ctx, fixed);
  const auto matches = match_features(ctx, fm, ff);
  std::vector<Point2> pm, pf;
  matched_points(fm, ff, matches, pm, pf);
  const ModelEstimate est = estimate_model(ctx, pm, pf);
  const double reg_ms = ms_since(t0);
  save_png(out / "matches.png", draw_matches(moving, fm, fixed, ff, matches, &est.inlier_mask));
  if (!est.found) throw Error(ErrorCode::kNoModel, "demo: no homography found between the bundled images");
  const Image warped = warp_image(ctx, moving, est.matrix, fixed.width, fixed.height);
  save_png(out / "warped.png", warped);
  save_png(out / "overlay.png", overlay_blend(fixed, warped));
  std::snprintf(line, sizeof line,
                "2. register  %s onto %s: %zu matches, %d inliers, RMS %.2f px, %d iterations, %.1f ms -> %s, %s, %s",
                moving_path.filename().c_str(), fixed_path.filename().c_str(), matches.size(), est.inliers, est.rms_px,
                est.iterations, reg_ms, (out / "matches.png").c_str(), (out / "warped.png").c_str(),
                (out / "overlay.png").c_str());
  say(line);
  report["register"] = {{"fixed", fixed_path.string()}, {"moving", moving_path.string()},
                        {"match_count", matches.size()}, {"inliers", est.inliers},
                        {"rms_px", est.rms_px},         {"matrix", est.matrix},
                        {"times_ms", {{"total", reg_ms}}}};

  // 3. Spectral angle against the mean target spectrum.
  const fs::path scene = find_scene(data);
  const fs::path targets = scene.parent_path() / (scene.stem().string() + "_targets.hdr");
  t0 = Clock::now();
  const EnviCube cube = open_envi(scene, ctx.options().max_pixels);
  const EnviCube target_cube = open_envi(targets, ctx.options().max_pixels);
  const int w = cube.header().samples, h = cube.header().lines;
  if (target_cube.header().samples != w || target_cube.header().lines != h)
    throw Error(ErrorCode::kBadFormat, targets.string() + ": target map size differs from " + scene.string());
  std::vector<std::uint8_t> truth(std::size_t(w) * h);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) truth[std::size_t(y) * w + x] = target_cube.value(y, x, 0) != 0 ? 1 : 0;
  const SpectralLibrary ref = reference_from_mask(cube, truth, "mean target");
  SpectralOptions so;
  so.metric = Metric::kSpectralAngle;
  const SpectralResult res = spectral_match(ctx, cube, ref, so);
  const double spec_ms = ms_since(t0);
  {
    const fs::path hdr = out / "spectral_sam.hdr";
    write_envi_f32(hdr, w, h, {"spectral angle to mean target (rad)"}, res.scores.data(), &cube.header());
  }
  // Heat map: small angles (target-like) bright.
  ImageF angle{w, h, res.scores};
  float lo = INFINITY, hi = -INFINITY;
  for (float v : angle.data)
    if (!std::isnan(v)) lo = std::min(lo, v), hi = std::max(hi, v);
  const int scale = std::max(1, 400 / std::max(w, h));
  ImageF big{w * scale, h * scale, std::vector<float>(std::size_t(w) * scale * h * scale)};
  for (int y = 0; y < big.height; ++y)
    for (int x = 0; x < big.width; ++x) big.at(x, y) = angle.at(x / scale, y / scale);
  Image heat = apply_colormap(big, hi, lo, Colormap::kInferno);  // reversed: low angle = bright
  Image canvas = blank_rgb(heat.width + 110, heat.height + 30, colors::kWhite);
  for (int y = 0; y < heat.height; ++y)
    std::copy_n(heat.data.data() + std::size_t(y) * heat.width * 3, std::size_t(heat.width) * 3,
                canvas.data.data() + (std::size_t(y + 24) * canvas.width) * 3);
  draw_text(canvas, 2, 4, scene.stem().string() + ": SAM to mean target", colors::kBlack, 2);
  draw_colorbar(canvas, heat.width + 10, 30, 20, heat.height - 12, Colormap::kInferno, hi, lo, "rad", 5,
                colors::kBlack);
  save_png(out / "spectral_sam.png", canvas);
  std::vector<float> negated(res.scores.size());
  for (std::size_t i = 0; i < negated.size(); ++i) negated[i] = -res.scores[i];
  const double auc = roc_auc(negated, truth);
  std::snprintf(line, sizeof line,
                "3. spectral  %s (%dx%dx%d %s): SAM to the mean of %zu target pixels, ROC AUC %.4f, %.1f ms -> %s, %s",
                scene.filename().c_str(), w, h, cube.header().bands, to_string(cube.header().data_type),
                std::size_t(std::count(truth.begin(), truth.end(), 1)), auc, spec_ms,
                (out / "spectral_sam.png").c_str(), (out / "spectral_sam.hdr").c_str());
  say(line);
  report["spectral"] = {{"cube", scene.string()}, {"metric", "sam"}, {"roc_auc", auc}, {"times_ms", {{"total", spec_ms}}}};
  demo_georeferenced(ctx, data, out, report, say);
  if (g.json) print_json(report);
  return 0;
}

}  // namespace

void add_demo_command(CLI::App& app, GlobalOptions& g, Action& action) {
  static DemoOptions o;
  auto* sub = app.add_subcommand("demo", "run SIFT, registration and spectral matching on the bundled sample data");
  sub->add_option("--out", o.out, "folder for the pictures and outputs (default demo-out)");
  sub->add_option("--data", o.data,
                  "folder with the sample data (default: $SPECTRASIFT_DATA_DIR, else ../share/spectrasift/data next to "
                  "the executable, else data/ beside it)");
  g.add_backend_options(*sub);
  g.add_json_option(*sub, "print the figures as one JSON object");
  sub->callback([&g, &action] { action = [&g] { return run_demo(o, g); }; });
}

}  // namespace spectrasift::cli

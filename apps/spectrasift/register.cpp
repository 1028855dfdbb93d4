// `spectrasift register FIXED MOVING...`: SIFT on the images (or their feature files), matching with
// query = MOVING and train = FIXED (as the library example and the demo), RANSAC model MOVING -> FIXED,
// its verdict (spectrasift/verdict.hpp), then optionally the warped moving image, the matches picture and
// an overlay. Every output of one MOVING is written only when its whole job succeeded. No model, or a
// model that is not reliable (unless --accept-weak) -> one-line error and exit code 3. Several MOVING
// inputs (or a glob) reuse one Context and FIXED's features; each gets its own result and outputs.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>

#include "inputs.hpp"
#include "match_common.hpp"
#include "register_geo.hpp"
#include "report.hpp"
#include "spectrasift/geometry.hpp"
#include "spectrasift/match.hpp"
#include "spectrasift/registration.hpp"
#include "spectrasift/verdict.hpp"

namespace spectrasift::cli {

namespace {

namespace fs = std::filesystem;

struct RegisterArgs {
  std::string fixed, warped, draw, overlay, size, gcp, geojson;
  const CLI::Option* descriptor_type = nullptr;  // --descriptor-type (resolve_descriptor_type)
  int band = 0;
  std::vector<std::string> moving;
  std::size_t draw_max = DrawMatchesOptions{}.max_matches;
  std::string model = "homography";
  std::string overlay_style = "checkerboard";
  int tile = 32;
  bool accept_weak = false;
  SiftOptions sift;
  MatchOptions match;
  RansacOptions ransac;
};

/// The output files of one MOVING input (empty = not asked for).
struct Outputs {
  fs::path warped, draw, overlay, gcp, geojson;
};

nlohmann::json verdict_json(const ModelVerdict& v) {
  return {{"reliable", v.reliable},       {"problems", v.problems},   {"inlier_ratio", v.inlier_ratio},
          {"distinct_inliers", v.distinct_inliers},
          {"log10_nfa", v.log10_nfa},     {"scale", v.scale},         {"scale_range", v.scale_range},
          {"anisotropy", v.anisotropy},   {"folds", v.folds},         {"flips", v.flips}};
}

/// Registers one MOVING onto FIXED; prints its result; returns the exit code (throws on errors).
/// `bar` shows the whole command; this input covers [progress0, progress1] of it.
int register_one(Context& ctx, const RegisterArgs& a, const GlobalOptions& g, FeatureInput& fixed,
                 const std::string& moving_path, const Outputs& out, bool first, std::pair<int, int> size,
                 Progress& bar, double progress0, double progress1) {
  const auto t_total = std::chrono::steady_clock::now();
  const std::string name = fs::path(moving_path).filename().string();
  const auto stage = [&](const char* what, double f) {
    bar.stage(std::string(what) + " " + name, progress0 + f * (progress1 - progress0));
  };
  const auto part = [&](double lo, double hi) {  // the library's progress of one step, onto [lo, hi] of this input
    return bar.within(progress0 + lo * (progress1 - progress0), progress0 + hi * (progress1 - progress0));
  };
  stage("sift", 0.0);
  ctx.set_progress(part(0.0, 0.5));
  FeatureInput moving = load_input(ctx, moving_path, a.sift, false, a.band);
  if (!moving.from_image && moving.features.image_width <= 0) {
    moving.features.image_width = size.first;
    moving.features.image_height = size.second;
  }
  if (!moving.from_image &&
      (!out.warped.empty() || !out.draw.empty() || !out.overlay.empty() || !out.gcp.empty()))
    throw Error(ErrorCode::kInvalidArgument, moving_path + ": a feature file: -o, --draw, --overlay and --gcp need the image");

  // Query = MOVING, train = FIXED; the model maps MOVING points onto FIXED points (spectrasift/registration.hpp).
  // The library's progress of each step drives the bar's share of it (match 0.5-0.7, RANSAC 0.7-0.8).
  const Registration reg = register_features(
      ctx, moving.features, fixed.features, moving.width(), moving.height(), fixed.width(), fixed.height(),
      {a.match, a.ransac, {}}, [&](const char* s) {
        const bool is_match = std::string(s) == "match";
        stage(s, is_match ? 0.5 : 0.7);
        ctx.set_progress(is_match ? part(0.5, 0.7) : part(0.7, 0.8));
      });
  const std::vector<Match>& matches = reg.matches;
  const ModelEstimate& est = reg.estimate;
  const double match_ms = reg.match_ms, ransac_ms = reg.ransac_ms;
  const std::string between = " between " + a.fixed + " (" + std::to_string(fixed.features.size()) +
                              " features) and " + moving_path + " (" + std::to_string(moving.features.size()) +
                              " features)";
  if (!est.found) {
    throw Error(ErrorCode::kNoModel, "no " + a.model + " found" + between + ": " + std::to_string(matches.size()) +
                                         " matches, best model " + std::to_string(est.inliers) + " inliers, " +
                                         std::to_string(a.ransac.required_inliers()) + " needed (do the images overlap?)");
  }
  const ModelVerdict& verdict = reg.verdict;
  if (!verdict.reliable) {
    char figures[160];
    std::snprintf(figures, sizeof figures, " (%d inliers of %zu matches, rms %.2f px)", est.inliers, matches.size(),
                  est.rms_px);
    const std::string message = verdict.summary() + between + figures;
    if (!a.accept_weak) throw Error(ErrorCode::kNoModel, message + "; --accept-weak keeps it");
    bar.clear();
    std::cerr << "spectrasift: warning: " << message << " (kept: --accept-weak)\n";
  }

  // Pictures, then all files at once.
  stage("warp", 0.8);
  ctx.set_progress({});
  auto t0 = std::chrono::steady_clock::now();
  Image warped;
  if (!out.warped.empty() || !out.overlay.empty())
    warped = warp_image(ctx, moving.image, est.matrix, fixed.width(), fixed.height());
  const double warp_ms = ms_since(t0);
  stage("write", 0.9);
  t0 = std::chrono::steady_clock::now();
  OutputSet files;
  files.png = g.png_options();
  // A GeoTIFF name and a georeferenced FIXED: the warped image is in FIXED's frame, so it gets FIXED's
  // georeferencing (its nodata value is MOVING's, whose pixels it holds).
  const bool geotiff = fixed.georef.georeferenced() && gdal_supported() &&
                       (lower_extension(out.warped) == ".tif" || lower_extension(out.warped) == ".tiff");
  if (!out.warped.empty() && geotiff) {
    GeoReference frame = fixed.georef;
    frame.nodata = moving.georef.nodata;
    write_geotiff(files.add(out.warped), warped, frame);
  } else if (!out.warped.empty()) {
    files.add_image(out.warped, warped);
  }
  if (!out.gcp.empty())
    write_gcp_vrt(files.add(out.gcp), out.gcp, moving_path,
                  control_points(fixed.georef, est.matrix, reg.moving_points, reg.fixed_points, est.inlier_mask, true),
                  fixed.georef.crs_wkt);
  if (!out.geojson.empty())
    write_control_points_geojson(
        files.add(out.geojson),
        control_points(fixed.georef, est.matrix, reg.moving_points, reg.fixed_points, est.inlier_mask, false),
        fixed.georef.crs_wkt);
  if (!out.draw.empty())
    files.add_image(out.draw, draw_matches(moving.image, moving.features, fixed.image, fixed.features, matches,
                                           &est.inlier_mask, DrawMatchesOptions{a.draw_max, true}));
  if (!out.overlay.empty())
    files.add_image(out.overlay, a.overlay_style == "blend" ? overlay_blend(fixed.image, warped)
                                                           : overlay_checkerboard(fixed.image, warped, a.tile));
  files.commit();
  const double write_ms = ms_since(t0);
  bar.clear();
  // FIXED's read and SIFT are counted in the first result (they are done once).
  const double fixed_read = first ? fixed.read_ms : 0.0, fixed_sift = first ? fixed.sift_ms : 0.0;
  const double total_ms = ms_since(t_total) + fixed_read + fixed_sift;

  const auto& h = est.matrix;
  const MapModel map = map_model(moving.georef, fixed.georef, h, reg.moving_points, reg.fixed_points, est.inlier_mask);
  if (g.json) {
    nlohmann::json j = context_json("register", ctx);
    j["model"] = to_string(est.model);
    j["matrix"] = {{h[0], h[1], h[2]}, {h[3], h[4], h[5]}, {h[6], h[7], h[8]}};
    j["matrix_maps"] = "moving -> fixed pixels, (0,0) = centre of the top-left pixel";
    j["match_count"] = matches.size();
    j["inliers"] = est.inliers;
    j["rms_px"] = est.rms_px;
    j["iterations"] = est.iterations;
    j["threshold_px"] = a.ransac.threshold_px;
    j["seed"] = a.ransac.seed;
    j["reliable"] = verdict.reliable;
    j["verdict"] = verdict_json(verdict);
    if (map.valid) j["map"] = map.to_json();
    j["fixed"] = fixed.describe();
    j["moving"] = moving.describe();
    j["times_ms"] = {{"read", fixed_read + moving.read_ms}, {"sift", fixed_sift + moving.sift_ms},
                     {"match", match_ms},                   {"ransac", ransac_ms},
                     {"warp", warp_ms},                     {"write", write_ms},
                     {"total", total_ms}};
    nlohmann::json outputs = nlohmann::json::object();
    if (!out.warped.empty()) outputs["warped"] = out.warped.string();
    if (!out.draw.empty()) outputs["draw"] = out.draw.string();
    if (!out.overlay.empty()) outputs["overlay"] = out.overlay.string();
    if (!out.gcp.empty()) outputs["gcp"] = out.gcp.string();
    if (!out.geojson.empty()) outputs["geojson"] = out.geojson.string();
    j["outputs"] = outputs;
    print_json(j);
  } else {
    std::printf("%s -> %s: %s, %d inliers of %zu matches (moving %zu features, fixed %zu), rms %.3f px, %d iterations%s\n",
                moving_path.c_str(), a.fixed.c_str(), to_string(est.model), est.inliers, matches.size(),
                moving.features.size(), fixed.features.size(), est.rms_px, est.iterations,
                verdict.reliable ? "" : " (NOT RELIABLE)");
    std::printf("matrix (moving -> fixed pixels):\n");
    for (int r = 0; r < 3; ++r) std::printf("  % .10g  % .10g  % .10g\n", h[r * 3], h[r * 3 + 1], h[r * 3 + 2]);
    if (map.valid) std::printf("%s", map.describe().c_str());
    std::printf("%s; read %.1f ms, sift %.1f ms, match %.1f ms, ransac %.1f ms, warp %.1f ms, write %.1f ms, total %.1f ms\n",
                ctx.describe().c_str(), fixed_read + moving.read_ms, fixed_sift + moving.sift_ms, match_ms, ransac_ms,
                warp_ms, write_ms, total_ms);
    for (const auto* p : {&out.warped, &out.draw, &out.overlay, &out.gcp, &out.geojson})
      if (!p->empty()) std::printf("wrote %s\n", p->c_str());
    std::fflush(stdout);
  }
  return 0;
}

int run_register(RegisterArgs& a, const GlobalOptions& g) {
  a.ransac.model = parse_geometry_model(a.model);
  a.ransac.check();
  a.match.check();
  check_descriptor_type(a.sift);
  a.sift.check();
  if (a.overlay_style != "checkerboard" && a.overlay_style != "blend")
    throw Error(ErrorCode::kInvalidArgument, "--overlay-style must be checkerboard or blend, got '" + a.overlay_style + "'");
  if (a.tile < 1) throw Error(ErrorCode::kInvalidArgument, "--tile must be >= 1");
  const std::pair<int, int> size = a.size.empty() ? std::pair<int, int>{0, 0} : parse_size(a.size);
  const std::vector<std::string> movings = expand_inputs(a.moving);
  const bool several = movings.size() > 1;
  // Refuse bad output names before any work. With several MOVING inputs each output option is a folder.
  for (const auto& [p, opt] : {std::pair{&a.warped, "-o"}, {&a.draw, "--draw"}, {&a.overlay, "--overlay"}})
    if (!p->empty() && !several) check_image_output(*p, opt);
  if (!a.gcp.empty() && !several && lower_extension(a.gcp) != ".vrt")
    throw Error(ErrorCode::kInvalidArgument, a.gcp + ": --gcp writes a GDAL VRT (.vrt)");
  if (!a.gcp.empty() && !gdal_supported())
    throw Error(ErrorCode::kUnsupported, a.gcp + ": --gcp needs GDAL, and this build has none: install libgdal-dev "
                                                 "(scripts/setup-debian.sh) and rebuild spectrasift");
  if (!a.geojson.empty() && !several && lower_extension(a.geojson) != ".geojson" && lower_extension(a.geojson) != ".json")
    throw Error(ErrorCode::kInvalidArgument, a.geojson + ": --geojson writes a .geojson (or .json) file");
  std::vector<Outputs> outs(movings.size());
  if (several) {
    const auto put = [&](const std::string& dir, const char* suffix, fs::path Outputs::*field) {
      if (dir.empty()) return;
      const auto names = outputs_in_dir(dir, movings, suffix);
      for (std::size_t i = 0; i < names.size(); ++i) outs[i].*field = names[i];
    };
    put(a.warped, "_warped.png", &Outputs::warped);
    put(a.draw, "_matches.png", &Outputs::draw);
    put(a.overlay, "_overlay.png", &Outputs::overlay);
    put(a.gcp, "_gcps.vrt", &Outputs::gcp);
    put(a.geojson, "_matches.geojson", &Outputs::geojson);
  } else {
    outs[0] = {a.warped, a.draw, a.overlay, a.gcp, a.geojson};
  }

  Context ctx(g.context_options());
  resolve_descriptor_type(a.sift, a.descriptor_type, ctx.backend());
  Progress bar("sift " + fs::path(a.fixed).filename().string(), !g.quiet);
  bar.update(0.0);
  ctx.set_progress(bar.within(0.0, 0.3));  // the library reports, the bar draws
  FeatureInput fixed = load_input(ctx, a.fixed, a.sift, false, a.band);
  if (!fixed.from_image && fixed.features.image_width <= 0) {
    fixed.features.image_width = size.first;
    fixed.features.image_height = size.second;
  }
  if (!fixed.from_image && (!a.draw.empty() || !a.overlay.empty()))
    throw Error(ErrorCode::kInvalidArgument, a.fixed + ": a feature file: --draw and --overlay need the image");
  if (!a.warped.empty() && fixed.width() <= 0)
    throw Error(ErrorCode::kInvalidArgument, a.fixed + ": the feature file records no image size: give --size WxH for -o");
  // FIXED takes the first share of the bar, each MOVING an equal share of the rest.
  const double share = 0.7 / double(movings.size());
  if (!several) return register_one(ctx, a, g, fixed, movings[0], outs[0], true, size, bar, 0.3, 1.0);
  // Several: each MOVING is reported on its own (an error does not stop the others); the exit code is
  // the worst of them.
  return for_each_input(movings, "register", "moving", g.json, bar, [&](std::size_t i) {
    return register_one(ctx, a, g, fixed, movings[i], outs[i], i == 0, size, bar, 0.3 + double(i) * share,
                        0.3 + double(i + 1) * share);
  });
}

}  // namespace

void add_register_command(CLI::App& app, GlobalOptions& g, Action& action) {
  auto args = std::make_shared<RegisterArgs>();
  auto* sub = app.add_subcommand(
      "register", "register MOVING onto FIXED: SIFT, ratio-test matching (query = MOVING, train = FIXED), RANSAC "
                  "model (MOVING -> FIXED pixels) and its verdict");
  sub->add_option("FIXED", args->fixed, "the reference: an image, or a feature file (.key, .json, .bin) written by `sift`")
      ->required();
  sub->add_option("MOVING", args->moving,
                  "the image(s) to bring onto FIXED, or feature files; several (or a quoted glob) reuse FIXED's "
                  "features and write one result each")
      ->required();
  sub->add_option("--size", args->size,
                  "WxH: the image size of a feature file that records none (Lowe's .key), for the verdict and -o");
  sub->add_option("--model", args->model, "homography|affine|similarity (default homography)");
  sub->add_option("--threshold", args->ransac.threshold_px,
                  "RANSAC inlier threshold: transfer error in FIXED pixels (default 3)")
      ->check(finite_number(true));
  sub->add_option("--confidence", args->ransac.confidence, "RANSAC confidence for the adaptive count (default 0.999)");
  sub->add_option("--max-iterations", args->ransac.max_iterations, "RANSAC iteration cap (default 10000)");
  sub->add_option("--min-inliers", args->ransac.min_inliers,
                  "fewest inliers to accept a model, 0 = 2 x sample size (default 0)");
  sub->add_option("--seed", args->ransac.seed, "RANSAC seed: same seed, same result (default 0)")->check(unsigned_64());
  sub->add_flag("--msac,!--no-msac", args->ransac.msac,
                "rank RANSAC models by the MSAC cost sum min(e^2, t^2) (default), or with --no-msac by the inlier count");
  sub->add_flag("--accept-weak", args->accept_weak,
                "keep a model whose verdict is 'not reliable' (weak support, fold, mirror, extreme scale): warning on "
                "stderr and \"reliable\": false in --json, exit 0 (default: exit 3)");
  sub->add_option("--ratio", args->match.ratio, "Lowe's ratio for matching (default 0.8)");
  sub->add_flag("--mutual", args->match.mutual, "keep only two-way best matches (default off)");
  args->descriptor_type = add_sift_options(*sub, args->sift, &args->band);
  sub->add_option("-o,--output", args->warped,
                  "write MOVING warped into FIXED's frame (.png; .tif when built with libtiff: a GeoTIFF with FIXED's "
                  "georeferencing when FIXED has one and the build has GDAL), same sample type; "
                  "with several MOVING: a folder, DIR/<moving stem>_warped.png");
  sub->add_option("--gcp", args->gcp,
                  "write the inlier matches as ground control points of MOVING: a GDAL VRT (.vrt) of MOVING with GCPs in "
                  "FIXED's map coordinates (its pixels when not georeferenced), for gdalwarp; needs GDAL; with several "
                  "MOVING: a folder, DIR/<moving stem>_gcps.vrt");
  sub->add_option("--geojson", args->geojson,
                  "write every match as a GeoJSON point (WGS 84 when FIXED has a CRS; properties: pixels, map "
                  "coordinates, residual, inlier); with several MOVING: a folder, DIR/<moving stem>_matches.geojson");
  sub->add_option("--draw", args->draw,
                  "write a picture of the matches (.png): MOVING left, FIXED right, inliers yellow, outliers magenta, a "
                  "legend with the counts below; with several MOVING: a folder, DIR/<moving stem>_matches.png");
  sub->add_option("--draw-max", args->draw_max,
                  "draw at most N matches, spread over the image and best first (default 300; 0 = all)");
  sub->add_option("--overlay", args->overlay,
                  "write an overlay of FIXED and the warped MOVING (.png); with several MOVING: a folder, "
                  "DIR/<moving stem>_overlay.png");
  sub->add_option("--overlay-style", args->overlay_style,
                  "checkerboard (tiles alternate) or blend (FIXED magenta, MOVING green) (default checkerboard)");
  sub->add_option("--tile", args->tile, "checkerboard tile size in pixels (default 32)");
  g.add_backend_options(*sub);
  g.add_png_option(*sub);
  g.add_json_option(*sub, "print the result as one JSON object per MOVING (README \"JSON output\")");
  sub->callback([&g, &action, args] { action = [&g, args] { return run_register(*args, g); }; });
}

}  // namespace spectrasift::cli

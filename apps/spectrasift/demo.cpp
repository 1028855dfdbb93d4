// `spectrasift demo`: the three jobs of spectrasift on the bundled sample data (data/), with pictures.
//   1. SIFT on data/box.png                        -> keypoints.png
//   2. register data/box.png onto box_in_scene.png -> matches.png, warped.png, overlay.png
//   3. spectral angle of every pixel of the bundled hyperspectral scene against the mean spectrum of
//      its target pixels                           -> spectral_sam.hdr/.img, spectral_sam.png
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
#include "report.hpp"
#include "spectrasift/draw.hpp"
#include "spectrasift/error.hpp"
#include "spectrasift/geometry.hpp"
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
  for (const auto& m : matches) {
    pm.push_back({fm.keypoints[std::size_t(m.query)].x, fm.keypoints[std::size_t(m.query)].y});
    pf.push_back({ff.keypoints[std::size_t(m.train)].x, ff.keypoints[std::size_t(m.train)].y});
  }
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

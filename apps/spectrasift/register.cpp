// `spectrasift register FIXED MOVING`: SIFT on both images, matching, RANSAC model MOVING -> FIXED,
// then optionally the warped moving image, the matches picture and an overlay. Every output is
// written only when the whole job succeeded; no model -> one-line error and exit code 3.
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <iostream>

#include "match_common.hpp"
#include "spectrasift/geometry.hpp"
#include "spectrasift/match.hpp"

namespace spectrasift::cli {

namespace {

struct RegisterArgs {
  std::string fixed, moving, warped, draw, overlay;
  std::size_t draw_max = DrawMatchesOptions{}.max_matches;
  std::string model = "homography";
  std::string overlay_style = "checkerboard";
  int tile = 32;
  SiftOptions sift;
  MatchOptions match;
  RansacOptions ransac;
};

}  // namespace

void add_register_command(CLI::App& app, GlobalOptions& g, Action& action) {
  auto args = std::make_shared<RegisterArgs>();
  auto* sub = app.add_subcommand(
      "register", "register MOVING onto FIXED: SIFT, ratio-test matching, RANSAC model (MOVING -> FIXED pixels)");
  sub->add_option("FIXED", args->fixed, "the reference image")->required();
  sub->add_option("MOVING", args->moving, "the image to bring onto FIXED")->required();
  sub->add_option("--model", args->model, "homography|affine|similarity (default homography)");
  sub->add_option("--threshold", args->ransac.threshold_px,
                  "RANSAC inlier threshold: transfer error in FIXED pixels (default 3)");
  sub->add_option("--confidence", args->ransac.confidence, "RANSAC confidence for the adaptive count (default 0.999)");
  sub->add_option("--max-iterations", args->ransac.max_iterations, "RANSAC iteration cap (default 10000)");
  sub->add_option("--min-inliers", args->ransac.min_inliers,
                  "fewest inliers to accept a model, 0 = 2 x sample size (default 0)");
  sub->add_option("--seed", args->ransac.seed, "RANSAC seed: same seed, same result (default 0)");
  sub->add_flag("--msac", args->ransac.msac,
                "rank RANSAC models by the MSAC cost sum min(e^2, t^2) instead of the inlier count (default off)");
  sub->add_option("--ratio", args->match.ratio, "Lowe's ratio for matching (default 0.8)");
  sub->add_flag("--mutual", args->match.mutual, "keep only two-way best matches (default off)");
  add_sift_options(*sub, args->sift);
  sub->add_option("-o,--output", args->warped, "write MOVING warped into FIXED's frame (.png; .tif when built with libtiff), same sample type");
  sub->add_option("--draw", args->draw, "write a picture of the matches (.png): FIXED left, MOVING right, inliers yellow, "
                                        "outliers magenta, a legend with the counts below");
  sub->add_option("--draw-max", args->draw_max, "draw at most N matches, spread over the image and best first (default 300; 0 = all)");
  sub->add_option("--overlay", args->overlay, "write an overlay of FIXED and the warped MOVING (.png)");
  sub->add_option("--overlay-style", args->overlay_style,
                  "checkerboard (tiles alternate) or blend (FIXED magenta, MOVING green) (default checkerboard)");
  sub->add_option("--tile", args->tile, "checkerboard tile size in pixels (default 32)");
  g.add_backend_options(*sub);
  g.add_png_option(*sub);
  g.add_json_option(*sub, "print the result as one JSON object: model, matrix, matches, inliers, rms_px, ...");
  sub->callback([&g, &action, args] {
    action = [&g, args] {
      const auto t_total = std::chrono::steady_clock::now();
      RegisterArgs& a = *args;
      a.ransac.model = parse_geometry_model(a.model);
      a.ransac.check();
      a.match.check();
      a.sift.check();
      if (a.overlay_style != "checkerboard" && a.overlay_style != "blend")
        throw Error(ErrorCode::kInvalidArgument, "--overlay-style must be checkerboard or blend, got '" + a.overlay_style + "'");
      if (a.tile < 1) throw Error(ErrorCode::kInvalidArgument, "--tile must be >= 1");
      // Refuse bad output names before any work.
      if (!a.warped.empty()) check_image_output(a.warped, "-o");
      if (!a.draw.empty()) check_image_output(a.draw, "--draw");
      if (!a.overlay.empty()) check_image_output(a.overlay, "--overlay");

      Context ctx(g.context_options());
      const FeatureInput fixed = load_input(ctx, a.fixed, a.sift, true);
      const FeatureInput moving = load_input(ctx, a.moving, a.sift, true);

      // Query = FIXED, train = MOVING (the command-line order); the model maps train -> query points.
      auto t0 = std::chrono::steady_clock::now();
      const std::vector<Match> matches = match_features(ctx, fixed.features, moving.features, a.match);
      const double match_ms = ms_since(t0);
      std::vector<Point2> pm, pf;
      pm.reserve(matches.size());
      pf.reserve(matches.size());
      for (const Match& m : matches) {
        const Keypoint& kf = fixed.features.keypoints[std::size_t(m.query)];
        const Keypoint& km = moving.features.keypoints[std::size_t(m.train)];
        pm.push_back({km.x, km.y});
        pf.push_back({kf.x, kf.y});
      }
      t0 = std::chrono::steady_clock::now();
      const ModelEstimate est = estimate_model(ctx, pm, pf, a.ransac);
      const double ransac_ms = ms_since(t0);
      if (!est.found) {
        throw Error(ErrorCode::kNoModel,
                    "no " + a.model + " found between " + a.fixed + " (" + std::to_string(fixed.features.size()) +
                        " features) and " + a.moving + " (" + std::to_string(moving.features.size()) + " features): " +
                        std::to_string(matches.size()) + " matches, best model " + std::to_string(est.inliers) +
                        " inliers, " + std::to_string(a.ransac.required_inliers()) +
                        " needed (do the images overlap?)");
      }

      // Pictures, then all files at once.
      t0 = std::chrono::steady_clock::now();
      Image warped;
      if (!a.warped.empty() || !a.overlay.empty())
        warped = warp_image(ctx, moving.image, est.matrix, fixed.image.width, fixed.image.height);
      const double warp_ms = ms_since(t0);
      t0 = std::chrono::steady_clock::now();
      OutputSet out;
      out.png = g.png_options();
      if (!a.warped.empty()) out.add_image(a.warped, warped);
      if (!a.draw.empty())
        out.add_image(a.draw, draw_matches(fixed.image, fixed.features, moving.image, moving.features, matches,
                                           &est.inlier_mask, DrawMatchesOptions{a.draw_max, true}));
      if (!a.overlay.empty())
        out.add_image(a.overlay, a.overlay_style == "blend" ? overlay_blend(fixed.image, warped)
                                                            : overlay_checkerboard(fixed.image, warped, a.tile));
      out.commit();
      const double write_ms = ms_since(t0);
      const double total_ms = ms_since(t_total);

      const auto& h = est.matrix;
      if (g.json) {
        nlohmann::json j = {
            {"model", to_string(est.model)},
            {"matrix", {{h[0], h[1], h[2]}, {h[3], h[4], h[5]}, {h[6], h[7], h[8]}}},
            {"matrix_maps", "moving -> fixed pixels, (0,0) = centre of the top-left pixel"},
            {"matches", matches.size()},
            {"inliers", est.inliers},
            {"rms_px", est.rms_px},
            {"iterations", est.iterations},
            {"threshold_px", a.ransac.threshold_px},
            {"seed", a.ransac.seed},
            {"backend", to_string(ctx.backend())},
            {"device", ctx.describe()},
            {"fixed", {{"path", a.fixed}, {"width", fixed.image.width}, {"height", fixed.image.height},
                       {"features", fixed.features.size()}}},
            {"moving", {{"path", a.moving}, {"width", moving.image.width}, {"height", moving.image.height},
                        {"features", moving.features.size()}}},
            {"time_ms",
             {{"read", fixed.read_ms + moving.read_ms},
              {"sift", fixed.sift_ms + moving.sift_ms},
              {"match", match_ms},
              {"ransac", ransac_ms},
              {"warp", warp_ms},
              {"write", write_ms},
              {"total", total_ms}}}};
        nlohmann::json outputs = nlohmann::json::object();
        if (!a.warped.empty()) outputs["warped"] = a.warped;
        if (!a.draw.empty()) outputs["draw"] = a.draw;
        if (!a.overlay.empty()) outputs["overlay"] = a.overlay;
        j["outputs"] = outputs;
        std::cout << j.dump(2) << '\n';
      } else {
        std::printf("%s: %d inliers of %zu matches (fixed %zu features, moving %zu), rms %.3f px, %d iterations\n",
                    to_string(est.model), est.inliers, matches.size(), fixed.features.size(), moving.features.size(),
                    est.rms_px, est.iterations);
        std::printf("matrix (moving -> fixed pixels):\n");
        for (int r = 0; r < 3; ++r) std::printf("  % .10g  % .10g  % .10g\n", h[r * 3], h[r * 3 + 1], h[r * 3 + 2]);
        std::printf("%s; read %.1f ms, sift %.1f ms, match %.1f ms, ransac %.1f ms, warp %.1f ms, write %.1f ms, total %.1f ms\n",
                    ctx.describe().c_str(), fixed.read_ms + moving.read_ms, fixed.sift_ms + moving.sift_ms, match_ms,
                    ransac_ms, warp_ms, write_ms, total_ms);
        for (const auto* p : {&a.warped, &a.draw, &a.overlay})
          if (!p->empty()) std::printf("wrote %s\n", p->c_str());
      }
      return 0;
    };
  });
}

}  // namespace spectrasift::cli

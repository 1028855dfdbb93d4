// `spectrasift match A B`: SIFT features of two images (or two feature files), nearest-neighbour
// matching with the ratio test; writes the matches as JSON.
#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <iostream>

#include "match_common.hpp"
#include "report.hpp"
#include "spectrasift/match.hpp"

namespace spectrasift::cli {

namespace {

struct MatchArgs {
  std::string a, b, output;
  SiftOptions sift;
  const CLI::Option* descriptor_type = nullptr;  // --descriptor-type (resolve_descriptor_type)
  MatchOptions match;
};

nlohmann::json distance_json(float d) { return std::isfinite(d) ? nlohmann::json(d) : nlohmann::json(nullptr); }

}  // namespace

void add_match_command(CLI::App& app, GlobalOptions& g, Action& action) {
  auto args = std::make_shared<MatchArgs>();
  auto* sub = app.add_subcommand(
      "match", "match the SIFT features of A (query) against B (train): nearest neighbour + Lowe's ratio test");
  sub->add_option("A", args->a, "query: an image, or a feature file (.key, .json, .bin) written by `sift`; f32 and u8 "
                                "descriptors match alike, on either side")->required();
  sub->add_option("B", args->b, "train: an image or a feature file")->required();
  sub->add_option("-o,--output", args->output,
                  "write the matches as JSON: {\"matches\":[{\"query\",\"train\",\"distance\",\"second_distance\","
                  "\"query_xy\",\"train_xy\"}...]}");
  sub->add_option("--ratio", args->match.ratio, "Lowe's ratio: keep best < ratio * second best (default 0.8)");
  sub->add_flag("--mutual", args->match.mutual, "keep only matches that are also best from B to A (default off)");
  sub->add_option("--max-distance", args->match.max_distance,
                  "largest descriptor distance kept (L2; SIFT descriptors have norm ~512; default: no limit)");
  args->descriptor_type = add_sift_options(*sub, args->sift);
  g.add_backend_options(*sub);
  g.add_json_option(*sub, "print one JSON object: query, train, match_count, times_ms and the matches (as in the -o "
                          "file) unless -o is given");
  sub->callback([&g, &action, args] {
    action = [&g, args] {
      const auto t_total = std::chrono::steady_clock::now();
      args->match.check();
      check_descriptor_type(args->sift);
      args->sift.check();
      Context ctx(g.context_options());
      resolve_descriptor_type(args->sift, args->descriptor_type, ctx.backend());
      const FeatureInput qa = load_input(ctx, args->a, args->sift, false);
      const FeatureInput tb = load_input(ctx, args->b, args->sift, false);
      auto t0 = std::chrono::steady_clock::now();
      const std::vector<Match> matches = match_features(ctx, qa.features, tb.features, args->match);
      const double match_ms = ms_since(t0);

      nlohmann::json list = nlohmann::json::array();
      for (const Match& m : matches) {
        const Keypoint& q = qa.features.keypoints[std::size_t(m.query)];
        const Keypoint& t = tb.features.keypoints[std::size_t(m.train)];
        list.push_back({{"query", m.query},
                        {"train", m.train},
                        {"distance", distance_json(m.distance)},
                        {"second_distance", distance_json(m.second_distance)},
                        {"query_xy", {q.x, q.y}},
                        {"train_xy", {t.x, t.y}}});
      }
      const nlohmann::json options = {
          {"ratio", args->match.ratio},
          {"mutual", args->match.mutual},
          {"max_distance", std::isfinite(args->match.max_distance) ? nlohmann::json(args->match.max_distance)
                                                                   : nlohmann::json(nullptr)}};
      double write_ms = 0;
      if (!args->output.empty()) {
        t0 = std::chrono::steady_clock::now();
        nlohmann::json doc = {{"format", "spectrasift-matches"},
                              {"version", 1},
                              {"query", qa.describe()},
                              {"train", tb.describe()},
                              {"options", options},
                              {"matches", list}};
        OutputSet out;
        out.add_text(args->output, doc.dump(1) + "\n");
        out.commit();
        write_ms = ms_since(t0);
      }
      const double total_ms = ms_since(t_total);
      if (g.json) {
        // The -o file's keys (query, train, options, matches), plus what every command prints.
        nlohmann::json j = context_json("match", ctx);
        j["query"] = qa.describe();
        j["train"] = tb.describe();
        j["options"] = options;
        j["match_count"] = matches.size();
        j["times_ms"] = {{"read", qa.read_ms + tb.read_ms},
                         {"sift", qa.sift_ms + tb.sift_ms},
                         {"match", match_ms},
                         {"write", write_ms},
                         {"total", total_ms}};
        if (!args->output.empty()) j["output"] = args->output;
        else j["matches"] = list;
        print_json(j);
      } else {
        std::cout << matches.size() << " matches between " << args->a << " (" << qa.features.size() << " features) and "
                  << args->b << " (" << tb.features.size() << " features); ratio " << args->match.ratio
                  << (args->match.mutual ? ", mutual" : "") << "; " << ctx.describe() << ", " << total_ms << " ms\n";
        if (!args->output.empty()) std::cout << "wrote " << args->output << '\n';
      }
      return 0;
    };
  });
}

}  // namespace spectrasift::cli

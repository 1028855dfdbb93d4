// Progress on long work (issue 20, item 2): the library reports through Context::set_progress (it never
// prints), each operation from 0 to a final 1.0, never going back; the CLI draws a bar from it on a terminal
// only, and nothing with --quiet or when stderr is not a terminal.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "cli_run.hpp"
#include "spectrasift/context.hpp"
#include "spectrasift/geometry.hpp"
#include "spectrasift/io.hpp"
#include "spectrasift/match.hpp"
#include "spectrasift/sift.hpp"
#include "spectrasift/spectral.hpp"

namespace fs = std::filesystem;
using namespace spectrasift;

namespace {

const fs::path kData = SPECTRASIFT_TEST_DATA;

Context cpu_context() {
  ContextOptions o;
  o.backend = Backend::kCpu;
  return Context(o);
}

/// Records what the Context reports, one list per operation.
struct Recorder {
  std::vector<double> values;
  void attach(Context& ctx) {
    ctx.set_progress([this](double f) { values.push_back(f); });
  }
  /// Starts at 0, never goes back, ends at exactly 1.0; at least `min_steps` distinct values.
  void expect_complete(const char* what, std::size_t min_steps) {
    SCOPED_TRACE(what);
    ASSERT_FALSE(values.empty());
    EXPECT_EQ(values.front(), 0.0);
    EXPECT_EQ(values.back(), 1.0);
    EXPECT_TRUE(std::is_sorted(values.begin(), values.end()));
    EXPECT_EQ(std::adjacent_find(values.begin(), values.end()), values.end()) << "a value repeated";
    for (double v : values) EXPECT_TRUE(v >= 0.0 && v <= 1.0) << v;
    EXPECT_GE(values.size(), min_steps);
    values.clear();
  }
};

TEST(Progress, EveryOperationReportsFromZeroToOneWithoutGoingBack) {
  Context ctx = cpu_context();
  Recorder rec;
  rec.attach(ctx);
  const Image a = read_image(kData / "graf1_gray.png", ReadMode::kGray);
  const Image b = read_image(kData / "graf3_gray.png", ReadMode::kGray);
  const Features fa = detect_and_compute(ctx, a);
  const std::vector<double> sift_values = rec.values;
  // SIFT: the stages and, on the CPU backend, one value per octave of the extrema stage.
  const int octaves = int(std::log2(std::min(a.width, a.height))) - 1;  // with the upsampled octave
  rec.expect_complete("sift", std::size_t(octaves) + 6);
  const Features fb = detect_and_compute(ctx, b);
  rec.values.clear();

  MatchOptions mo;
  mo.mutual = true;
  const std::vector<Match> matches = match_features(ctx, fa, fb, mo);
  ASSERT_NE(std::find(rec.values.begin(), rec.values.end(), 0.5), rec.values.end()) << "the second pass starts at 0.5";
  rec.expect_complete("match", 20);  // the CPU backend reports per piece of queries, 16 a pass
  {  // matching in pieces (progress on) gives the matches of one piece (progress off)
    Context quiet = cpu_context();
    const std::vector<Match> plain = match_features(quiet, fa, fb, mo);
    ASSERT_EQ(plain.size(), matches.size());
    for (std::size_t i = 0; i < plain.size(); ++i) {
      EXPECT_EQ(plain[i].query, matches[i].query);
      EXPECT_EQ(plain[i].train, matches[i].train);
      EXPECT_EQ(plain[i].distance, matches[i].distance);
    }
  }

  std::vector<Point2> pm, pf;
  for (const Match& m : matches) {
    pm.push_back({fa.keypoints[std::size_t(m.query)].x, fa.keypoints[std::size_t(m.query)].y});
    pf.push_back({fb.keypoints[std::size_t(m.train)].x, fb.keypoints[std::size_t(m.train)].y});
  }
  RansacOptions ro;
  ro.min_iterations = 1000;  // several batches
  (void)estimate_model(ctx, pm, pf, ro);
  rec.expect_complete("ransac", 4);

  // Spectral: one value per chunk of lines (here 10 chunks of 10 lines), to the Context's callback when the
  // call gives none, else to the call's only.
  const EnviCube cube = open_envi(kData / "hydice_data.hdr");
  const SpectralLibrary refs = reference_from_pixels(cube, {{3, 4}, {10, 20}});
  SpectralOptions so;
  so.chunk_lines = 10;
  (void)spectral_match(ctx, cube, refs, so);
  rec.expect_complete("spectral", 10);
  std::vector<double> own;
  (void)spectral_match(ctx, cube, refs, so, [&own](double f) { own.push_back(f); });
  EXPECT_GE(own.size(), 9u);
  EXPECT_EQ(rec.values, (std::vector<double>{0.0, 1.0})) << "the Context sees only the start and the end";
  rec.values.clear();

  // An operation called from inside a progress callback reports nothing of its own.
  bool nested = false;
  ctx.set_progress([&](double f) {
    rec.values.push_back(f);
    if (!nested && f > 0.3) {
      nested = true;
      (void)match_features(ctx, fa, fb);
    }
  });
  (void)detect_and_compute(ctx, a);
  EXPECT_TRUE(nested);
  EXPECT_EQ(rec.values, sift_values) << "the nested match reported into the SIFT's progress";
  rec.expect_complete("sift with a nested match", std::size_t(octaves) + 6);

  ctx.set_progress({});  // off again
  (void)match_features(ctx, fa, fb);
  EXPECT_TRUE(rec.values.empty());
}

class ProgressCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("spectrasift_progress_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  /// The SIFT command with the bar drawn at once (SPECTRASIFT_PROGRESS_DELAY=0 instead of after a second).
  std::string sift_command(const std::string& extra) const {
    return "env SPECTRASIFT_PROGRESS_DELAY=0 " + std::string(SPECTRASIFT_CLI) + " sift --backend cpu " +
           test::quote((kData / "graf1_gray.png").string()) + " -o " + test::quote((dir_ / "a.key").string()) + " " +
           extra;
  }
  /// Runs `command` on a pseudo-terminal (script(1)); returns what the terminal received.
  std::string on_terminal(const std::string& command) const {
    if (std::system("command -v script >/dev/null 2>&1") != 0) return "no script(1)";
    const test::CliRun r = test::run_captured("script", "-qec " + test::quote(command) + " /dev/null", dir_);
    EXPECT_EQ(r.status, 0) << r.err;
    return r.out;
  }
  fs::path dir_;
};

TEST_F(ProgressCli, NothingWhenStderrIsNotATerminal) {
  const test::CliRun r = test::run_captured(sift_command(""), "", dir_);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_TRUE(fs::exists(dir_ / "a.key"));
}

TEST_F(ProgressCli, ABarOnATerminalFedByTheLibraryAndNoneWithQuiet) {
  const std::string tty = on_terminal(sift_command(""));
  if (tty == "no script(1)") GTEST_SKIP() << tty;
  EXPECT_NE(tty.find("sift graf1_gray.png"), std::string::npos) << tty;
  EXPECT_NE(tty.find("%"), std::string::npos) << tty;
  EXPECT_NE(tty.find("\r\033[K"), std::string::npos) << "the bar is erased before the result: " << tty;
  // Intermediate values from the library's reports (per stage and octave), not only the CLI's stages.
  int values = 0;
  for (std::size_t at = 0; (at = tty.find("%\r", at)) != std::string::npos; ++at) ++values;
  EXPECT_GE(values, 8) << tty;
  const std::string quiet = on_terminal(sift_command("--quiet"));
  EXPECT_EQ(quiet.find("%"), std::string::npos) << quiet;
}

}  // namespace

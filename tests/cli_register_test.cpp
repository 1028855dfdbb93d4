// `spectrasift register` and the conventions every command shares (issue 20): the model's verdict (exit 3,
// --accept-weak), query = MOVING as in the library, feature files on either side with their size, several
// inputs in one process, JSON errors on stdout, exit 2 for usage errors, spectral's output format, the
// demo's data search, and the progress bar's silence when stderr is not a terminal.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cli_run.hpp"
#include "spectrasift/geometry.hpp"
#include "spectrasift/georef.hpp"
#include "spectrasift/io.hpp"
#include "spectrasift/match.hpp"
#include "spectrasift/sift.hpp"

namespace fs = std::filesystem;
using namespace spectrasift;

namespace {

const fs::path kData = SPECTRASIFT_DATA_DIR;
const fs::path kTestData = SPECTRASIFT_TEST_DATA;

using test::slurp;

std::string q(const fs::path& p) { return test::quote(p.string()); }

/// Every JSON line of stdout.
std::vector<nlohmann::json> json_lines(const std::string& out) {
  std::vector<nlohmann::json> v;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) v.push_back(nlohmann::json::parse(line));
  return v;
}

class CliRegister : public ::testing::Test {
 protected:
  using Run = test::CliRun;
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("spectrasift_cli_register_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  /// Runs `exe args` (exe is quoted unless it holds a space: a command with its own options).
  Run run(const std::string& args, const std::string& exe = SPECTRASIFT_CLI) const {
    return test::run_captured(exe.find(' ') == std::string::npos ? q(exe) : exe, args, dir_);
  }
  fs::path dir_;
};

const std::string kBox = q(kData / "box.png"), kScene = q(kData / "box_in_scene.png");

TEST_F(CliRegister, QueryIsMovingAsInTheLibrary) {
  const Run r = run("register " + kScene + " " + kBox + " --backend cpu --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  // The library example's convention: match_features(ctx, moving, fixed) then RANSAC moving -> fixed.
  ContextOptions co;
  co.backend = Backend::kCpu;
  Context ctx(co);
  const Image fixed = read_image(kData / "box_in_scene.png"), moving = read_image(kData / "box.png");
  const Features ff = detect_and_compute(ctx, fixed), fm = detect_and_compute(ctx, moving);
  const auto matches = match_features(ctx, fm, ff);
  std::vector<Point2> pm, pf;
  for (const Match& m : matches) {
    pm.push_back({fm.keypoints[std::size_t(m.query)].x, fm.keypoints[std::size_t(m.query)].y});
    pf.push_back({ff.keypoints[std::size_t(m.train)].x, ff.keypoints[std::size_t(m.train)].y});
  }
  const ModelEstimate est = estimate_model(ctx, pm, pf);
  EXPECT_EQ(j["match_count"].get<std::size_t>(), matches.size());
  EXPECT_EQ(j["inliers"].get<int>(), est.inliers);
  for (int i = 0; i < 9; ++i) EXPECT_EQ(j["matrix"][i / 3][i % 3].get<double>(), est.matrix[std::size_t(i)]);
  EXPECT_TRUE(j["reliable"].get<bool>());
  EXPECT_EQ(j["command"], "register");
  EXPECT_EQ(j["fixed"]["width"], 512);
  EXPECT_EQ(j["moving"]["width"], 324);
}

TEST_F(CliRegister, AnUnreliableModelExitsThreeUnlessAccepted) {
  // graf1 onto box_in_scene: RANSAC "finds" a homography that folds and mirrors the image.
  const std::string graf = q(kTestData / "graf1_gray.png");
  Run r = run("register " + kScene + " " + graf + " --backend cpu -o " + q(dir_ / "w.png"));
  EXPECT_EQ(r.status, 3) << r.err;
  EXPECT_NE(r.err.find("spectrasift: error: no reliable model: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("inliers of"), std::string::npos) << "the figures: " << r.err;
  EXPECT_NE(r.err.find("--accept-weak"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "w.png"));
  // With --json the error is also a JSON object on stdout.
  r = run("register " + kScene + " " + graf + " --backend cpu --json");
  EXPECT_EQ(r.status, 3);
  const auto e = nlohmann::json::parse(r.out);
  EXPECT_EQ(e["code"], "no_model");
  EXPECT_EQ(e["exit_code"], 3);
  EXPECT_NE(e["error"].get<std::string>().find("no reliable model"), std::string::npos);
  // --accept-weak keeps it: exit 0, "reliable": false and the reasons, a warning on stderr.
  r = run("register " + kScene + " " + graf + " --backend cpu --json --accept-weak");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_FALSE(j["reliable"].get<bool>());
  EXPECT_FALSE(j["verdict"]["problems"].empty());
  EXPECT_TRUE(j["verdict"]["folds"].get<bool>());
  EXPECT_NE(r.err.find("spectrasift: warning: no reliable model"), std::string::npos) << r.err;
  // A pair with nothing in common: no model at all, exit 3 too.
  r = run("register " + q(kTestData / "camera.png") + " " + kBox + " --backend cpu");
  EXPECT_EQ(r.status, 3) << r.err;
}

TEST_F(CliRegister, FeatureFilesOnEitherSide) {
  ASSERT_EQ(run("sift " + kScene + " -o " + q(dir_ / "scene.bin") + " --backend cpu").status, 0);
  ASSERT_EQ(run("sift " + kBox + " -o " + q(dir_ / "box.key") + " --backend cpu").status, 0);
  const Run images = run("register " + kScene + " " + kBox + " --backend cpu --json");
  ASSERT_EQ(images.status, 0) << images.err;
  const auto ji = nlohmann::json::parse(images.out);
  // .bin records the image size; Lowe's .key does not: --size gives it.
  Run r = run("register " + q(dir_ / "scene.bin") + " " + q(dir_ / "box.key") + " --size 324x223 --backend cpu --json");
  ASSERT_EQ(r.status, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["fixed"]["kind"], "features");
  EXPECT_EQ(j["fixed"]["width"], 512);
  EXPECT_EQ(j["moving"]["width"], 324);
  EXPECT_EQ(j["match_count"], ji["match_count"]);
  EXPECT_NEAR(j["inliers"].get<int>(), ji["inliers"].get<int>(), 3);  // .key rounds descriptors to integers
  // A feature file for FIXED with an image for MOVING: the warp has FIXED's size from the file.
  r = run("register " + q(dir_ / "scene.bin") + " " + kBox + " --backend cpu -o " + q(dir_ / "w.png"));
  ASSERT_EQ(r.status, 0) << r.err;
  const Image w = read_image(dir_ / "w.png");
  EXPECT_EQ(w.width, 512);
  EXPECT_EQ(w.height, 384);
  // Pictures that need pixels are refused for a feature file, as a usage error.
  r = run("register " + q(dir_ / "scene.bin") + " " + kBox + " --backend cpu --draw " + q(dir_ / "d.png"));
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("need the image"), std::string::npos) << r.err;
  r = run("register " + kScene + " " + kBox + " --size 12 --backend cpu");
  EXPECT_EQ(r.status, 2) << r.err;
}

// u8 feature files (sift --descriptor-type u8: binary version 2, JSON) register exactly as f32 ones: the same
// values, so the same matches, model and inliers; the JSON names each side's descriptor type.
TEST_F(CliRegister, U8FeatureFilesRegisterAsF32Ones) {
  ASSERT_EQ(run("sift " + kScene + " -o " + q(dir_ / "scene.bin") + " --backend cpu").status, 0);
  ASSERT_EQ(run("sift " + kBox + " -o " + q(dir_ / "box.bin") + " --backend cpu").status, 0);
  ASSERT_EQ(run("sift " + kScene + " -o " + q(dir_ / "scene_u8.bin") + " --descriptor-type u8 --backend cpu").status, 0);
  ASSERT_EQ(run("sift " + kBox + " -o " + q(dir_ / "box_u8.json") + " --descriptor-type u8 --backend cpu").status, 0);
  const Run f = run("register " + q(dir_ / "scene.bin") + " " + q(dir_ / "box.bin") + " --backend cpu --json");
  ASSERT_EQ(f.status, 0) << f.err;
  const Run u = run("register " + q(dir_ / "scene_u8.bin") + " " + q(dir_ / "box_u8.json") + " --backend cpu --json");
  ASSERT_EQ(u.status, 0) << u.err;
  const auto jf = nlohmann::json::parse(f.out), ju = nlohmann::json::parse(u.out);
  EXPECT_EQ(jf["fixed"]["descriptor_type"], "f32");
  EXPECT_EQ(ju["fixed"]["descriptor_type"], "u8");
  EXPECT_EQ(ju["moving"]["descriptor_type"], "u8");
  EXPECT_EQ(ju["fixed"]["width"], 512);
  EXPECT_EQ(ju["moving"]["width"], 324);
  EXPECT_EQ(ju["match_count"], jf["match_count"]);
  EXPECT_EQ(ju["inliers"], jf["inliers"]);
  EXPECT_EQ(ju["matrix"], jf["matrix"]);
  // Images: f32 by default on the CPU backend (u8 by default on GPU backends: the features are only matched), the
  // type asked when asked, f32 with --root-sift; the same model from u8 and f32 extractions and from the files.
  for (const auto& [flags, type] : {std::pair<std::string, std::string>{"", "f32"}, {" --descriptor-type u8", "u8"},
                                    {" --descriptor-type f32", "f32"}}) {
    const Run images = run("register " + kScene + " " + kBox + flags + " --backend cpu --json");
    ASSERT_EQ(images.status, 0) << images.err;
    const auto j = nlohmann::json::parse(images.out);
    EXPECT_EQ(j["matrix"], jf["matrix"]) << flags;
    EXPECT_EQ(j["fixed"]["descriptor_type"], type) << flags;
    EXPECT_EQ(j["moving"]["descriptor_type"], type) << flags;
  }
  const Run root = run("register " + kScene + " " + kBox + " --root-sift --backend cpu --json");
  ASSERT_EQ(root.status, 0) << root.err;
  EXPECT_EQ(nlohmann::json::parse(root.out)["fixed"]["descriptor_type"], "f32");
  EXPECT_NE(run("register " + kScene + " " + kBox + " --root-sift --descriptor-type u8 --backend cpu").status, 0);
}

TEST_F(CliRegister, SeveralInputsInOneProcess) {
  fs::create_directories(dir_ / "in");
  fs::copy_file(kData / "box.png", dir_ / "in" / "a.png");
  fs::copy_file(kData / "box.png", dir_ / "in" / "b.png");
  fs::copy_file(kTestData / "camera.png", dir_ / "in" / "c.png");
  // sift: a quoted glob, -o names a folder, one file per image.
  Run r = run("sift " + q(dir_ / "in" / "*.png") + " -o " + q(dir_ / "feat") + " --format key --json --backend cpu");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto lines = json_lines(r.out);
  ASSERT_EQ(lines.size(), 3u);
  for (const char* stem : {"a", "b", "c"}) EXPECT_TRUE(fs::exists(dir_ / "feat" / (std::string(stem) + ".key"))) << stem;
  EXPECT_EQ(lines[0]["image"]["features"], lines[1]["image"]["features"]);
  // register: FIXED once, each MOVING its own result; c.png does not register -> its error, exit 3.
  r = run("register " + kScene + " " + q(dir_ / "in" / "*.png") + " --backend cpu --json -o " + q(dir_ / "warped"));
  EXPECT_EQ(r.status, 3) << r.err;
  const auto reg = json_lines(r.out);
  ASSERT_EQ(reg.size(), 3u);
  EXPECT_EQ(reg[0]["matrix"], reg[1]["matrix"]);
  EXPECT_TRUE(reg[0]["reliable"].get<bool>());
  EXPECT_EQ(reg[2]["code"], "no_model");
  EXPECT_TRUE(fs::exists(dir_ / "warped" / "a_warped.png"));
  EXPECT_TRUE(fs::exists(dir_ / "warped" / "b_warped.png"));
  EXPECT_FALSE(fs::exists(dir_ / "warped" / "c_warped.png"));
  // A pattern that matches nothing is an error naming it.
  r = run("sift " + q(dir_ / "none" / "*.png"));
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("no file matches"), std::string::npos) << r.err;
}

TEST_F(CliRegister, UsageErrorsExitTwoAndJsonErrors) {
  for (const std::string& args : {"register " + kScene + " " + kBox + " --model rigid",
                                  "sift " + kBox + " -o " + q(dir_ / "x.xml") + " --format xml",
                                  "register " + kScene + " " + kBox + " --overlay-style stripes",
                                  "register " + kScene + " " + kBox + " --no-such-flag",
                                  "spectral " + q(kData / "sandiego_plane_60.hdr") + " --ref-pixel 1,1 -o " +
                                      q(dir_ / "o.bin")}) {
    Run r = run(args);
    EXPECT_EQ(r.status, 2) << args << ": " << r.err;
    EXPECT_NE(r.err.find("spectrasift: error: "), std::string::npos) << r.err;
    r = run(args + " --json");
    EXPECT_EQ(r.status, 2) << args;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_TRUE(j.contains("error")) << r.out;
    EXPECT_TRUE(j["code"] == "invalid_argument" || j["code"] == "usage") << r.out;
    EXPECT_EQ(j["exit_code"], 2);
  }
  // A run-time error (a missing file) is 1, in JSON too.
  const Run r = run("sift " + q(dir_ / "absent.png") + " --json");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(nlohmann::json::parse(r.out)["code"], "io");
}

TEST_F(CliRegister, SpectralOutputFollowsItsExtension) {
  const std::string cube = q(kData / "sandiego_plane_60.hdr");
  const Run r = run("spectral " + cube + " --ref-pixel 1,1 -o " + q(dir_ / "out.tif"));
  if (spectrasift::gdal_supported()) {  // a GeoTIFF (geo_test checks its content), never ENVI bytes
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_TRUE(fs::exists(dir_ / "out.tif"));
  } else {  // refused, saying how to get GDAL
    EXPECT_NE(r.status, 0);
    EXPECT_NE(r.err.find("GeoTIFF"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("libgdal-dev"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(dir_ / "out.tif"));
  }
  EXPECT_FALSE(fs::exists(dir_ / "out.img"));
  EXPECT_EQ(run("spectral " + cube + " --ref-pixel 1,1 -o " + q(dir_ / "out.hdr")).status, 0);
}

TEST_F(CliRegister, DemoFindsItsDataWhereverTheExecutableIs) {
  // A copy of the executable elsewhere, with the install layout beside it: bin/ and share/spectrasift/data.
  const fs::path bin = dir_ / "inst" / "bin", data = dir_ / "inst" / "share" / "spectrasift" / "data";
  fs::create_directories(bin);
  fs::create_directories(data);
  fs::copy_file(SPECTRASIFT_CLI, bin / "spectrasift");
  for (const auto& e : fs::directory_iterator(kData)) fs::copy_file(e.path(), data / e.path().filename());
  Run r = run("demo --backend cpu --json --out " + q(dir_ / "out"), (bin / "spectrasift").string());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["data"], data.string());
  // Without its data: a clear error, and --data finds it.
  fs::remove_all(dir_ / "inst" / "share");
  r = run("demo --backend cpu --out " + q(dir_ / "out"), (bin / "spectrasift").string());
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("--data"), std::string::npos) << r.err;
  r = run("demo --backend cpu --out " + q(dir_ / "out") + " --data " + q(kData), (bin / "spectrasift").string());
  EXPECT_EQ(r.status, 0) << r.err;
}

TEST_F(CliRegister, NoProgressBarWhenStderrIsNotATerminal) {
  const Run r = run("register " + kScene + " " + kBox + " --backend cpu");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(run("register " + kScene + " " + kBox + " --backend cpu --quiet").status, 0);
}

// On a terminal (a pseudo-terminal from util-linux `script`) the bar is drawn on stderr, stage by stage;
// --quiet silences it. SPECTRASIFT_PROGRESS_DELAY=0 draws it from the start instead of after a second, so
// that the test does not depend on how fast the machine registers (a fast machine finished these five
// registrations within the second, and nothing was drawn).
TEST_F(CliRegister, ProgressBarOnATerminal) {
  if (std::system("command -v script >/dev/null 2>&1") != 0) GTEST_SKIP() << "no `script` to make a terminal";
  const std::string graf1 = q(kTestData / "graf1_gray.png"), graf3 = q(kTestData / "graf3_gray.png");
  std::string job = "env SPECTRASIFT_PROGRESS_DELAY=0 " + q(SPECTRASIFT_CLI) + " register " + graf3;
  for (int i = 0; i < 5; ++i) job += " " + graf1;
  job += " --backend cpu --threads 1";
  const auto on_tty = [&](const std::string& extra) {
    // stderr on the terminal, stdout discarded: what `script` records is the bar alone.
    const std::string inner = job + extra + " 2>&1 >/dev/null";
    return run("-c " + q(inner) + " /dev/null", "script -qfe").out;
  };
  const std::string shown = on_tty("");
  EXPECT_NE(shown.find("%"), std::string::npos) << shown;
  EXPECT_NE(shown.find("ransac graf1_gray.png"), std::string::npos) << shown;
  EXPECT_EQ(on_tty(" --quiet").find("%"), std::string::npos);
}

}  // namespace

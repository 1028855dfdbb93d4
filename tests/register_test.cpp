// Registration end to end: our SIFT + matcher + RANSAC on synthetic warps of a real image (known
// homographies), on the Oxford graffiti pair graf1 -> graf3 against its ground truth (and against
// OpenCV's SIFT + ratio test + findHomography when OpenCV is present), the failure on a blank image or
// images that do not overlap, and the `match` / `register` commands.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "harness_util.hpp"
#include "spectrasift/error.hpp"
#include "spectrasift/geometry.hpp"
#include "spectrasift/io.hpp"
#include "spectrasift/match.hpp"
#include "spectrasift/registration.hpp"
#include "spectrasift/sift.hpp"

#ifdef SPECTRASIFT_HAVE_OPENCV
#include <opencv2/calib3d.hpp>
#include <opencv2/features2d.hpp>
#include <opencv2/imgcodecs.hpp>
#endif

using namespace spectrasift;
using Mat3 = std::array<double, 9>;
namespace fs = std::filesystem;

namespace {

const std::string kData = SPECTRASIFT_TEST_DATA;

Context cpu_context() {
  ContextOptions o;
  o.backend = Backend::kCpu;
  o.threads = 2;
  return Context(o);
}

/// SIFT, or a skip when the SIFT implementation is not there yet.
#define SIFT_OR_SKIP(out, ctx, image)                                                           \
  Features out;                                                                                 \
  try {                                                                                         \
    out = detect_and_compute(ctx, image);                                                       \
  } catch (const Error& e) {                                                                    \
    if (std::string(e.what()).find("not implemented") != std::string::npos) GTEST_SKIP() << e.what(); \
    throw;                                                                                      \
  }

using test::mean_corner_error;

/// Our whole pipeline as `spectrasift register` runs it: the library's register_features (query = moving,
/// train = fixed, model moving -> fixed). The figures asserted here and recorded in
/// docs/performance/matching.md are the CLI's only if this is the CLI's flow (RegisterCli.SameModelAsTheLibrary
/// checks it bit for bit): until 2026-12-02 this helper matched with query = fixed while the CLI had switched to
/// query = moving (12c859b), a different match set (681 vs 676 on graf1 -> graf3) and different RANSAC results.
ModelEstimate register_like_cli(Context& ctx, const Features& moving, const Features& fixed, std::size_t* n_matches,
                                const RansacOptions& ro = {}) {
  RegistrationOptions o;
  o.ransac = ro;
  const Registration r = register_features(ctx, moving, fixed, 0, 0, 0, 0, o);
  if (n_matches) *n_matches = r.matches.size();
  return r.estimate;
}

/// H1to3p.xml (OpenCV FileStorage): the nine numbers inside <data>.
Mat3 read_h1to3p() {
  std::ifstream f(kData + "/H1to3p.xml");
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string s = ss.str();
  const auto a = s.find("<data>"), b = s.find("</data>");
  if (a == std::string::npos || b == std::string::npos) throw std::runtime_error("H1to3p.xml: no <data>");
  std::istringstream in(s.substr(a + 6, b - a - 6));
  Mat3 h{};
  for (double& v : h) in >> v;
  return h;
}

struct CliResult {
  int status = -1;
  std::string out, err;
};

CliResult run_cli(const std::string& args) {
  const fs::path err = fs::temp_directory_path() / ("spectrasift_register_test_err_" + std::to_string(::getpid()));
  const std::string cmd = std::string(SPECTRASIFT_CLI) + " " + args + " 2>" + err.string();
  CliResult r;
  r.out = test::run_capture(cmd, r.status);
  std::ifstream e(err);
  std::stringstream ss;
  ss << e.rdbuf();
  r.err = ss.str();
  fs::remove(err);
  return r;
}

fs::path temp_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("spectrasift_register_test_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

}  // namespace

// ---- synthetic warps of a real image --------------------------------------------------------------

class SyntheticWarp : public ::testing::TestWithParam<int> {};

TEST_P(SyntheticWarp, CornerErrorBelowHalfPixel) {
  const Image camera = read_image(kData + "/camera.png");  // 512 x 512 grey
  const double c = 255.5;
  Mat3 truth;
  switch (GetParam()) {
    case 0: {  // similarity: 8 degrees, scale 0.9 about the centre, shift (6, -4)
      const double s = 0.9, t = 8 * 3.141592653589793 / 180, cs = s * std::cos(t), sn = s * std::sin(t);
      truth = {cs, -sn, c - cs * c + sn * c + 6, sn, cs, c - sn * c - cs * c - 4, 0, 0, 1};
      break;
    }
    case 1: truth = {0.95, 0.08, 4, -0.05, 1.02, 8, 0, 0, 1}; break;  // affine with shear
    default: truth = {1.02, 0.03, -12, 0.01, 0.97, 10, 1.2e-4, -0.9e-4, 1}; break;  // perspective
  }
  auto ctx = cpu_context();
  const Image fixed_image = warp_image(camera, truth, 512, 512);
  SIFT_OR_SKIP(moving, ctx, camera);
  SIFT_OR_SKIP(fixed, ctx, fixed_image);
  // Seeds 0..7, ranked by MSAC (the default since 2026-12-02) and by the inlier count (--no-msac). MSAC finds the planted model on
  // every seed (0.07-0.15 px). The count ranking does not: with ~95 % inliers it keeps a model with one or two
  // more inliers at the 3 px edge over the right one, and its refits, which must not lose an inlier, cannot
  // leave it (perspective warp, seed 0: 499 inliers, rms 1.02 px, 2.69 px; the right model: 498, 0.28 px,
  // 0.07 px). Until 2026-12-02 this test ran one seed in the other match direction, where seed 0 happened to be
  // right (0.06-0.13 px); docs/performance/matching.md has the tables. The count ranking is held to a bound it
  // meets. The default must be MSAC (RansacOptions{}): the bound of 0.5 px applies to what a user gets.
  EXPECT_TRUE(RansacOptions{}.msac);
  for (const bool msac : {true, false}) {
    double worst = 0;
    for (std::uint64_t seed = 0; seed < 8; ++seed) {
      RansacOptions o;
      o.seed = seed;
      o.msac = msac;
      std::size_t n = 0;
      const ModelEstimate r = register_like_cli(ctx, moving, fixed, &n, o);
      ASSERT_TRUE(r.found) << "seed " << seed;
      const double e = mean_corner_error(r.matrix, truth, 512, 512);
      worst = std::max(worst, e);
      std::cout << "warp " << GetParam() << (msac ? ", msac" : ", count") << ", seed " << seed << ": " << n
                << " matches, " << r.inliers << " inliers, rms " << r.rms_px << " px, mean corner error " << e
                << " px\n";
      EXPECT_GT(r.inliers, 100) << "seed " << seed;
    }
    EXPECT_LT(worst, msac ? 0.5 : 3.0) << (msac ? "MSAC" : "inlier count") << ": the worst seed";
  }
}

INSTANTIATE_TEST_SUITE_P(Camera, SyntheticWarp, ::testing::Values(0, 1, 2));

// ---- Oxford graffiti 1 -> 3 against its ground truth --------------------------------------------------

TEST(Graffiti, Graf1ToGraf3AgainstGroundTruth) {
  // tests/data holds graf1/graf3 as 8-bit grey PNG (cvtColor BGR2GRAY of the opencv-doc colour PNGs),
  // which is exactly the input both SIFTs compute on, at full size (800 x 640).
  const Image g1 = read_image(kData + "/graf1_gray.png"), g3 = read_image(kData + "/graf3_gray.png");
  const Mat3 truth = read_h1to3p();  // maps graf1 -> graf3: moving = graf1, fixed = graf3
  auto ctx = cpu_context();
  SIFT_OR_SKIP(f1, ctx, g1);
  SIFT_OR_SKIP(f3, ctx, g3);
  std::size_t n = 0;
  const ModelEstimate r = register_like_cli(ctx, f1, f3, &n);
  ASSERT_TRUE(r.found);
  const double ours = mean_corner_error(r.matrix, truth, g1.width, g1.height);
  std::cout << "graf1->graf3 spectrasift (threshold 3 px, seed 0): " << f1.size() << "/" << f3.size() << " features, "
            << n << " matches, " << r.inliers << " inliers, mean corner error " << ours << " px\n";
  RecordProperty("spectrasift_corner_error_px", std::to_string(ours));
  // The 676 matches hold two nearly equally supported homographies (docs/performance/matching.md): ~463 inliers
  // ~4.2 px off the ground truth and ~390 inliers ~1.1-1.6 px off; the seed picks one. Measured at seed 0: 463
  // inliers, 4.19 px (OpenCV 4.6 is quoted at 4.4 px). Over seeds 0..7 every result is one of the two, and the
  // near one is found by some seed (3 of 8 at 3 px): the ground truth's model is among RANSAC's answers.
  EXPECT_LT(ours, 5.0);
  EXPECT_GT(r.inliers, 300);
  int near = 0;
  for (std::uint64_t seed = 0; seed < 8; ++seed) {
    for (const double threshold : {3.0, 2.0}) {
      RansacOptions o;
      o.seed = seed;
      o.threshold_px = threshold;
      const ModelEstimate rs = register_like_cli(ctx, f1, f3, nullptr, o);
      ASSERT_TRUE(rs.found) << "seed " << seed << ", " << threshold << " px";
      const double e = mean_corner_error(rs.matrix, truth, g1.width, g1.height);
      std::cout << "  seed " << seed << ", threshold " << threshold << " px: " << rs.inliers << " inliers, " << e
                << " px\n";
      // A tighter threshold does not pick the near model reliably either (seed 0 at 2 px: 357 inliers, 5.51 px;
      // 4 of 8 seeds within 1.3 px): both thresholds are held to the same loose bound, the far basin included.
      EXPECT_LT(e, 6.0) << "seed " << seed << ", " << threshold << " px";
      EXPECT_GT(rs.inliers, threshold == 3.0 ? 300 : 250) << "seed " << seed << ", " << threshold << " px";
      if (threshold == 3.0 && e < 1.7) ++near;
    }
  }
  EXPECT_GE(near, 1) << "no seed found the model near the ground truth";
  // Same seed, same answer.
  const ModelEstimate again = register_like_cli(ctx, f1, f3, nullptr);
  EXPECT_EQ(again.matrix, r.matrix);
  EXPECT_EQ(again.inlier_mask, r.inlier_mask);
#ifdef SPECTRASIFT_HAVE_OPENCV
  // (a) OpenCV end to end: cv::SIFT, BFMatcher knnMatch k = 2, ratio 0.8, findHomography(RANSAC, 3 px).
  const cv::Mat c1 = cv::imread(kData + "/graf1_gray.png", cv::IMREAD_GRAYSCALE);
  const cv::Mat c3 = cv::imread(kData + "/graf3_gray.png", cv::IMREAD_GRAYSCALE);
  auto sift = cv::SIFT::create();
  std::vector<cv::KeyPoint> k1, k3;
  cv::Mat d1, d3;
  sift->detectAndCompute(c1, cv::noArray(), k1, d1);
  sift->detectAndCompute(c3, cv::noArray(), k3, d3);
  cv::BFMatcher bf(cv::NORM_L2);
  std::vector<std::vector<cv::DMatch>> knn;
  bf.knnMatch(d3, d1, knn, 2);
  std::vector<cv::Point2f> p1, p3;
  for (const auto& m : knn)
    if (m.size() == 2 && m[0].distance < 0.8f * m[1].distance) {
      p1.push_back(k1[std::size_t(m[0].trainIdx)].pt);
      p3.push_back(k3[std::size_t(m[0].queryIdx)].pt);
    }
  auto cv_error = [&](const std::vector<cv::Point2f>& a, const std::vector<cv::Point2f>& b) {
    const cv::Mat h = cv::findHomography(a, b, cv::RANSAC, 3.0);
    if (h.empty()) return std::numeric_limits<double>::infinity();
    Mat3 hc;
    for (int i = 0; i < 9; ++i) hc[std::size_t(i)] = h.at<double>(i / 3, i % 3);
    return mean_corner_error(hc, truth, g1.width, g1.height);
  };
  const double theirs = cv_error(p1, p3);
  // (b) findHomography on exactly our matches (the RANSAC stage alone, same input: the CLI's matches).
  std::vector<cv::Point2f> q1, q3;
  for (const auto& m : match_features(ctx, f1, f3)) {  // query = moving (graf1), train = fixed (graf3)
    q1.push_back({f1.keypoints[std::size_t(m.query)].x, f1.keypoints[std::size_t(m.query)].y});
    q3.push_back({f3.keypoints[std::size_t(m.train)].x, f3.keypoints[std::size_t(m.train)].y});
  }
  const double theirs_same = cv_error(q1, q3);
  std::cout << "graf1->graf3 OpenCV " << CV_VERSION << ": end to end " << p1.size() << " matches, mean corner error "
            << theirs << " px; findHomography on our " << q1.size() << " matches: " << theirs_same << " px\n";
  RecordProperty("opencv_corner_error_px", std::to_string(theirs));
  RecordProperty("opencv_on_our_matches_corner_error_px", std::to_string(theirs_same));
  // OpenCV's figure depends on the order of its random samples (1.2 px end to end here, 4.5 px on the
  // same matches in our order); ours must be no worse than its RANSAC on the same matches.
  EXPECT_LT(ours, theirs_same + 0.5);
#else
  std::cout << "OpenCV C++ not found: the OpenCV comparison is skipped\n";
#endif
}

// ---- failures -----------------------------------------------------------------------------------------

TEST(RegisterFailure, BlankImageGivesNoModel) {
  auto ctx = cpu_context();
  Image blank = Image::allocate(320, 240, 1, PixelType::kU8);
  std::fill(blank.data.begin(), blank.data.end(), std::uint8_t(128));
  const Image camera = read_image(kData + "/camera.png");
  SIFT_OR_SKIP(fb, ctx, blank);
  SIFT_OR_SKIP(fc, ctx, camera);
  EXPECT_EQ(fb.size(), 0u);
  std::size_t n = 99;
  const ModelEstimate r = register_like_cli(ctx, fc, fb, &n);
  EXPECT_EQ(n, 0u);
  EXPECT_FALSE(r.found);
}

TEST(RegisterFailure, ImagesWithoutOverlapGiveNoModel) {
  auto ctx = cpu_context();
  const Image camera = read_image(kData + "/camera.png"), coins = read_image(kData + "/coins.png");
  SIFT_OR_SKIP(fa, ctx, camera);
  SIFT_OR_SKIP(fb, ctx, coins);
  // As `spectrasift register FIXED=camera MOVING=coins` decides: no model, or one the verdict refuses (exit 3).
  // In this match direction (the CLI's, query = MOVING) RANSAC does find a homography (11 "inliers" of 27
  // matches: the verdict refuses it, it folds and mirrors); the similarity is below.
  for (auto model : {GeometryModel::kHomography, GeometryModel::kAffine}) {
    RegistrationOptions o;
    o.ransac.model = model;
    const Registration r = register_features(ctx, fb, fa, coins.width, coins.height, camera.width, camera.height, o);
    EXPECT_TRUE(!r.estimate.found || !r.verdict.reliable)
        << to_string(model) << ": " << r.estimate.inliers << " inliers of " << r.matches.size() << " matches, "
        << r.verdict.summary();
  }
}

// `spectrasift register tests/data/camera.png tests/data/coins.png --model similarity` exited 0 with "reliable":
// true: 6 inliers of 27 matches, log10 NFA -10.4, but 5 of the 6 inliers are matches of different coins keypoints
// to ONE camera keypoint (146.8, 384.4), which a similarity of scale 0.048 maps them all near; the a contrario
// count took them as independent chance events. With --mutual: 4 inliers of 12, two location pairs twice each
// (SIFT's extra orientations), fitted exactly by the 2-point sample. The verdict now counts distinct location
// pairs (2 in both cases: no more than a similarity sample fits, so no evidence).
TEST(RegisterFailure, ImagesWithoutOverlapSimilarityIsRefused) {
  auto ctx = cpu_context();
  const Image camera = read_image(kData + "/camera.png"), coins = read_image(kData + "/coins.png");
  SIFT_OR_SKIP(fa, ctx, camera);
  SIFT_OR_SKIP(fb, ctx, coins);
  for (bool mutual : {false, true}) {
    RegistrationOptions o;
    o.ransac.model = GeometryModel::kSimilarity;
    o.match.mutual = mutual;
    const Registration r = register_features(ctx, fb, fa, coins.width, coins.height, camera.width, camera.height, o);
    EXPECT_TRUE(!r.estimate.found || !r.verdict.reliable)
        << "mutual " << mutual << ": " << r.estimate.inliers << " inliers (" << r.verdict.distinct_inliers
        << " distinct) of " << r.matches.size() << " matches, log10 NFA " << r.verdict.log10_nfa;
  }
}

// ---- the commands ------------------------------------------------------------------------------------

TEST(RegisterCli, JsonAndPictures) {
  const fs::path dir = temp_dir("cli");
  const std::string fixed = kData + "/graf3_gray.png", moving = kData + "/graf1_gray.png";
  const CliResult r = run_cli("register " + fixed + " " + moving + " --backend cpu --json -o " +
                              (dir / "warped.png").string() + " --draw " + (dir / "matches.png").string() +
                              " --overlay " + (dir / "overlay.png").string());
  if (r.status != 0 && r.err.find("not implemented") != std::string::npos) GTEST_SKIP() << r.err;
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  for (const char* k : {"model", "matrix", "match_count", "inliers", "rms_px", "backend", "iterations", "times_ms", "reliable"})
    EXPECT_TRUE(j.contains(k)) << k;
  EXPECT_EQ(j["model"], "homography");
  EXPECT_EQ(j["backend"], "cpu");
  Mat3 h;
  for (int i = 0; i < 9; ++i) h[std::size_t(i)] = j["matrix"][std::size_t(i / 3)][std::size_t(i % 3)].get<double>();
  EXPECT_LT(mean_corner_error(h, read_h1to3p(), 800, 640), 5.0);
  EXPECT_GT(j["inliers"].get<int>(), 300);
  EXPECT_LE(j["inliers"].get<int>(), j["match_count"].get<int>());
  EXPECT_TRUE(j["reliable"].get<bool>());
  EXPECT_LE(j["rms_px"].get<double>(), 3.0);
  for (const char* k : {"read", "sift", "match", "ransac", "total"}) EXPECT_TRUE(j["times_ms"].contains(k)) << k;
  const Image warped = read_image(dir / "warped.png"), pic = read_image(dir / "matches.png"),
              ov = read_image(dir / "overlay.png");
  EXPECT_EQ(warped.width, 800);
  EXPECT_EQ(warped.height, 640);
  EXPECT_EQ(warped.channels, 1);
  EXPECT_EQ(pic.width, 1600);
  EXPECT_EQ(ov.width, 800);
  EXPECT_EQ(ov.channels, 3);
  // The same seed on the command line gives the same matrix.
  const CliResult again = run_cli("register " + fixed + " " + moving + " --backend cpu --json --seed 0");
  ASSERT_EQ(again.status, 0) << again.err;
  EXPECT_EQ(nlohmann::json::parse(again.out)["matrix"], j["matrix"]);
  fs::remove_all(dir);
}

// `spectrasift register` and the library's register_features (this file's accuracy tests, the README's
// example, the Python module) give the same model, bit for bit, on graf1 -> graf3 with the options whose
// figures docs/performance/matching.md records. The accuracy figures asserted above and recorded there are
// the CLI's only while this holds: when the CLI switched to query = MOVING (12c859b) and this file's own flow
// kept query = fixed, the page and the threshold-2 assertion (1.03 px) went on describing a flow the CLI no
// longer ran (5.51 px).
TEST(RegisterCli, SameModelAsTheLibrary) {
  const std::string fixed = kData + "/graf3_gray.png", moving = kData + "/graf1_gray.png";
  auto ctx = cpu_context();
  const Image g1 = read_image(moving), g3 = read_image(fixed);
  SIFT_OR_SKIP(f1, ctx, g1);
  SIFT_OR_SKIP(f3, ctx, g3);
  struct Case {
    const char* args;
    std::uint64_t seed;
    double threshold;
    bool msac;
  };
  for (const Case& c : {Case{"", 0, 3.0, true}, Case{" --threshold 2", 0, 2.0, true},
                        Case{" --seed 3 --no-msac", 3, 3.0, false}, Case{" --seed 5 --threshold 2 --msac", 5, 2.0, true},
                        Case{" --seed 5 --threshold 2 --no-msac", 5, 2.0, false}}) {
    const CliResult cli = run_cli("register " + fixed + " " + moving + " --backend cpu --json -q" + c.args);
    ASSERT_EQ(cli.status, 0) << c.args << ": " << cli.err;
    const auto j = nlohmann::json::parse(cli.out);
    RansacOptions o;
    o.seed = c.seed;
    o.threshold_px = c.threshold;
    o.msac = c.msac;
    std::size_t n = 0;
    const ModelEstimate lib = register_like_cli(ctx, f1, f3, &n, o);
    ASSERT_TRUE(lib.found) << c.args;
    EXPECT_EQ(j["match_count"].get<std::size_t>(), n) << c.args;
    EXPECT_EQ(j["inliers"].get<int>(), lib.inliers) << c.args;
    // JSON writes doubles so that they read back exactly: the same bits or a different model.
    for (int i = 0; i < 9; ++i)
      EXPECT_EQ(j["matrix"][std::size_t(i / 3)][std::size_t(i % 3)].get<double>(), lib.matrix[std::size_t(i)])
          << c.args << ": entry " << i;
  }
}

TEST(RegisterCli, NoModelExitsThreeWithoutOutputs) {
  const fs::path dir = temp_dir("nomodel");
  Image blank = Image::allocate(200, 150, 1, PixelType::kU8);
  write_png(dir / "blank.png", blank);
  const CliResult r = run_cli("register " + (dir / "blank.png").string() + " " + kData + "/camera.png --backend cpu -o " +
                              (dir / "w.png").string() + " --draw " + (dir / "d.png").string());
  if (r.err.find("not implemented") != std::string::npos) GTEST_SKIP() << r.err;
  EXPECT_EQ(r.status, 3) << r.err;
  EXPECT_NE(r.err.find("spectrasift: error: no homography found"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "one line: " << r.err;
  EXPECT_FALSE(fs::exists(dir / "w.png"));
  EXPECT_FALSE(fs::exists(dir / "d.png"));
  // Nothing else (no temporary) is left in the folder either.
  int files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++files;
  EXPECT_EQ(files, 1);
  fs::remove_all(dir);
}

TEST(RegisterCli, BadArgumentsAreRefused) {
  const std::string img = kData + "/camera.png";
  CliResult r = run_cli("register " + img + " " + img + " --model projective");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("unknown model 'projective'"), std::string::npos) << r.err;
  r = run_cli("register " + img + " " + img + " --threshold 0");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("threshold"), std::string::npos) << r.err;
  r = run_cli("register " + img + " " + img + " -o out.jpg");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("out.jpg"), std::string::npos) << r.err;
  r = run_cli("register " + img + " /nonexistent/x.png");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("/nonexistent/x.png"), std::string::npos) << r.err;
}

TEST(MatchCli, WritesMatchesJson) {
  const fs::path dir = temp_dir("match");
  const std::string a = kData + "/graf3_gray.png", b = kData + "/graf1_gray.png";
  const CliResult r = run_cli("match " + a + " " + b + " --backend cpu --max-features 800 --json -o " +
                              (dir / "m.json").string());
  if (r.status != 0 && r.err.find("not implemented") != std::string::npos) GTEST_SKIP() << r.err;
  ASSERT_EQ(r.status, 0) << r.err;
  const auto s = nlohmann::json::parse(r.out);
  std::ifstream f(dir / "m.json");
  const auto doc = nlohmann::json::parse(f);
  EXPECT_EQ(doc["format"], "spectrasift-matches");
  ASSERT_EQ(doc["matches"].size(), s["match_count"].get<std::size_t>());
  EXPECT_GT(doc["matches"].size(), 50u);
  EXPECT_LE(s["query"]["features"].get<int>(), 810);  // --max-features (ties at the cut are kept)
  // The matched positions agree with the ground-truth homography for most matches.
  const Mat3 h = read_h1to3p();
  int good = 0;
  for (const auto& m : doc["matches"]) {
    EXPECT_LT(m["distance"].get<double>(), 0.8 * m["second_distance"].get<double>() + 1e-3);
    const Point2 p = apply_model(h, {m["train_xy"][0].get<double>(), m["train_xy"][1].get<double>()});
    good += std::hypot(p.x - m["query_xy"][0].get<double>(), p.y - m["query_xy"][1].get<double>()) < 5;
  }
  EXPECT_GT(good, int(doc["matches"].size()) / 2);
  // Feature files work as inputs too.
  Context ctx = cpu_context();
  SiftOptions so;
  so.max_features = 300;
  const Features fa = detect_and_compute(ctx, read_image(a), so);
  const Features fb = detect_and_compute(ctx, read_image(b), so);
  write_features_bin(dir / "a.bin", fa);
  write_features_key(dir / "b.key", fb);
  const CliResult r2 = run_cli("match " + (dir / "a.bin").string() + " " + (dir / "b.key").string() + " --backend cpu --json");
  ASSERT_EQ(r2.status, 0) << r2.err;
  const auto s2 = nlohmann::json::parse(r2.out);
  EXPECT_EQ(s2["query"]["features"].get<std::size_t>(), fa.size());
  EXPECT_EQ(s2["train"]["features"].get<std::size_t>(), fb.size());
  EXPECT_GT(s2["match_count"].get<int>(), 20);
  EXPECT_EQ(s2["matches"].size(), s2["match_count"].get<std::size_t>());  // the list, named as in the -o file
  fs::remove_all(dir);
}

// Matching and RANSAC: spectrasift (CPU backend) against OpenCV's BFMatcher::knnMatch(k = 2) + ratio
// test and findHomography(RANSAC) on the SAME features, in the same process, with the same thread
// count. Prints a Markdown table (median of --runs runs after one warm-up).
//
//   match_bench [--runs N] [--threads T] [--data DIR]
//
// Pairs: graf1 -> graf3 (800 x 640, tests/data), the same pair upscaled x2 (1600 x 1280, bilinear
// with spectrasift::warp_image) and the same pair with SIFT's contrast threshold at 0.01 (about three
// times the features), with the ground truth H1to3p (scaled for the x2 pair), so that the accuracy of
// both RANSACs is printed beside their time.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "bench_timing.hpp"
#include "harness_util.hpp"
#include "spectrasift/geometry.hpp"
#include "spectrasift/io.hpp"
#include "spectrasift/match.hpp"
#include "spectrasift/sift.hpp"

#ifdef SPECTRASIFT_HAVE_OPENCV
#include <opencv2/calib3d.hpp>
#include <opencv2/core.hpp>
#include <opencv2/features2d.hpp>
#endif

using namespace spectrasift;
using Mat3 = std::array<double, 9>;

using spectrasift::bench::median_ms;

namespace {

Mat3 read_h1to3p(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string s = ss.str();
  const auto a = s.find("<data>"), b = s.find("</data>");
  std::istringstream in(s.substr(a + 6, b - a - 6));
  Mat3 h{};
  for (double& v : h) in >> v;
  return h;
}

Mat3 mul(const Mat3& a, const Mat3& b) {
  Mat3 c{};
  for (int r = 0; r < 3; ++r)
    for (int k = 0; k < 3; ++k)
      for (int j = 0; j < 3; ++j) c[std::size_t(r * 3 + k)] += a[std::size_t(r * 3 + j)] * b[std::size_t(j * 3 + k)];
  return c;
}

double corner_error(const Mat3& a, const Mat3& b, int w, int h) { return test::mean_corner_error(a, b, w, h); }

struct Pair {
  std::string name;
  Features fixed, moving;  // query = fixed (graf3), train = moving (graf1)
  Mat3 truth;
  int width, height;  // of the moving image
};

}  // namespace

int main(int argc, char** argv) {
  int runs = 5, threads = 2;
  std::string data = SPECTRASIFT_TEST_DATA;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--runs") runs = std::atoi(argv[i + 1]);
    else if (a == "--threads") threads = std::atoi(argv[i + 1]);
    else if (a == "--data") data = argv[i + 1];
  }
  ContextOptions co;
  co.backend = Backend::kCpu;
  co.threads = threads;
  Context ctx(co);
#ifdef SPECTRASIFT_HAVE_OPENCV
  cv::setNumThreads(threads);
#endif

  const Image g1 = read_image(data + "/graf1_gray.png"), g3 = read_image(data + "/graf3_gray.png");
  const Mat3 h13 = read_h1to3p(data + "/H1to3p.xml");
  std::vector<Pair> pairs;
  pairs.push_back({"graf1->graf3 800x640", detect_and_compute(ctx, g3), detect_and_compute(ctx, g1), h13, g1.width,
                   g1.height});
  {
    // x2 with pixel centres at (0,0): x' = 2 x + 0.5.
    const Mat3 up{2, 0, 0.5, 0, 2, 0.5, 0, 0, 1};
    const Image u1 = warp_image(ctx, g1, up, 2 * g1.width, 2 * g1.height);
    const Image u3 = warp_image(ctx, g3, up, 2 * g3.width, 2 * g3.height);
    pairs.push_back({"graf1->graf3 x2 1600x1280", detect_and_compute(ctx, u3), detect_and_compute(ctx, u1),
                     mul(mul(up, h13), invert_model(up)), u1.width, u1.height});
  }
  {
    // Many features: the same pair with a quarter of the default contrast threshold.
    SiftOptions many;
    many.contrast_threshold = 0.01;
    pairs.push_back({"graf1->graf3 contrast 0.01", detect_and_compute(ctx, g3, many), detect_and_compute(ctx, g1, many),
                     h13, g1.width, g1.height});
  }

  std::printf("| pair | features (fixed / moving) | stage | spectrasift ms | OpenCV ms | OpenCV / spectrasift | "
              "matches or inliers (ours / OpenCV) | corner error px (ours / OpenCV) |\n");
  std::printf("|---|---|---|---:|---:|---:|---|---|\n");
  for (const Pair& p : pairs) {
    const std::string feats = std::to_string(p.fixed.size()) + " / " + std::to_string(p.moving.size());
    std::vector<Match> ours;
    const double t_match = median_ms(runs, [&] { ours = match_features(ctx, p.fixed, p.moving); });
    std::vector<Point2> pm, pf;
    for (const auto& m : ours) {
      pm.push_back({p.moving.keypoints[std::size_t(m.train)].x, p.moving.keypoints[std::size_t(m.train)].y});
      pf.push_back({p.fixed.keypoints[std::size_t(m.query)].x, p.fixed.keypoints[std::size_t(m.query)].y});
    }
    ModelEstimate est;
    const double t_ransac = median_ms(runs, [&] { est = estimate_model(ctx, pm, pf); });
    const double our_err = corner_error(est.matrix, p.truth, p.width, p.height);
#ifdef SPECTRASIFT_HAVE_OPENCV
    const cv::Mat dq(int(p.fixed.size()), 128, CV_32F, const_cast<float*>(p.fixed.descriptors.data()));
    const cv::Mat dt(int(p.moving.size()), 128, CV_32F, const_cast<float*>(p.moving.descriptors.data()));
    cv::BFMatcher bf(cv::NORM_L2);
    std::vector<cv::DMatch> good;
    const double t_cv_match = median_ms(runs, [&] {
      std::vector<std::vector<cv::DMatch>> knn;
      bf.knnMatch(dq, dt, knn, 2);
      good.clear();
      for (const auto& m : knn)
        if (m.size() == 2 && m[0].distance < 0.8f * m[1].distance) good.push_back(m[0]);
    });
    std::vector<cv::Point2f> cm, cf;
    for (const auto& pt : pm) cm.push_back({float(pt.x), float(pt.y)});
    for (const auto& pt : pf) cf.push_back({float(pt.x), float(pt.y)});
    cv::Mat h, mask;
    // Same settings as ours: 3 px, confidence 0.999, at most 10000 iterations; same matches as input.
    const double t_cv_ransac =
        median_ms(runs, [&] { h = cv::findHomography(cm, cf, cv::RANSAC, 3.0, mask, 10000, 0.999); });
    Mat3 hc{};
    for (int i = 0; i < 9; ++i) hc[std::size_t(i)] = h.at<double>(i / 3, i % 3);
    const double cv_err = corner_error(hc, p.truth, p.width, p.height);
    std::printf("| %s | %s | match (ratio 0.8) | %.1f | %.1f | %.2f | %zu / %zu | |\n", p.name.c_str(), feats.c_str(),
                t_match, t_cv_match, t_cv_match / t_match, ours.size(), good.size());
    std::printf("| %s | %s | RANSAC homography (3 px) | %.2f | %.2f | %.2f | %d / %d | %.2f / %.2f |\n", p.name.c_str(),
                feats.c_str(), t_ransac, t_cv_ransac, t_cv_ransac / t_ransac, est.inliers, cv::countNonZero(mask),
                our_err, cv_err);
#else
    std::printf("| %s | %s | match (ratio 0.8) | %.1f | n/a | | %zu / - | |\n", p.name.c_str(), feats.c_str(), t_match,
                ours.size());
    std::printf("| %s | %s | RANSAC homography (3 px) | %.2f | n/a | | %d / - | %.2f / - |\n", p.name.c_str(),
                feats.c_str(), t_ransac, est.inliers, our_err);
#endif
    std::fflush(stdout);
  }
  std::printf("\n(%d runs, median after one warm-up; %d threads for both; RANSAC iterations ours: see -v)\n", runs,
              threads);
  return 0;
}

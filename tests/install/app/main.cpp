// The README's library example as a program: built against an installed spectrasift by
// tests/install/install_test.cmake (CMake package and pkg-config). Usage: example FIXED MOVING CUBE.hdr
#include <spectrasift/context.hpp>
#include <spectrasift/geometry.hpp>
#include <spectrasift/io.hpp>
#include <spectrasift/match.hpp>
#include <spectrasift/sift.hpp>
#include <spectrasift/spectral.hpp>
#include <spectrasift/verdict.hpp>

#include <cstdio>

using namespace spectrasift;

int main(int argc, char** argv) {
  if (argc != 4) return 2;
  Context ctx;                                            // backend from SPECTRASIFT_BACKEND, else auto
  Image fixed = read_image(argv[1]), moving = read_image(argv[2]);
  Features ff = detect_and_compute(ctx, fixed);           // OpenCV-compatible defaults (SiftOptions)
  Features fm = detect_and_compute(ctx, moving);
  std::vector<Match> matches = match_features(ctx, fm, ff);   // query = moving, train = fixed
  std::vector<Point2> pm, pf;
  for (const Match& m : matches) {
    pm.push_back({fm.keypoints[m.query].x, fm.keypoints[m.query].y});
    pf.push_back({ff.keypoints[m.train].x, ff.keypoints[m.train].y});
  }
  ModelEstimate h = estimate_model(ctx, pm, pf);          // RansacOptions{}: homography, 3 px, seed 0
  ModelVerdict v = assess_model(h, pm, pf, moving.width, moving.height, fixed.width, fixed.height);
  if (!v.reliable) std::printf("%s\n", v.summary().c_str());
  Image warped = warp_image(ctx, moving, h.matrix, fixed.width, fixed.height);

  EnviCube cube = open_envi(argv[3]);                     // header checked against the file, data memory-mapped
  SpectralLibrary refs = reference_from_pixels(cube, {{30, 30}, {5, 5}});
  SpectralOptions so;
  so.metric = Metric::kSpectralAngle;
  so.reduction = Reduction::kBest;
  SpectralResult r = spectral_match(ctx, cube, refs, so); // r.index, r.scores (band after band), r.times

  std::printf("%zu matches, %d inliers, reliable %d, warped %dx%d; %d x %d pixels, best of %d references\n",
              matches.size(), h.inliers, int(v.reliable), warped.width, warped.height, r.samples, r.lines,
              r.references);
  return h.found && v.reliable && r.index.size() == std::size_t(r.samples) * r.lines ? 0 : 1;
}

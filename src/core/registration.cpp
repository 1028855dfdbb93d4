// The registration flow (spectrasift/registration.hpp): match, RANSAC, verdict.
#include "spectrasift/registration.hpp"

#include <chrono>

namespace spectrasift {

Registration register_features(Context& ctx, const Features& moving, const Features& fixed, int moving_w, int moving_h,
                               int fixed_w, int fixed_h, const RegistrationOptions& options,
                               const RegistrationStageFn& on_stage) {
  using clock = std::chrono::steady_clock;
  const auto ms_since = [](clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(clock::now() - t0).count();
  };
  Registration r;
  if (on_stage) on_stage("match");
  auto t0 = clock::now();
  r.matches = match_features(ctx, moving, fixed, options.match);
  r.match_ms = ms_since(t0);
  r.moving_points.reserve(r.matches.size());
  r.fixed_points.reserve(r.matches.size());
  for (const Match& m : r.matches) {
    const Keypoint& km = moving.keypoints[std::size_t(m.query)];
    const Keypoint& kf = fixed.keypoints[std::size_t(m.train)];
    r.moving_points.push_back({km.x, km.y});
    r.fixed_points.push_back({kf.x, kf.y});
  }
  if (on_stage) on_stage("ransac");
  t0 = clock::now();
  r.estimate = estimate_model(ctx, r.moving_points, r.fixed_points, options.ransac);
  r.ransac_ms = ms_since(t0);
  r.verdict =
      assess_model(r.estimate, r.moving_points, r.fixed_points, moving_w, moving_h, fixed_w, fixed_h, options.verdict);
  return r;
}

}  // namespace spectrasift

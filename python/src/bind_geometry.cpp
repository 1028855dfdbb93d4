// register_features() (spectrasift/registration.hpp: the flow of `spectrasift register`) and warp().
#include <nanobind/stl/string.h>

#include <array>
#include <string>

#include "common.hpp"
#include "spectrasift/error.hpp"
#include "spectrasift/geometry.hpp"
#include "spectrasift/registration.hpp"

namespace spectrasift::python {

namespace {

using Matrix = nb::ndarray<const double, nb::shape<3, 3>, nb::c_contig, nb::device::cpu>;

nb::dict verdict_dict(const ModelVerdict& v) {
  nb::dict d;
  nb::list problems;
  for (const auto& p : v.problems) problems.append(p);
  d["reliable"] = v.reliable;
  d["problems"] = problems;
  d["inlier_ratio"] = v.inlier_ratio;
  d["distinct_inliers"] = v.distinct_inliers;
  d["log10_nfa"] = v.log10_nfa;
  d["scale"] = v.scale;
  d["scale_range"] = v.scale_range;
  d["anisotropy"] = v.anisotropy;
  d["folds"] = v.folds;
  d["flips"] = v.flips;
  d["summary"] = v.summary();
  return d;
}

}  // namespace

void bind_geometry(nb::module_& m) {
  m.def(
      "register_features",
      [](PyContext& c, const Features& moving, const Features& fixed, int moving_w, int moving_h, int fixed_w,
         int fixed_h, double ratio, bool mutual, const std::string& model, double threshold, double confidence,
         int max_iterations, int min_inliers, std::uint64_t seed, bool msac) {
        ContextCall call(c, "register");
        RegistrationOptions o;
        o.match.ratio = ratio;
        o.match.mutual = mutual;
        o.ransac.model = parse_geometry_model(model);
        o.ransac.threshold_px = threshold;
        o.ransac.confidence = confidence;
        o.ransac.max_iterations = max_iterations;
        o.ransac.min_inliers = min_inliers;
        o.ransac.seed = seed;
        o.ransac.msac = msac;
        o.ransac.check();
        o.match.check();
        Registration r;
        {
          nb::gil_scoped_release release;
          r = register_features(call.ctx(), moving, fixed, moving_w, moving_h, fixed_w, fixed_h, o);
        }
        nb::dict d;
        const auto& e = r.estimate;
        std::vector<double> matrix(e.matrix.begin(), e.matrix.end());
        d["found"] = e.found;
        d["model"] = to_string(e.model);
        d["matrix"] = owned_array(std::move(matrix), {3, 3});
        d["inliers"] = owned_array(std::vector<std::uint8_t>(e.inlier_mask), {e.inlier_mask.size()});
        d["inlier_count"] = e.inliers;
        d["match_count"] = r.matches.size();
        d["rms_px"] = e.rms_px;
        d["iterations"] = e.iterations;
        d["required_inliers"] = o.ransac.required_inliers();
        d["verdict"] = verdict_dict(r.verdict);
        d["match_bytes"] = match_bytes(r.matches);
        d["match_ms"] = r.match_ms;
        d["ransac_ms"] = r.ransac_ms;
        return d;
      },
      nb::arg("ctx"), nb::arg("moving"), nb::arg("fixed"), nb::arg("moving_w"), nb::arg("moving_h"), nb::arg("fixed_w"),
      nb::arg("fixed_h"), nb::arg("ratio"), nb::arg("mutual"), nb::arg("model"), nb::arg("threshold"),
      nb::arg("confidence"), nb::arg("max_iterations"), nb::arg("min_inliers"), nb::arg("seed"), nb::arg("msac"));

  m.def(
      "warp",
      [](PyContext& c, ImageArray moving, Matrix matrix, int width, int height) {
        ContextCall call(c, "warp");
        std::array<double, 9> h{};
        for (std::size_t i = 0; i < 9; ++i) h[i] = matrix.data()[i];
        Image input = image_copy(moving);  // warp_image takes an owning Image: one copy of the input
        Image out;
        {
          nb::gil_scoped_release release;
          out = warp_image(call.ctx(), input, h, width, height);
        }
        return image_to_numpy(std::move(out));
      },
      nb::arg("ctx"), nb::arg("moving"), nb::arg("matrix"), nb::arg("width"), nb::arg("height"));
}

}  // namespace spectrasift::python

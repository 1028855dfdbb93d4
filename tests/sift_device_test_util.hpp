// Helpers of the device SIFT tests (sift_opencl_test.cpp, sift_cuda_test.cpp): the stage sequence of
// core/sift.cpp run on a backend's own stages, the CPU reference, the agreement of a device's features with
// the CPU backend's (tests/tolerances.hpp sift_backend_vs_cpu), bit identity, and the input-type conversions.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/context_impl.hpp"
#include "core/sift_backend.hpp"
#include "core/sift_device_stages.hpp"
#include "core/sift_plan.hpp"
#include "spectrasift/context.hpp"
#include "spectrasift/io.hpp"
#include "spectrasift/sift.hpp"
#include "tolerances.hpp"

namespace spectrasift::test {

/// Whether list_devices() has a device of backend b.
inline bool have_device(Backend b) {
  for (const auto& d : list_devices())
    if (d.backend == b) return true;
  return false;
}

inline Image load_test_image(const char* name) { return read_image(std::string(SPECTRASIFT_TEST_DATA) + "/" + name); }

/// A photo of the shared data folder (kleiber_1920x1080.jpg, ...): in $SPECTRASIFT_TEST_PHOTOS when it is set
/// (e.g. "none": no photo), else in shared/data/photos inside the repository (the device machine's copy) or
/// beside it; "" when it is not there.
inline std::string shared_photo_path(const char* name) {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("SPECTRASIFT_TEST_PHOTOS")) {
    dirs.emplace_back(env);
  } else {
    dirs.push_back(std::string(SPECTRASIFT_TEST_DATA) + "/../../shared/data/photos");
    dirs.push_back(std::string(SPECTRASIFT_TEST_DATA) + "/../../../shared/data/photos");
  }
  for (const std::string& dir : dirs) {
    const std::string path = dir + "/" + name;
    if (std::FILE* f = std::fopen(path.c_str(), "rb")) {
      std::fclose(f);
      return path;
    }
  }
  return "";
}

inline detail::SiftImageView sift_view(const Image& im) {
  return detail::SiftImageView{im.data.data(), im.type, im.width, im.height, im.channels, false};
}

/// core/sift.cpp's run sequence on a set of stages. lap(stage), when given, is called right after each call
/// (stage: its detail::SiftDeviceStages::Stage, kUpload .. kDownload; the plan is made before the upload).
inline Features run_stages(detail::SiftStages& st, detail::ContextImpl& im, const detail::SiftImageView& v,
                           const SiftOptions& o, const Image* mask, detail::SiftCounts* counts = nullptr,
                           const std::function<void(int)>& lap = {}) {
  using Stages = detail::SiftDeviceStages;
  const auto done = [&lap](int stage) {
    if (lap) lap(stage);
  };
  const detail::SiftPlan& plan = detail::sift_plan(im, v.width, v.height, o);
  st.upload(plan, v);
  done(Stages::kUpload);
  st.pyramid();
  done(Stages::kPyramid);
  st.dog();
  done(Stages::kDog);
  st.extrema();
  done(Stages::kExtrema);
  st.refine();
  done(Stages::kRefine);
  st.orientations();
  done(Stages::kOrientations);
  st.select(mask);
  done(Stages::kSelect);
  st.descriptors();
  done(Stages::kDescriptors);
  Features f;
  detail::SiftCounts c;
  st.download(f, c);
  done(Stages::kDownload);
  if (counts) *counts = c;
  return f;
}

inline Features cpu_sift(const Image& im, const SiftOptions& o = {}, const Image* mask = nullptr) {
  ContextOptions co;
  co.backend = Backend::kCpu;
  co.threads = 2;
  Context ctx(co);
  return detect_and_compute(ctx, im, o, mask);
}

struct SiftAgreement {
  std::size_t cpu = 0, device = 0, paired = 0, identical = 0;
  double worst_descriptor = 0;  // max abs difference over paired rows, rows normalised to unit L2 norm
  double paired_share() const { return cpu ? double(paired) / double(cpu) : 1.0; }
};

inline double angle_diff(double a, double b) {
  const double d = std::fmod(std::abs(a - b), 360.0);
  return std::min(d, 360.0 - d);
}

/// Pairs every CPU keypoint with a device keypoint of the same octave and layer within the tolerances of
/// `backend` (the nearest in position), and compares their descriptors.
inline SiftAgreement compare_sift(const Features& cpu, const Features& dev, Backend backend) {
  const SiftTolerance tol = sift_backend_vs_cpu(backend);
  SiftAgreement a;
  a.cpu = cpu.keypoints.size();
  a.device = dev.keypoints.size();
  // device keypoints sorted by y for a window search
  std::vector<std::size_t> by_y(dev.keypoints.size());
  for (std::size_t i = 0; i < by_y.size(); ++i) by_y[i] = i;
  std::sort(by_y.begin(), by_y.end(), [&](std::size_t p, std::size_t q) { return dev.keypoints[p].y < dev.keypoints[q].y; });
  std::vector<char> used(dev.keypoints.size(), 0);
  const std::size_t n = Features::kDescriptorSize;
  for (std::size_t i = 0; i < cpu.keypoints.size(); ++i) {
    const Keypoint& k = cpu.keypoints[i];
    auto lo = std::lower_bound(by_y.begin(), by_y.end(), k.y - tol.position_px,
                               [&](std::size_t p, double y) { return dev.keypoints[p].y < y; });
    std::size_t best = SIZE_MAX;
    double best_d = 1e9;
    for (auto it = lo; it != by_y.end() && dev.keypoints[*it].y <= k.y + tol.position_px; ++it) {
      const Keypoint& q = dev.keypoints[*it];
      if (used[*it] || q.octave != k.octave || q.layer != k.layer) continue;
      if (std::abs(q.x - k.x) > tol.position_px) continue;
      if (std::abs(q.size - k.size) > tol.scale_rel * k.size) continue;
      if (angle_diff(q.angle, k.angle) > tol.angle_deg) continue;
      const double d = std::abs(q.x - k.x) + std::abs(q.y - k.y) + angle_diff(q.angle, k.angle) * 1e-3;
      if (d < best_d) { best_d = d; best = *it; }
    }
    if (best == SIZE_MAX) continue;
    used[best] = 1;
    ++a.paired;
    const float* dc = cpu.descriptors.data() + i * n;
    const float* dd = dev.descriptors.data() + best * n;
    double nc = 0, nd = 0;
    for (std::size_t t = 0; t < n; ++t) { nc += double(dc[t]) * dc[t]; nd += double(dd[t]) * dd[t]; }
    nc = nc > 0 ? 1 / std::sqrt(nc) : 0;
    nd = nd > 0 ? 1 / std::sqrt(nd) : 0;
    double worst = 0;
    for (std::size_t t = 0; t < n; ++t) worst = std::max(worst, std::abs(dc[t] * nc - dd[t] * nd));
    a.worst_descriptor = std::max(a.worst_descriptor, worst);
    const Keypoint& q = dev.keypoints[best];
    if (q.x == k.x && q.y == k.y && q.size == k.size && q.angle == k.angle && q.response == k.response &&
        std::memcmp(dc, dd, n * sizeof(float)) == 0)
      ++a.identical;
  }
  return a;
}

/// The agreement of the device SIFT issues: >= 99 % of the CPU's keypoints paired, their descriptors within
/// tolerance, the counts within 1 %. Prints the figures with `tag` ("sift-ocl", "sift-cuda").
inline SiftAgreement expect_sift_agreement(const Features& cpu, const Features& dev, Backend backend, const char* tag,
                                           const std::string& what) {
  const SiftAgreement a = compare_sift(cpu, dev, backend);
  std::printf("[ %s ] %s: cpu %zu, %s %zu, paired %zu (%.3f %%), bit-identical %zu, worst descriptor %.3g\n", tag,
              what.c_str(), a.cpu, to_string(backend), a.device, a.paired, 100.0 * a.paired_share(), a.identical,
              a.worst_descriptor);
  EXPECT_GT(a.cpu, 0u) << what;
  EXPECT_GE(a.paired_share(), 0.99) << what;
  EXPECT_GE(double(a.device), 0.99 * double(a.cpu)) << what;
  EXPECT_LE(double(a.device), 1.01 * double(a.cpu)) << what;
  EXPECT_LE(a.worst_descriptor, sift_backend_vs_cpu(backend).descriptor_max_abs) << what;
  return a;
}

inline bool same_sift_bits(const Features& a, const Features& b) {
  if (a.keypoints.size() != b.keypoints.size() || a.descriptors.size() != b.descriptors.size()) return false;
  for (std::size_t i = 0; i < a.keypoints.size(); ++i) {
    const Keypoint &p = a.keypoints[i], &q = b.keypoints[i];
    if (std::memcmp(&p.x, &q.x, 5 * sizeof(float)) != 0 || p.octave != q.octave || p.layer != q.layer ||
        std::memcmp(&p.layer_offset, &q.layer_offset, sizeof(float)) != 0)
      return false;
  }
  // memcmp's pointers must not be null, even for 0 bytes (an empty vector's data() may be).
  return a.descriptors.empty() ||
         std::memcmp(a.descriptors.data(), b.descriptors.data(), a.descriptors.size() * sizeof(float)) == 0;
}

/// A grey u8 image as another type: u16 (v * 257, the same grey levels) or f32 (v / 255), with `channels`
/// channels (colour channels made different from each other so that the RGB formula is exercised).
inline Image convert_sift_input(const Image& g, PixelType type, int channels) {
  Image out;
  out.width = g.width;
  out.height = g.height;
  out.channels = channels;
  out.type = type;
  out.data.resize(g.pixel_count() * std::size_t(channels) * bytes_per_sample(type));
  for (std::size_t i = 0; i < g.pixel_count(); ++i) {
    for (int c = 0; c < channels; ++c) {
      const unsigned v0 = g.data[i];
      const unsigned v = c == 0 || channels < 3 ? v0 : (c == 1 ? (v0 * 7 + 13) % 256 : 255 - v0);
      const std::size_t at = i * std::size_t(channels) + std::size_t(c);
      if (type == PixelType::kU8) out.data[at] = std::uint8_t(v);
      else if (type == PixelType::kU16) out.as<std::uint16_t>()[at] = std::uint16_t(v * 257 + (c == 2 ? 11 : 0));
      else out.as<float>()[at] = float(v) / 255.0f + (c == 2 ? 1e-3f : 0.0f);
    }
  }
  return out;
}

/// The mask of the max_features + mask tests: diagonal bands over the image.
inline Image band_mask(int width, int height) {
  Image mask = Image::allocate(width, height, 1, PixelType::kU8);
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x) mask.data[std::size_t(y) * std::size_t(width) + std::size_t(x)] = (x + y) % 300 < 170;
  return mask;
}

/// The mask of the select-path tests: tiles of 37 x 29 pixels, two of three set.
inline Image tile_mask(int width, int height) {
  Image mask = Image::allocate(width, height, 1, PixelType::kU8);
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x)
      mask.data[std::size_t(y) * std::size_t(width) + std::size_t(x)] = (x / 37 + y / 29) % 3 ? 255 : 0;
  return mask;
}

/// The images and options of the select-path tests (one-block/work-group select against the multi-launch path):
/// the test images at the defaults, and graf1 at contrast 0.01 (4,483 features: more records than 4,096).
inline std::vector<std::pair<const char*, SiftOptions>> select_path_cases() {
  SiftOptions dense;
  dense.contrast_threshold = 0.01;
  return {{"box.png", {}}, {"graf1_gray.png", {}}, {"camera.png", {}}, {"graf1_gray.png", dense}};
}

/// g repeated nx x ny times: about nx ny times g's keypoints, with its responses repeated (ties at a cap), for
/// the select-path tests' counts around the small-count paths' limits.
inline Image tiled_image(const Image& g, int nx, int ny) {
  Image out = Image::allocate(g.width * nx, g.height * ny, g.channels, g.type);
  const std::size_t row = g.row_bytes();
  for (int y = 0; y < out.height; ++y)
    for (int tx = 0; tx < nx; ++tx)
      std::memcpy(out.data.data() + std::size_t(y) * out.row_bytes() + std::size_t(tx) * row,
                  g.data.data() + std::size_t(y % g.height) * row, row);
  return out;
}

/// An image of the descriptor-form tests: its path, its options, and the label of the printed lines.
struct DescriptorFormCase {
  std::string path;
  SiftOptions options;
  std::string what;
};

/// The cases of the GPU descriptor-form tests (every form bit-identical, each agreeing with the CPU): box and graf1
/// upsampled, graf1 at sigma 3.2 (larger windows, more bands), camera without upsampling and with RootSIFT, and
/// kleiber 1080p upsampled (2.4k keypoints) when the shared photo is found (else a line with `tag` says so).
inline std::vector<DescriptorFormCase> descriptor_form_cases(const char* tag) {
  SiftOptions wide, flat, root;
  wide.sigma = 3.2;
  flat.upsample = false;
  root.root_sift = true;
  std::vector<std::pair<std::string, SiftOptions>> cases = {{std::string(SPECTRASIFT_TEST_DATA) + "/box.png", {}},
                                                            {std::string(SPECTRASIFT_TEST_DATA) + "/graf1_gray.png", {}},
                                                            {std::string(SPECTRASIFT_TEST_DATA) + "/graf1_gray.png", wide},
                                                            {std::string(SPECTRASIFT_TEST_DATA) + "/camera.png", flat},
                                                            {std::string(SPECTRASIFT_TEST_DATA) + "/camera.png", root}};
  const std::string kleiber = shared_photo_path("kleiber_1920x1080.jpg");
  if (kleiber.empty())
    std::printf("[ %s ] kleiber_1920x1080.jpg not found (shared/data/photos, SPECTRASIFT_TEST_PHOTOS): photo case not run\n",
                tag);
  else
    cases.emplace_back(kleiber, SiftOptions{});
  std::vector<DescriptorFormCase> out;
  for (const auto& [path, o] : cases) {
    const std::string name = path.substr(path.find_last_of('/') + 1);
    out.push_back({path, o,
                   name + " sigma " + std::to_string(o.sigma) + " upsample " + std::to_string(int(o.upsample)) +
                       (o.root_sift ? " RootSIFT" : "")});
  }
  return out;
}

/// A device backend's SIFT as the shared checks below call it: detect_and_compute on its context.
struct DeviceSift {
  Backend backend;
  const char* tag;  ///< the prefix of the printed figures ("sift-ocl", "sift-cuda")
  std::function<Features(const Image&, const SiftOptions&, const Image*)> run;
  SiftAgreement expect_agreement(const Features& cpu, const Features& dev, const std::string& what) const {
    return expect_sift_agreement(cpu, dev, backend, tag, what);
  }
};

/// Every input type (u8, u16, f32 with 1..4 channels) agrees with the CPU backend.
inline void check_every_input_type(const DeviceSift& d) {
  const Image box = load_test_image("box.png");
  for (PixelType t : {PixelType::kU8, PixelType::kU16, PixelType::kF32}) {
    for (int channels : {1, 2, 3, 4}) {
      const Image im = convert_sift_input(box, t, channels);
      const std::string what = "box type " + std::to_string(int(t)) + " channels " + std::to_string(channels);
      d.expect_agreement(cpu_sift(im), d.run(im, {}, nullptr), what);
    }
  }
}

/// max_features and a mask keep the CPU's set; the mask is dropped by the next run.
inline void check_max_features_and_mask(const DeviceSift& d) {
  const Image im = load_test_image("graf1_gray.png");
  const Image mask = band_mask(im.width, im.height);
  SiftOptions o;
  o.max_features = 300;
  const Features cpu = cpu_sift(im, o, &mask), dev = d.run(im, o, &mask);
  d.expect_agreement(cpu, dev, "graf1 max_features 300 + mask");
  EXPECT_LE(cpu.keypoints.size(), 330u);
  const Features all = d.run(im, o, nullptr);
  EXPECT_GT(all.keypoints.size(), dev.keypoints.size());
  SiftOptions none;
  d.expect_agreement(cpu_sift(im, none, &mask), d.run(im, none, &mask), "graf1 mask only");
}

/// The images of the DISABLED_StageTimes tests: graf1 and box, and the paths in
/// SPECTRASIFT_SIFT_TIMING_IMAGES (colon-separated), e.g. the 1080p photos.
inline std::vector<std::string> timing_images() {
  std::vector<std::string> names = {std::string(SPECTRASIFT_TEST_DATA) + "/graf1_gray.png",
                                    std::string(SPECTRASIFT_TEST_DATA) + "/box.png"};
  if (const char* extra = std::getenv("SPECTRASIFT_SIFT_TIMING_IMAGES")) {
    const std::string list = extra;
    for (std::size_t at = 0; at <= list.size();) {
      const std::size_t end = std::min(list.find(':', at), list.size());
      if (end > at) names.push_back(list.substr(at, end - at));
      at = end + 1;
    }
  }
  return names;
}

inline double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

}  // namespace spectrasift::test

// Features (keypoints and descriptors as NumPy views on the C++ vectors), sift(), match(), read_image(),
// read_features().
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>

#include <cstring>
#include <filesystem>
#include <string>

#include "common.hpp"
#include "spectrasift/error.hpp"
#include "spectrasift/io.hpp"
#include "spectrasift/match.hpp"
#include "spectrasift/sift.hpp"

namespace spectrasift::python {

namespace {

static_assert(sizeof(Keypoint) == 32, "the Python package views keypoints as a 32-byte structured dtype");
static_assert(sizeof(Match) == 16, "the Python package views matches as a 16-byte structured dtype");

PixelType pixel_type(const nb::dlpack::dtype& t) {
  if (t == nb::dtype<std::uint8_t>()) return PixelType::kU8;
  if (t == nb::dtype<std::uint16_t>()) return PixelType::kU16;
  if (t == nb::dtype<float>()) return PixelType::kF32;
  throw Error(ErrorCode::kInvalidArgument, "the image must be uint8, uint16 or float32");
}

/// The view of a C-contiguous (H, W) or (H, W, C) array: read in place by the library.
ImageView image_view(const ImageArray& a) {
  if (a.ndim() != 2 && a.ndim() != 3)
    throw Error(ErrorCode::kInvalidArgument,
                "the image must have 2 (H, W) or 3 (H, W, C) dimensions, not " + std::to_string(a.ndim()));
  ImageView v;
  v.data = a.data();
  v.height = int(a.shape(0));
  v.width = int(a.shape(1));
  v.channels = a.ndim() == 3 ? int(a.shape(2)) : 1;
  v.type = pixel_type(a.dtype());
  return v;
}

using KeypointBytes = nb::ndarray<const std::uint8_t, nb::ndim<2>, nb::c_contig, nb::device::cpu>;

/// Features with the keypoints of `keypoint_bytes` (rows of sizeof(Keypoint) bytes) and room for no
/// descriptor yet, after checking that `rows` x `cols` descriptors fit them.
Features features_from_keypoints(const KeypointBytes& keypoint_bytes, std::size_t rows, std::size_t cols, int width,
                                 int height) {
  if (keypoint_bytes.shape(1) != sizeof(Keypoint) || cols != std::size_t(Features::kDescriptorSize) ||
      rows != keypoint_bytes.shape(0))
    throw Error(ErrorCode::kInvalidArgument, "features: " + std::to_string(keypoint_bytes.shape(0)) +
                                                 " keypoints need " + std::to_string(keypoint_bytes.shape(0)) +
                                                 " x 128 descriptors, got " + std::to_string(rows) + " x " +
                                                 std::to_string(cols));
  Features f;
  f.image_width = width;
  f.image_height = height;
  f.keypoints.resize(keypoint_bytes.shape(0));
  if (!f.keypoints.empty()) std::memcpy(f.keypoints.data(), keypoint_bytes.data(), keypoint_bytes.size());
  return f;
}

}  // namespace

Image image_copy(const ImageArray& a) {
  const ImageView v = image_view(a);
  Image img = Image::allocate(v.width, v.height, v.channels, v.type);
  if (!img.data.empty()) std::memcpy(img.data.data(), v.data, img.data.size());
  return img;
}

nb::ndarray<nb::numpy, std::uint8_t> match_bytes(const std::vector<Match>& matches) {
  std::vector<std::uint8_t> bytes(matches.size() * sizeof(Match));
  if (!bytes.empty()) std::memcpy(bytes.data(), matches.data(), bytes.size());
  return owned_array(std::move(bytes), {matches.size(), sizeof(Match)});
}

nb::object image_to_numpy(Image&& image) {
  auto* heap = new Image(std::move(image));
  nb::capsule owner(heap, [](void* p) noexcept { delete static_cast<Image*>(p); });
  const std::size_t shape[3] = {std::size_t(heap->height), std::size_t(heap->width), std::size_t(heap->channels)};
  const std::size_t ndim = heap->channels == 1 ? 2 : 3;
  nb::dlpack::dtype t = heap->type == PixelType::kU8    ? nb::dtype<std::uint8_t>()
                        : heap->type == PixelType::kU16 ? nb::dtype<std::uint16_t>()
                                                        : nb::dtype<float>();
  return nb::cast(nb::ndarray<nb::numpy>(heap->data.data(), ndim, shape, owner, nullptr, t));
}

void bind_features(nb::module_& m) {
  nb::class_<Features>(m, "Features")
      .def_ro("image_width", &Features::image_width)
      .def_ro("image_height", &Features::image_height)
      .def("__len__", &Features::size)
      .def_prop_ro("keypoint_bytes",
                   [](nb::handle self) {
                     const Features& f = nb::cast<const Features&>(self);
                     return nb::ndarray<nb::numpy, const std::uint8_t, nb::ndim<2>>(
                         f.keypoints.data(), {f.keypoints.size(), sizeof(Keypoint)}, self);
                   })
      .def_prop_ro("descriptor_type", [](const Features& f) { return std::string(to_string(f.descriptor_type)); })
      // A view of the array that descriptor_type names: uint8 for u8 features (cv2's CV_8U), float32 for f32.
      .def_prop_ro("descriptors",
                   [](nb::handle self) -> nb::object {
                     const Features& f = nb::cast<const Features&>(self);
                     const std::size_t n = f.keypoints.size(), d = Features::kDescriptorSize;
                     if (f.descriptor_type == DescriptorType::kU8)
                       return nb::cast(
                           nb::ndarray<nb::numpy, const std::uint8_t, nb::ndim<2>>(f.descriptor_bytes.data(), {n, d}, self));
                     return nb::cast(nb::ndarray<nb::numpy, const float, nb::ndim<2>>(f.descriptors.data(), {n, d}, self));
                   })
      .def("descriptors_u8",
           [](const Features& f) {
             return owned_array(f.descriptors_u8(), {f.size(), std::size_t(Features::kDescriptorSize)});
           })
      .def("descriptors_f32",
           [](const Features& f) {
             return owned_array(f.descriptors_f32(), {f.size(), std::size_t(Features::kDescriptorSize)});
           })
      // Two overloads: float32 descriptors give f32 features, uint8 ones u8 features (nanobind picks by dtype).
      .def_static(
          "from_arrays",
          [](KeypointBytes keypoint_bytes, nb::ndarray<const float, nb::ndim<2>, nb::c_contig, nb::device::cpu> d,
             int width, int height) {
            Features f = features_from_keypoints(keypoint_bytes, d.shape(0), d.shape(1), width, height);
            f.descriptors.assign(d.data(), d.data() + d.size());
            return f;
          },
          nb::arg("keypoint_bytes"), nb::arg("descriptors"), nb::arg("width"), nb::arg("height"))
      .def_static(
          "from_arrays",
          [](KeypointBytes keypoint_bytes, nb::ndarray<const std::uint8_t, nb::ndim<2>, nb::c_contig, nb::device::cpu> d,
             int width, int height) {
            Features f = features_from_keypoints(keypoint_bytes, d.shape(0), d.shape(1), width, height);
            f.descriptor_type = DescriptorType::kU8;
            f.descriptor_bytes.assign(d.data(), d.data() + d.size());
            return f;
          },
          nb::arg("keypoint_bytes"), nb::arg("descriptors"), nb::arg("width"), nb::arg("height"))
      // (width, height, keypoint bytes, float32 descriptor bytes) for f32 features, as before u8 features
      // existed (older pickles load); u8 features add a fifth item, "u8", and their descriptor bytes.
      .def("__getstate__",
           [](const Features& f) -> nb::tuple {
             nb::bytes kp(f.keypoints.data(), f.keypoints.size() * sizeof(Keypoint));
             if (f.descriptor_type == DescriptorType::kU8)
               return nb::make_tuple(f.image_width, f.image_height, kp,
                                     nb::bytes(f.descriptor_bytes.data(), f.descriptor_bytes.size()), "u8");
             return nb::make_tuple(f.image_width, f.image_height, kp,
                                   nb::bytes(f.descriptors.data(), f.descriptors.size() * sizeof(float)));
           })
      .def("__setstate__", [](Features& f, const nb::tuple& state) {
        new (&f) Features();
        if (state.size() != 4 && state.size() != 5)
          throw Error(ErrorCode::kInvalidArgument, "features: a pickled state of " + std::to_string(state.size()) +
                                                       " items (expected 4 or 5)");
        f.image_width = nb::cast<int>(state[0]);
        f.image_height = nb::cast<int>(state[1]);
        const nb::bytes kp = nb::cast<nb::bytes>(state[2]);
        const nb::bytes d = nb::cast<nb::bytes>(state[3]);
        if (state.size() == 5) f.descriptor_type = parse_descriptor_type(nb::cast<std::string>(state[4]));
        const std::size_t value_bytes = f.descriptor_type == DescriptorType::kU8 ? 1 : sizeof(float);
        if (kp.size() % sizeof(Keypoint) != 0 || d.size() != kp.size() / sizeof(Keypoint) * 128 * value_bytes)
          throw Error(ErrorCode::kInvalidArgument, "features: a pickled state of inconsistent sizes");
        f.keypoints.resize(kp.size() / sizeof(Keypoint));
        if (kp.size()) std::memcpy(f.keypoints.data(), kp.c_str(), kp.size());
        if (f.descriptor_type == DescriptorType::kU8) {
          f.descriptor_bytes.resize(d.size());
          if (d.size()) std::memcpy(f.descriptor_bytes.data(), d.c_str(), d.size());
        } else {
          f.descriptors.resize(d.size() / sizeof(float));
          if (d.size()) std::memcpy(f.descriptors.data(), d.c_str(), d.size());
        }
      });

  m.def(
      "sift",
      [](PyContext& c, ImageArray image, int octave_layers, double sigma, double contrast_threshold,
         double edge_threshold, bool upsample, int max_features, bool root_sift, const std::string& descriptor_type,
         nb::object mask) {
        ContextCall call(c, "sift");
        SiftOptions o;
        o.octave_layers = octave_layers;
        o.sigma = sigma;
        o.contrast_threshold = contrast_threshold;
        o.edge_threshold = edge_threshold;
        o.upsample = upsample;
        o.max_features = max_features;
        o.root_sift = root_sift;
        o.descriptor_type = parse_descriptor_type(descriptor_type);
        const ImageView view = image_view(image);
        Image mask_image;
        if (!mask.is_none()) mask_image = image_copy(nb::cast<ImageArray>(mask));
        record_input(view.data);
        nb::gil_scoped_release release;
        const CallTimer timer;
        return detect_and_compute(call.ctx(), view, o, mask.is_none() ? nullptr : &mask_image);
      },
      nb::arg("ctx"), nb::arg("image"), nb::arg("octave_layers"), nb::arg("sigma"), nb::arg("contrast_threshold"),
      nb::arg("edge_threshold"), nb::arg("upsample"), nb::arg("max_features"), nb::arg("root_sift"),
      nb::arg("descriptor_type"), nb::arg("mask").none());

  m.def(
      "match",
      [](PyContext& c, const Features& query, const Features& train, double ratio, bool mutual, double max_distance) {
        ContextCall call(c, "match");
        MatchOptions o;
        o.ratio = ratio;
        o.mutual = mutual;
        o.max_distance = max_distance;
        std::vector<Match> matches;
        {
          nb::gil_scoped_release release;
          matches = match_features(call.ctx(), query, train, o);
        }
        return match_bytes(matches);
      },
      nb::arg("ctx"), nb::arg("query"), nb::arg("train"), nb::arg("ratio"), nb::arg("mutual"), nb::arg("max_distance"));

  m.def(
      "read_image",
      [](const std::string& path, bool gray, std::uint64_t max_pixels) {
        Image img;
        {
          nb::gil_scoped_release release;
          ImageLimits limits;
          limits.max_pixels = max_pixels;
          img = read_image(path, gray ? ReadMode::kGray : ReadMode::kAsStored, limits);
        }
        return image_to_numpy(std::move(img));
      },
      nb::arg("path"), nb::arg("gray"), nb::arg("max_pixels"));

  m.def(
      "read_features",
      [](const std::string& path) {
        nb::gil_scoped_release release;
        return read_features(path);
      },
      nb::arg("path"));
}

}  // namespace spectrasift::python

// The batch call of sift.hpp (detect_and_compute over a span of images), checked the same way on every
// backend (sift_test.cpp on the CPU, sift_opencl_test.cpp, sift_cuda_test.cpp): each image's features have
// the bits of the single-image call on the same context; the callback sees the images in order, once each;
// a bad image is refused before any work with its index in the message.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <string>
#include <vector>

#include "sift_device_test_util.hpp"
#include "spectrasift/error.hpp"

namespace spectrasift::test {

inline ImageView view_of(const Image& im) { return ImageView{im.data.data(), im.width, im.height, im.channels, im.type}; }

/// The batch inputs: runs of one size (where a device prefetches the next image) across pixel types and
/// channel counts (the next image's byte count differs from this one's), a change of size (no prefetch across
/// it), and a repeat of the first image at the end.
inline std::vector<Image> batch_inputs() {
  const Image box = load_test_image("box.png"), graf = load_test_image("graf1_gray.png");
  return {box,
          convert_sift_input(box, PixelType::kU8, 3),
          convert_sift_input(box, PixelType::kU16, 1),
          convert_sift_input(box, PixelType::kF32, 4),
          graf,
          load_test_image("graf3_gray.png"),
          convert_sift_input(graf, PixelType::kU8, 3),
          box};
}

/// Every image of the batch has the single call's bits under options o (and mask, for every image).
inline void check_batch_equals_single(Context& ctx, const std::vector<Image>& images, const SiftOptions& o = {},
                                      const Image* mask = nullptr) {
  std::vector<ImageView> views;
  for (const Image& im : images) views.push_back(view_of(im));
  std::vector<std::size_t> order;
  std::vector<Features> batch;
  detect_and_compute(ctx, views, o, mask, [&](std::size_t i, Features&& f) {
    order.push_back(i);
    batch.push_back(std::move(f));
  });
  ASSERT_EQ(batch.size(), images.size());
  for (std::size_t i = 0; i < images.size(); ++i) {
    EXPECT_EQ(order[i], i);
    const Features single = detect_and_compute(ctx, images[i], o, mask);
    EXPECT_FALSE(single.keypoints.empty()) << "image " << i;
    EXPECT_TRUE(same_sift_bits(batch[i], single)) << "image " << i << ": " << batch[i].size() << " features in the "
                                                  << "batch, " << single.size() << " alone";
    EXPECT_EQ(batch[i].image_width, images[i].width);
  }
  // The vector form gives the same.
  const std::vector<Features> again = detect_and_compute(ctx, std::span<const ImageView>(views), o, mask);
  ASSERT_EQ(again.size(), images.size());
  for (std::size_t i = 0; i < images.size(); ++i) EXPECT_TRUE(same_sift_bits(again[i], batch[i])) << "image " << i;
}

/// The default options over batch_inputs(), then max_features with a mask over images of one size, then a
/// stretch (prepared on the host image by image).
inline void check_batch(Context& ctx) {
  check_batch_equals_single(ctx, batch_inputs());
  const Image graf = load_test_image("graf1_gray.png");
  const std::vector<Image> same_size{graf, load_test_image("graf3_gray.png"), graf};
  const Image mask = band_mask(graf.width, graf.height);
  SiftOptions capped;
  capped.max_features = 300;
  check_batch_equals_single(ctx, same_size, capped, &mask);
  SiftOptions stretched;
  stretched.stretch = SiftOptions::Stretch::kPercentile;
  check_batch_equals_single(ctx, same_size, stretched);
}

/// A bad image (empty, five channels, not the mask's size) is refused before any image runs, and the message
/// names its index; an empty batch gives nothing; the callback's exception propagates unchanged.
inline void check_batch_errors(Context& ctx) {
  const Image box = load_test_image("box.png"), graf = load_test_image("graf1_gray.png");
  const auto expect_refused = [&](const std::vector<ImageView>& views, const Image* mask, const std::string& start) {
    int calls = 0;
    try {
      detect_and_compute(ctx, views, {}, mask, [&](std::size_t, Features&&) { ++calls; });
      ADD_FAILURE() << "no error for " << start;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      EXPECT_EQ(std::string(e.what()).rfind(start, 0), 0u) << e.what();
    }
    EXPECT_EQ(calls, 0) << start;  // checked before any work
  };
  ImageView empty = view_of(box);
  empty.data = nullptr;
  expect_refused({view_of(box), view_of(box), empty}, nullptr, "sift: images[2]: the image is empty");
  ImageView five = view_of(box);
  five.channels = 5;
  expect_refused({five}, nullptr, "sift: images[0]: images with 5 channels");
  const Image mask = band_mask(graf.width, graf.height);
  expect_refused({view_of(graf), view_of(box)}, &mask, "sift: images[1]: the mask is");

  EXPECT_TRUE(detect_and_compute(ctx, std::span<const ImageView>{}).empty());
  const std::vector<ImageView> two{view_of(box), view_of(box)};
  struct Stop {};
  EXPECT_THROW(detect_and_compute(ctx, two, {}, nullptr, [](std::size_t, Features&&) { throw Stop{}; }), Stop);
  // The context is usable afterwards (a device dropped the prefetched image) and gives the same bits.
  EXPECT_TRUE(same_sift_bits(detect_and_compute(ctx, box), detect_and_compute(ctx, two).at(1)));
}

}  // namespace spectrasift::test

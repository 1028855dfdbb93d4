// spectrasift/types.hpp — value types shared by every part of the API.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace spectrasift {

namespace detail {
class DeviceFeatures;  // a backend's device copy of descriptors (internal; see Features::device)
}

/// Where the work runs. kAuto picks CUDA, then an OpenCL GPU, then the CPU backend.
enum class Backend { kAuto, kCpu, kCuda, kOpenCL };

const char* to_string(Backend b) noexcept;
/// Parses "auto", "cpu", "cuda" or "opencl" (any case); throws Error(kInvalidArgument) otherwise.
Backend parse_backend(const std::string& name);

/// The sample type of an image. Images keep their own type until the backend converts them.
enum class PixelType : std::uint8_t { kU8, kU16, kF32 };

std::size_t bytes_per_sample(PixelType t) noexcept;
const char* to_string(PixelType t) noexcept;

/// An image in host memory: interleaved channels, rows stored top to bottom without padding.
/// Pixel (x, y) channel c of a U8 image is data[(y * width + x) * channels + c].
/// Channel order is R, G, B(, A) as decoded from the file (not OpenCV's BGR).
/// Value ranges: U8 0..255, U16 0..65535, F32 nominally 0..1.
struct Image {
  int width = 0;
  int height = 0;
  int channels = 0;
  PixelType type = PixelType::kU8;
  std::vector<std::uint8_t> data;  ///< width * height * channels * bytes_per_sample(type) bytes

  bool empty() const noexcept { return width <= 0 || height <= 0 || data.empty(); }
  std::size_t pixel_count() const noexcept { return std::size_t(width) * std::size_t(height); }
  std::size_t row_bytes() const noexcept { return std::size_t(width) * channels * bytes_per_sample(type); }

  template <class T> T* as() noexcept { return reinterpret_cast<T*>(data.data()); }
  template <class T> const T* as() const noexcept { return reinterpret_cast<const T*>(data.data()); }

  /// A zero-filled image of the given shape.
  static Image allocate(int width, int height, int channels, PixelType type);
};

/// A read-only view of an image in the caller's memory (a NumPy array, a decoder's buffer): the layout of
/// Image (interleaved channels, rows of width * channels samples without padding), neither owned nor copied.
/// The memory must stay valid and unchanged during the call that uses the view.
struct ImageView {
  const void* data = nullptr;
  int width = 0;
  int height = 0;
  int channels = 0;
  PixelType type = PixelType::kU8;
};

/// A float image of one channel, the working type of the pipeline (grey levels 0..255 for SIFT).
struct ImageF {
  int width = 0;
  int height = 0;
  std::vector<float> data;  ///< row-major, width * height values
  float& at(int x, int y) noexcept { return data[std::size_t(y) * width + x]; }
  float at(int x, int y) const noexcept { return data[std::size_t(y) * width + x]; }
};

/// A 2-D point in pixel coordinates: (0,0) is the centre of the top-left pixel, x right, y down.
struct Point2 {
  double x = 0;
  double y = 0;
};

/// One SIFT keypoint, with OpenCV's field meanings (see docs in sift.hpp).
struct Keypoint {
  float x = 0;          ///< column, input pixels, (0,0) = centre of the top-left pixel
  float y = 0;          ///< row, input pixels
  float size = 0;       ///< diameter of the meaningful neighbourhood = 2 * sigma, input pixels
  float angle = 0;      ///< dominant gradient direction in degrees [0, 360), y down (clockwise on screen)
  float response = 0;   ///< |interpolated DoG| in units of 1/255 of the grey range (OpenCV's response)
  int octave = 0;       ///< octave index, -1 = the doubled image, 0 = the input resolution, ...
  int layer = 0;        ///< DoG layer 1..octave_layers where the extremum was found
  float layer_offset = 0;  ///< sub-layer offset in [-0.5, 0.5]
};

/// The element type of SIFT descriptors (OpenCV's descriptorType): kF32 floats (CV_32F, OpenCV's default) or
/// kU8 bytes (CV_8U). SIFT's default descriptors are integers 0..255 either way, so both hold the same values
/// and match alike; kU8 takes a quarter of the host memory, and a GPU backend returns it without a conversion
/// to floats (CUDA reads the descriptors back as bytes either way; OpenCL reads bytes instead of its floats).
enum class DescriptorType : std::uint8_t { kF32, kU8 };

const char* to_string(DescriptorType t) noexcept;
/// Parses "f32" / "float32" or "u8" / "uint8" (any case); throws Error(kInvalidArgument) otherwise.
DescriptorType parse_descriptor_type(const std::string& name);

/// Keypoints and their descriptors: keypoints.size() rows of kDescriptorSize values (row i belongs to
/// keypoint i), in `descriptors` (floats) when descriptor_type is kF32 and in `descriptor_bytes` when it is
/// kU8; the other array is empty. With default options the values are integers 0..255 (OpenCV's CV_32F or
/// CV_8U descriptors); with RootSIFT (floats only) they are the square roots of the L1-normalised values,
/// scaled by 512 so that their L2 norm is 512 like the default ones (see SiftOptions::root_sift).
struct Features {
  static constexpr int kDescriptorSize = 128;
  int image_width = 0;
  int image_height = 0;
  std::vector<Keypoint> keypoints;
  /// Which array holds the descriptors (SiftOptions::descriptor_type of the run that made them).
  DescriptorType descriptor_type = DescriptorType::kF32;
  std::vector<float> descriptors;               ///< kF32: keypoints.size() * kDescriptorSize floats
  std::vector<std::uint8_t> descriptor_bytes;   ///< kU8: keypoints.size() * kDescriptorSize bytes
  /// Internal and optional: the descriptors' copy on the device of the backend that extracted them (GPU
  /// SIFT), so that matching on that backend does not upload them again. It is used only while it still
  /// mirrors the descriptor array of descriptor_type (same type, count and content, checked by a digest at each
  /// match), so editing, copying
  /// or filtering the vectors is always safe: an edited Features is matched from its host values. Null for
  /// features of the CPU backend or read from a file.
  std::shared_ptr<const detail::DeviceFeatures> device;

  std::size_t size() const noexcept { return keypoints.size(); }
  /// Row i of `descriptors` (kF32 features).
  const float* descriptor(std::size_t i) const noexcept { return descriptors.data() + i * kDescriptorSize; }
  /// Row i of `descriptor_bytes` (kU8 features).
  const std::uint8_t* descriptor_u8(std::size_t i) const noexcept {
    return descriptor_bytes.data() + i * kDescriptorSize;
  }
  /// Values in the array that descriptor_type names (keypoints.size() * kDescriptorSize when consistent).
  std::size_t descriptor_values() const noexcept {
    return descriptor_type == DescriptorType::kU8 ? descriptor_bytes.size() : descriptors.size();
  }
  /// The descriptors as bytes whatever the type: a copy of descriptor_bytes, or the floats rounded and
  /// saturated to 0..255 (OpenCV's conversion to CV_8U).
  std::vector<std::uint8_t> descriptors_u8() const;
  /// The descriptors as floats whatever the type: a copy of descriptors, or the bytes' values.
  std::vector<float> descriptors_f32() const;
  /// The same features with kU8 descriptors (bytes as descriptors_u8(); keypoints copied). Throws
  /// Error(kInvalidArgument) when a float value is not an integer 0..255 (RootSIFT), which bytes would change.
  Features to_u8() const&;
  /// The same, the keypoints moved out of this.
  Features to_u8() &&;
};

}  // namespace spectrasift

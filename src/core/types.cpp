#include "spectrasift/types.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "spectrasift/error.hpp"

namespace spectrasift {

const char* to_string(Backend b) noexcept {
  switch (b) {
    case Backend::kAuto: return "auto";
    case Backend::kCpu: return "cpu";
    case Backend::kCuda: return "cuda";
    case Backend::kOpenCL: return "opencl";
  }
  return "?";
}

Backend parse_backend(const std::string& name) {
  std::string s = name;
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  if (s == "auto") return Backend::kAuto;
  if (s == "cpu") return Backend::kCpu;
  if (s == "cuda") return Backend::kCuda;
  if (s == "opencl" || s == "ocl") return Backend::kOpenCL;
  throw Error(ErrorCode::kInvalidArgument, "unknown backend '" + name + "' (expected auto, cpu, cuda or opencl)");
}

std::size_t bytes_per_sample(PixelType t) noexcept {
  switch (t) {
    case PixelType::kU8: return 1;
    case PixelType::kU16: return 2;
    case PixelType::kF32: return 4;
  }
  return 0;
}

const char* to_string(PixelType t) noexcept {
  switch (t) {
    case PixelType::kU8: return "u8";
    case PixelType::kU16: return "u16";
    case PixelType::kF32: return "f32";
  }
  return "?";
}

Image Image::allocate(int width, int height, int channels, PixelType type) {
  if (width <= 0 || height <= 0 || channels <= 0)
    throw Error(ErrorCode::kInvalidArgument, "image dimensions must be positive");
  Image im;
  im.width = width;
  im.height = height;
  im.channels = channels;
  im.type = type;
  im.data.assign(std::size_t(width) * height * channels * bytes_per_sample(type), 0);
  return im;
}

std::vector<std::uint8_t> Features::descriptors_u8() const {
  std::vector<std::uint8_t> out(descriptors.size());
  for (std::size_t i = 0; i < descriptors.size(); ++i) {
    const float v = std::nearbyint(descriptors[i]);
    out[i] = std::uint8_t(std::clamp(v, 0.0f, 255.0f));
  }
  return out;
}

}  // namespace spectrasift

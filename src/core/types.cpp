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
  if (descriptor_type == DescriptorType::kU8) return descriptor_bytes;
  std::vector<std::uint8_t> out(descriptors.size());
  for (std::size_t i = 0; i < descriptors.size(); ++i) {
    const float v = std::nearbyint(descriptors[i]);
    out[i] = std::uint8_t(std::clamp(v, 0.0f, 255.0f));
  }
  return out;
}

std::vector<float> Features::descriptors_f32() const {
  if (descriptor_type == DescriptorType::kF32) return descriptors;
  return std::vector<float>(descriptor_bytes.begin(), descriptor_bytes.end());
}

Features Features::to_u8() const& {
  Features copy;
  copy.image_width = image_width;
  copy.image_height = image_height;
  copy.keypoints = keypoints;
  copy.descriptor_type = descriptor_type;
  copy.descriptors = descriptors;
  copy.descriptor_bytes = descriptor_bytes;
  return std::move(copy).to_u8();
}

Features Features::to_u8() && {
  Features out;
  out.image_width = image_width;
  out.image_height = image_height;
  out.keypoints = std::move(keypoints);
  out.descriptor_type = DescriptorType::kU8;
  if (descriptor_type == DescriptorType::kU8) {
    out.descriptor_bytes = std::move(descriptor_bytes);
    return out;
  }
  out.descriptor_bytes.resize(descriptors.size());
  for (std::size_t i = 0; i < descriptors.size(); ++i) {
    const float v = descriptors[i];
    if (!(v >= 0.0f && v <= 255.0f && v == std::nearbyint(v)))
      throw Error(ErrorCode::kInvalidArgument, "features: descriptor value " + std::to_string(v) + " (row " +
                                                   std::to_string(i / kDescriptorSize) +
                                                   ") is not an integer 0..255, so it has no u8 form (RootSIFT "
                                                   "descriptors are floats)");
    out.descriptor_bytes[i] = std::uint8_t(v);
  }
  return out;
}

const char* to_string(DescriptorType t) noexcept {
  return t == DescriptorType::kU8 ? "u8" : "f32";
}

DescriptorType parse_descriptor_type(const std::string& name) {
  std::string n;
  for (char c : name) n += char(std::tolower(static_cast<unsigned char>(c)));
  if (n == "f32" || n == "float32") return DescriptorType::kF32;
  if (n == "u8" || n == "uint8") return DescriptorType::kU8;
  throw Error(ErrorCode::kInvalidArgument, "unknown descriptor type '" + name + "' (expected f32 or u8)");
}

}  // namespace spectrasift

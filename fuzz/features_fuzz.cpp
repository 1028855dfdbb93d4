// Fuzz target: feature files (.key text, JSON, binary "SSFT" versions 1 and 2) through read_features, which
// detects the format from the content; a file that reads is written back in all three formats and read again,
// and then as u8 features (to_u8(), when its values are integers 0..255) the same way.
#include <cstdint>

#include "fuzz_common.hpp"
#include "spectrasift/error.hpp"
#include "spectrasift/io.hpp"

namespace {

using namespace spectrasift;

/// The readers' promise: one row of the named type per keypoint, and the other array empty.
void check_shape(const Features& f) {
  const std::size_t values = f.keypoints.size() * std::size_t(Features::kDescriptorSize);
  const bool u8 = f.descriptor_type == DescriptorType::kU8;
  if (f.descriptor_type != DescriptorType::kF32 && !u8) __builtin_trap();
  if ((u8 ? f.descriptor_bytes.size() : f.descriptors.size()) != values) __builtin_trap();
  if (!(u8 ? f.descriptors.empty() : f.descriptor_bytes.empty())) __builtin_trap();
}

/// Writes `f` in every format and reads it again. u8 descriptors are exact in every format: JSON and binary
/// give back the type and the bytes, Lowe's .key (which names no type) the same values as f32.
void round_trip(const Features& f) {
  for (const auto fmt : {FeatureFormat::kKey, FeatureFormat::kJson, FeatureFormat::kBinary}) {
    const auto out = fuzz::scratch_dir() / "features.out";
    Features again;
    try {
      write_features(out, f, fmt);
      again = read_features(out);
    } catch (const Error&) {
      // Values a format cannot hold (NaN in JSON, ...) are refused with an Error by the writer or reader; u8
      // values never are.
      if (f.descriptor_type == DescriptorType::kU8) __builtin_trap();
      continue;
    }
    check_shape(again);
    if (again.keypoints.size() != f.keypoints.size()) __builtin_trap();
    if (f.descriptor_type != DescriptorType::kU8) continue;
    if (fmt == FeatureFormat::kKey) {
      if (again.descriptor_type != DescriptorType::kF32 || again.descriptors_u8() != f.descriptor_bytes) __builtin_trap();
    } else if (again.descriptor_type != DescriptorType::kU8 || again.descriptor_bytes != f.descriptor_bytes) {
      __builtin_trap();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto path = fuzz::write_file("features.in", data, size);
  Features f;
  try {
    f = read_features(path);
  } catch (const Error&) {
    return 0;
  }
  check_shape(f);
  round_trip(f);
  if (f.descriptor_type == DescriptorType::kF32) {
    Features u;
    try {
      u = f.to_u8();  // refused when a value is not an integer 0..255
    } catch (const Error&) {
      return 0;
    }
    check_shape(u);
    round_trip(u);
  }
  return 0;
}

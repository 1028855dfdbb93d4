// Fuzz target: feature files (.key text, JSON, binary "SSFT") through read_features, which detects the
// format from the content; a file that reads is written back in all three formats and read again.
#include <cstdint>

#include "fuzz_common.hpp"
#include "spectrasift/error.hpp"
#include "spectrasift/io.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace spectrasift;
  const auto path = fuzz::write_file("features.in", data, size);
  Features f;
  try {
    f = read_features(path);
  } catch (const Error&) {
    return 0;
  }
  if (f.descriptors.size() != f.keypoints.size() * std::size_t(Features::kDescriptorSize)) __builtin_trap();
  for (const auto fmt : {FeatureFormat::kKey, FeatureFormat::kJson, FeatureFormat::kBinary}) {
    const auto out = fuzz::scratch_dir() / "features.out";
    try {
      write_features(out, f, fmt);
      const Features again = read_features(out);
      if (again.keypoints.size() != f.keypoints.size()) __builtin_trap();
    } catch (const Error&) {
      // Values a format cannot hold (NaN in JSON, ...) are refused with an Error by the writer or reader.
    }
  }
  return 0;
}

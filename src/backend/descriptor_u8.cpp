// pack_descriptors_u8: see descriptor_u8.hpp.
#include "backend/descriptor_u8.hpp"

namespace spectrasift::detail {

bool pack_descriptors_u8(const float* values, std::size_t begin, std::size_t end, int dim, std::uint8_t* bytes,
                         std::int32_t* norms) noexcept {
  const std::size_t d = std::size_t(dim);
  bool bad = false;
  for (std::size_t r = begin; r < end; ++r) {
    const float* v = values + r * d;
    std::uint8_t* out = bytes + r * d;
    std::int32_t norm = 0;
    int row_bad = 0;
    // No early exit, and the value clamped before the conversion (defined for every float, NaN included:
    // it clamps to 0 and then differs from itself), so that the loop vectorises.
    for (std::size_t k = 0; k < d; ++k) {
      float c = v[k] > 0.0f ? v[k] : 0.0f;
      c = c < 255.0f ? c : 255.0f;
      const int u = int(c);
      row_bad |= int(float(u) != v[k]);
      out[k] = std::uint8_t(u);
      norm += u * u;
    }
    norms[r] = norm;
    bad |= row_bad != 0;
  }
  return !bad;
}

}  // namespace spectrasift::detail

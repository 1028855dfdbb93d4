// Small image helpers shared by tests.
#pragma once

#include <cstring>

#include "spectrasift/io.hpp"

namespace spectrasift::test {

/// A w x h crop of an image starting at (x0, y0) (any channel count and sample type; no bounds check).
inline Image crop(const Image& src, int x0, int y0, int w, int h) {
  Image out;
  out.width = w;
  out.height = h;
  out.channels = src.channels;
  out.type = src.type;
  const std::size_t px = std::size_t(src.channels) * bytes_per_sample(src.type);
  out.data.resize(std::size_t(w) * h * px);
  for (int y = 0; y < h; ++y)
    std::memcpy(out.data.data() + std::size_t(y) * w * px,
                src.data.data() + (std::size_t(y0 + y) * src.width + x0) * px, std::size_t(w) * px);
  return out;
}

}  // namespace spectrasift::test

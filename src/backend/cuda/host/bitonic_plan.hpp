// The launch sequence of CUDA SIFT's bitonic sorts (select stage, kernels/sift_sort.cuh) and the position
// arithmetic its kernels share, in plain C++ (SPECTRASIFT_FN: also CUDA device code), so that a host test
// runs the same network and checks that it sorts.
//
// A bitonic network over P positions (a power of two) runs stages k = 2, 4, .., P, each with steps
// j = k/2, .., 1; step (k, j) compare-exchanges positions i and i + j for every i with bit j clear, in
// ascending order where i & k is 0. Steps with j below the block size B (positions a block holds in shared
// memory) run inside one launch per stage (and the stages k <= B in the first launch); the wider steps go
// through global memory, two consecutive steps (j, j/2) per launch where both are that wide.
#pragma once

#include <cstddef>
#include <vector>

#include "numeric/dialect.h"

namespace spectrasift::cuda {

struct BitonicLaunch {
  enum Kind {
    kLocalAll,    ///< every stage k = 2 .. B with all its steps, inside each block (the first launch)
    kLocalMerge,  ///< the steps j = B/2 .. 1 of stage k inside each block
    kStep,        ///< step (k, j) through global memory
    kStep2,       ///< steps (k, j) and (k, j/2) through global memory, 4 positions a thread
  };
  Kind kind;
  unsigned k;
  unsigned j;
};

/// The launches that sort `positions` positions (a power of two >= block) with blocks of `block` positions.
inline void bitonic_plan(std::size_t positions, std::size_t block, std::vector<BitonicLaunch>& out) {
  out.clear();
  out.push_back({BitonicLaunch::kLocalAll, 0, 0});
  for (std::size_t k = 2 * block; k <= positions; k <<= 1) {
    std::size_t j = k / 2;
    while (j >= block) {
      if (j / 2 >= block) {
        out.push_back({BitonicLaunch::kStep2, unsigned(k), unsigned(j)});
        j >>= 2;
      } else {
        out.push_back({BitonicLaunch::kStep, unsigned(k), unsigned(j)});
        j >>= 1;
      }
    }
    out.push_back({BitonicLaunch::kLocalMerge, unsigned(k), 0});
  }
}

/// Pair t of a step of width j: its lower position (bit j clear); the partner is that + j.
SPECTRASIFT_FN unsigned int bitonic_pair_lower(unsigned int t, unsigned int j) {
  return 2 * j * (t / j) + t % j;
}

/// Quad t of the two steps (j, j/2): its lowest position b (bits j and j/2 clear); the quad is b, b + j/2,
/// b + j, b + j + j/2: step j pairs (b, b + j) and (b + j/2, b + j + j/2), then step j/2 pairs (b, b + j/2)
/// and (b + j, b + j + j/2). All four share bit k of b (k >= 2 j), hence the direction.
SPECTRASIFT_FN unsigned int bitonic_quad_base(unsigned int t, unsigned int j) {
  const unsigned int h = j / 2;
  return 4 * h * (t / h) + t % h;
}

}  // namespace spectrasift::cuda

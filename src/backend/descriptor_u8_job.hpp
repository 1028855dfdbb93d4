// descriptor_u8_job.hpp — the host descriptors of both matching sides packed to bytes and norms
// (descriptor_u8.hpp) by several threads, and uploaded chunk by chunk as soon as each chunk is packed: the upload
// of chunk c runs beside the packing of the later chunks, so the kernels can start right after the last chunk
// (docs/performance/matching.md, 'GPU matching: the u8 path'). Plain C++: both GPU backends drive it with their
// own host pool and copy call (CUDA match.cu, OpenCL match.cpp); host tests check the split and the bits.
//
// Threads claim pieces of kPieceRows rows in order from one counter; each chunk (kChunkRows rows of one side)
// counts its unpacked pieces. The calling thread runs pack_and_upload: it hands chunk c to the copy call once its
// count is zero, and packs pieces itself while it waits. The other threads run pack_all. Which thread packs which
// piece never changes the bytes (every piece writes only its own rows).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "backend/descriptor_u8.hpp"

namespace spectrasift::detail {

/// One side's rows of `dim` floats and where its bytes (row r at bytes + r * dim) and norms go. A side of kU8
/// features gives its rows as source_bytes (values null): they are copied, and the norms computed.
struct U8Side {
  const float* values = nullptr;
  std::size_t rows = 0;
  std::uint8_t* bytes = nullptr;
  std::int32_t* norms = nullptr;
  const std::uint8_t* source_bytes = nullptr;
};

/// Rows [begin, end) of side `side` (0 query, 1 train): one upload.
struct U8Chunk {
  int side = 0;
  std::size_t begin = 0, end = 0;
};

class U8PackJob {
 public:
  /// Rows one thread packs per claim (128 KiB of floats): small enough that the calling thread, packing while
  /// it waits for a chunk, hands the chunk over late by little; large enough that the claims cost nothing.
  static constexpr std::size_t kPieceRows = 256;
  /// Rows per upload (512 KiB of bytes at dim 128; 8 uploads at 16384 x 16384): each copy call costs the
  /// calling thread a few microseconds, and the last chunk's upload (~15 us on PCIe 5) is not hidden.
  static constexpr std::size_t kChunkRows = 16 * kPieceRows;

  U8PackJob(const U8Side& query, const U8Side& train, int dim) : sides_{query, train}, dim_(dim) {
    for (int s = 0; s < 2; ++s)
      for (std::size_t b = 0; b < sides_[s].rows; b += kChunkRows)
        chunks_.push_back({s, b, std::min(b + kChunkRows, sides_[s].rows)});
    left_ = std::make_unique<std::atomic<int>[]>(chunks_.size());
    for (std::size_t c = 0; c < chunks_.size(); ++c) {
      const int pieces = int((chunks_[c].end - chunks_[c].begin + kPieceRows - 1) / kPieceRows);
      left_[c].store(pieces, std::memory_order_relaxed);
      for (int p = 0; p < pieces; ++p) pieces_.push_back({c, chunks_[c].begin + std::size_t(p) * kPieceRows});
    }
  }
  U8PackJob(const U8PackJob&) = delete;
  U8PackJob& operator=(const U8PackJob&) = delete;

  const std::vector<U8Chunk>& chunks() const noexcept { return chunks_; }

  /// Packs the next unclaimed piece (skipped once a value was found not to be a byte); false when none is left.
  bool pack_next() noexcept {
    const std::size_t p = next_.fetch_add(1, std::memory_order_relaxed);
    if (p >= pieces_.size()) return false;
    const auto [c, begin] = pieces_[p];
    const U8Chunk& chunk = chunks_[c];
    const U8Side& s = sides_[chunk.side];
    const std::size_t end = std::min(begin + kPieceRows, chunk.end);
    if (s.source_bytes)
      copy_descriptors_u8(s.source_bytes, begin, end, dim_, s.bytes, s.norms);
    else if (exact_.load(std::memory_order_relaxed) && !pack_descriptors_u8(s.values, begin, end, dim_, s.bytes, s.norms))
      exact_.store(false, std::memory_order_relaxed);
    left_[c].fetch_sub(1, std::memory_order_acq_rel);  // release: the piece's bytes before the count
    return true;
  }

  /// A helper thread's part: packs pieces until none is left.
  void pack_all() noexcept {
    while (pack_next()) {
    }
  }

  /// The calling thread's part: upload(chunk) for every chunk in order once it is packed, packing pieces while
  /// it waits. Returns whether every value was a byte; stops at the first chunk after a value that was not (the
  /// chunks handed over before stay handed over: the caller orders its staging buffer's reuse after them). May
  /// be called again (e.g. after the pool's job returned) to hand over what is left.
  template <class Upload>
  bool pack_and_upload(Upload&& upload) {
    for (; uploaded_ < chunks_.size(); ++uploaded_) {
      // Until the chunk is packed: pack pieces; with none left to claim, another thread packs the chunk's last
      // ones (wait, yielding now and then for a loaded machine where that thread waits for a core).
      for (int spin = 0; left_[uploaded_].load(std::memory_order_acquire) > 0;) {
        if (pack_next()) continue;
        if (++spin % 64)
          pause();
        else
          std::this_thread::yield();
      }
      if (!exact()) return false;
      upload(chunks_[uploaded_]);
    }
    return exact();
  }

  /// Whether every value packed so far was a byte (final once every piece is packed).
  bool exact() const noexcept { return exact_.load(std::memory_order_relaxed); }

 private:
  static void pause() noexcept {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#else
    std::this_thread::yield();
#endif
  }
  struct Piece {
    std::size_t chunk, begin;  // its chunk, its first row
  };

  U8Side sides_[2];
  int dim_;
  std::vector<U8Chunk> chunks_;
  std::vector<Piece> pieces_;  // in order: a chunk's pieces, then the next chunk's
  std::unique_ptr<std::atomic<int>[]> left_;  // per chunk: pieces not packed yet
  std::atomic<std::size_t> next_{0};
  std::atomic<bool> exact_{true};
  std::size_t uploaded_ = 0;  // chunks handed to upload (the calling thread's)
};

}  // namespace spectrasift::detail

// Page hints for large host outputs that are about to be written (the SIFT read-back into a fresh Features,
// tens of MB for 100k features): a fresh allocation's pages are faulted in, and zeroed by the kernel, by the
// first write, on the writing thread. Populating them first, in pieces on several threads, and with huge
// pages where the system allows them, takes that cost off the one thread that then fills the vector.
// Both are hints: where the kernel does not support them nothing happens and the first write faults as usual.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace spectrasift::detail {

/// Bytes of a piece of populate_pages work (2 MiB: one huge page).
constexpr std::size_t kPopulatePiece = std::size_t(2) << 20;

/// Asks for transparent huge pages on the whole pages inside [p, p + bytes) (MADV_HUGEPAGE; a hint).
void advise_huge_pages(void* p, std::size_t bytes) noexcept;

/// Faults in the whole pages inside [p, p + bytes) for writing without changing their content
/// (MADV_POPULATE_WRITE, Linux 5.14 and later). Returns false when the kernel refused (nothing done).
bool populate_pages(void* p, std::size_t bytes) noexcept;

/// Below this many bytes new storage is left to fault as it is filled (a few pages; and the C library often
/// hands back the pages of the previous call's vector).
constexpr std::size_t kPopulateMinBytes = std::size_t(4) << 20;

/// Resizes v to n value-initialised elements (contents replaced). New storage of kPopulateMinBytes or more
/// is given huge pages where allowed and populated first, in kPopulatePiece pieces run by
/// run_pieces(count, fn) (fn(piece) for piece in [0, count), e.g. on a thread pool), so that the zero-fill
/// on the calling thread finds its pages mapped.
template <class T, class RunPieces> void resize_for_writes(std::vector<T>& v, std::size_t n, const RunPieces& run_pieces) {
  if (v.capacity() < n) {
    v = std::vector<T>();  // no copy of the old values into the new storage
    v.reserve(n);
    auto* bytes = reinterpret_cast<unsigned char*>(v.data());
    const std::size_t total = v.capacity() * sizeof(T);
    if (total >= kPopulateMinBytes) {
      advise_huge_pages(bytes, total);
      run_pieces((total + kPopulatePiece - 1) / kPopulatePiece, [&](std::size_t piece) {
        const std::size_t lo = piece * kPopulatePiece;
        populate_pages(bytes + lo, std::min(kPopulatePiece, total - lo));
      });
    }
  }
  v.resize(n);
}

}  // namespace spectrasift::detail

// Page hints for large host outputs (host_pages.hpp).
#include "backend/host_pages.hpp"

#include <cstdint>

#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

namespace spectrasift::detail {

namespace {

// The whole pages inside [p, p + bytes): begin and length, length 0 when there is none.
struct PageRange {
  void* begin = nullptr;
  std::size_t bytes = 0;
};

PageRange whole_pages(void* p, std::size_t bytes) noexcept {
#if defined(__linux__)
  const auto page = std::uintptr_t(sysconf(_SC_PAGESIZE));
  const auto lo = (std::uintptr_t(p) + page - 1) / page * page;
  const auto hi = (std::uintptr_t(p) + bytes) / page * page;
  if (page > 0 && hi > lo) return {reinterpret_cast<void*>(lo), std::size_t(hi - lo)};
#else
  (void)p;
  (void)bytes;
#endif
  return {};
}

}  // namespace

void advise_huge_pages(void* p, std::size_t bytes) noexcept {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  const PageRange r = whole_pages(p, bytes);
  if (r.bytes) (void)madvise(r.begin, r.bytes, MADV_HUGEPAGE);
#else
  (void)p;
  (void)bytes;
#endif
}

bool populate_pages(void* p, std::size_t bytes) noexcept {
#if defined(__linux__)
  // The constant is Linux's (5.14+); older C libraries lack the name.
#ifndef MADV_POPULATE_WRITE
  constexpr int MADV_POPULATE_WRITE = 23;
#endif
  const PageRange r = whole_pages(p, bytes);
  return r.bytes == 0 || madvise(r.begin, r.bytes, MADV_POPULATE_WRITE) == 0;
#else
  (void)p;
  (void)bytes;
  return false;
#endif
}

}  // namespace spectrasift::detail

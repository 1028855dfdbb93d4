#include "io/mapping_guard.hpp"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <mutex>

namespace spectrasift::io_detail {
namespace {

// Slots the handler reads with atomic loads only. state: 0 free, 1 being changed, 2 guarded.
constexpr int kSlots = 64;
struct Slot {
  std::atomic<int> state{0};
  std::atomic<std::uintptr_t> begin{0}, end{0};
  std::atomic<bool> faulted{false};
};
Slot g_slots[kSlots];
struct sigaction g_previous {};

extern "C" void on_sigbus(int sig, siginfo_t* info, void* context) {
  const auto addr = reinterpret_cast<std::uintptr_t>(info->si_addr);
  for (Slot& s : g_slots) {
    if (s.state.load(std::memory_order_acquire) != 2) continue;
    const std::uintptr_t b = s.begin.load(std::memory_order_relaxed), e = s.end.load(std::memory_order_relaxed);
    if (addr < b || addr >= e) continue;
    // Zero pages from the faulting page to the end of the mapping: the page that faulted and every later
    // one are past the file's new end. mmap is a plain system call here (no allocation, no lock).
    const std::uintptr_t page = std::uintptr_t(::sysconf(_SC_PAGESIZE));
    const std::uintptr_t from = addr / page * page;
    if (::mmap(reinterpret_cast<void*>(from), e - from, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) !=
        MAP_FAILED) {
      s.faulted.store(true, std::memory_order_release);
      return;  // the faulting read is retried and now reads a zero
    }
    break;
  }
  // Not ours (or we could not repair it): whatever was there before, else the default action.
  if (g_previous.sa_flags & SA_SIGINFO) {
    if (g_previous.sa_sigaction) return g_previous.sa_sigaction(sig, info, context);
  } else if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN && g_previous.sa_handler) {
    return g_previous.sa_handler(sig);
  }
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(sig, &dfl, nullptr);
  ::raise(sig);
}

void install_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction sa {};
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGBUS, &sa, &g_previous);
  });
}

}  // namespace

int guard_mapping(void* begin, std::size_t bytes) {
  install_once();
  for (int i = 0; i < kSlots; ++i) {
    int expected = 0;
    if (g_slots[i].state.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) {
      g_slots[i].begin.store(reinterpret_cast<std::uintptr_t>(begin), std::memory_order_relaxed);
      g_slots[i].end.store(reinterpret_cast<std::uintptr_t>(begin) + bytes, std::memory_order_relaxed);
      g_slots[i].faulted.store(false, std::memory_order_relaxed);
      g_slots[i].state.store(2, std::memory_order_release);
      return i;
    }
  }
  return -1;
}

void unguard_mapping(int handle) {
  if (handle < 0 || handle >= kSlots) return;
  g_slots[handle].state.store(1, std::memory_order_release);
  g_slots[handle].state.store(0, std::memory_order_release);
}

bool mapping_faulted(int handle) {
  return handle >= 0 && handle < kSlots && g_slots[handle].faulted.load(std::memory_order_acquire);
}

}  // namespace spectrasift::io_detail

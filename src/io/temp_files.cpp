#include "io/temp_files.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>

#include "spectrasift/error.hpp"

namespace spectrasift::io_detail {
namespace {

namespace fs = std::filesystem;

// ---- the registry a signal handler can read ------------------------------------------------------------
// Fixed slots of plain characters: the handler only loads an atomic state and calls unlink(), both
// async-signal-safe. State 0 = free, 1 = being filled or emptied, 2 = holds a temporary to remove.
constexpr int kSlots = 64;
constexpr std::size_t kPathMax = 4096;
struct Slot {
  std::atomic<int> state{0};
  char path[kPathMax];
};
Slot g_slots[kSlots];
constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};

extern "C" void remove_temps_and_reraise(int sig) {
  const int saved = errno;
  for (Slot& s : g_slots)
    if (s.state.load(std::memory_order_acquire) == 2) ::unlink(s.path);
  // The default action (termination) for the same signal, so that the exit status says what killed us.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(sig, &dfl, nullptr);
  errno = saved;
  ::raise(sig);
}

void install_handlers_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (int sig : kSignals) {
      struct sigaction old {};
      if (::sigaction(sig, nullptr, &old) != 0) continue;
      // A program that handles the signal itself (or ignores it) keeps its choice.
      if ((old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL) continue;
      struct sigaction sa {};
      sa.sa_handler = remove_temps_and_reraise;
      sigemptyset(&sa.sa_mask);
      for (int other : kSignals) sigaddset(&sa.sa_mask, other);
      ::sigaction(sig, &sa, nullptr);
    }
  });
}

void slot_add(const std::string& path) {
  if (path.size() >= kPathMax) return;  // not removable on a signal; the sweep removes it later
  for (Slot& s : g_slots) {
    int expected = 0;
    if (s.state.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) {
      std::memcpy(s.path, path.c_str(), path.size() + 1);
      s.state.store(2, std::memory_order_release);
      return;
    }
  }
}

void slot_remove(const std::string& path) {
  for (Slot& s : g_slots) {
    int expected = 2;
    if (s.state.load(std::memory_order_acquire) == 2 && std::strcmp(s.path, path.c_str()) == 0 &&
        s.state.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) {
      s.state.store(0, std::memory_order_release);
      return;
    }
  }
}

// Temporary -> the user's name of its output, for messages and for nested writers (display_name).
std::mutex g_names_mutex;
std::map<std::string, std::string>& names() {
  static std::map<std::string, std::string> m;
  return m;
}

const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "is a directory (an output needs a file name)";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "is a device, not a regular file (outputs are written to regular files)";
  if (S_ISFIFO(mode)) return "is a FIFO, not a regular file (outputs are written to regular files)";
  if (S_ISSOCK(mode)) return "is a socket, not a regular file (outputs are written to regular files)";
  return nullptr;
}

/// "<pid>" if `name` is "<base>.tmp-<pid>-<n>", else 0.
pid_t temp_owner(const std::string& name, const std::string& base) {
  const std::string prefix = base + ".tmp-";
  if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) return 0;
  std::size_t i = prefix.size();
  long long pid = 0;
  std::size_t digits = 0;
  for (; i < name.size() && name[i] >= '0' && name[i] <= '9' && digits < 10; ++i, ++digits) pid = pid * 10 + (name[i] - '0');
  if (digits == 0 || i >= name.size() || name[i] != '-' || ++i >= name.size()) return 0;
  for (; i < name.size(); ++i)
    if (name[i] < '0' || name[i] > '9') return 0;
  return pid > 0 && pid < (1LL << 31) ? pid_t(pid) : 0;
}

}  // namespace

void throw_io(const std::string& display, const std::string& what, int err) {
  throw Error(ErrorCode::kIo, display + ": " + what + " (" + std::strerror(err) + ")");
}

fs::path resolve_output_target(const fs::path& target) {
  fs::path p = target;
  for (int hops = 0;; ++hops) {
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0) {
      if (errno == ENOENT) return p;  // a new file (or the missing file a dangling link names)
      throw_io(target.string(), "cannot inspect the output", errno);
    }
    if (S_ISLNK(st.st_mode)) {
      if (hops >= 40) throw_io(target.string(), "cannot follow the output link", ELOOP);
      std::error_code ec;
      const fs::path link = fs::read_symlink(p, ec);
      if (ec) throw_io(target.string(), "cannot follow the output link", ec.value());
      p = link.is_absolute() ? link : p.parent_path() / link;
      continue;
    }
    if (const char* kind = kind_of(st.st_mode)) {
      if (p == target) throw Error(ErrorCode::kIo, target.string() + ": " + kind);
      throw Error(ErrorCode::kIo, target.string() + ": links to " + p.string() + ", which " + kind);
    }
    return p;
  }
}

fs::path next_temp_name(const fs::path& resolved) {
  static std::atomic<unsigned> counter{0};
  fs::path temp = resolved;
  temp += ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
  return temp;
}

fs::path create_temp_beside(const fs::path& resolved, const std::string& display) {
  install_handlers_once();
  for (int attempt = 0;; ++attempt) {
    const fs::path temp = next_temp_name(resolved);
    // Registered before it exists: a signal between open() and the registration would leave it behind.
    {
      std::lock_guard<std::mutex> lock(g_names_mutex);
      names()[temp.string()] = display;
    }
    slot_add(temp.string());
    const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd >= 0) {
      ::close(fd);
      return temp;
    }
    const int err = errno;
    unregister_temp(temp);
    if (err == EEXIST && attempt < 100) continue;  // someone else's file (or a planted link): another name
    const fs::path dir = resolved.parent_path().empty() ? fs::path(".") : resolved.parent_path();
    throw_io(display, "cannot create a file in " + dir.string(), err);
  }
}

void unregister_temp(const fs::path& temp) {
  slot_remove(temp.string());
  std::lock_guard<std::mutex> lock(g_names_mutex);
  names().erase(temp.string());
}

bool is_registered_temp(const fs::path& path) {
  std::lock_guard<std::mutex> lock(g_names_mutex);
  return names().count(path.string()) != 0;
}

std::string display_name(const fs::path& path) {
  std::lock_guard<std::mutex> lock(g_names_mutex);
  const auto it = names().find(path.string());
  return it == names().end() ? path.string() : it->second;
}

void sweep_stale_temps(const fs::path& resolved) {
  const fs::path dir = resolved.parent_path().empty() ? fs::path(".") : resolved.parent_path();
  const std::string base = resolved.filename().string();
  DIR* d = ::opendir(dir.c_str());
  if (!d) return;  // nothing to sweep where we cannot list; creating the temporary reports the real error
  const pid_t self = ::getpid();
  while (const dirent* e = ::readdir(d)) {
    const pid_t pid = temp_owner(e->d_name, base);
    if (pid == 0 || pid == self) continue;
    if (::kill(pid, 0) == 0 || errno != ESRCH) continue;  // alive (or not ours to ask about): keep
    const fs::path stale = dir / e->d_name;
    struct stat st {};
    if (::lstat(stale.c_str(), &st) == 0 && (S_ISREG(st.st_mode) || S_ISLNK(st.st_mode))) ::unlink(stale.c_str());
  }
  ::closedir(d);
}

int open_for_write(const fs::path& path) {
  return ::open(path.c_str(), O_WRONLY | O_TRUNC | O_NOFOLLOW | O_CLOEXEC);
}

std::FILE* open_file_for_write(const fs::path& path) {
  const int fd = open_for_write(path);
  if (fd < 0) return nullptr;
  std::FILE* f = ::fdopen(fd, "wb");
  if (!f) {
    const int err = errno;
    ::close(fd);
    errno = err;
  }
  return f;
}

}  // namespace spectrasift::io_detail

// AtomicOutput and OutputSet (io.hpp): outputs appear complete or not at all, as a set, under a lock.
// The temporary files themselves (exclusive creation, signal cleanup, sweeping) are io/temp_files.cpp's.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <set>
#include <system_error>

#include "io/temp_files.hpp"
#include "spectrasift/error.hpp"
#include "spectrasift/io.hpp"

namespace spectrasift {

namespace fs = std::filesystem;

AtomicOutput::AtomicOutput(fs::path target) : target_(std::move(target)) {
  if (io_detail::is_registered_temp(target_)) {
    // A writer handed another output's temporary (write_png(set.add("a.png"), ...)): that file is ours
    // already, created exclusively; write it in place and let its owner rename it.
    nested_ = true;
    resolved_ = temp_ = target_;
    return;
  }
  resolved_ = io_detail::resolve_output_target(target_);
  io_detail::sweep_stale_temps(resolved_);
  temp_ = io_detail::create_temp_beside(resolved_, target_.string());
}

AtomicOutput::~AtomicOutput() {
  if (!committed_ && !nested_) {
    ::unlink(temp_.c_str());
    io_detail::unregister_temp(temp_);
  }
}

void AtomicOutput::commit() {
  if (nested_ || committed_) {
    committed_ = true;
    return;
  }
  if (::rename(temp_.c_str(), resolved_.c_str()) != 0) {
    const int err = errno;  // before the cleanup, which may change errno
    ::unlink(temp_.c_str());
    io_detail::unregister_temp(temp_);
    committed_ = true;  // nothing left to remove
    io_detail::throw_io(target_.string(), "cannot write", err);
  }
  io_detail::unregister_temp(temp_);
  committed_ = true;
}

OutputSet::OutputSet() = default;
OutputSet::~OutputSet() = default;  // each AtomicOutput not committed removes its temporary

fs::path OutputSet::add(const fs::path& target) {
  // Two outputs with one name (say --png OUT.img next to -o OUT.hdr) would overwrite each other.
  const auto key = [](const fs::path& p) {
    std::error_code e;
    return fs::absolute(p, e).lexically_normal();
  };
  for (const auto& o : outputs_)
    if (key(o->target()) == key(target) || key(o->resolved_target()) == key(io_detail::resolve_output_target(target)))
      throw Error(ErrorCode::kInvalidArgument, target.string() + ": given for two outputs of one command");
  outputs_.push_back(std::make_unique<AtomicOutput>(target));
  return outputs_.back()->temp_path();
}

namespace {

/// flock(LOCK_EX) on each folder, taken in sorted order (two sets sharing folders cannot deadlock) and
/// released on destruction. A folder that cannot be opened for reading is not locked (best effort).
class FolderLocks {
 public:
  explicit FolderLocks(const std::set<std::string>& folders) {
    for (const auto& f : folders) {
      const int fd = ::open(f.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (fd < 0) continue;
      while (::flock(fd, LOCK_EX) != 0 && errno == EINTR) {
      }
      fds_.push_back(fd);
    }
  }
  ~FolderLocks() {
    for (int fd : fds_) ::close(fd);  // closing releases the lock
  }
  FolderLocks(const FolderLocks&) = delete;
  FolderLocks& operator=(const FolderLocks&) = delete;

 private:
  std::vector<int> fds_;
};

/// A hard link to the regular file at `path`, beside it, or an empty path when there is no such file.
fs::path keep_old(const fs::path& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return {};
  for (int attempt = 0; attempt < 100; ++attempt) {
    const fs::path backup = io_detail::next_temp_name(path);
    if (::link(path.c_str(), backup.c_str()) == 0) return backup;
    if (errno != EEXIST) break;
  }
  return {};  // cannot keep it (e.g. no hard links on this file system): a failure cannot restore this one
}

}  // namespace

void OutputSet::commit() {
  std::set<std::string> folders;
  for (const auto& o : outputs_) {
    const fs::path dir = o->resolved_target().parent_path();
    folders.insert(dir.empty() ? std::string(".") : dir.string());
  }
  FolderLocks locks(folders);
  std::vector<fs::path> old(outputs_.size());
  std::size_t done = 0;
  try {
    for (; done < outputs_.size(); ++done) {
      old[done] = keep_old(outputs_[done]->resolved_target());
      outputs_[done]->commit();
    }
  } catch (...) {
    // Back to the old set: output `done` failed (its temporary is gone); undo 0..done-1 in reverse.
    if (!old[done].empty()) ::unlink(old[done].c_str());
    for (std::size_t i = done; i-- > 0;) {
      const fs::path& target = outputs_[i]->resolved_target();
      if (old[i].empty()) ::unlink(target.c_str());
      else ::rename(old[i].c_str(), target.c_str());
    }
    throw;  // the outputs not renamed yet remove their temporaries when the set is destroyed
  }
  for (const auto& b : old)
    if (!b.empty()) ::unlink(b.c_str());
}

std::vector<fs::path> OutputSet::targets() const {
  std::vector<fs::path> t;
  for (const auto& o : outputs_) t.push_back(o->target());
  return t;
}

namespace io_detail {

void write_file_atomically(const fs::path& path, const void* data, std::size_t size) {
  AtomicOutput out(path);
  const std::string name = display_name(path);
  const int fd = open_for_write(out.temp_path());
  if (fd < 0) throw_io(name, "cannot create", errno);
  const auto* p = static_cast<const char*>(data);
  std::size_t left = size;
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : EIO;
      ::close(fd);
      throw_io(name, "write error", err);
    }
    p += n;
    left -= std::size_t(n);
  }
  if (::close(fd) != 0) throw_io(name, "write error", errno);
  out.commit();
}

}  // namespace io_detail

}  // namespace spectrasift

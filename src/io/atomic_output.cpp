#include <atomic>
#include <system_error>
#include <unistd.h>

#include "spectrasift/error.hpp"
#include "spectrasift/io.hpp"

namespace spectrasift {

AtomicOutput::AtomicOutput(std::filesystem::path target) : target_(std::move(target)) {
  static std::atomic<unsigned> counter{0};
  temp_ = target_;
  temp_ += ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
}

AtomicOutput::~AtomicOutput() {
  if (!committed_) {
    std::error_code ec;
    std::filesystem::remove(temp_, ec);
  }
}

void AtomicOutput::commit() {
  std::error_code ec;
  std::filesystem::rename(temp_, target_, ec);
  if (ec) {
    std::filesystem::remove(temp_, ec);
    throw Error(ErrorCode::kIo, target_.string() + ": cannot write (" + ec.message() + ")");
  }
  committed_ = true;
}

OutputSet::OutputSet() = default;
OutputSet::~OutputSet() = default;  // each AtomicOutput not committed removes its temporary

std::filesystem::path OutputSet::add(const std::filesystem::path& target) {
  std::error_code ec;
  // Two outputs with one name (say --png OUT.img next to -o OUT.hdr) would overwrite each other.
  const auto key = [](const std::filesystem::path& p) {
    std::error_code e;
    return std::filesystem::absolute(p, e).lexically_normal();
  };
  for (const auto& o : outputs_)
    if (key(o->target()) == key(target))
      throw Error(ErrorCode::kInvalidArgument, target.string() + ": given for two outputs of one command");
  if (std::filesystem::is_directory(target, ec))
    throw Error(ErrorCode::kIo, target.string() + ": is a directory (an output needs a file name)");
  outputs_.push_back(std::make_unique<AtomicOutput>(target));
  return outputs_.back()->temp_path();
}

void OutputSet::commit() {
  std::size_t done = 0;
  try {
    for (; done < outputs_.size(); ++done) outputs_[done]->commit();
  } catch (...) {
    std::error_code ec;
    for (std::size_t i = 0; i < done; ++i) std::filesystem::remove(outputs_[i]->target(), ec);
    throw;  // the outputs not renamed yet remove their temporaries when the set is destroyed
  }
}

std::vector<std::filesystem::path> OutputSet::targets() const {
  std::vector<std::filesystem::path> t;
  for (const auto& o : outputs_) t.push_back(o->target());
  return t;
}

}  // namespace spectrasift

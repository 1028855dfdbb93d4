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

}  // namespace spectrasift

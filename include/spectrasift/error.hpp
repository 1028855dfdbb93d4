// spectrasift/error.hpp — the one exception type of the library.
#pragma once

#include <stdexcept>
#include <string>

namespace spectrasift {

/// What went wrong, coarsely; the message says the rest.
enum class ErrorCode {
  kInvalidArgument,   ///< an option or argument is out of its documented range
  kIo,                ///< a file could not be opened, read or written
  kBadFormat,         ///< a file was read but its content is malformed or truncated
  kUnsupported,       ///< a valid input that this build cannot handle (type, format, backend)
  kBackendUnavailable,///< the requested backend or device is not present
  kBackend,           ///< a CUDA or OpenCL call failed (native_status holds its code)
  kOutOfMemory,       ///< an allocation failed or a configured limit was exceeded
  kNoModel,           ///< RANSAC found no model with enough inliers
  kInternal,          ///< a bug: an invariant of the library did not hold
};

const char* to_string(ErrorCode code) noexcept;

/// The exception thrown by every function of the library. It carries the code, the backend that
/// raised it ("cpu", "cuda", "opencl" or "" when none) and the backend's native status (0 when none).
class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message, std::string backend = {}, long native_status = 0)
      : std::runtime_error(message), code_(code), backend_(std::move(backend)), native_status_(native_status) {}

  ErrorCode code() const noexcept { return code_; }
  const std::string& backend() const noexcept { return backend_; }
  long native_status() const noexcept { return native_status_; }

 private:
  ErrorCode code_;
  std::string backend_;
  long native_status_;
};

}  // namespace spectrasift

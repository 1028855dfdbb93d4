#include "spectrasift/error.hpp"

namespace spectrasift {

const char* to_string(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::kInvalidArgument: return "invalid argument";
    case ErrorCode::kIo: return "i/o error";
    case ErrorCode::kBadFormat: return "bad format";
    case ErrorCode::kUnsupported: return "unsupported";
    case ErrorCode::kBackendUnavailable: return "backend unavailable";
    case ErrorCode::kBackend: return "backend error";
    case ErrorCode::kOutOfMemory: return "out of memory";
    case ErrorCode::kNoModel: return "no model";
    case ErrorCode::kInternal: return "internal error";
  }
  return "unknown error";
}

}  // namespace spectrasift

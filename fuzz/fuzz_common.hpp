// Shared helpers of the libFuzzer targets: the library reads files, so each input is written to a file
// in a private directory on tmpfs (/dev/shm when present) and read back through the public API. No API
// change was needed for fuzzing; the cost is one small write per input.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

namespace spectrasift::fuzz {

/// A directory private to this process, removed at exit.
inline const std::filesystem::path& scratch_dir() {
  static const std::filesystem::path dir = [] {
    std::error_code ec;
    std::filesystem::path base = std::filesystem::is_directory("/dev/shm", ec) ? std::filesystem::path("/dev/shm")
                                                                               : std::filesystem::temp_directory_path();
    std::filesystem::path d = base / ("spectrasift-fuzz-" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    std::atexit([] {
      std::error_code e;
      std::filesystem::remove_all(scratch_dir(), e);
    });
    return d;
  }();
  return dir;
}

/// Writes bytes to scratch_dir()/name and returns the path.
inline std::filesystem::path write_file(const std::string& name, const void* data, std::size_t size) {
  const std::filesystem::path p = scratch_dir() / name;
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(static_cast<const char*>(data), std::streamsize(size));
  return p;
}

/// Splits an input at the first separator line "\n%%DATA%%\n": what precedes is the text part (an
/// ENVI header), what follows the binary part (the data file). Without a separator the data part is empty.
inline std::pair<std::string_view, std::string_view> split_input(const std::uint8_t* data, std::size_t size) {
  constexpr std::string_view kSep = "\n%%DATA%%\n";
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  const auto at = all.find(kSep);
  if (at == std::string_view::npos) return {all, {}};
  return {all.substr(0, at), all.substr(at + kSep.size())};
}

}  // namespace spectrasift::fuzz

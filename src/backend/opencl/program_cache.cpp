// The on-disk cache of compiled OpenCL programs (see program_cache.hpp).
#include "backend/opencl/program_cache.hpp"

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>

#include <unistd.h>

namespace spectrasift::opencl {

namespace {

constexpr char kMagic[8] = {'S', 'S', 'C', 'L', 'B', 'I', 'N', '1'};

/// 64-bit FNV-1a over bytes, from a given basis (two bases give the two halves of the key).
std::uint64_t fnv1a(const void* data, std::size_t n, std::uint64_t h) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

std::string hex64(std::uint64_t v) {
  char b[17];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(v));
  return b;
}

/// The file's header: magic, the key's 32 characters, the payload size and its checksum.
struct Header {
  char magic[8];
  char key[32];
  std::uint64_t size;
  std::uint64_t checksum;
};

}  // namespace

std::string program_cache_dir() {
  if (const char* d = std::getenv("SPECTRASIFT_CACHE_DIR"); d && *d) {
    const std::string s = d;
    return s == "off" || s == "OFF" || s == "0" ? std::string() : s;
  }
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/spectrasift";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/spectrasift";
  return {};
}

std::string program_cache_key(const std::vector<std::string>& identity, const std::string& options,
                              const std::string& source) {
  // Each part is framed by its length, so that no two different tuples give the same byte stream.
  std::string id;
  for (const std::string& part : identity) id += std::to_string(part.size()) + ':' + part + '\n';
  id += std::to_string(options.size()) + ':' + options + '\n' + std::to_string(source.size()) + ':';
  std::uint64_t a = fnv1a(id.data(), id.size(), 0xcbf29ce484222325ull);
  std::uint64_t b = fnv1a(id.data(), id.size(), 0x84222325cbf29ce4ull);
  a = fnv1a(source.data(), source.size(), a);
  b = fnv1a(source.data(), source.size(), b);
  return hex64(a) + hex64(b);
}

std::string program_cache_file(const std::string& dir, const std::string& key) { return dir + "/" + key + ".clbin"; }

std::vector<unsigned char> load_program_binary(const std::string& dir, const std::string& key) {
  std::ifstream in(program_cache_file(dir, key), std::ios::binary);
  if (!in) return {};
  Header h{};
  if (!in.read(reinterpret_cast<char*>(&h), sizeof h)) return {};
  if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0 || key.size() != sizeof h.key ||
      std::memcmp(h.key, key.data(), sizeof h.key) != 0 || h.size == 0 || h.size > (std::uint64_t(1) << 31))
    return {};
  std::vector<unsigned char> bin(static_cast<std::size_t>(h.size));
  if (!in.read(reinterpret_cast<char*>(bin.data()), std::streamsize(bin.size()))) return {};
  if (in.peek() != std::ifstream::traits_type::eof()) return {};  // trailing bytes: not a file we wrote
  if (fnv1a(bin.data(), bin.size(), 0xcbf29ce484222325ull) != h.checksum) return {};
  return bin;
}

void store_program_binary(const std::string& dir, const std::string& key,
                          const std::vector<unsigned char>& binary) noexcept {
  try {
    if (dir.empty() || binary.empty() || key.size() != 32) return;
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return;
    static std::atomic<unsigned> serial{0};
    const std::string final_path = program_cache_file(dir, key);
    const std::string tmp = final_path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(serial++);
    Header h{};
    std::memcpy(h.magic, kMagic, sizeof kMagic);
    std::memcpy(h.key, key.data(), sizeof h.key);
    h.size = binary.size();
    h.checksum = fnv1a(binary.data(), binary.size(), 0xcbf29ce484222325ull);
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      out.write(reinterpret_cast<const char*>(&h), sizeof h);
      out.write(reinterpret_cast<const char*>(binary.data()), std::streamsize(binary.size()));
      if (!out.flush()) {
        out.close();
        std::filesystem::remove(tmp, ec);
        return;
      }
    }
    std::filesystem::rename(tmp, final_path, ec);
    if (ec) std::filesystem::remove(tmp, ec);
  } catch (...) {
    // The cache is an optimisation: a full disk or a read-only home only costs the next build.
  }
}

}  // namespace spectrasift::opencl

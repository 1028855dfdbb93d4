// The on-disk cache of compiled OpenCL programs (State::program keeps the in-process one). PoCL compiles the
// SIFT program in tens of seconds and NVIDIA's driver in about a second; a cached binary loads in
// milliseconds.
//
// Folder: $SPECTRASIFT_CACHE_DIR, else $XDG_CACHE_HOME/spectrasift, else $HOME/.cache/spectrasift;
// SPECTRASIFT_CACHE_DIR=off (or an empty result) disables it. One file per program, named by a 128-bit key
// over everything that decides the binary: platform name and version, device name, driver version, the
// build options and the full source after the includes were inlined. A file holds a header (magic, its key,
// the payload size and a checksum of the payload) and the binary; a file that is short, corrupt or made for
// another key is ignored and replaced, so a bad cache costs a build, never a crash (the payload is checked
// before the driver sees it). Files are written under a unique temporary name and renamed into place, so
// concurrent processes never read a half-written file.
#pragma once

#include <string>
#include <vector>


namespace spectrasift::opencl {

/// The cache folder from the environment (read at each call), or "" when disabled.
std::string program_cache_dir();

/// The cache key (32 hex digits) of a program: the device's identity (platform name and version, device
/// name, driver version: State::device_identity), the build options and the source.
std::string program_cache_key(const std::vector<std::string>& identity, const std::string& options,
                              const std::string& source);

/// The binary stored under `key` in `dir`, or empty when there is none or the file does not check out.
std::vector<unsigned char> load_program_binary(const std::string& dir, const std::string& key);

/// Stores `binary` under `key` (creating `dir`); failures are ignored (the cache is an optimisation).
void store_program_binary(const std::string& dir, const std::string& key, const std::vector<unsigned char>& binary) noexcept;

/// The path of the file of `key` in `dir` (tests corrupt it).
std::string program_cache_file(const std::string& dir, const std::string& key);

}  // namespace spectrasift::opencl

// Temporary output files (issue 21, items 3-5): created exclusively beside their target, never through a
// link planted at their name; removed when the process gets SIGINT, SIGTERM or SIGHUP; temporaries left by
// processes that died (SIGKILL, a crash) are swept when the same target is written again. Private to io/.
#pragma once

#include <cstddef>
#include <cstdio>
#include <filesystem>
#include <string>

namespace spectrasift::io_detail {

/// The file an output named `target` is renamed onto: a symlink is followed to the file it names (the
/// output is written through it, as cp does; a dangling link creates its target). Throws Error(kIo)
/// naming `target` when that is a directory, a device, a FIFO or a socket (outputs are regular files).
std::filesystem::path resolve_output_target(const std::filesystem::path& target);

/// Creates "<resolved>.tmp-<pid>-<n>" with O_CREAT|O_EXCL|O_NOFOLLOW (a name that exists, a link
/// included, is never opened: the next n is tried) and registers it for removal on a signal. `display` is
/// the user's name for the output, used by messages (display_name) and by the error when the folder is
/// not writable. Returns the temporary's path.
std::filesystem::path create_temp_beside(const std::filesystem::path& resolved, const std::string& display);

/// The next unused-looking name "<resolved>.tmp-<pid>-<n>" (nothing is created).
std::filesystem::path next_temp_name(const std::filesystem::path& resolved);

/// Forgets a temporary (after it was renamed onto its target or removed).
void unregister_temp(const std::filesystem::path& temp);

/// True when `path` is a temporary this process created and has not unregistered yet.
bool is_registered_temp(const std::filesystem::path& path);

/// The user's name for `path`: the output's name when `path` is a registered temporary, else `path`.
std::string display_name(const std::filesystem::path& path);

/// Removes "<name>.tmp-<pid>-<n>" files beside `resolved` whose process <pid> no longer runs.
void sweep_stale_temps(const std::filesystem::path& resolved);

/// Opens an existing file to write it from the start, without following a symlink at its name. Returns
/// the descriptor, or -1 with errno set.
int open_for_write(const std::filesystem::path& path);

/// Writes `size` bytes to `path` through an AtomicOutput: complete or not at all. Errors name the user's
/// file (display_name(path)).
void write_file_atomically(const std::filesystem::path& path, const void* data, std::size_t size);

/// open_for_write as a stdio stream (nullptr with errno set on failure).
std::FILE* open_file_for_write(const std::filesystem::path& path);

/// "<display>: <what> (<strerror(err)>)" as an Error(kIo).
[[noreturn]] void throw_io(const std::string& display, const std::string& what, int err);

}  // namespace spectrasift::io_detail

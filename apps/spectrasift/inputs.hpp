// Several inputs in one process (`sift IMAGE...`, `register FIXED MOVING...`): glob patterns expanded,
// and the name of each input's output when there are several.
#pragma once

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace spectrasift::cli {

/// The inputs as given, with every argument that names no file and holds a wildcard (*, ? or [) expanded
/// as a glob pattern (sorted; for a pattern quoted past the shell, or a shell that leaves it as is).
/// Throws Error(kIo) for a pattern that matches nothing.
std::vector<std::string> expand_inputs(const std::vector<std::string>& args);

/// With several inputs, input `input`'s output in the folder `dir`: dir / (stem of input + suffix), e.g.
/// ("feat", "scenes/a.png", ".key") -> "feat/a.key". The folder is created. Throws
/// Error(kInvalidArgument) when two inputs would get the same name.
std::vector<std::filesystem::path> outputs_in_dir(const std::filesystem::path& dir,
                                                  const std::vector<std::string>& inputs, const std::string& suffix);

/// Parses "WxH" (two positive integers) for --size; throws Error(kInvalidArgument) quoting the text.
std::pair<int, int> parse_size(const std::string& text);

}  // namespace spectrasift::cli

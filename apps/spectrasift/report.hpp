// How every subcommand reports: one JSON object per line on stdout with --json (the same key names for
// the same things in every command; README "JSON output"), errors as {"error", "code", "exit_code"}
// with --json, and the exit codes: 0 done, 1 run-time error, 2 usage error, 3 no reliable model.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "spectrasift/context.hpp"
#include "spectrasift/error.hpp"

namespace spectrasift::cli {

constexpr int kExitRuntime = 1;
constexpr int kExitUsage = 2;
constexpr int kExitNoModel = 3;

/// The exit code of an error: kInvalidArgument (a bad option or argument) is a usage error (2),
/// kNoModel 3, every other code 1.
int exit_code_for(ErrorCode code) noexcept;
/// "invalid_argument", "io", "bad_format", ... (the ErrorCode's name in snake case).
const char* error_code_name(ErrorCode code) noexcept;

/// {"command", "backend", "device"}: the keys every command's JSON starts with.
nlohmann::json context_json(const std::string& command, const Context& ctx);
/// {"command", "error", "code", "exit_code"}: what --json prints on stdout when a command fails.
nlohmann::json error_json(const std::string& command, const std::string& message, const std::string& code,
                          int exit_code);
/// Prints `j` on one line of stdout (JSON Lines: a command with several inputs prints one line each).
void print_json(const nlohmann::json& j);

class Progress;
/// Runs job(i) for every input of a command with several: an Error of one input is reported (stderr, and
/// with `json` an error object with {key: input} on stdout) and the others go on. Returns the worst exit code.
int for_each_input(const std::vector<std::string>& inputs, const std::string& command, const std::string& key,
                   bool json, Progress& bar, const std::function<int(std::size_t)>& job);
/// for_each_input's report of one input's error (the bar cleared, stderr, and with `json` the error object with
/// {key: input}); returns its exit code.
int report_input_error(const std::string& command, const std::string& key, const std::string& input, bool json,
                       Progress& bar, const Error& e);

}  // namespace spectrasift::cli

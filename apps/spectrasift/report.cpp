#include "report.hpp"

#include <algorithm>
#include <iostream>

#include "cli.hpp"

namespace spectrasift::cli {

int exit_code_for(ErrorCode code) noexcept {
  if (code == ErrorCode::kInvalidArgument) return kExitUsage;
  if (code == ErrorCode::kNoModel) return kExitNoModel;
  return kExitRuntime;
}

const char* error_code_name(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::kInvalidArgument: return "invalid_argument";
    case ErrorCode::kIo: return "io";
    case ErrorCode::kBadFormat: return "bad_format";
    case ErrorCode::kUnsupported: return "unsupported";
    case ErrorCode::kBackendUnavailable: return "backend_unavailable";
    case ErrorCode::kBackend: return "backend";
    case ErrorCode::kOutOfMemory: return "out_of_memory";
    case ErrorCode::kNoModel: return "no_model";
    case ErrorCode::kInternal: return "internal";
  }
  return "unknown";
}

nlohmann::json context_json(const std::string& command, const Context& ctx) {
  return {{"command", command}, {"backend", to_string(ctx.backend())}, {"device", ctx.describe()}};
}

nlohmann::json error_json(const std::string& command, const std::string& message, const std::string& code,
                          int exit_code) {
  return {{"command", command}, {"error", message}, {"code", code}, {"exit_code", exit_code}};
}

void print_json(const nlohmann::json& j) { std::cout << j.dump() << std::endl; }

int for_each_input(const std::vector<std::string>& inputs, const std::string& command, const std::string& key,
                   bool json, Progress& bar, const std::function<int(std::size_t)>& job) {
  int worst = 0;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    try {
      worst = std::max(worst, job(i));
    } catch (const Error& e) {
      worst = std::max(worst, report_input_error(command, key, inputs[i], json, bar, e));
    }
  }
  return worst;
}

int report_input_error(const std::string& command, const std::string& key, const std::string& input, bool json,
                       Progress& bar, const Error& e) {
  bar.clear();
  const int code = exit_code_for(e.code());
  std::cerr << "spectrasift: error: " << e.what() << '\n';
  if (json) {
    nlohmann::json j = error_json(command, e.what(), error_code_name(e.code()), code);
    j[key] = input;
    print_json(j);
  }
  return code;
}

}  // namespace spectrasift::cli

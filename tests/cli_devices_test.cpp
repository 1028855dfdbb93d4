// The `devices` subcommand and the CLI's global behaviour (--help, --version, unknown commands).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <array>
#include <cstdio>
#include <string>

namespace {

struct Run {
  int exit_code;
  std::string out;
};

/// Runs the CLI with arguments through the shell, capturing stdout (stderr merged when asked).
Run run_cli(const std::string& args, bool merge_stderr = false) {
  std::string cmd = std::string("\"") + SPECTRASIFT_CLI + "\" " + args + (merge_stderr ? " 2>&1" : " 2>/dev/null");
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return {-1, {}};
  std::string out;
  std::array<char, 4096> buf{};
  while (std::size_t n = std::fread(buf.data(), 1, buf.size(), p)) out.append(buf.data(), n);
  const int status = ::pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

}  // namespace

TEST(CliDevices, JsonListsTheCpuFirst) {
  const auto r = run_cli("devices --json");
  ASSERT_EQ(r.exit_code, 0);
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j["devices"].is_array());
  ASSERT_GE(j["devices"].size(), 1u);
  EXPECT_EQ(j["devices"][0]["backend"], "cpu");
  EXPECT_GE(j["devices"][0]["compute_units"].get<int>(), 1);
  EXPECT_EQ(j["backends"][0], "cpu");
}

TEST(CliDevices, TableHasAHeader) {
  const auto r = run_cli("devices");
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("backend"), std::string::npos);
  EXPECT_NE(r.out.find("cpu"), std::string::npos);
}

TEST(Cli, VersionAndHelp) {
  auto r = run_cli("--version");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("spectrasift"), std::string::npos);
  r = run_cli("--help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("devices"), std::string::npos);
  for (const char* sub : {"devices", "sift", "match", "register", "spectral", "demo"}) {
    r = run_cli(std::string(sub) + " --help");
    EXPECT_EQ(r.exit_code, 0) << sub;
    // The usage line of a subcommand's own help names it (the top-level help would not).
    const auto usage = r.out.substr(0, r.out.find('\n', r.out.find("Usage")));
    EXPECT_NE(usage.find(std::string(" ") + sub), std::string::npos) << sub << ": " << usage;
  }
}

TEST(Cli, UnknownSubcommandOrBackendFails) {
  auto r = run_cli("frobnicate", true);
  EXPECT_NE(r.exit_code, 0);
  r = run_cli("devices --backend", true);
  EXPECT_NE(r.exit_code, 0);
}

// The `devices` subcommand and the CLI's global behaviour (--help, --version, unknown commands).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <array>
#include <cstdio>
#include <string>

#include "harness_util.hpp"

namespace {

struct Run {
  int exit_code;
  std::string out;
};

/// Runs the CLI with arguments through the shell, capturing stdout (stderr merged when asked); `env` is put
/// in front of the command (e.g. "env NAME=VALUE ").
Run run_cli(const std::string& args, bool merge_stderr = false, const std::string& env = "") {
  std::string cmd = env + "\"" + SPECTRASIFT_CLI + "\" " + args + (merge_stderr ? " 2>&1" : " 2>/dev/null");
  int status = -1;
  std::string out = spectrasift::test::run_capture(cmd, status);
  return {status, std::move(out)};
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

// --max-pixels (every subcommand that reads images or cubes) and SPECTRASIFT_MAX_PIXELS: an input over the
// limit fails with exit code 1 and a message that names the limit and how to raise it; 0 lifts the limit;
// the flag wins over the variable; malformed values are clear errors.
TEST(Cli, MaxPixelsLimitsEveryInputAndSaysHowToRaiseIt) {
  const std::string box = std::string("\"") + SPECTRASIFT_TEST_DATA + "/box.png\"";  // 324 x 223 = 72252 pixels
  auto r = run_cli("sift " + box + " --max-pixels 100", true);
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("spectrasift: error: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("box.png: image of 324 x 223 = 72252 pixels exceeds the limit of 100 pixels (raise it with "
                       "--max-pixels N or SPECTRASIFT_MAX_PIXELS"),
            std::string::npos)
      << r.out;
  r = run_cli("sift " + box + " --max-pixels 72251", true);
  EXPECT_EQ(r.exit_code, 1) << r.out;
  for (const char* ok : {"0", "72252", "1000000000000"}) {
    r = run_cli("sift " + box + " --max-pixels " + ok, true);
    EXPECT_EQ(r.exit_code, 0) << ok << ": " << r.out;
    EXPECT_NE(r.out.find("keypoints"), std::string::npos) << r.out;
  }
  // The environment variable, and the flag over it.
  r = run_cli("sift " + box, true);
  EXPECT_EQ(r.exit_code, 0) << r.out;  // the default limit (2^30)
  const std::string env100 = "env SPECTRASIFT_MAX_PIXELS=100 ";
  r = run_cli("sift " + box, true, env100);
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("exceeds the limit of 100 pixels"), std::string::npos) << r.out;
  r = run_cli("sift " + box + " --max-pixels 0", true, env100);
  EXPECT_EQ(r.exit_code, 0) << r.out;
  r = run_cli("sift " + box, true, "env SPECTRASIFT_MAX_PIXELS=garbage ");
  EXPECT_EQ(r.exit_code, 2) << r.out;  // a bad setting is a usage error
  EXPECT_NE(r.out.find("spectrasift: error: SPECTRASIFT_MAX_PIXELS='garbage' is not a pixel count"), std::string::npos)
      << r.out;
  // Malformed flags are usage errors (exit 2).
  for (const char* bad : {"-5", "lots", "1.5"}) {
    r = run_cli("sift " + box + " --max-pixels " + bad, true);
    EXPECT_EQ(r.exit_code, 2) << bad << ": " << r.out;
    EXPECT_NE(r.out.find("--max-pixels"), std::string::npos) << r.out;
  }
  // The other subcommands that read images have the flag too.
  r = run_cli("match " + box + " " + box + " --max-pixels 100", true);
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("exceeds the limit of 100 pixels (raise it with --max-pixels"), std::string::npos) << r.out;
  r = run_cli("register " + box + " " + box + " --max-pixels 100", true);
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("exceeds the limit of 100 pixels (raise it with --max-pixels"), std::string::npos) << r.out;
}

// Running the built CLI from a test: a shell command with stdout and stderr captured (cli_*_test.cpp).
#pragma once

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace spectrasift::test {

struct CliRun {
  int status = -1;  ///< the exit code (128 when killed by a signal)
  std::string out, err;
};

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// `s` in single quotes for the shell.
inline std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

/// Runs `program args` through the shell, stdout and stderr captured in two files of `scratch`.
inline CliRun run_captured(const std::string& program, const std::string& args, const std::filesystem::path& scratch) {
  const std::filesystem::path out = scratch / ".stdout", err = scratch / ".stderr";
  const std::string cmd = program + " " + args + " >" + quote(out.string()) + " 2>" + quote(err.string());
  CliRun r;
  const int raw = std::system(cmd.c_str());
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128;
  r.out = slurp(out);
  r.err = slurp(err);
  std::filesystem::remove(out);
  std::filesystem::remove(err);
  return r;
}

}  // namespace spectrasift::test

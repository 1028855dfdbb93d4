// Fuzz target: command-line parsing of every subcommand (numbers, lists, enumerations, flags), with the
// parser main() uses (cli::build_app): the app's files are linked in, main.cpp compiled with its main()
// renamed (see CMakeLists.txt). The input is split at
// NUL bytes into argv words. Only parsing runs (the chosen action is never called): a malformed argument
// must end in CLI::Error / spectrasift::Error, as main() expects, never in another exception or a crash.
// spectral --ref-pixel "X,Y" is checked at parse time (cli::parse_pixel_xy); every word is also fed to
// that parser directly, so its accept/reject decision is exercised on arbitrary text.
#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "cli.hpp"
#include "spectrasift/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace spectrasift;
  if (size > 4096) return 0;
  std::vector<std::string> args;  // CLI11 takes them in reverse order
  std::string word;
  for (std::size_t i = 0; i < size; ++i) {
    if (data[i] == 0) {
      args.push_back(word);
      word.clear();
    } else {
      word += char(data[i]);
    }
  }
  args.push_back(word);
  std::vector<std::string> reversed(args.rbegin(), args.rend());

  CLI::App app{"spectrasift"};
  cli::GlobalOptions global;
  cli::Action action;
  cli::build_app(app, global, action);  // the parser of main.cpp
  for (const auto& w : args) {
    try {
      const auto xy = cli::parse_pixel_xy(w);
      (void)xy;
    } catch (const Error&) {
    }
  }
  try {
    app.parse(reversed);
  } catch (const CLI::Error&) {
  } catch (const Error&) {
  }
  return 0;
}

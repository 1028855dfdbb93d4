// Shared pieces of the command-line tool: global options, the command registry and small helpers.
#pragma once

#include <CLI/CLI.hpp>

#include <filesystem>
#include <functional>
#include <string>
#include <utility>

#include "spectrasift/context.hpp"
#include "spectrasift/io.hpp"

namespace spectrasift::cli {

/// Options every subcommand takes (--backend, --device, --threads, --max-pixels, -v, --json).
struct GlobalOptions {
  std::string backend;  ///< empty: SPECTRASIFT_BACKEND or auto
  int device = -1;      ///< -1: SPECTRASIFT_DEVICE or the first
  int threads = 0;
  long long max_pixels = -1;  ///< -1: SPECTRASIFT_MAX_PIXELS or ContextOptions' default (2^30); 0 = no limit
  bool verbose = false;
  bool json = false;
  int png_compression = 1;  ///< PngOptions::level of every PNG written

  /// Adds --png-compression (to commands that write pictures).
  void add_png_option(CLI::App& sub);
  PngOptions png_options() const { return PngOptions{png_compression}; }

  /// Adds --backend, --device, --threads, --max-pixels and -v to a subcommand.
  void add_backend_options(CLI::App& sub);
  /// Adds --json.
  void add_json_option(CLI::App& sub, const std::string& what = "print the result as one JSON object on stdout");
  /// ContextOptions from the environment overridden by the flags.
  ContextOptions context_options() const;
};

/// What a subcommand does once its arguments are parsed; returns the exit code.
using Action = std::function<int()>;

// One function per subcommand file: registers the subcommand and sets `action` when it is chosen.
void add_devices_command(CLI::App& app, GlobalOptions& g, Action& action);
void add_sift_command(CLI::App& app, GlobalOptions& g, Action& action);
void add_match_command(CLI::App& app, GlobalOptions& g, Action& action);
void add_register_command(CLI::App& app, GlobalOptions& g, Action& action);
void add_spectral_command(CLI::App& app, GlobalOptions& g, Action& action);
void add_demo_command(CLI::App& app, GlobalOptions& g, Action& action);
/// The whole command line: --version, one required subcommand, every subcommand above (main.cpp; the
/// cli_args fuzzer builds the same parser with it).
void build_app(CLI::App& app, GlobalOptions& g, Action& action);

/// Parses a pixel position "X,Y" (two decimal integers in int range, nothing else; spaces around the numbers
/// are allowed). Throws Error(kInvalidArgument) quoting the text otherwise. Used by spectral --ref-pixel.
std::pair<int, int> parse_pixel_xy(const std::string& text);

/// Checks that an input file exists and is a regular file; throws Error(kIo) naming it otherwise.
void require_input_file(const std::filesystem::path& path);

/// A progress bar on stderr, shown only when stderr is a terminal (and not in --json mode).
class Progress {
 public:
  Progress(std::string label, bool enabled);
  ~Progress();
  void update(double fraction);  ///< 0..1
  void done();

 private:
  std::string label_;
  bool enabled_;
  int last_ = -1;
};

}  // namespace spectrasift::cli

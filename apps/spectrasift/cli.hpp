// Shared pieces of the command-line tool: global options, the command registry and small helpers.
#pragma once

#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdint>
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
  std::string max_memory;     ///< --max-memory: empty = the default budget (half of the physical memory)
  bool verbose = false;
  bool quiet = false;  ///< --quiet: no progress bar
  bool json = false;
  int png_compression = 1;  ///< PngOptions::level of every PNG written

  /// Adds --png-compression (to commands that write pictures).
  void add_png_option(CLI::App& sub);
  PngOptions png_options() const { return PngOptions{png_compression}; }

  /// Adds --backend, --device, --threads, --max-pixels, -v and -q to a subcommand.
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

// Validators for numeric options (issue 21, item 6): they read the text before CLI11 converts it, so that
// a value out of range is a usage error with the range in plain numbers (never a 300-digit double bound),
// and -1 or 1e23 never wraps into an unsigned option.

/// A decimal integer (digits, a '-' only when lo < 0) in [lo, hi].
CLI::Validator integer_in(long long lo, long long hi);
/// A decimal integer in [0, 2^64 - 1] (digits only: no sign, exponent or fraction).
CLI::Validator unsigned_64();
/// A finite number (not nan or inf); positive: > 0 as well.
CLI::Validator finite_number(bool positive = false);
// --max-memory's value: spectrasift::parse_memory_size (options.hpp; SPECTRASIFT_MAX_MEMORY takes the same).

/// The largest --threads: 4 x the hardware threads (beyond that libgomp fails or crashes).
int max_threads();

/// Parses a pixel position "X,Y" (two decimal integers in int range, nothing else; spaces around the numbers
/// are allowed). Throws Error(kInvalidArgument) quoting the text otherwise. Used by spectral --ref-pixel.
std::pair<int, int> parse_pixel_xy(const std::string& text);

/// Checks that an input file exists and is a regular file; throws Error(kIo) naming it otherwise.
void require_input_file(const std::filesystem::path& path);

/// Milliseconds since `t0` (the stage times that commands report).
inline double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

/// A progress bar on stderr for long jobs: drawn only when stderr is a terminal, `enabled` (not --quiet),
/// and once the job has run for a second (SPECTRASIFT_PROGRESS_DELAY seconds: 0 draws at once); a stage
/// label ("sift fixed", "ransac") may change as it goes. The library reports, the CLI draws: within() is
/// the callback to give Context::set_progress for a part of the job.
class Progress {
 public:
  Progress(std::string label, bool enabled);
  ~Progress();
  void update(double fraction);                          ///< 0..1 of the whole job
  void stage(const std::string& label, double fraction);  ///< a new stage, starting at `fraction`
  /// A callback that maps an operation's 0..1 onto [lo, hi] of the whole job (the bar must outlive it).
  ProgressFn within(double lo, double hi);
  void clear();  ///< erases the bar (before a message or a result is printed); the next update redraws it
  void done();   ///< ends the bar's line; nothing more is drawn

 private:
  std::string label_;
  bool enabled_;
  bool drawn_ = false;
  int last_ = -1;
  std::chrono::steady_clock::time_point start_;
  std::chrono::duration<double> delay_{1.0};
};

}  // namespace spectrasift::cli

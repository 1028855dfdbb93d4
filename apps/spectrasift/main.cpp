// spectrasift — command-line entry point. Each subcommand lives in its own file (DESIGN.md layout).
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <optional>
#include <thread>
#include <cstdio>
#include <cstring>
#include <iostream>

#include "cli.hpp"
#include "report.hpp"
#include "spectrasift/error.hpp"

namespace spectrasift::cli {

void GlobalOptions::add_backend_options(CLI::App& sub) {
  sub.add_option("--backend", backend, "auto|cpu|cuda|opencl (default: $SPECTRASIFT_BACKEND or auto)");
  sub.add_option("--device", device, "device index within the backend (default: $SPECTRASIFT_DEVICE or 0)")
      ->check(integer_in(0, std::numeric_limits<int>::max()));
  sub.add_option("--threads", threads, "CPU threads, 0 = all (default 0; at most 4 x the hardware threads)")
      ->check(integer_in(0, max_threads()));
  sub.add_option("--max-pixels", max_pixels,
                 "largest image or cube read, in pixels (width x height), checked before allocating; 0 = no limit "
                 "(default: $SPECTRASIFT_MAX_PIXELS or 1073741824 = 2^30)")
      ->check(integer_in(0, std::numeric_limits<long long>::max()));
  sub.add_option("--max-memory", max_memory,
                 "working-memory budget of one job (SIFT pyramid, spectral output), checked before allocating: "
                 "BYTES with an optional K/M/G/T suffix, or none (default: half of the physical memory)")
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            try {
              parse_memory_size(text);
            } catch (const Error& e) {
              return e.what();
            }
            return {};
          },
          "SIZE"));
  sub.add_flag("-v,--verbose", verbose, "log the backend picked and the time of each stage to stderr");
  sub.add_flag("-q,--quiet", quiet, "no progress bar on stderr (it is shown only when stderr is a terminal)");
}

void GlobalOptions::add_png_option(CLI::App& sub) {
  sub.add_option("--png-compression", png_compression,
                 "PNG compression 0-9: 1 (default) is fast (zlib 1, Up filter, run-length: about OpenCV's speed), "
                 "2-9 give smaller files more slowly (9: smallest), 0 stores uncompressed")
      ->check(CLI::Range(0, 9));
}

void GlobalOptions::add_json_option(CLI::App& sub, const std::string& what) { sub.add_flag("--json", json, what); }

ContextOptions GlobalOptions::context_options() const {
  ContextOptions o = ContextOptions::from_env();
  if (!backend.empty()) o.backend = parse_backend(backend);
  if (device >= 0) o.device = device;
  o.threads = threads;
  if (max_pixels >= 0) o.max_pixels = std::uint64_t(max_pixels);
  if (!max_memory.empty()) o.max_memory = parse_memory_size(max_memory);
  o.verbose = verbose;
  return o;
}

namespace {

/// The decimal integer `text` holds entirely, or nullopt (also when it is outside long long or uint64).
template <class T>
std::optional<T> whole_integer(const std::string& text) {
  T v{};
  const char* end = text.data() + text.size();
  const auto r = std::from_chars(text.data(), end, v);
  if (r.ec != std::errc() || r.ptr != end || text.empty() || text[0] == '+') return std::nullopt;
  return v;
}

}  // namespace

CLI::Validator integer_in(long long lo, long long hi) {
  const std::string range = std::to_string(lo) + ".." + std::to_string(hi);
  return CLI::Validator(
      [lo, hi, range](std::string& text) -> std::string {
        const auto v = whole_integer<long long>(text);
        if (!v || *v < lo || *v > hi) return "'" + text + "' is not an integer in " + range;
        return {};
      },
      "INT in " + range);
}

CLI::Validator unsigned_64() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        if (!whole_integer<std::uint64_t>(text) || text[0] == '-')
          return "'" + text + "' is not an integer in 0..18446744073709551615";
        return {};
      },
      "UINT64");
}

CLI::Validator finite_number(bool positive) {
  return CLI::Validator(
      [positive](std::string& text) -> std::string {
        double v = 0;
        const char* end = text.data() + text.size();
        const auto r = std::from_chars(text.data(), end, v);
        if (r.ec != std::errc() || r.ptr != end || !std::isfinite(v) || (positive && !(v > 0)))
          return "'" + text + "' is not a " + (positive ? "positive " : "") + "finite number";
        return {};
      },
      positive ? "POSITIVE NUMBER" : "NUMBER");
}

int max_threads() {
  const unsigned hw = std::thread::hardware_concurrency();
  return int(4 * std::max(1u, hw));
}

std::pair<int, int> parse_pixel_xy(const std::string& text) {
  // std::from_chars instead of sscanf: sscanf's %d is undefined for out-of-range numbers and accepts
  // signs, spaces and trailing text in places we do not want.
  const auto fail = [&] {
    return Error(ErrorCode::kInvalidArgument, "--ref-pixel '" + text + "' is not X,Y (two integers, e.g. 12,40)");
  };
  const char* p = text.data();
  const char* const end = p + text.size();
  const auto number = [&](int& v) {
    while (p < end && *p == ' ') ++p;
    const auto [next, ec] = std::from_chars(p, end, v);
    if (ec != std::errc() || next == p) throw fail();
    p = next;
    while (p < end && *p == ' ') ++p;
  };
  int x = 0, y = 0;
  number(x);
  if (p == end || *p != ',') throw fail();
  ++p;
  number(y);
  if (p != end) throw fail();
  return {x, y};
}

void require_input_file(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    throw Error(ErrorCode::kIo, path.string() + ": no such file");
  if (!std::filesystem::is_regular_file(path, ec))
    throw Error(ErrorCode::kIo, path.string() + ": not a regular file");
}

Progress::Progress(std::string label, bool enabled)
    : label_(std::move(label)), enabled_(enabled && ::isatty(STDERR_FILENO)), start_(std::chrono::steady_clock::now()) {
  if (const char* d = std::getenv("SPECTRASIFT_PROGRESS_DELAY"); d && *d) {
    char* end = nullptr;
    const double v = std::strtod(d, &end);
    if (end != d && *end == '\0' && v >= 0 && v < 1e6) delay_ = std::chrono::duration<double>(v);
  }
}
ProgressFn Progress::within(double lo, double hi) {
  return [this, lo, hi](double f) { update(lo + f * (hi - lo)); };
}
Progress::~Progress() { done(); }
void Progress::stage(const std::string& label, double fraction) {
  label_ = label;
  last_ = -1;
  update(fraction);
}
void Progress::update(double fraction) {
  if (!enabled_) return;
  // Only jobs that last: nothing is drawn during the first second.
  if (std::chrono::steady_clock::now() - start_ < delay_) return;
  const int pct = int(std::min(1.0, std::max(0.0, fraction)) * 100.0 + 0.5);
  if (pct == last_) return;
  last_ = pct;
  const int width = 30, filled = pct * width / 100;
  std::fprintf(stderr, "\r%-24.24s [%.*s%*s] %3d%%", label_.c_str(), filled, "##############################",
               width - filled, "", pct);
  std::fflush(stderr);
  drawn_ = true;
}
void Progress::clear() {
  if (!enabled_ || !drawn_) return;
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
  drawn_ = false;
  last_ = -1;
}
void Progress::done() {
  if (enabled_ && drawn_) std::fprintf(stderr, "\n");
  enabled_ = false;
}

void build_app(CLI::App& app, GlobalOptions& g, Action& action) {
  app.set_version_flag("--version", std::string("spectrasift ") + version());
  app.require_subcommand(1);
  add_devices_command(app, g, action);
  add_sift_command(app, g, action);
  add_match_command(app, g, action);
  add_register_command(app, g, action);
  add_spectral_command(app, g, action);
  add_demo_command(app, g, action);
}

}  // namespace spectrasift::cli

int main(int argc, char** argv) {
  using namespace spectrasift;
  CLI::App app{"spectrasift: SIFT feature registration and hyperspectral spectral matching on CUDA, OpenCL and CPUs"};
  cli::GlobalOptions global;
  cli::Action action;
  cli::build_app(app, global, action);
  // Errors are one line on stderr and, with --json, also one JSON object on stdout (README "JSON output").
  bool json = false;
  for (int i = 1; i < argc; ++i) json = json || std::strcmp(argv[i], "--json") == 0;
  std::string command = argc > 1 ? argv[1] : "";
  const auto fail = [&](const std::string& message, const std::string& code, int exit_code) {
    std::cerr << "spectrasift: error: " << message << (code == "usage" ? " (see --help)" : "") << '\n';
    if (json) cli::print_json(cli::error_json(command, message, code, exit_code));
    return exit_code;
  };
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return fail(e.what(), "usage", cli::kExitUsage);
  } catch (const Error& e) {
    return fail(e.what(), cli::error_code_name(e.code()), cli::kExitUsage);
  }
  if (!app.get_subcommands().empty()) command = app.get_subcommands().front()->get_name();
  try {
    return action ? action() : cli::kExitUsage;
  } catch (const Error& e) {
    return fail(e.what(), cli::error_code_name(e.code()), cli::exit_code_for(e.code()));
  } catch (const std::bad_alloc&) {
    return fail("out of memory", "out_of_memory", cli::kExitRuntime);
  } catch (const std::exception& e) {
    return fail(e.what(), "internal", cli::kExitRuntime);
  }
}

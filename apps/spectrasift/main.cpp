// spectrasift — command-line entry point. Each subcommand lives in its own file (DESIGN.md layout).
#include <unistd.h>

#include <charconv>
#include <cstdio>
#include <iostream>

#include "cli.hpp"
#include "spectrasift/error.hpp"

namespace spectrasift::cli {

void GlobalOptions::add_backend_options(CLI::App& sub) {
  sub.add_option("--backend", backend, "auto|cpu|cuda|opencl (default: $SPECTRASIFT_BACKEND or auto)");
  sub.add_option("--device", device, "device index within the backend (default: $SPECTRASIFT_DEVICE or 0)");
  sub.add_option("--threads", threads, "CPU threads, 0 = all (default 0)");
  sub.add_option("--max-pixels", max_pixels,
                 "largest image or cube read, in pixels (width x height), checked before allocating; 0 = no limit "
                 "(default: $SPECTRASIFT_MAX_PIXELS or 1073741824 = 2^30)")
      ->check(CLI::NonNegativeNumber);
  sub.add_flag("-v,--verbose", verbose, "log the backend picked and the time of each stage to stderr");
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
  o.verbose = verbose;
  return o;
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
    : label_(std::move(label)), enabled_(enabled && ::isatty(STDERR_FILENO)) {}
Progress::~Progress() { done(); }
void Progress::update(double fraction) {
  if (!enabled_) return;
  const int pct = int(fraction * 100.0 + 0.5);
  if (pct == last_) return;
  last_ = pct;
  const int width = 30, filled = pct * width / 100;
  std::fprintf(stderr, "\r%s [%.*s%*s] %3d%%", label_.c_str(), filled, "##############################",
               width - filled, "", pct);
  std::fflush(stderr);
}
void Progress::done() {
  if (enabled_ && last_ >= 0) std::fprintf(stderr, "\n");
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
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // Usage errors: one line on stderr, like every other error of the tool.
    std::cerr << "spectrasift: error: " << e.what() << " (see --help)\n";
    return 2;  // usage error (1 = run-time error, 3 = no model found)
  } catch (const Error& e) {
    std::cerr << "spectrasift: error: " << e.what() << '\n';
    return 2;
  }
  try {
    return action ? action() : 2;
  } catch (const Error& e) {
    std::cerr << "spectrasift: error: " << e.what() << '\n';
    return e.code() == ErrorCode::kNoModel ? 3 : 1;
  } catch (const std::bad_alloc&) {
    std::cerr << "spectrasift: error: out of memory\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "spectrasift: error: " << e.what() << '\n';
    return 1;
  }
}

// Placeholder while the subcommand is being written (replaced by its real implementation).
#include "cli.hpp"
namespace spectrasift::cli {
void add_demo_command(CLI::App& app, GlobalOptions& g, Action& action) { (void)app; (void)g; (void)action; }
}  // namespace spectrasift::cli

// `spectrasift devices`: every backend compiled in and every device it finds.
#include <nlohmann/json.hpp>

#include <cstdio>
#include <iostream>

#include "cli.hpp"
#include "report.hpp"

namespace spectrasift::cli {

void add_devices_command(CLI::App& app, GlobalOptions& g, Action& action) {
  auto* sub = app.add_subcommand("devices", "list the backends compiled in and the devices each one finds");
  g.add_json_option(*sub, "print the list as JSON");
  sub->callback([&g, &action] {
    action = [&g] {
      const auto devices = list_devices();
      const auto compiled = compiled_backends();
      if (g.json) {
        nlohmann::json j;
        j["command"] = "devices";
        j["version"] = version();
        for (auto b : compiled) j["backends"].push_back(to_string(b));
        j["devices"] = nlohmann::json::array();
        for (const auto& d : devices) {
          j["devices"].push_back({{"backend", to_string(d.backend)}, {"index", d.index}, {"name", d.name},
                                  {"platform", d.platform}, {"type", d.type}, {"global_memory", d.global_memory},
                                  {"local_memory", d.local_memory}, {"compute_units", d.compute_units},
                                  {"max_work_group_size", d.max_work_group_size}, {"version", d.version}});
        }
        print_json(j);
        return 0;
      }
      std::cout << "spectrasift " << version() << "; backends compiled in:";
      for (auto b : compiled) std::cout << ' ' << to_string(b);
      std::cout << "\n\n";
      std::printf("%-8s %-3s %-5s %-44s %10s %9s %5s %6s  %s\n", "backend", "#", "type", "name", "memory", "local",
                  "CUs", "maxWG", "platform / version");
      for (const auto& d : devices) {
        std::printf("%-8s %-3d %-5s %-44.44s %7.1f GiB %6.0f KiB %5d %6d  %s / %s\n", to_string(d.backend), d.index,
                    d.type.c_str(), d.name.c_str(), double(d.global_memory) / (1024.0 * 1024 * 1024),
                    double(d.local_memory) / 1024.0, d.compute_units, d.max_work_group_size, d.platform.c_str(),
                    d.version.c_str());
      }
      for (auto b : compiled) {
        bool any = false;
        for (const auto& d : devices) any = any || d.backend == b;
        if (!any) std::cout << "(" << to_string(b) << ": compiled in, but no device found)\n";
      }
      return 0;
    };
  });
}

}  // namespace spectrasift::cli

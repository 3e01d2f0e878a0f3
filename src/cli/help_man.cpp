// The hidden `gpuq --help-man`: every command's help in the layout help2man turns into the
// man page gpuq(1) (cmake/packaging.cmake), so that the page lists what the code defines.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <regex>
#include <sstream>

#include "cli.h"

namespace gpuq::cli {

namespace {

/// The top help, then for each command a "Command gpuq NAME:" heading (a subsection for
/// help2man), its description, its usage, and its documented flags (CLI11's own lines).
std::string man_help(CLI::App& app) {
  const std::regex short_and_long(R"(^( +-\w),(--))", std::regex::multiline);  // "-h, --help": help2man marks both up
  std::string out = std::regex_replace(app.help(), short_and_long, "$1, $2");
  for (CLI::App* sub : app.get_subcommands([](CLI::App* s) { return !s->get_group().empty(); })) {
    std::istringstream lines(sub->help());
    std::string line;
    out += fmt::format("\nCommand gpuq {}:\n  {}.\n", sub->get_name(), sub->get_description());
    bool usage_seen = false;
    while (std::getline(lines, line)) {
      if (!usage_seen) {
        if (line.rfind("Usage:", 0) == 0) {
          usage_seen = true;
          // CLI11 names the command alone ("Usage: run [OPTIONS]").
          size_t at = line.find(sub->get_name());
          out += "  Usage: gpuq " + line.substr(at == std::string::npos ? 7 : at) + "\n\n";
        }
        continue;
      }
      if (line.empty() || line.back() == ':') continue;  // "Options:", "Positionals:"
      out += std::regex_replace(line, short_and_long, "$1, $2") + "\n";
    }
  }
  return out;
}

}  // namespace

void add_man_help_flag(CLI::App& app) {
  app.add_flag_callback(
         "--help-man",
         [&app] {
           std::string out = man_help(app);
           std::fwrite(out.data(), 1, out.size(), stdout);
           throw CLI::Success();
         },
         "")
      ->group("");
}

}  // namespace gpuq::cli

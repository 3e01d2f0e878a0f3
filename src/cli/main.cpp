// gpuq: a dependency and priority GPU job queue for one multi-GPU node.
// The CLI layer: each subcommand declares its flags and calls one function of cli.h.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstring>
#include <functional>

#include "cli.h"
#include "gpuq/live/commands.h"
#include "gpuq/core/hint.h"
#include "gpuq/core/suggest.h"

#include <algorithm>
#include <string_view>
#include <vector>

using namespace gpuq;
using namespace gpuq::cli;

namespace {

/// The one candidate that `word` shortens or misspells at its end ("hist" for "history",
/// "--max-retry" for "--max-retries"): the longest common start, at least 3 letters of the
/// word's (past `skip` leading characters) and all but its last 2; none when two tie.
std::optional<std::string> nearest_by_start(std::string_view word, const std::vector<std::string_view>& names,
                                            size_t skip) {
  size_t best = 0;
  std::optional<std::string> found;
  bool tie = false;
  for (std::string_view c : names) {
    size_t k = 0;
    while (k < word.size() && k < c.size() && word[k] == c[k]) ++k;
    if (k > best) {
      best = k, found = std::string(c), tie = false;
    } else if (k == best && found && c != *found) {
      tie = true;
    }
  }
  if (tie || best < skip + 3 || best + 2 < word.size()) return std::nullopt;
  return found;
}

/// "did you mean" for a mistyped subcommand or flag of a command line CLI11 refused.
std::vector<std::string> typo_hints(CLI::App& app, int argc, char** argv) {
  std::vector<std::string> hints;
  std::vector<std::string> commands, flags;
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    commands.push_back(sub->get_name());
    for (const CLI::Option* o : sub->get_options())
      for (const std::string& name : o->get_lnames()) flags.push_back("--" + name);
  }
  std::vector<std::string_view> command_views(commands.begin(), commands.end());
  std::vector<std::string_view> flag_views(flags.begin(), flags.end());
  auto known = [](const std::vector<std::string>& list, std::string_view w) {
    return std::find(list.begin(), list.end(), w) != list.end();
  };
  if (argc > 1 && argv[1][0] != '-' && !known(commands, argv[1])) {
    auto near = nearest_name(argv[1], command_views);
    if (!near) near = nearest_by_start(argv[1], command_views, 0);
    if (near) hints.push_back(fmt::format("there is no command \"{}\"; did you mean \"{}\"?", argv[1], *near));
    else hints.push_back(fmt::format("there is no command \"{}\"", argv[1]));
  }
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a.substr(0, 2) != "--" || a.size() == 2) continue;
    a = a.substr(0, a.find('='));
    if (known(flags, a) || a == "--help" || a == "--version") continue;
    auto near = nearest_name(a, flag_views);
    if (!near) near = nearest_by_start(a, flag_views, 2);
    if (near) hints.push_back(fmt::format("there is no flag {}; did you mean {}?", a, *near));
  }
  return hints;
}

/// Each command's --help ends with an example or two (tests/user_mistakes_run_test.cpp runs
/// every one of them against a plan, so that none can go stale).
const std::vector<std::pair<std::string_view, std::string_view>>& help_examples() {
  static const std::vector<std::pair<std::string_view, std::string_view>> kExamples = {
      {"run", "gpuq run --plan plan.json --gpus 0-3 --max-retries 1"},
      {"status", "gpuq status --plan plan.json\n  gpuq status --plan plan.json --watch 10"},
      {"simulate", "gpuq simulate --plan plan.json --gpus 0-3\n  gpuq simulate --plan plan.json --from-state --svg timeline.svg"},
      {"validate", "gpuq validate --plan plan.json"},
      {"logs", "gpuq logs --plan plan.json -f train\n  gpuq logs --plan plan.json -n 50 train"},
      {"retry", "gpuq retry --plan plan.json train"},
      {"kill", "gpuq kill --plan plan.json train"},
      {"hold", "gpuq hold --plan plan.json report"},
      {"requeue", "gpuq requeue --plan plan.json train"},
      {"preempt", "gpuq preempt --plan plan.json --dry-run train\n  gpuq preempt --plan plan.json train"},
      {"history", "gpuq history --plan plan.json --since 6h\n  gpuq history --plan plan.json --estimates"},
      {"add", "gpuq add --plan plan.json --id eval2 --gpus 1 --deps train -- eval.sh --split test"},
      {"pause", "gpuq pause --plan plan.json"},
      {"resume", "gpuq resume --plan plan.json"},
      {"gpus", "gpuq gpus"},
      {"drain", "gpuq drain 3 --why overheating"},
      {"undrain", "gpuq undrain 3"},
      {"settings", "gpuq settings --plan plan.json --gpus 0-3"},
      {"top", "gpuq top --plan plan.json --print 100x30\n(in a terminal, `gpuq top`; ? there lists the keys)"},
  };
  return kExamples;
}

}  // namespace

int main(int argc, char** argv) {
  if (std::optional<int> wrapper = as_job_wrapper(argc, argv)) return *wrapper;
  CLI::App app{
      "gpuq: a dependency and priority GPU job queue for one multi-GPU node.\n"
      "Runs a plan (a JSON list of jobs) on the node's GPUs: highest priority first, short jobs\n"
      "backfilled while a wide job waits, 2-GPU jobs on NVLink pairs, state kept beside the plan.\n"
      "Exit status: 0 success, 1 the command could not do all its work, 2 bad input."};
  app.require_subcommand(1, 1);
  app.set_help_all_flag("--help-all", "print the help of every command");
  Flags f;
  Action action;
  add_version_command(app, action);
  add_run_command(app, f, action);
  add_status_command(app, f, action);
  add_simulate_command(app, f, action);
  add_validate_command(app, f, action);
  add_logs_command(app, f, action);
  add_control_commands(app, f, action);
  add_history_command(app, f, action);
  add_plan_edit_commands(app, f, action);
  add_gpus_command(app, f, action);
  add_settings_command(app, f, action);
  add_top_command(app, f, action);
  add_completion_commands(app, action);
  add_man_help_flag(app);
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; }))
    for (const auto& [name, text] : help_examples())
      if (sub->get_name() == name) sub->footer("Examples:\n  " + std::string(text));  // CLI11 leaves blank lines before it

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::Success& e) {  // --help-man
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // A typo gets its "did you mean" alone (CLI11's own words for it, "A subcommand is
    // required" for a mistyped one, mislead); anything else CLI11's words, as gpuq's.
    std::vector<std::string> hints = typo_hints(app, argc, argv);
    if (hints.empty()) fmt::print(stderr, "gpuq: {}\n", e.what());
    for (const std::string& hint : hints) fmt::print(stderr, "gpuq: {}\n", hint);
    fmt::print(stderr, "gpuq: `gpuq --help` lists the commands, `gpuq COMMAND --help` their flags\n");
    return kExitBadInput;
  }
  take_flags_and_env(f);
  // Commands that take --plan (not version or completion) find their plan when it was not given.
  bool takes_plan = false;
  for (const CLI::App* sub : app.get_subcommands())
    takes_plan = takes_plan || (sub->get_option_no_throw("--plan") && sub->get_name() != "gpus" &&
                                sub->get_name() != "drain" && sub->get_name() != "undrain");  // optional
  if (f.status_node) takes_plan = false;  // status --node: the node's jobs, of every plan
  if (action && takes_plan && !resolve_plan(f)) return kExitBadInput;
  if (action && takes_plan) set_hint_flags(hint_flags_for(f));
  try {
    int status = action ? action() : 0;
    phase("free");
    return status;
  } catch (const std::exception& e) {
    fmt::print(stderr, "gpuq: {}\n", e.what());
    return kExitFailure;
  }
}


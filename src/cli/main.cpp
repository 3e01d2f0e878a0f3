// gpuq: a dependency and priority GPU job queue for one multi-GPU node.
// The CLI layer: each subcommand declares its flags and calls one function of cli.h.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstring>
#include <functional>

#include "cli.h"
#include "gpuq/live/launcher.h"
#include "gpuq/live/phase.h"

using namespace gpuq;
using namespace gpuq::cli;

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], kJobWrapperArg) == 0) return job_wrapper(argc, argv);
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
  add_completion_commands(app, action);
  add_man_help_flag(app);

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
    app.exit(e);
    return kExitBadInput;
  }
  // Commands that take --plan (not version or completion) find their plan when it was not given.
  bool takes_plan = false;
  for (const CLI::App* sub : app.get_subcommands()) takes_plan = takes_plan || sub->get_option_no_throw("--plan");
  if (action && takes_plan && !resolve_plan(f)) return kExitBadInput;
  try {
    int status = action ? action() : 0;
    phase("free");
    return status;
  } catch (const StoreError& e) {
    fmt::print(stderr, "gpuq: {}\n", e.what());
    return kExitFailure;
  } catch (const std::exception& e) {
    fmt::print(stderr, "gpuq: {}\n", e.what());
    return kExitFailure;
  }
}


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
  app.set_version_flag("--version", "gpuq 0.1.0");
  Flags f;
  std::function<int()> action;

  auto* run = app.add_subcommand("run", "run the plan: start jobs as they become ready, until all are finished");
  add_flags(run, f, {kGpus, kPoll, kBackfill, kRetries, kRetryAfter, kMaxUsed});
  run->add_option("--kill-grace", f.kill_grace,
                  "seconds a killed job may take to exit after SIGTERM before its process group gets SIGKILL")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  add_time_limit_factor(run, f);
  run->add_option("--nvidia-smi", f.nvidia_smi,
                  "the nvidia-smi command to probe GPU memory with (default: $GPUQ_NVIDIA_SMI, else nvidia-smi)");
  run->callback([&] { action = [&] { return cmd_run(f); }; });

  auto* status = app.add_subcommand(
      "status", "show each job's status, why jobs wait, and when each job and the plan are predicted to finish");
  add_flags(status, f, {kGpus, kAll, kBackfill, kRetries, kRetryAfter, kMaxUsed});
  add_time_limit_factor(status, f);
  status->add_flag("--json", f.json, "print one JSON object (schema in README) instead of text");
  status->add_option("--svg", f.svg, "also write a Gantt chart of what ran and what is predicted to FILE");
  status->add_option("--watch", f.watch, "redraw every S seconds until Ctrl-C (for a tmux pane)")
      ->expected(0, 1)
      ->default_str("5");
  status->add_option("--nvidia-smi", f.nvidia_smi, "the nvidia-smi command (default: $GPUQ_NVIDIA_SMI, else nvidia-smi)");
  status->callback([&] { action = [&] { return cmd_status(f); }; });

  auto* sim = app.add_subcommand("simulate", "predict the timeline of the plan from est_hours");
  add_flags(sim, f, {kGpus, kAll, kBackfill});
  add_time_limit_factor(sim, f);
  sim->add_flag("--json", f.json, "print one JSON object (schema in README) instead of the timeline");
  sim->add_option("--svg", f.svg, "also write the timeline as a Gantt chart (SVG) to FILE");
  sim->add_flag("--from-state", f.from_state,
                "predict from the live state: what is done stays done, running jobs finish their estimate");
  sim->callback([&] { action = [&] { return cmd_simulate(f); }; });

  auto* validate = app.add_subcommand(
      "validate", "check the whole plan before a long run: deadlocks, missing scripts and files, missing estimates");
  add_flags(validate, f, {kGpus, kBackfill});
  validate->add_flag("--strict", f.strict, "exit 1 when there are warnings (errors always exit 2)");
  validate->callback([&] { action = [&] { return cmd_validate(f); }; });

  auto* logs = app.add_subcommand("logs", "print the end of a job's log (logs/ID.log), or follow it until the job ends");
  add_flags(logs, f, {});
  logs->add_option("job", f.jobs, "the job id")->required()->expected(1);
  logs->add_option("-n,--lines", f.lines, "how many lines from the end (0: the whole log)")->capture_default_str();
  logs->add_flag("-f,--follow", f.follow, "keep printing what the job writes until it is no longer running");
  logs->callback([&] { action = [&] { return cmd_logs(f); }; });

  auto* retry = app.add_subcommand("retry", "make failed, blocked, held or done jobs pending again (not running ones)");
  auto* kill = app.add_subcommand("kill", "stop running jobs: SIGTERM to the process group, marked failed (exit -15)");
  auto* hold = app.add_subcommand("hold", "keep pending, failed or blocked jobs from starting until `retry`");
  for (auto [sub, name] : {std::pair{retry, "retry"}, std::pair{kill, "kill"}, std::pair{hold, "hold"}}) {
    add_flags(sub, f, {});
    sub->add_option("job", f.jobs, "job ids")->required();
    std::string action_name = name;
    sub->callback([&, action_name] { action = [&, action_name] { return cmd_control(f, action_name); }; });
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kExitBadInput;
  }
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


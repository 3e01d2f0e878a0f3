// `gpuq run`.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <unistd.h>

#include "gpuq/live/commands.h"

#include "cli.h"

namespace gpuq::cli {

int cmd_run(Flags& f) {
  // The text as it was before the load: the version the reload on edit compares with (an
  // edit between the two is then reloaded at the first tick, never missed).
  std::string plan_text = plan_text_now(f.plan);
  auto loaded = load_command(f);
  if (!loaded) return kExitBadInput;
  std::unique_ptr<Backend> backend = chosen_backend(f);
  return run_plan(f, std::move(loaded->plan), loaded->gpus, plan_text, *backend,
                  [](const std::string& line) { fmt::print(stderr, "{}\n", line); });
}

void add_run_settings(CLI::App* sub, Flags& f) {
  setting_flag(f, sub->add_option("--kill-grace", f.kill_grace,
                                  "seconds a killed job may take to exit after SIGTERM before its process group gets "
                                  "SIGKILL")
                      ->capture_default_str()
                      ->check(CLI::NonNegativeNumber.description(""))
                      ->type_name("S"));
  add_time_limit_factor(sub, f);
  add_gpu_memory(sub, f);
  add_quiet_minutes(sub, f);
  add_preempt_flags(sub, f);
  add_host_flags(sub, f);
  setting_flag(f, sub->add_option("--nvidia-smi", f.nvidia_smi,
                                  "the nvidia-smi command to probe GPU memory and utilization with (default: "
                                  "$GPUQ_NVIDIA_SMI, else nvidia-smi)")
                      ->type_name(kCommandType));
  add_gpu_flags(sub, f, "auto");
  setting_flag(f, sub->add_option("--on-event", f.on_event,
                                  "run CMD (bash) for each event of the event log PLAN.events.jsonl, with the event "
                                  "in GPUQ_EVENT, GPUQ_JOB_ID, GPUQ_ATTEMPT, GPUQ_OUTCOME, GPUQ_EXIT, GPUQ_LOG, ... "
                                  "and as JSON on stdin; 'failed,timeout:CMD' runs it for those only (event kinds: "
                                  "start, end, retry, requeue, kill, hold, timeout, preempt, reload, pause, resume, eta; end outcomes: "
                                  "done, failed, killed, lost, hung, preempted); repeatable")
                      ->allow_extra_args(false));
  setting_flag(f, sub->add_option("--hook-timeout", f.hook_timeout,
                                  "seconds (more than 0) an --on-event command may run before it is stopped")
                      ->capture_default_str()
                      ->check(CLI::PositiveNumber.description("")));  // one line: run --help fits a screen
  setting_flag(f, sub->add_option("--snapshot", f.snapshot,
                                  "git: each job runs a git snapshot of the workdir taken when it is loaded")
                      ->type_name("off|git")
                      ->check(CLI::Validator(
                          [](std::string& v) { return v == "off" || v == "git" ? "" : "must be off or git, not " + v; },
                          "")));
  setting_flag(f, sub->add_option("--events-max-mb", f.events_max_mb,
                                  "start a new event log past this size (the old one becomes PLAN.events.jsonl.N); "
                                  "0: never")
                      ->capture_default_str()
                      ->check(CLI::NonNegativeNumber.description(""))
                      ->type_name("MB"));
  setting_flag(f, sub->add_option("--progress-from-log", f.progress_from_log,
                                  "false: read a job's progress only from its GPUQ_PROGRESS file, not from a "
                                  "progress bar (k/N, NN%) at the end of its log")
                      ->capture_default_str()
                      ->check(CLI::IsMember({"true", "false"}).description(""))
                      ->type_name("B"));  // one line: run --help fits a screen
  setting_flag(f, sub->add_option("--eta-slip-percent", f.eta_slip_percent,
                                  "an eta event when the plan's predicted finish moves by more than this percent of "
                                  "the time left (and --eta-slip-minutes)")
                      ->capture_default_str()
                      ->check(CLI::NonNegativeNumber.description(""))
                      ->type_name("P"));
  setting_flag(f, sub->add_option("--eta-slip-minutes", f.eta_slip_minutes,
                                  "... and by more than this many minutes")
                      ->capture_default_str()
                      ->check(CLI::NonNegativeNumber.description(""))
                      ->type_name("M"));
}

void add_run_command(CLI::App& app, Flags& f, Action& action) {
  auto* run = app.add_subcommand("run", "run the plan: start jobs as they become ready, until all are finished");
  add_flags(run, f, {kGpus, kPoll, kBackfill, kRetries, kRetryAfter, kMaxUsed});
  add_run_settings(run, f);
  run->add_option("--node-dir", f.node_dir,
                  "share the node's GPUs with other runs through DIR (default: $GPUQ_NODE_DIR, else /var/lib/gpuq "
                  "when you may write there, else your own ~/.local/state/gpuq/node-HOST; off: run alone)")
      ->type_name("DIR");
  add_batch_run_flags(run, f);
  run->callback([&] { action = [&] { return cmd_run(f); }; });
}

}  // namespace gpuq::cli

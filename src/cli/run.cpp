// `gpuq run`.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>

#include "gpuq/core/plan.h"
#include "gpuq/live/queue.h"
#include "gpuq/live/run_loop.h"
#include "gpuq/live/store.h"

#include "cli.h"

namespace gpuq::cli {

int cmd_run(const Flags& f) {
  auto loaded = load_command(f);
  if (!loaded) return kExitBadInput;
  const std::vector<int>* gpus = &loaded->gpus;
  const Plan* plan = &loaded->plan;
  RunOptions opt = run_options(f, *gpus);
  PlanPaths paths = paths_for(f.plan);
  RunGuard guard(paths);
  warn_unknown_entries(*plan, paths, read_state(paths));
  return run_queue(*plan, paths, opt, stdout);
}

void add_run_command(CLI::App& app, Flags& f, Action& action) {
  auto* run = app.add_subcommand("run", "run the plan: start jobs as they become ready, until all are finished");
  add_flags(run, f, {kGpus, kPoll, kBackfill, kRetries, kRetryAfter, kMaxUsed});
  run->add_option("--kill-grace", f.kill_grace,
                  "seconds a killed job may take to exit after SIGTERM before its process group gets SIGKILL")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  add_time_limit_factor(run, f);
  run->add_option("--nvidia-smi", f.nvidia_smi,
                  "the nvidia-smi command to probe GPU memory with (default: $GPUQ_NVIDIA_SMI, else nvidia-smi)")
      ->type_name(kCommandType);
  run->callback([&] { action = [&] { return cmd_run(f); }; });
}

}  // namespace gpuq::cli

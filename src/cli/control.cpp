// `gpuq retry | kill | hold`.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>

#include "gpuq/live/journal.h"
#include "gpuq/live/launcher.h"
#include "gpuq/core/plan.h"
#include "gpuq/live/store.h"

#include "cli.h"

namespace gpuq::cli {

int cmd_control(const Flags& f, const std::string& action) {
  auto loaded = load_command(f);
  if (!loaded) return kExitBadInput;
  const Plan* plan = &loaded->plan;
  PlanPaths paths = plan_paths(f);
  FileStore store(paths);
  PosixLauncher launcher(paths);
  SystemClock clock;
  ControlResult r = control(*plan, f.plan, store, launcher, clock, action, f.jobs, events_path_for(paths.state));
  for (const auto& line : r.lines) fmt::print(r.status == kExitBadInput ? stderr : stdout, "{}\n", line);
  return r.status;
}

void add_control_commands(CLI::App& app, Flags& f, Action& action) {
  auto* retry = app.add_subcommand("retry", "make failed, blocked, held or done jobs pending again (not running ones)");
  auto* kill = app.add_subcommand("kill", fmt::format("stop running jobs: SIGTERM to the process group, marked failed (exit {})", kKilledExit));
  auto* hold = app.add_subcommand("hold", "keep pending, failed or blocked jobs from starting until `retry`");
  for (auto [sub, name] : {std::pair{retry, "retry"}, std::pair{kill, "kill"}, std::pair{hold, "hold"}}) {
    add_flags(sub, f, {});
    sub->add_option("job", f.jobs, "job ids")->required();
    std::string action_name = name;
    sub->callback([&, action_name] { action = [&, action_name] { return cmd_control(f, action_name); }; });
  }
}

}  // namespace gpuq::cli

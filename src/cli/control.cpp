// `gpuq retry | kill | hold`.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "gpuq/live/commands.h"

#include "cli.h"

namespace gpuq::cli {

int cmd_control(Flags& f, const std::string& action) {
  auto say_out = [](const std::string& l) { fmt::print("{}\n", l); };
  auto say_err = [](const std::string& l) {
    std::fflush(stdout);
    fmt::print(stderr, "{}\n", l);
  };
  if (action == "preempt" && f.add_dry_run) return preempt_dry_run(f, f.jobs, say_out, say_err);
  auto loaded = load_command(f);  // a plan with problems: said, and acted on as control_plan says
  std::fflush(stdout);
  return control_plan(f, loaded ? std::optional<Plan>(std::move(loaded->plan)) : std::nullopt,
                      ControlAsk{action, f.jobs, f.stale}, [](const std::string& l) { fmt::print("{}\n", l); },
                      [](const std::string& l) {
                        std::fflush(stdout);
                        fmt::print(stderr, "{}\n", l);
                      });
}

void add_control_commands(CLI::App& app, Flags& f, Action& action) {
  auto* retry = app.add_subcommand("retry", "make failed, blocked, held or done jobs pending again (not running ones)");
  auto* kill = app.add_subcommand("kill", fmt::format("stop running jobs: SIGTERM to the process group, marked failed (exit {})", kKilledExit));
  auto* hold = app.add_subcommand("hold", "keep pending, failed or blocked jobs from starting until `retry`");
  auto* requeue = app.add_subcommand(
      "requeue", "stop running jobs and make them pending again, as one step: `after:` dependents never see them finished");
  auto* preempt = app.add_subcommand(
      "preempt", "stop running preemptible jobs now to give their GPUs to other work: their preempt_signal, SIGKILL "
                 "after --preempt-grace; each runs again when GPUs allow");
  preempt->add_flag("--dry-run", f.add_dry_run, "change nothing: say what it would send, and when each job would resume");
  for (auto [sub, name] : {std::pair{retry, "retry"}, std::pair{kill, "kill"}, std::pair{hold, "hold"},
                           std::pair{requeue, "requeue"}, std::pair{preempt, "preempt"}}) {
    add_flags(sub, f, sub == preempt ? SettingCommand::kPreempt : sub == requeue ? SettingCommand::kRequeue : 0);
    auto* jobs = sub->add_option("job", f.jobs, "job ids");
    if (sub == retry)
      sub->add_flag("--stale", f.stale,
                    "also the stale done jobs (done before their deps changed, grew or ran again: see `status`) "
                    "and the done jobs after them");
    else
      jobs->required();
    std::string action_name = name;
    sub->callback([&, action_name] { action = [&, action_name] { return cmd_control(f, action_name); }; });
  }
}

}  // namespace gpuq::cli

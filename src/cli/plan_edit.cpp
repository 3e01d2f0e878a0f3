// `gpuq add`, `gpuq pause` and `gpuq resume`: changes to a plan that a running `gpuq run`
// takes without a restart (it reloads the plan file on edit, and looks at PLAN.paused).
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <cmath>
#include <filesystem>
#include <map>

#include "gpuq/live/commands.h"

#include "cli.h"

namespace gpuq::cli {

namespace {

// The job `gpuq add` appends, as one line of JSON laid out as people write plans ("key":
// value, ", " between): the fields given, in the README's order.
std::string job_text(const Flags& f) {
  auto str = [](const std::string& s) { return nlohmann::json(s).dump(); };
  auto list = [&](auto first, auto last) {
    std::string out = "[";
    for (auto it = first; it != last; ++it) out += (it == first ? "" : ", ") + str(*it);
    return out + "]";
  };
  std::string out = fmt::format("{{\"id\": {}, \"script\": {}", str(f.add_id), str(f.add_script.front()));
  if (f.add_gpus) out += fmt::format(", \"gpus\": {}", *f.add_gpus);
  if (f.add_priority) out += fmt::format(", \"priority\": {}", *f.add_priority);
  if (f.add_est_hours) out += fmt::format(", \"est_hours\": {}", *f.add_est_hours);
  if (!f.add_deps.empty()) out += ", \"deps\": " + list(f.add_deps.begin(), f.add_deps.end());
  if (f.add_script.size() > 1) out += ", \"args\": " + list(f.add_script.begin() + 1, f.add_script.end());
  return out + "}";
}

}  // namespace

/// The job must fit --node-gpus, else a running `gpuq run`'s --gpus (the run would refuse the
/// plan otherwise), else the plan's "settings" "gpus", else the default.
int cmd_add(Flags& f) {
  if (!node_gpus(f)) return kExitBadInput;  // a bad --node-gpus, before anything else
  if (std::string why = plan_file_problem(f.plan); !why.empty()) {
    fmt::print(stderr, "gpuq add: {}\n", why);
    return kExitBadInput;
  }
  if (std::string why = others_plan_problem(f.plan, "add"); !why.empty()) {
    fmt::print(stderr, "gpuq add: {}\n", why);
    return kExitFailure;
  }
  if (!take_plan_settings_only(f, nullptr) || !node_gpus(f)) return kExitBadInput;  // a plan that is not JSON: said below
  return add_job(f, NewJob{f.add_id, f.add_script, job_text(f)}, f.add_dry_run,
                 [](const std::string& l) { fmt::print("{}\n", l); },
                 [](const std::string& l) { fmt::print(stderr, "{}\n", l); });
}

void add_plan_edit_commands(CLI::App& app, Flags& f, Action& action) {
  auto* add = app.add_subcommand("add", "append one job to the plan file (checked first; the rest of the file kept "
                                        "as it is); a running `gpuq run` picks it up");
  add->add_option("--plan", f.plan, "the plan file (JSON) (default: $GPUQ_PLAN, else plan.json in the current folder)")
      ->type_name(kPlanType);
  setting_flag(f, add->add_option("--state-dir", f.state_dir,
                                  "the folder of the plan's state and lock (default: $GPUQ_STATE_DIR)"));
  add->add_option("--id", f.add_id, "the new job's id")->required();
  add->add_option("--gpus", f.add_gpus, "GPUs the job needs (plan default: 1)")->check(CLI::NonNegativeNumber);
  add->add_option("--priority", f.add_priority, "its priority, lower first (plan default: 50)");
  add->add_option("--deps", f.add_deps, "jobs it waits for, comma-separated (after:ID and file:PATH too)")
      ->delimiter(',')
      ->allow_extra_args(false);  // one value a --deps (comma-separated): a `--` after it starts the script
  add->add_option("--est-hours", f.add_est_hours, "its estimated duration in hours (plan default: 1)")
      ->check(CLI::NonNegativeNumber);
  setting_flag(f,
               add->add_option("--node-gpus", f.gpus,
                               "GPU ids of this node, to check the job's width against (default: a running `gpuq "
                               "run`'s --gpus, else the plan's \"settings\", else 0-7)"),
               "gpus");
  add->add_flag("--dry-run", f.add_dry_run,
                "write nothing: say how the job would move each other job's predicted start, and the plan's finish");
  add->add_option("script", f.add_script, "-- SCRIPT [ARGS...]: the job's bash script and its arguments")->required();
  add->callback([&] {
    f.reads_run_settings = true;
    action = [&] { return cmd_add(f); };
  });
  for (bool on : {true, false}) {
    auto* sub = app.add_subcommand(on ? "pause" : "resume",
                                   on ? "start no new job until `gpuq resume` (running jobs go on; kept across "
                                        "restarts of `gpuq run`)"
                                      : "let jobs start again after `gpuq pause`");
    add_flags(sub, f, {});
    sub->callback([&, on] {
      action = [&, on] {
        if (auto why = plan_file_problem(f.plan); !why.empty()) {
          fmt::print(stderr, "gpuq {}: {}\n", on ? "pause" : "resume", why);
          return kExitBadInput;
        }
        if (auto why = others_plan_problem(f.plan, on ? "pause" : "resume"); !why.empty()) {
          fmt::print(stderr, "gpuq {}: {}\n", on ? "pause" : "resume", why);
          return kExitFailure;
        }
        if (!take_plan_settings_only(f, on ? "pause" : "resume")) return kExitBadInput;  // its state_dir
        fmt::print("{}\n", pause_plan(f, on));
        return 0;
      };
    });
  }
}

}  // namespace gpuq::cli

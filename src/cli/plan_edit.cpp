// `gpuq add`, `gpuq pause` and `gpuq resume`: changes to a plan that a running `gpuq run`
// takes without a restart (it reloads the plan file on edit, and looks at PLAN.paused).
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <cmath>
#include <filesystem>
#include <map>

#include "gpuq/core/hint.h"
#include "gpuq/core/local_time.h"
#include "gpuq/core/outlook.h"
#include "gpuq/core/progress.h"
#include "gpuq/core/simulate.h"
#include "gpuq/live/control.h"
#include "gpuq/core/plan.h"
#include "gpuq/core/plan_text.h"
#include "gpuq/core/validate.h"
#include "gpuq/live/local_files.h"
#include "gpuq/live/plan_edit.h"
#include "gpuq/live/proc.h"
#include "gpuq/live/run_info.h"
#include "gpuq/live/snapshots.h"
#include "gpuq/live/store.h"

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

// The first predicted start of each job (unix seconds) and the plan's finish, from the live state.
struct WhatIf {
  std::map<std::string, double> starts;
  std::optional<double> finish;
};

WhatIf predict_from(const Plan& plan, const State& state, const RunOptions& ro, double now, const Flags& f) {
  LiveStart ls = live_start(plan, state, ro, now, free_now(state, ro, GpuReading{}),
                            LocalFiles(workdir_of(f, plan.workdir).path));
  Simulation sim = simulate(plan, ro, &ls);
  WhatIf w;
  for (const SimRow& r : sim.rows) {
    const std::string& id = plan.jobs[r.job].id;
    const JobState* s = state.find(id);
    if (!s || s->status != Status::Running) w.starts.emplace(id, now + r.start * 3600);  // its first attempt's
    w.finish = std::max(w.finish.value_or(now), now + r.end * 3600);
  }
  if (!sim.stuck.empty()) w.finish.reset();
  return w;
}

// add --dry-run: how the new job would move every other job's predicted start (the prediction
// `status` makes, from the live state), and the plan's finish. Nothing is written.
int what_if(const Flags& f, const PlanPaths& paths, const Plan& before, const Plan& after,
            const std::vector<int>& gpus) {
  State state = read_state(paths);
  double now = unix_now();
  refresh(before, paths, state, now);
  RunOptions ro = run_options(f, gpus);
  WhatIf was = predict_from(before, state, ro, now, f), will = predict_from(after, state, ro, now, f);
  auto new_start = will.starts.find(f.add_id);
  fmt::print("gpuq add --dry-run: {} not added (nothing written); it would start {}\n", f.add_id,
             new_start == will.starts.end() ? std::string("never, as things stand")
                                            : "~" + local_time(new_start->second, now));
  size_t moved = 0, same = 0;
  for (const Job& j : before.jobs) {
    auto a = was.starts.find(j.id), b = will.starts.find(j.id);
    if (a == was.starts.end() && b == will.starts.end()) continue;  // running or done: nothing to move
    if (a != was.starts.end() && b != will.starts.end() && std::fabs(b->second - a->second) < 1) {
      ++same;
      continue;
    }
    ++moved;
    std::string from = a == was.starts.end() ? "never" : local_time(a->second, now);
    std::string to = b == will.starts.end() ? "never" : local_time(b->second, now);
    std::string by = a != was.starts.end() && b != will.starts.end() ? " (" + shift_text(b->second - a->second) + ")" : "";
    fmt::print("  {:<30} starts {} -> {}{}\n", j.id, from, to, by);
  }
  if (!moved) fmt::print("  no other job's predicted start moves\n");
  else if (same) fmt::print("  {} other job(s) start as predicted before\n", same);
  if (was.finish && will.finish)
    fmt::print("the plan's predicted finish: {} -> {} ({})\n", local_time(*was.finish, now),
               local_time(*will.finish, now), shift_text(*will.finish - *was.finish));
  return 0;
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
  if (!take_plan_settings_only(f, nullptr)) return kExitBadInput;  // a plan that is not JSON: said below
  auto gpus = node_gpus(f);
  if (!gpus) return kExitBadInput;
  PlanPaths paths = plan_paths(f);
  std::string source = f.source_of("gpus") == SettingSource::Flag ? "--node-gpus" : f.gpus_source;
  auto say = [&](const std::string& e) { fmt::print(stderr, "{}\n", with_gpus_source(e, source)); };
  // The file itself, where the plan is a link: the link stays a link.
  std::error_code ec;
  std::string target = std::filesystem::canonical(f.plan, ec).string();
  if (ec) target = f.plan;
  FileStore store(paths);
  Store::Locked lock(store);  // one writer of the plan at a time: two adds never lose one
  std::string text = read_file(target).value_or("");
  PlanLoad before = parse_plan(text, f.plan, *gpus);
  if (!before.plan) {
    for (const std::string& e : before.errors) say(e);
    fmt::print(stderr, "gpuq add: the plan has {} problem(s) already; fix them first (nothing was added)\n",
               before.errors.size());
    return kExitBadInput;
  }
  // `gpuq add --id x -- 'step.sh x 2'`: one word that is no file but a command line (validate's rule).
  const std::string& script = f.add_script.front();
  if (f.add_script.size() == 1 && script_holds_arguments(script) &&
      !readable_file(LocalFiles(workdir_of(f, before.plan->workdir).path).expand(script))) {
    std::vector<std::string> words;
    for (size_t at = 0; at != std::string::npos;) {
      size_t from = script.find_first_not_of(" \t", at);
      if (from == std::string::npos) break;
      at = script.find_first_of(" \t", from);
      words.push_back(script.substr(from, at == std::string::npos ? at : at - from));
    }
    std::string split;
    for (const std::string& w : words) split += " " + shell_word(w);
    fmt::print(stderr, "gpuq add: the script \"{}\" is not a file: {}; give the script and its arguments as "
                       "separate words after --: gpuq add ... --{} (nothing was added)\n",
               script, kArgsGoInArgs, split);
    return kExitBadInput;
  }
  std::string problem;
  auto next = append_job_text(text, job_text(f), &problem);
  if (!next) {
    fmt::print(stderr, "gpuq add: {}: {}; nothing was added\n", f.plan, problem);
    return kExitBadInput;
  }
  PlanLoad after = parse_plan(*next, f.plan, *gpus);
  if (!after.plan) {
    for (const std::string& e : after.errors) say(e);
    fmt::print(stderr, "gpuq add: {} not added: the plan with it would have {} problem(s); {} is unchanged\n",
               f.add_id, after.errors.size(), f.plan);
    return kExitBadInput;
  }
  if (f.add_dry_run) return what_if(f, paths, *before.plan, *after.plan, *gpus);
  // A job that runs from a snapshot: the code as it is now, recorded before the plan names the job
  // (a running `gpuq run` keeps it when it reloads the plan).
  std::string code;
  if (const Job* job = after.plan->find(f.add_id); job && uses_snapshot(*job, f.snapshot)) {
    Workdir wd = workdir_of(f, after.plan->workdir);
    GitSnapshots snapshots(its_own_files(paths));
    try {
      SnapshotRef snap = snapshots.take(absolute_workdir(wd), unix_now());
      State state = store.read();
      set_snapshot(state.at(f.add_id), snap);
      store.write(state, false);
      code = fmt::format(" (snapshot {}{})", short_commit(snap.commit), snap.dirty ? ", with uncommitted changes" : "");
    } catch (const SnapshotError& e) {
      fmt::print(stderr, "gpuq add: {} not added: it runs from a snapshot (\"snapshot\": \"git\"), and none can be "
                         "taken: {}; {} is unchanged\n",
                 f.add_id, e.what(), f.plan);
      return kExitBadInput;
    } catch (const StoreError& e) {
      fmt::print(stderr, "gpuq add: {} not added: cannot record its snapshot: {}; {} is unchanged\n", f.add_id,
                 e.what(), f.plan);
      return kExitFailure;
    }
  }
  replace_file_durably(target, *next);
  // Who starts it: the run going on (it reloads the plan), or the next run.
  RunPresence run = run_presence(paths);
  std::string starts = run.running && run.info
                           ? fmt::format("the running `gpuq run` (pid {}) starts it when it is ready", run.info->pid)
                       : run.running ? "the running `gpuq run` starts it when it is ready"
                                     : "no `gpuq run` is running this plan: " + hint("run") + " starts it";
  fmt::print("added {}{} to {} ({} jobs); {}\n", f.add_id, code, f.plan, after.plan->jobs.size(), starts);
  return 0;
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
        fmt::print("{}\n", set_paused(plan_paths(f), on, unix_now()));
        return 0;
      };
    });
  }
}

}  // namespace gpuq::cli

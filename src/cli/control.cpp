// `gpuq retry | kill | hold`.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "gpuq/live/journal.h"
#include "gpuq/live/launcher.h"
#include "gpuq/live/slurm.h"
#include "gpuq/core/plan.h"
#include "gpuq/core/stale.h"
#include "gpuq/live/store.h"

#include "cli.h"
#include "gpuq/core/job_words.h"

namespace gpuq::cli {

namespace fs = std::filesystem;

bool wait_for_requeues(const Flags& f, const Plan& plan, FileStore& store, Launcher& launcher);

int cmd_control(Flags& f, const std::string& action) {
  auto loaded = load_command(f);
  // The control commands must work while the plan on disk has problems (an edit half done):
  // with the version a running `run` goes on with, else (kill) from the state's running
  // entries alone. load_command has said where the file has problems and what they are.
  if (!loaded && !fs::exists(f.plan)) return kExitBadInput;
  std::optional<Loaded> kept;
  if (!loaded) kept = plan_run_goes_on_with(f);
  if (std::string why = others_plan_problem(f.plan, action); !why.empty()) {
    fmt::print(stderr, "gpuq {}: {}\n", action, why);
    return kExitFailure;
  }
  PlanPaths paths = plan_paths(f);
  std::string plan_name = f.plan;
  if (!loaded && kept) {
    fmt::print(stderr, "gpuq {}: the plan file {} does not load (above); acting on the version the running `gpuq run` "
               "goes on with ({})\n", action, f.plan, paths.run_plan);
  } else if (!loaded && action == "kill") {
    fmt::print(stderr, "gpuq kill: the plan file {} does not load (above), and no `gpuq run` goes on with an earlier "
               "version; going on from the state alone\n", f.plan);
    plan_name = f.plan + " (which does not load)";
  } else if (!loaded) {
    fmt::print(stderr, "gpuq {0}: the plan file {1} does not load (above), and no `gpuq run` goes on with an earlier "
               "version to take the jobs from; nothing was changed: fix {1}, then {0} again\n", action, f.plan);
    return kExitBadInput;
  }
  Plan none;
  const Plan* plan = loaded ? &loaded->plan : kept ? &kept->plan : &none;
  warn_state_beside_link(f.plan);
  FileStore store(paths);
  PosixLauncher local(paths);
  // A plan run with --slurm: kill is scancel, hold of a job not started scontrol hold, retry scontrol release.
  std::optional<SlurmLauncher> slurm;
  try {
    if (state_in_slurm(store.read())) slurm.emplace(*plan, paths, SlurmOptions{});
  } catch (const StoreError&) {
  }
  Launcher& launcher = slurm ? static_cast<Launcher&>(*slurm) : local;
  if (action == "retry" && f.stale) {
    // The stale done jobs, each with why, and the done jobs after them (stale once they rerun).
    State state;
    try {
      state = store.read();
    } catch (const StoreError& e) {
      fmt::print(stderr, "gpuq retry: {}\n", e.what());
      return kExitFailure;
    }
    std::vector<size_t> reruns = stale_reruns(*plan, state);
    if (reruns.empty() && f.jobs.empty()) {
      fmt::print("no done job of {} is stale: nothing to rerun\n", plan_name);
      return 0;
    }
    for (size_t i : reruns) {
      Staleness why = staleness_of(*plan, i, state);
      if (why.empty())
        fmt::print("{}: done after a stale job it depends on; rerun with it\n", plan->jobs[i].id);
      else
        fmt::print("stale: {} ({})\n", plan->jobs[i].id, staleness_text(why));
      if (std::find(f.jobs.begin(), f.jobs.end(), plan->jobs[i].id) == f.jobs.end()) f.jobs.push_back(plan->jobs[i].id);
    }
  } else if (f.jobs.empty()) {
    fmt::print(stderr, "gpuq {}: no job given: name the jobs{}\n", action,
               action == "retry" ? ", or --stale for the stale done ones" : "");
    return kExitBadInput;
  }
  SystemClock clock;
  // A sweep's id names its points; a sweep point may be written with a number spelled otherwise.
  JobWords words = resolve_job_words(*plan, f.jobs);
  for (const std::string& note : words.notes) fmt::print("gpuq {}: {}\n", action, note);
  f.jobs = words.ids;  // requeue waits for these
  ControlResult r = control(*plan, plan_name, store, launcher, clock, action, f.jobs, events_path_for(paths.state));
  for (const auto& line : r.lines) fmt::print(r.status == kExitBadInput ? stderr : stdout, "{}\n", line);
  if (action == "requeue" && r.status != kExitBadInput) {
    std::fflush(stdout);
    if (!wait_for_requeues(f, *plan, store, launcher)) return kExitFailure;
  }
  return r.status;
}

/// The rest of `requeue`: wait for each stopped job's group to be gone (SIGKILL after
/// --kill-grace), then make the job pending. False when a group outlived SIGKILL too.
bool wait_for_requeues(const Flags& f, const Plan& plan, FileStore& store, Launcher& launcher) {
  std::vector<std::pair<std::string, long long>> groups;
  {
    State state = store.read();
    for (const auto& id : f.jobs)
      if (const JobState* s = state.find(id); s && s->requeue && s->status == Status::Running && s->pid)
        groups.push_back({id, *s->pid});
  }
  auto all_gone = [&] {
    for (auto& [id, g] : groups)
      if (launcher.group_alive(g)) return false;
    return true;
  };
  auto wait = [&](double seconds) {
    auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (!all_gone() && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return all_gone();
  };
  if (!wait(f.kill_grace)) {
    for (auto& [id, g] : groups)
      if (launcher.group_alive(g)) {
        launcher.signal_group(g, Signal::Kill);
        fmt::print("SIGKILL to {} (process group {}): still alive {:g} s after SIGTERM\n", id, g, f.kill_grace);
      }
    wait(10);
  }
  bool gone = all_gone();
  std::vector<std::string> stopped;
  for (auto& [id, g] : groups) stopped.push_back(id);
  for (const auto& line : finish_requeues(plan, store, launcher, stopped, unix_now(), events_path_for(plan_paths(f).state)))
    fmt::print("{}\n", line);
  return gone;
}

void add_control_commands(CLI::App& app, Flags& f, Action& action) {
  auto* retry = app.add_subcommand("retry", "make failed, blocked, held or done jobs pending again (not running ones)");
  auto* kill = app.add_subcommand("kill", fmt::format("stop running jobs: SIGTERM to the process group, marked failed (exit {})", kKilledExit));
  auto* hold = app.add_subcommand("hold", "keep pending, failed or blocked jobs from starting until `retry`");
  auto* requeue = app.add_subcommand(
      "requeue", "stop running jobs and make them pending again, as one step: `after:` dependents never see them finished");
  setting_flag(f, requeue
                      ->add_option("--kill-grace", f.kill_grace,
                                   "seconds the job may take to exit after SIGTERM before its process group gets SIGKILL")
                      ->capture_default_str()
                      ->check(CLI::NonNegativeNumber));
  for (auto [sub, name] : {std::pair{retry, "retry"}, std::pair{kill, "kill"}, std::pair{hold, "hold"},
                           std::pair{requeue, "requeue"}}) {
    add_flags(sub, f, {});
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

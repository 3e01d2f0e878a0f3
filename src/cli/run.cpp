// `gpuq run`.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <unistd.h>

#include "gpuq/core/plan.h"
#include "gpuq/live/proc.h"
#include "gpuq/live/hooks.h"
#include "gpuq/live/queue.h"
#include "gpuq/live/run_info.h"
#include "gpuq/live/run_loop.h"
#include "gpuq/live/slurm.h"
#include "gpuq/live/store.h"
#include "gpuq/live/local_files.h"
#include "gpuq/core/validate.h"

#include "gpuq/core/plan_diff.h"

#include "cli.h"
#include "gpuq/live/node_dir.h"

namespace gpuq::cli {

namespace {

// What run --slurm hands sbatch; nullopt (with `problem`) for a plan Slurm cannot take.
std::optional<SlurmOptions> slurm_options(const Flags& f, const Plan& plan, const std::string& workdir,
                                          std::string* problem) {
  SlurmShards shards = cluster_shards(f);
  if (std::string why = slurm_plan_problem(plan, shards); !why.empty()) {
    *problem = why;
    return std::nullopt;
  }
  SlurmOptions o;
  o.shards = shards;
  o.partition = f.partition;
  o.account = f.account;
  o.qos = f.qos;
  o.sbatch_args = f.sbatch_arg;
  o.time_margin = f.time_margin;
  o.max_queued = f.max_queued;
  o.reservations = slurm_reservations(plan);
  char self[4096];
  ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  o.gpuq_binary = n > 0 ? std::string(self, static_cast<size_t>(n)) : "gpuq";
  o.chdir = std::filesystem::absolute(workdir.empty() ? "." : workdir).lexically_normal().string();
  return o;
}

// A state whose running jobs belong to the other kind of run: Slurm ids read as pids, or pids sent to scancel.
std::string mode_mix_problem(const State& state, bool slurm) {
  for (const auto& [id, s] : state.entries()) {
    if (s.status != Status::Running) continue;
    if (!slurm && s.queue_id)
      return fmt::format("job {} is running in Slurm (Slurm job {}): this plan is run with --slurm until its Slurm "
                         "jobs have ended",
                         id, *s.queue_id);
    if (slurm && !s.queue_id)
      return fmt::format("job {} is running on this machine (pid {}): run --slurm once no job runs here",
                         id, s.pid.value_or(0));
  }
  return "";
}

// --pairs and --on-event into `opt`; the problem with either, or "".
std::string take_placement_and_hooks(const Flags& f, RunOptions& opt) {
  std::string problem;
  std::optional<Placement> placement = parse_pairs(f.pairs.empty() ? "auto" : f.pairs, &problem);
  if (!placement) return problem;
  opt.placement = *placement;  // auto: run_queue reads the topology from its probe
  for (const std::string& text : opt.on_event)
    if (!parse_hook(text, &problem)) return problem;
  return "";
}

// Every script of a job still to run, before anything starts: a wrong folder would fail them one by one.
// A job that waits on another job of the plan may have its script made by that job: its missing
// script is said, not refused (it fails as unstartable if the script is still missing when due).
// False (said) when run must refuse.
bool scripts_there(const Plan& plan, const State& state, const Workdir& wd) {
  LocalFiles files(wd.path);
  auto done = [&](size_t i) { return state.status_of(plan, i) == Status::Done; };
  std::vector<size_t> missing = jobs_without_script(plan, files, readable_file, [&](size_t i) { return !done(i); });
  auto later = std::stable_partition(missing.begin(), missing.end(), [&](size_t i) { return !waits_on_a_job(plan, i, done); });
  if (later != missing.begin()) {
    fmt::print(stderr, "gpuq run: nothing started: {}\n",
               missing_scripts_text(plan, std::vector<size_t>(missing.begin(), later), files, wd.shown));
    return false;
  }
  if (!missing.empty())
    fmt::print(stderr, "gpuq run: not there yet, for jobs that wait on other jobs (which may make them): {}\n",
               missing_scripts_text(plan, missing, files, wd.shown));
  return true;
}

// The settings this run uses, as PLAN.run.json records them for `status`: each as the run
// takes it (pairs, nvidia-smi, poll and workdir as they are in effect, not as given).
GivenSettings settings_in_use(const Flags& f, const RunOptions& opt, const Workdir& wd) {
  GivenSettings s;
  s.values = f;
  s.given.fill(true);
  if (s.values.pairs.empty()) s.values.pairs = "auto";
  s.values.nvidia_smi = opt.nvidia_smi;
  s.values.poll = opt.poll;
  std::error_code ec;
  s.values.workdir = wd.path.empty() ? std::filesystem::current_path(ec).string() : wd.path;
  s.values.state_dir = f.state_dir;
  s.given[setting_index(*find_setting("state_dir"))] = !f.state_dir.empty();
  return s;
}

}  // namespace

int cmd_run(Flags& f) {
  // The text as it was before the load: the version the reload on edit compares with (an
  // edit between the two is then reloaded at the first tick, never missed).
  std::string plan_text;
  try {
    plan_text = read_file(f.plan).value_or("");
  } catch (const StoreError&) {
  }
  auto loaded = load_command(f);
  if (!loaded) return kExitBadInput;
  const std::vector<int>* gpus = &loaded->gpus;
  const Plan* plan = &loaded->plan;
  RunOptions opt = run_options(f, *gpus);
  if (std::string problem = take_placement_and_hooks(f, opt); !problem.empty()) {
    fmt::print(stderr, "gpuq run: {}\n", problem);
    return kExitBadInput;
  }
  Workdir wd = workdir_of(f, plan->workdir);
  opt.workdir = wd.path;
  opt.node_dir = f.node_dir;
  PlanPaths paths = plan_paths(f);
  State state = read_state(paths);
  std::optional<Plan> slurm_plan;
  std::optional<SlurmOptions> slurm;
  if (f.slurm) {
    std::string problem;
    slurm = slurm_options(f, *plan, wd.path, &problem);
    if (!slurm) {
      fmt::print(stderr, "gpuq run --slurm: {}\n", problem);
      return kExitBadInput;
    }
    // Slurm places the jobs (the engine hands it every ready job, as many as --max-queued
    // lets through), and a reservation is Slurm's (--reservation), not a closed GPU of this node.
    slurm_plan = slurm_copy(*plan);
    plan = &*slurm_plan;
    opt.batch = true;
    if (f.source_of("poll") == SettingSource::Default) opt.poll = 30;
  }
  if (std::string mix = mode_mix_problem(state, f.slurm); !mix.empty()) {
    fmt::print(stderr, "gpuq run: nothing started: {}\n", mix);
    return kExitFailure;
  }
  if (!scripts_there(*plan, state, wd)) return kExitBadInput;
  GitSnapshots snapshots;
  if (std::string problem = snapshot_problem(f, *plan, wd, snapshots); !problem.empty()) {
    fmt::print(stderr, "gpuq run: {}\n", problem);
    return kExitBadInput;
  }
  if (!f.slurm)
    if (std::string problem = node_dir_problem(choose_node_dir(opt.node_dir)); !problem.empty()) {
      fmt::print(stderr, "gpuq run: nothing started: {}\n", problem);
      return kExitBadInput;
    }
  RunGuard guard(paths);
  // Two states for one plan file would run every job twice: refuse until there is one.
  if (std::string split = state_beside_link_problem(paths); !split.empty()) {
    fmt::print(stderr, "gpuq run: {}\n", split);
    return kExitFailure;
  }
  warn_unknown_entries(*plan, paths, read_state(paths));
  // What `status` reads to tell whether this run works, and on which version of the plan.
  RunInfo info;
  info.pid = ::getpid();
  char host[256] = {0};
  info.host = ::gethostname(host, sizeof host - 1) == 0 ? host : "?";
  info.plan = f.plan;
  info.gpus = *gpus;
  info.max_retries = f.max_retries;
  info.settings = settings_in_use(f, opt, wd);
  info.started = unix_now();
  info.tick = info.started;
  info.loaded = stamp_plan(f.plan).value_or(PlanStamp{});
  info.loaded_at = info.started;
  info.slurm = f.slurm;
  if (!f.slurm) info.node_dir = choose_node_dir(opt.node_dir);
  // Jobs that run from a snapshot and changed since the last run loaded the plan (its copy,
  // PLAN.run.plan.json): loaded anew, so each takes a snapshot of the code as it is now.
  if (any_snapshot(*plan, opt.snapshot)) try {
      if (std::optional<std::string> was = read_file(paths.run_plan))
        if (PlanLoad last = parse_plan(*was, paths.run_plan, *gpus); last.plan)
          opt.snapshot_changed = diff_plans(*last.plan, *plan).changed;
    } catch (const StoreError&) {
      // no copy to compare with: every queued job keeps its snapshot
    }
  keep_loaded_plan(paths, f.plan);
  return run_queue(slurm_plan ? std::move(*slurm_plan) : std::move(loaded->plan), paths, opt, stdout, &info, &plan_text,
                   slurm ? &*slurm : nullptr);
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
  setting_flag(f, sub->add_option("--nvidia-smi", f.nvidia_smi,
                                  "the nvidia-smi command to probe GPU memory and utilization with (default: "
                                  "$GPUQ_NVIDIA_SMI, else nvidia-smi)")
                      ->type_name(kCommandType));
  add_gpu_flags(sub, f, "auto");
  setting_flag(f, sub->add_option("--on-event", f.on_event,
                                  "run CMD (bash) for each event of the event log PLAN.events.jsonl, with the event "
                                  "in GPUQ_EVENT, GPUQ_JOB_ID, GPUQ_ATTEMPT, GPUQ_OUTCOME, GPUQ_EXIT, GPUQ_LOG, ... "
                                  "and as JSON on stdin; 'failed,timeout:CMD' runs it for those only (event kinds: "
                                  "start, end, retry, requeue, kill, hold, timeout, reload, pause, resume, eta; end outcomes: done, "
                                  "failed, killed, lost, hung); repeatable")
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
                      ->check(CLI::NonNegativeNumber));
  setting_flag(f, sub->add_option("--progress-from-log", f.progress_from_log,
                                  "false: read a job's progress only from its GPUQ_PROGRESS file, not from a "
                                  "progress bar (k/N, NN%) at the end of its log")
                      ->capture_default_str()
                      ->check(CLI::IsMember({"true", "false"}).description(""))
                      ->type_name("BOOL"));
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
                  "share the node's GPUs fairly with other users' runs through DIR (default: $GPUQ_NODE_DIR, else "
                  "/var/lib/gpuq when it exists and you may write there; off: run alone)")
      ->type_name("DIR");
  run->add_flag("--slurm", f.slurm,
                "submit each ready job to Slurm (sbatch) instead of starting it here; gpuq keeps the plan's deps, "
                "priorities and retries, Slurm places the jobs (doc/slurm.md)");
  run->add_option("--partition", f.partition, "--slurm: the partition to submit to (sbatch --partition)");
  run->add_option("--account", f.account, "--slurm: the account to charge (sbatch --account)");
  run->add_option("--qos", f.qos, "--slurm: the quality of service (sbatch --qos)");
  run->add_option("--max-queued", f.max_queued, "--slurm: at most this many of the plan's jobs in Slurm's queue")
      ->capture_default_str()
      ->type_name("N")
      ->check(CLI::PositiveNumber);
  run->add_option("--time-margin", f.time_margin,
                  "--slurm: a job without time_limit_hours gets sbatch --time of est_hours x this")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  run->add_option("--sbatch-arg", f.sbatch_arg, "--slurm: one more argument for every sbatch (repeatable)")
      ->allow_extra_args(false);
  run->callback([&] { action = [&] { return cmd_run(f); }; });
}

}  // namespace gpuq::cli

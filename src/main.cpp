// gpuq: a dependency and priority GPU job queue for one multi-GPU node.
// The CLI layer: each subcommand declares its flags and calls the library.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>

#include "gpuq/plan.h"
#include "gpuq/queue.h"
#include "gpuq/simulate.h"
#include "gpuq/store.h"

namespace {

using namespace gpuq;

/// Exit statuses: 0 success, 1 the command could not do all its work, 2 bad input.
constexpr int kExitFailure = 1;
constexpr int kExitBadInput = 2;

/// Every flag of the original; each subcommand shows the ones it uses.
struct Flags {
  std::string plan;
  std::string gpus = "0,1,2,3,4,5,6,7";
  double poll = 20;
  bool all = false;
  double backfill_max_hours = 0.5;
  long long max_retries = 2;
  double retry_after = 300;
  long long max_used_mib = 1024;
  double kill_grace = 30;
  std::string nvidia_smi;
  std::vector<std::string> jobs;
};

enum Flag { kGpus, kPoll, kAll, kBackfill, kRetries, kRetryAfter, kMaxUsed };

/// Adds --plan and the original's flags: those in `used` are documented, the
/// rest accepted and ignored (the original took every flag with every command).
void add_flags(CLI::App* sub, Flags& f, std::initializer_list<Flag> used) {
  sub->add_option("--plan", f.plan, "the plan file (JSON); its state, lock and logs/ live beside it")->required();
  auto uses = [&](Flag x) { return std::find(used.begin(), used.end(), x) != used.end(); };
  auto group = [&](CLI::Option* o, Flag x) { o->group(uses(x) ? "Options" : ""); };
  group(sub->add_option("--gpus", f.gpus, "GPU ids of this node, comma-separated")->capture_default_str(), kGpus);
  group(sub->add_option("--poll", f.poll, "longest sleep between two looks at the queue, in seconds")
            ->capture_default_str()
            ->check(CLI::PositiveNumber),
        kPoll);
  group(sub->add_flag("--all", f.all, "also list jobs the default listing leaves out"), kAll);
  group(sub->add_option("--backfill-max-hours", f.backfill_max_hours,
                        "while a higher-priority job waits for GPUs, only jobs this short may start")
            ->capture_default_str()
            ->check(CLI::NonNegativeNumber),
        kBackfill);
  group(sub->add_option("--max-retries", f.max_retries, "automatic retries of a failed job")
            ->capture_default_str()
            ->check(CLI::NonNegativeNumber),
        kRetries);
  group(sub->add_option("--retry-after", f.retry_after, "seconds between a failure and its automatic retry")
            ->capture_default_str()
            ->check(CLI::NonNegativeNumber),
        kRetryAfter);
  group(sub->add_option("--max-used-mib", f.max_used_mib,
                        "a GPU with more memory in use than this (nvidia-smi) is not given to a new job")
            ->capture_default_str(),
        kMaxUsed);
}

std::optional<std::vector<int>> node_gpus(const Flags& f) {
  std::string err;
  auto ids = parse_gpu_list(f.gpus, &err);
  if (!ids) fmt::print(stderr, "gpuq: {}\n", err);
  return ids;
}

/// Loads and checks the plan, or prints every problem.
std::optional<Plan> load_or_report(const Flags& f, const std::vector<int>& gpus) {
  PlanLoad load = load_plan(f.plan, gpus);
  if (!load.plan) {
    fmt::print(stderr, "gpuq: the plan {} is not valid ({} problem{}):\n", f.plan, load.errors.size(),
               load.errors.size() == 1 ? "" : "s");
    for (const auto& e : load.errors) fmt::print(stderr, "  {}\n", e);
    return std::nullopt;
  }
  for (const auto& w : load.warnings) fmt::print(stderr, "gpuq: warning: {}\n", w);
  return std::move(load.plan);
}

/// Warns about state entries of jobs the plan no longer has (renamed or removed jobs).
void warn_unknown_entries(const Plan& plan, const PlanPaths& paths, const State& state) {
  std::string list;
  size_t n = 0;
  for (const auto& [id, s] : state.entries()) {
    if (plan.find(id)) continue;
    if (n++ < 10) list += (list.empty() ? "" : ", ") + id + " (" + status_name(s.status) + ")";
  }
  if (n)
    fmt::print(stderr,
               "gpuq: warning: {} names {} job(s) that are not in {}: {}{}. Their entries are kept as they are "
               "(a running one keeps its GPUs until it ends); if the jobs are gone for good, delete their entries "
               "while no `gpuq run` is going\n",
               paths.state, n, paths.plan, list, n > 10 ? ", ..." : "");
}

int cmd_simulate(const Flags& f) {
  auto gpus = node_gpus(f);
  if (!gpus) return kExitBadInput;
  auto plan = load_or_report(f, *gpus);
  if (!plan) return kExitBadInput;
  SimOptions opt;
  opt.node_gpus = *gpus;
  opt.backfill_max_hours = f.backfill_max_hours;
  Simulation sim = simulate(*plan, opt);
  for (const auto& note : sim.notes) fmt::print(stderr, "gpuq: {}\n", note);
  if (!sim.stuck.empty()) {
    fmt::print(stderr, "gpuq: {}: {}", f.plan, format_stuck(*plan, sim));
    return kExitFailure;
  }
  std::string out = format_timeline(*plan, sim, opt, f.all);
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

int cmd_run(const Flags& f) {
  auto gpus = node_gpus(f);
  if (!gpus) return kExitBadInput;
  auto plan = load_or_report(f, *gpus);
  if (!plan) return kExitBadInput;
  RunOptions opt;
  opt.node_gpus = *gpus;
  opt.poll = f.poll;
  opt.backfill_max_hours = f.backfill_max_hours;
  opt.max_retries = f.max_retries;
  opt.retry_after = f.retry_after;
  opt.max_used_mib = f.max_used_mib;
  opt.kill_grace = f.kill_grace;
  const char* env = std::getenv("GPUQ_NVIDIA_SMI");
  opt.nvidia_smi = !f.nvidia_smi.empty() ? f.nvidia_smi : env && *env ? env : "nvidia-smi";
  PlanPaths paths = paths_for(f.plan);
  warn_unknown_entries(*plan, paths, read_state(paths));
  return run_queue(*plan, paths, opt, stdout);
}

int cmd_status(const Flags& f) {
  auto gpus = node_gpus(f);
  if (!gpus) return kExitBadInput;
  auto plan = load_or_report(f, *gpus);
  if (!plan) return kExitBadInput;
  PlanPaths paths = paths_for(f.plan);
  State state = read_state(paths);
  warn_unknown_entries(*plan, paths, state);
  double now = unix_now();
  refresh(paths, state, now);  // in memory only: status changes nothing (fix 13)
  std::string out = format_status(*plan, state, now, f.all);
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

int cmd_control(const Flags& f, const std::string& action) {
  auto gpus = node_gpus(f);
  if (!gpus) return kExitBadInput;
  auto plan = load_or_report(f, *gpus);
  if (!plan) return kExitBadInput;
  ControlResult r = control(*plan, paths_for(f.plan), action, f.jobs);
  for (const auto& line : r.lines) fmt::print(r.status == kExitBadInput ? stderr : stdout, "{}\n", line);
  return r.status;
}

}  // namespace

int main(int argc, char** argv) {
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
  run->add_option("--nvidia-smi", f.nvidia_smi,
                  "the nvidia-smi command to probe GPU memory with (default: $GPUQ_NVIDIA_SMI, else nvidia-smi)");
  run->callback([&] { action = [&] { return cmd_run(f); }; });

  auto* status = app.add_subcommand("status", "show each job's status (running, failed, blocked, held; --all: every job)");
  add_flags(status, f, {kAll});
  status->callback([&] { action = [&] { return cmd_status(f); }; });

  auto* sim = app.add_subcommand("simulate", "predict the timeline of the plan from est_hours");
  add_flags(sim, f, {kGpus, kAll, kBackfill});
  sim->callback([&] { action = [&] { return cmd_simulate(f); }; });

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
    return action ? action() : 0;
  } catch (const StoreError& e) {
    fmt::print(stderr, "gpuq: {}\n", e.what());
    return kExitFailure;
  } catch (const std::exception& e) {
    fmt::print(stderr, "gpuq: {}\n", e.what());
    return kExitFailure;
  }
}

// `gpuq validate`.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <sys/stat.h>
#include <unistd.h>

#include "gpuq/live/local_files.h"
#include "gpuq/core/events.h"
#include "gpuq/core/validate.h"
#include "gpuq/live/journal.h"
#include "gpuq/live/store.h"

#include "gpuq/live/slurm.h"

#include "gpuq/views/reasons.h"

#include "cli.h"

namespace gpuq::cli {

int cmd_validate(Flags& f) {
  auto gpus = node_gpus(f);
  if (!gpus) return kExitBadInput;
  // A path that is no plan file at all: one line, before any talk of problems in a plan.
  if (std::string problem = plan_file_problem(f.plan); !problem.empty()) {
    fmt::print(stderr, "gpuq: plan {}: {}\n", f.plan, problem);
    return kExitBadInput;
  }
  PlanLoad load = load_plan_choosing_gpus(f.plan, choose_gpus(f));
  take_settings(f, {});  // a plan that is not JSON gave none: the flags and variables still count
  for (std::string& e : settings_problems(f)) load.errors.insert(load.errors.begin(), std::move(e));
  if (!load.errors.empty()) load.plan.reset();
  gpus = node_gpus(f);  // as the settings give them
  if (!gpus) return kExitBadInput;
  const Plan* plan = load.plan ? &*load.plan : load.partial ? &*load.partial : nullptr;
  Workdir wd = workdir_of(f, plan ? plan->workdir : std::nullopt);
  LocalFiles files(wd.path);
  // The node's memory, for a job that packs with more GiB than a GPU takes (it never starts).
  Policy mem;
  mem.gpu_mem_gib = f.gpu_mem_gib;
  mem.gpu_mem_headroom = f.gpu_mem_headroom;
  if (!load.plan) {
    // The loader's errors, and in the same round what the files and each job's own checks say
    // of the jobs it could read.
    std::vector<Finding> more, found;
    if (plan) {
      found = file_findings(*plan, files, readable_file, wd.shown);
      for (Finding& x : job_findings(*plan, &mem)) found.push_back(std::move(x));
    }
    // The loader's warnings and the fields gpuq does not read too (errors with --strict): one
    // round shows everything, not the warnings only once the errors are fixed.
    std::vector<std::string> warned = load.warnings;
    for (std::string& u : load.unknown_fields) (f.strict ? load.errors : warned).push_back(std::move(u));
    for (Finding& x : found)
      if (x.error || f.strict) more.push_back(std::move(x));
      else warned.push_back(fmt::format("{}: {}{}", f.plan, x.job.empty() ? "" : "job '" + x.job + "': ", x.text));
    fmt::print(stderr, "gpuq: the plan {} is not valid ({} problem{}):\n", f.plan, load.errors.size() + more.size(),
               load.errors.size() + more.size() == 1 ? "" : "s");
    for (const auto& e : load.errors) fmt::print(stderr, "  {}\n", with_gpus_source(e, f.gpus_source));
    for (const Finding& x : more)
      fmt::print(stderr, "  {}: {}{}\n", f.plan, x.job.empty() ? "" : "job '" + x.job + "': ", x.text);
    if (!warned.empty())
      fmt::print(stderr, "and {} warning{}:\n", warned.size(), warned.size() == 1 ? "" : "s");
    for (const auto& w : warned) fmt::print(stderr, "  warning: {}\n", w);
    return kExitBadInput;
  }
  // The sweeps, as the jobs they expand into.
  for (const Sweep& sw : plan->sweeps) {
    std::string ids;
    for (size_t k = sw.first; k < sw.first + sw.count; ++k) ids += (ids.empty() ? "" : ", ") + plan->jobs[k].id;
    fmt::print("sweep '{}': {} job(s): {}\n", sw.id, sw.count, ids);
  }
  // The loader's warnings first (its checks come first), counted and printed as validate's own.
  std::vector<Finding> findings = loader_findings(load.warnings);
  // Fields gpuq does not read: notes the plan may carry, or a mistake; --strict takes them for mistakes.
  for (std::string& u : load.unknown_fields) findings.push_back({f.strict, "", std::move(u)});
  for (Finding& x : validate_plan(*plan, *gpus, f.backfill_max_hours, files, readable_file, wd.shown, &mem))
    findings.push_back(std::move(x));
  // --slurm: what `run --slurm` refuses (a reservation of GPU ids without a Slurm reservation).
  if (f.slurm)
    if (std::string why = slurm_plan_problem(*plan, cluster_shards(f)); !why.empty())
      findings.push_back({true, "", "--slurm: " + why});
  // Snapshots of the code: the workdir must be in a git repository.
  {
    GitSnapshots snapshots;
    if (std::string problem = snapshot_problem(f, *plan, wd, snapshots); !problem.empty())
      findings.push_back({true, "", std::move(problem)});
  }
  // What earlier runs of the same kind of job took (the event log, when there is one).
  std::vector<Event> events = read_events(events_path_for(plan_paths(f).state), nullptr);
  if (!events.empty()) {
    State state;
    try {
      state = read_state(plan_paths(f));
    } catch (const StoreError&) {
    }
    std::vector<Learned> learned = learn_estimates(attempts_of(events), *plan);
    for (EstimateWarning& w : estimate_warnings(*plan, state, learned))
      findings.push_back({false, std::move(w.job), std::move(w.text)});
    for (EstimateWarning& w : memory_warnings(*plan, state, learned, mem.gpu_room(0)))
      findings.push_back({false, std::move(w.job), std::move(w.text)});
  }
  size_t errors = 0, warnings = 0;
  Policy so;
  so.node_gpus = *gpus;
  so.backfill_max_hours = f.backfill_max_hours;
  for (const Finding& x : findings) {
    (x.error ? errors : warnings)++;
    fmt::print("{}: {}{}\n", x.error ? "error" : "warning", x.job.empty() ? "" : "job '" + x.job + "': ",
               finding_text(*plan, so, x));
  }
  fmt::print("{}: {} job(s), {} error(s), {} warning(s)\n", f.plan, plan->jobs.size(), errors, warnings);
  if (errors) return kExitBadInput;
  return warnings && f.strict ? kExitFailure : 0;
}

void add_validate_command(CLI::App& app, Flags& f, Action& action) {
  auto* validate = app.add_subcommand(
      "validate", "check the whole plan before a long run: deadlocks, missing scripts and files, missing estimates");
  add_flags(validate, f, {kGpus, kBackfill});
  add_gpu_memory(validate, f);
  validate->add_flag("--strict", f.strict,
                    "exit 1 when there are warnings, and take fields gpuq does not read for errors (exit 2)");
  validate->add_flag("--slurm", f.slurm, "check also what `run --slurm` needs (reservations naming a Slurm reservation)");
  validate->callback([&] { action = [&] { return cmd_validate(f); }; });
}

}  // namespace gpuq::cli

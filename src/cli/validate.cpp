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

#include "cli.h"

namespace gpuq::cli {

int cmd_validate(const Flags& f) {
  auto gpus = node_gpus(f);
  if (!gpus) return kExitBadInput;
  std::vector<std::string> loader_warnings, unknown_fields;
  auto plan = load_or_report(f, *gpus, &loader_warnings, &unknown_fields);
  if (!plan) return kExitBadInput;
  auto readable = [](const std::string& p) {
    struct stat st;
    return ::access(p.c_str(), R_OK) == 0 && ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
  };
  // The loader's warnings first (its checks come first), counted and printed as validate's own.
  std::vector<Finding> findings = loader_findings(loader_warnings);
  // Fields gpuq does not read: notes the plan may carry, or a mistake; --strict takes them for mistakes.
  for (std::string& u : unknown_fields) findings.push_back({f.strict, "", std::move(u)});
  for (Finding& x : validate_plan(*plan, *gpus, f.backfill_max_hours, LocalFiles(), readable))
    findings.push_back(std::move(x));
  // What earlier runs of the same kind of job took (the event log, when there is one).
  std::vector<Event> events = read_events(events_path_for(paths_for(f.plan).state), nullptr);
  if (!events.empty()) {
    State state;
    try {
      state = read_state(paths_for(f.plan));
    } catch (const StoreError&) {
    }
    for (EstimateWarning& w : estimate_warnings(*plan, state, learn_estimates(attempts_of(events), *plan)))
      findings.push_back({false, std::move(w.job), std::move(w.text)});
  }
  size_t errors = 0, warnings = 0;
  for (const Finding& x : findings) {
    (x.error ? errors : warnings)++;
    fmt::print("{}: {}{}\n", x.error ? "error" : "warning", x.job.empty() ? "" : "job '" + x.job + "': ", x.text);
  }
  fmt::print("{}: {} job(s), {} error(s), {} warning(s)\n", f.plan, plan->jobs.size(), errors, warnings);
  if (errors) return kExitBadInput;
  return warnings && f.strict ? kExitFailure : 0;
}

void add_validate_command(CLI::App& app, Flags& f, Action& action) {
  auto* validate = app.add_subcommand(
      "validate", "check the whole plan before a long run: deadlocks, missing scripts and files, missing estimates");
  add_flags(validate, f, {kGpus, kBackfill});
  validate->add_flag("--strict", f.strict,
                    "exit 1 when there are warnings, and take fields gpuq does not read for errors (exit 2)");
  validate->callback([&] { action = [&] { return cmd_validate(f); }; });
}

}  // namespace gpuq::cli

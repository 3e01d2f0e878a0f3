// `gpuq validate`.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "gpuq/core/validate.h"
#include "gpuq/live/commands.h"
#include "gpuq/views/reasons.h"

#include "cli.h"
#include "gpuq/live/backend.h"

namespace gpuq::cli {

namespace {

// The plan is not valid: its problems, what the files say, then its warnings, in one round.
int print_invalid(const Flags& f, const Validation& v) {
  size_t n = v.errors.size() + v.file_findings.size();
  fmt::print(stderr, "gpuq: the plan {} is not valid ({} problem{}):\n", f.plan, n, n == 1 ? "" : "s");
  for (const auto& e : v.errors) fmt::print(stderr, "  {}\n", e);
  for (const Finding& x : v.file_findings)
    fmt::print(stderr, "  {}: {}{}\n", f.plan, x.job.empty() ? "" : "job '" + x.job + "': ", x.text);
  if (!v.warned.empty()) fmt::print(stderr, "and {} warning{}:\n", v.warned.size(), v.warned.size() == 1 ? "" : "s");
  for (const auto& w : v.warned) fmt::print(stderr, "  warning: {}\n", w);
  return kExitBadInput;
}

}  // namespace

int cmd_validate(Flags& f) {
  std::unique_ptr<Backend> backend = chosen_backend(f);  // a batch queue's refusals too, when it is asked for
  Validation v = validate_setup(f, f.strict, backend->batch() ? backend.get() : nullptr);
  if (!v.bad_gpus.empty() || !v.not_a_plan.empty()) {
    fmt::print(stderr, "gpuq: {}\n", v.bad_gpus.empty() ? "plan " + f.plan + ": " + v.not_a_plan : v.bad_gpus);
    return kExitBadInput;
  }
  if (!v.plan) return print_invalid(f, v);
  const Plan& plan = *v.plan;
  // The sweeps, as the jobs they expand into.
  for (const Sweep& sw : plan.sweeps) {
    std::string ids;
    for (size_t k = sw.first; k < sw.first + sw.count; ++k) ids += (ids.empty() ? "" : ", ") + plan.jobs[k].id;
    fmt::print("sweep '{}': {} job(s): {}\n", sw.id, sw.count, ids);
  }
  size_t errors = 0, warnings = 0;
  Policy so;
  so.node_gpus = v.gpus;
  so.backfill_max_hours = f.backfill_max_hours;
  for (const Finding& x : v.findings) {
    (x.error ? errors : warnings)++;
    fmt::print("{}: {}{}\n", x.error ? "error" : "warning", x.job.empty() ? "" : "job '" + x.job + "': ",
               finding_text(plan, so, x));
  }
  fmt::print("{}: {} job(s), {} error(s), {} warning(s)\n", f.plan, plan.jobs.size(), errors, warnings);
  if (errors) return kExitBadInput;
  return warnings && f.strict ? kExitFailure : 0;
}

void add_validate_command(CLI::App& app, Flags& f, Action& action) {
  auto* validate = app.add_subcommand(
      "validate", "check the whole plan before a long run: deadlocks, missing scripts and files, missing estimates");
  add_flags(validate, f, SettingCommand::kValidate);
  validate->add_flag("--strict", f.strict,
                    "exit 1 when there are warnings, and take fields gpuq does not read for errors (exit 2)");
  add_batch_check_flag(validate, f);
  validate->callback([&] { action = [&] { return cmd_validate(f); }; });
}

}  // namespace gpuq::cli

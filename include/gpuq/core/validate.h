// `gpuq validate`: what only a look at the whole plan finds, before a long run starts.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "gpuq/core/plan.h"
#include "gpuq/core/rules.h"
#include "gpuq/core/simulate.h"

namespace gpuq {

/// One finding: an error (the plan cannot finish, or a job cannot run) or a warning.
struct Finding {
  bool error;
  std::string job;   ///< the job it is about ("" for the plan as a whole)
  std::string text;  ///< what is wrong, and the fix (empty when `stuck` says it)
  std::optional<Stuck> stuck{};  ///< the job can never start, and why (views word it; the fix: the reservations)
};

/// Checks a loaded plan: reservations that wait on each other (the plan cannot
/// finish), a reservation member that depends on a job needing the reserved
/// GPUs, scripts that are missing or unreadable, file: deps missing now that no
/// job produces, and (warnings) jobs without est_hours. `files` expands the
/// paths and says whether a file exists; warnings too for est_hours over
/// time_limit_hours and a warn_signal sent no later than the job's start; `readable(path)` whether a script can be read.
/// `folder` says where relative paths were taken from ("/home/me (the current folder)"); the
/// checks of each job (job_findings) close the list.
std::vector<Finding> validate_plan(const Plan& plan, const std::vector<int>& node_gpus, double backfill_max_hours,
                                   const FileChecks& files, const std::function<bool(const std::string&)>& readable,
                                   const std::string& folder = "the folder `gpuq run` starts in",
                                   const Policy* mem = nullptr);

/// The checks of each job alone, which need no valid plan (validate makes them on the jobs of a
/// plan that is not valid too, so that one round shows every problem of a job): a packed job
/// that no GPU's memory takes (with `mem`, the node's memory settings; none: not looked at), and
/// warnings for no est_hours, est_hours over time_limit_hours or over a week, on_quiet "kill"
/// without quiet_minutes, a warn_signal sent no later than the job's start.
std::vector<Finding> job_findings(const Plan& plan, const Policy* mem = nullptr);

/// The checks of the files alone (scripts, file: deps), which need no valid plan: validate
/// makes them on the jobs of a plan that is not valid too. Missing scripts are one finding.
std::vector<Finding> file_findings(const Plan& plan, const FileChecks& files,
                                   const std::function<bool(const std::string&)>& readable, const std::string& folder);

/// The jobs (positions) whose script `readable` refuses, among those `wanted` lets through.
std::vector<size_t> jobs_without_script(const Plan& plan, const FileChecks& files,
                                        const std::function<bool(const std::string&)>& readable,
                                        const std::function<bool(size_t)>& wanted = nullptr);

/// Whether job i waits on another job of the plan (a dep, `after:`, `produced_by`) that `done`
/// does not call done: such a job's missing script may yet be written by the job it waits on.
bool waits_on_a_job(const Plan& plan, size_t i, const std::function<bool(size_t)>& done);

/// One message for all of them: the scripts (each with a "did you mean", nearest_script), the
/// folder relative paths were taken from (`folder`), and how to change it.
std::string missing_scripts_text(const Plan& plan, const std::vector<size_t>& jobs, const FileChecks& files,
                                 const std::string& folder);

/// A script that is there near a missing `script`, for a "did you mean": a script of the plan
/// that `files` finds and that is not among `missing` (nearest_name), else a file near it
/// (nearest_existing_path); "" when none.
std::string nearest_script(const Plan& plan, const std::string& script, const FileChecks& files,
                           const std::vector<std::string_view>& missing = {});

/// The loader's warnings (a reservation's GPUs outside --gpus: the plan is usable)
/// as validate's warnings about the plan as a whole, in the loader's words.
std::vector<Finding> loader_findings(const std::vector<std::string>& warnings);

/// The rule validate and `gpuq add` share on a script that is not a readable file: a path with a
/// space in it is taken for a command line, whose arguments go in "args" (kArgsGoInArgs).
bool script_holds_arguments(const std::string& script);
inline constexpr const char* kArgsGoInArgs = "a script's arguments go in \"args\", a list of strings, not in \"script\"";


}  // namespace gpuq

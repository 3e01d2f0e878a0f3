// `gpuq validate`: what only a look at the whole plan finds, before a long run starts.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "gpuq/core/plan.h"
#include "gpuq/core/rules.h"

namespace gpuq {

/// One finding: an error (the plan cannot finish, or a job cannot run) or a warning.
struct Finding {
  bool error;
  std::string job;   ///< the job it is about ("" for the plan as a whole)
  std::string text;  ///< what is wrong, and the fix
};

/// Checks a loaded plan: reservations that wait on each other (the plan cannot
/// finish), a reservation member that depends on a job needing the reserved
/// GPUs, scripts that are missing or unreadable, file: deps missing now that no
/// job produces, and (warnings) jobs without est_hours. `files` expands the
/// paths and says whether a file exists; warnings too for est_hours over
/// time_limit_hours and a warn_signal sent no later than the job's start; `readable(path)` whether a script can be read.
std::vector<Finding> validate_plan(const Plan& plan, const std::vector<int>& node_gpus, double backfill_max_hours,
                                   const FileChecks& files, const std::function<bool(const std::string&)>& readable);

/// The loader's warnings (a reservation's GPUs outside --gpus: the plan is usable)
/// as validate's warnings about the plan as a whole, in the loader's words.
std::vector<Finding> loader_findings(const std::vector<std::string>& warnings);

}  // namespace gpuq

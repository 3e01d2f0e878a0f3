// The views as JSON: `status --json` and `simulate --json` (schemas in the README).
#pragma once

#ifdef GPUQ_CORE
#error "the core does not include views: it returns data, views print it"
#endif

#include <string>

#include "gpuq/core/outlook.h"
#include "gpuq/core/simulate.h"

namespace gpuq {

/// `status --json`: {"plan", "now", "finish", "counts", "jobs": [JobView...]}.
std::string outlook_json(const Plan& plan, const std::string& plan_path, const Outlook& o);

/// `simulate --json`: {"plan", "makespan_hours", "utilization", "stuck", "jobs": [...]}, times in hours.
std::string simulation_json(const Plan& plan, const std::string& plan_path, const Simulation& sim,
                            const SimOptions& opt);

}  // namespace gpuq

// The views as JSON: `status --json` and `simulate --json` (schemas in doc/commands.md).
#pragma once

#ifdef GPUQ_CORE
#error "the core does not include views: it returns data, views print it"
#endif

#include <nlohmann/json.hpp>

#include <optional>
#include <string>

#include "gpuq/core/outlook.h"
#include "gpuq/core/simulate.h"

namespace gpuq {

/// `status --json`: {"plan", "now", "finish", "counts", "plan_loaded_at", "paused", "paused_since",
/// "run", "settings", "jobs": [JobView...]}; "run" (and "plan_loaded_at") null when no `gpuq run`
/// holds the plan; "settings" as given (each setting's value and source), left out when null.
std::string outlook_json(const Plan& plan, const State& state, const std::string& plan_path, const Outlook& o,
                         const RunSeen& run = RunSeen{}, const nlohmann::ordered_json& settings = nullptr);

/// `simulate --json`: {"plan", "makespan_hours", "utilization", "stuck", "jobs": [...]}, times in hours.
std::string simulation_json(const Plan& plan, const std::string& plan_path, const Simulation& sim,
                            const SimOptions& opt);

}  // namespace gpuq

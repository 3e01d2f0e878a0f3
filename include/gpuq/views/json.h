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

/// What `status` knows of the plan's `gpuq run` (its PLAN.run.json and run lock), as plain data.
struct RunSeen {
  bool running = false;                   ///< a `gpuq run` holds the plan's run lock now
  std::optional<long long> pid;
  std::string host;
  std::optional<double> started, last_tick, ended;  ///< unix seconds
  std::optional<double> plan_loaded_at;   ///< the modification time of the plan it loaded
  bool plan_changed = false;              ///< the plan on disk is not the one it loaded
  std::optional<size_t> plan_problems;    ///< the plan on disk has this many problems (run goes on with its own)
  bool slurm = false;                     ///< the run is a run --slurm (its problems include Slurm's)
  std::optional<double> paused_since;     ///< `gpuq pause` holds the plan (not run's own: the plan's)
  std::optional<long long> file_pid;      ///< PLAN.run.json is an earlier run's (this pid): the running one has not written it
  std::optional<double> poll;             ///< the run's --poll: a last tick many polls ago is said
};

/// `status --json`: {"plan", "now", "finish", "counts", "plan_loaded_at", "paused", "paused_since",
/// "run", "settings", "jobs": [JobView...]}; "run" (and "plan_loaded_at") null when no `gpuq run`
/// holds the plan; "settings" as given (each setting's value and source), left out when null.
std::string outlook_json(const Plan& plan, const State& state, const std::string& plan_path, const Outlook& o,
                         const RunSeen& run = RunSeen{}, const nlohmann::ordered_json& settings = nullptr);

/// `simulate --json`: {"plan", "makespan_hours", "utilization", "stuck", "jobs": [...]}, times in hours.
std::string simulation_json(const Plan& plan, const std::string& plan_path, const Simulation& sim,
                            const SimOptions& opt);

}  // namespace gpuq

// What a user asks of a live queue: why each job waits, when it will finish
// (the remaining work simulated from the live state with the same pass), as
// text, JSON and an SVG Gantt chart.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gpuq/core/plan.h"
#include "gpuq/core/local_time.h"
#include "gpuq/core/rules.h"
#include "gpuq/core/simulate.h"
#include "gpuq/core/state.h"

namespace gpuq {


/// One job as `status --json` and `simulate --json` report it.
struct JobView {
  size_t job;
  std::string status;                 ///< the state's status, or "predicted" in simulate
  std::vector<int> gpus;
  long long attempts = 0;
  std::optional<long long> exit;
  std::optional<std::string> outcome; ///< how its last attempt ended (outcome_name), done and failed only
  std::optional<double> start, end;   ///< status: unix seconds; simulate: hours from the start
  double elapsed = 0;                 ///< seconds run (status)
  std::string why;                    ///< why it waits; "" when it does not
  bool overdue = false;               ///< running past its est_hours
  bool hung = false;                  ///< running, and the hang watchdog says hung? (watchdog.h)
  bool queued_in_slurm = false;       ///< running to gpuq, but Slurm has not started it (rules.h)
  bool after_resume = false;          ///< paused: predicted to start only after `gpuq resume` (no time)
  std::optional<double> predicted_start, predicted_finish;  ///< same unit as start/end
};

/// The live queue seen from outside.
struct Outlook {
  double now = 0;
  std::vector<JobView> jobs;            ///< plan order
  std::optional<double> finish;         ///< when the last job is predicted to end (unix seconds)
  std::vector<size_t> never;            ///< jobs predicted never to start
  Simulation sim;                       ///< the prediction, hours from now
  std::vector<size_t> order;            ///< predicted_order(*this, explain_first), when make_outlook needed it
  size_t order_sorted = 0;              ///< how many of `order` are in order
  bool paused = false;                  ///< made with Policy::paused: nothing new starts in `sim`
};

/// The live state as a simulation's starting point, where the rule book puts
/// each job once the next tick's changes (`tick`, from plan_tick) are made: so
/// the prediction starts at time 0 exactly the jobs that tick starts.
SimStart live_start(const Plan& plan, const State& state, const TickPlan& tick, const Policy& p, double now,
                    const FileChecks& files);

/// The same, working out the next tick itself. `free` are the GPUs free now.
SimStart live_start(const Plan& plan, const State& state, const Policy& p, double now, GpuMask free,
                    const FileChecks& files);

/// Some entry of the state is running (a job of the plan or not).
bool any_running(const State& state);

/// Why each job waits, and when each will start and finish. `free` are the
/// GPUs free now (none of the plan's jobs, nothing over --max-used-mib).
/// With `explain_first`, only that many jobs get their `why`: the first not
/// done in predicted order, the rows `status` prints without --all.
/// Each file: dep is looked at once. `others` says why each GPU another user holds is
/// busy (held_by_others), which a job waiting for GPUs names.
Outlook make_outlook(const Plan& plan, const State& state, const Policy& p, double now, GpuMask free,
                     const FileChecks& files, std::optional<size_t> explain_first = std::nullopt,
                     const std::map<int, std::string>& others = {});

/// The jobs not done, by predicted start (never last), plan order among equals:
/// the order `status` lists them in. With `first`, only the first `first` of
/// them are in that order, and the rest follow in no order (a partial sort).
std::vector<size_t> predicted_order(const Outlook& o, size_t first = static_cast<size_t>(-1));

}  // namespace gpuq

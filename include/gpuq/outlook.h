// What a user asks of a live queue: why each job waits, when it will finish
// (the remaining work simulated from the live state with the same pass), as
// text, JSON and an SVG Gantt chart.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "gpuq/plan.h"
#include "gpuq/rules.h"
#include "gpuq/simulate.h"
#include "gpuq/state.h"

namespace gpuq {

/// Local time of day of `t` (unix seconds) as "14:02", with the weekday
/// ("Tue 14:02") when it is not the day of `now`.
std::string local_time(double t, double now);

/// Rows `status` shows below the original's, without --all.
constexpr size_t kOutlookRows = 30;

/// One job as `status --json` and `simulate --json` report it.
struct JobView {
  size_t job;
  std::string status;                 ///< the state's status, or "predicted" in simulate
  std::vector<int> gpus;
  long long attempts = 0;
  std::optional<long long> exit;
  std::optional<double> start, end;   ///< status: unix seconds; simulate: hours from the start
  double elapsed = 0;                 ///< seconds run (status)
  std::string why;                    ///< why it waits; "" when it does not
  bool overdue = false;               ///< running past its est_hours
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
/// Each file: dep is looked at once.
Outlook make_outlook(const Plan& plan, const State& state, const Policy& p, double now, GpuMask free,
                     const FileChecks& files, std::optional<size_t> explain_first = std::nullopt);

/// The jobs not done, by predicted start (never last), plan order among equals:
/// the order `status` lists them in. With `first`, only the first `first` of
/// them are in that order, and the rest follow in no order (a partial sort).
std::vector<size_t> predicted_order(const Outlook& o, size_t first = static_cast<size_t>(-1));

/// The lines `status` prints below the original's rows: each job not done, in
/// predicted order, with its prediction and why it waits; then the plan's finish.
/// At most `limit` jobs unless `all`.
std::string format_outlook(const Plan& plan, const Outlook& o, bool all, size_t limit = kOutlookRows);

/// `status --json`: {"plan", "now", "finish", "counts", "jobs": [JobView...]}.
std::string outlook_json(const Plan& plan, const std::string& plan_path, const Outlook& o);

/// `simulate --json`: {"plan", "makespan_hours", "utilization", "stuck", "jobs": [...]}, times in hours.
std::string simulation_json(const Plan& plan, const std::string& plan_path, const Simulation& sim,
                            const SimOptions& opt);

/// A Gantt chart: one row per GPU and rows for 0-GPU jobs, a time axis in hours,
/// jobs labelled and coloured by status (done, running, failed, predicted).
/// `bars` are (job, status, start hour, end hour, gpus); `now_h` draws a line.
struct Bar {
  size_t job;
  std::string status;
  double start, end;
  std::vector<int> gpus;
};
std::string gantt_svg(const Plan& plan, const std::vector<Bar>& bars, const std::vector<int>& node_gpus,
                      std::optional<double> now_h, const std::string& title);

}  // namespace gpuq

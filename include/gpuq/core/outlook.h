// What a user asks of a live queue: why each job waits, when it will start and finish. The
// engine, loaded with the live state, takes the next tick of `run` (the reasons are the
// engine's, as data: views word them); the prediction (simulate.h) carries it on to the end.
#pragma once

#include <map>
#include <set>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpuq/core/engine.h"
#include "gpuq/core/local_time.h"
#include "gpuq/core/node.h"
#include "gpuq/core/plan.h"
#include "gpuq/core/progress.h"
#include "gpuq/core/rules.h"
#include "gpuq/core/simulate.h"
#include "gpuq/core/state.h"

namespace gpuq {

/// One job as `status --json` and `simulate --json` report it.
struct JobView {
  size_t job;
  std::string_view status;            ///< the state's status, or "predicted" in simulate (a static string)
  std::vector<int> gpus;
  long long attempts = 0;
  std::optional<long long> exit;
  std::optional<std::string_view> outcome;  ///< how its last attempt ended (outcome_name, static), done and failed only
  std::optional<double> start, end;   ///< status: unix seconds; simulate: hours from the start
  double elapsed = 0;                 ///< seconds run (status)
  int32_t wait_at = -1;               ///< why it waits at the next tick: Outlook::waits[wait_at] (-1: not worked
                                      ///< out; status without --all explains the rows it shows)
  int32_t fate_at = -1;               ///< predicted never to start: sim.stuck[fate_at] (or sim.blocked, `doomed`)
  bool doomed = false;                ///< blocked by a failure the prediction foresees (sim.blocked)
  bool overdue = false;               ///< running past its est_hours
  bool hung = false;                  ///< running, and the hang watchdog says hung? (watchdog.h)
  std::optional<double> idle_for;     ///< running, and the idle watch says idle: for this many seconds (watchdog.h)
  bool queued = false;                ///< running to gpuq, but the batch queue has not started it
  bool after_resume = false;          ///< paused: predicted to start only after `gpuq resume` (no time)
  bool not_in_run_plan = false;       ///< the running `gpuq run` loaded a plan without this job
  std::optional<double> predicted_start, predicted_finish;  ///< same unit as start/end
  std::optional<double> progress;     ///< running: the latest progress `run` read (0-1), if any
  std::optional<FinishSource> finish_source;  ///< running: where its predicted end comes from
};

/// What a `gpuq run` of the plan is doing, as far as the reasons care.
struct RunContext {
  bool known = false;                     ///< status looked (without it the reasons assume a run goes)
  bool running = true;                    ///< a `gpuq run` holds the plan
  std::optional<double> plan_loaded_at;   ///< when it loaded the plan it runs
};

/// The live queue seen from outside.
struct Outlook {
  double now = 0;
  Policy policy;                        ///< the settings it was predicted with
  std::vector<JobView> jobs;            ///< plan order
  std::optional<double> finish;         ///< when the last job is predicted to end (unix seconds)
  std::vector<size_t> never;            ///< jobs predicted never to start
  Simulation sim;                       ///< the prediction, hours from now
  std::vector<size_t> order;            ///< predicted_order(*this, explain_first), when make_outlook needed it
  size_t order_sorted = 0;              ///< how many of `order` are in order
  bool paused = false;                  ///< made with Policy::paused: nothing new starts in `sim`
  std::map<int, std::string> others;    ///< GPUs another user holds, and why (ReadingSeen::others)
  RunContext run;                       ///< status's look at the plan's `gpuq run`
  std::vector<Why> waits;               ///< the reasons worked out (JobView::wait_at)
  std::vector<std::vector<std::string>> missing_files;  ///< per reason: its file: deps missing now, expanded
  std::map<size_t, std::string> queue_reasons;  ///< the batch queue's own word on why a job waits
  std::map<size_t, NodeWhy> node_reasons;       ///< why a shared node keeps a ready job waiting (status)
  std::set<std::string> stale_snapshots;  ///< commits of waiting jobs' snapshots older than the tree (status looks)

  /// Why `v` waits, or null when not worked out.
  const Why* wait_of(const JobView& v) const { return v.wait_at < 0 ? nullptr : &waits[static_cast<size_t>(v.wait_at)]; }
  /// Why `v` never starts, or null.
  const Stuck* fate_of(const JobView& v) const {
    if (v.fate_at < 0) return nullptr;
    return &(v.doomed ? sim.blocked : sim.stuck)[static_cast<size_t>(v.fate_at)];
  }
};

/// The live state as a prediction's starting point: each job's life (times in hours from
/// `now`), its files, the GPUs busy but not by the plan (`free`: the GPUs free now).
/// `mem_other`: where jobs pack, the GiB per GPU in use beyond the running packed jobs'
/// declared (memory_use, gpu_use.h), as `run`'s next tick sees it.
/// `node`: on a shared node, the GPUs other runs' jobs hold and until when (busy till then, not
/// only until run's next look), and when the node starts the plan's ready jobs.
LiveStart live_start(const Plan& plan, const State& state, const Policy& p, double now, GpuMask free,
                     const FileChecks& files, std::vector<double> mem_other = {},
                     const OnNode& node = {});

/// Why each job waits, and when each will start and finish. `free` are the
/// GPUs free now (none of the plan's jobs, nothing over --max-used-mib).
/// With `explain_first`, only that many jobs are explained: the first not
/// done in predicted order, the rows `status` prints without --all.
/// Each file: dep is looked at once. `others` says why each GPU another user holds is
/// busy (ReadingSeen::others), which a job waiting for GPUs names.
Outlook make_outlook(const Plan& plan, const State& state, const Policy& p, double now, GpuMask free,
                     const FileChecks& files, std::optional<size_t> explain_first = std::nullopt,
                     const std::map<int, std::string>& others = {}, std::vector<double> mem_other = {},
                     const OnNode& node = {});

/// The jobs not done, by predicted start (never last), plan order among equals:
/// the order `status` lists them in. With `first`, only the first `first` of
/// them are in that order, and the rest follow in no order (a partial sort).
std::vector<size_t> predicted_order(const Outlook& o, size_t first = static_cast<size_t>(-1));

/// Rows `status` shows below the original's, without --all (the outlook explains only these).
constexpr size_t kOutlookRows = 30;

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

}  // namespace gpuq

// Where a plan's jobs run: on this machine (the default), or through a batch queue that places
// them on a cluster's nodes (`run --slurm`: live/slurm.h is its adapter). The one seam through
// which the commands and the look reach a backend: what it refuses in a plan, the plan as it
// runs there, what its queue says of the jobs in it, a launcher for the control commands, and
// the run itself. Only the adapters name the queue they drive.
#pragma once

#if defined(GPUQ_CORE) || defined(GPUQ_VIEWS)
#error "a live header (the OS behind ports) in the core or the views: pass data in instead"
#endif

#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gpuq/core/plan.h"
#include "gpuq/core/state.h"
#include "gpuq/live/ports.h"
#include "gpuq/live/queue.h"
#include "gpuq/live/store.h"

namespace gpuq {

struct RunInfo;

/// The options of a run through a batch queue, as the CLI's flags give them.
struct BatchAsk {
  std::string partition, account, qos;
  std::vector<std::string> extra_args;  ///< passed to each submission as written
  double time_margin = 1.5;             ///< a job without time_limit_hours asks for est_hours x this
  long long max_queued = 200;           ///< at most this many of the plan's jobs in the queue
  double gpu_mem_gib = 80;              ///< a GPU's memory (the queue does not say), for packed jobs' shares
  double gpu_mem_headroom = 5;
};

class Backend {
 public:
  virtual ~Backend() = default;
  /// True for a batch queue (it places the jobs; `run` only submits them).
  virtual bool batch() const = 0;
  /// What this backend cannot run in `plan` ("" when it takes it). `ask_cluster`: ask the
  /// cluster what it offers (a packed job needs GPU shares); else only the plan is looked at.
  virtual std::string plan_problem(const Plan& plan, bool ask_cluster) const = 0;
  /// The plan as this backend schedules it (a batch queue's reservations are its own: none
  /// closes GPU ids of this machine).
  virtual Plan plan_for(const Plan& plan) const { return plan; }
  /// Lines on how a prediction of the plan on a cluster of this backend treats it (simulate --nodes).
  virtual std::vector<std::string> prediction_notes(const Plan&) const { return {}; }
  /// What the queue says of the jobs of `state` in it, as `seen_by` (the launcher that read them:
  /// read.h's see_jobs) last asked it. Empty on this machine.
  virtual QueueView queue_view(Launcher& seen_by, const State& state) const {
    (void)seen_by, (void)state;
    return {};
  }
  /// A launcher for the control commands (kill, hold, retry, requeue) of `plan`.
  virtual std::unique_ptr<Launcher> launcher(const Plan& plan, const PlanPaths& paths) const = 0;
  /// `gpuq run` of `plan` (as plan_for gives it) through this backend: run_loop.h's run_queue
  /// over its ports. `poll_given`: the poll interval was set (else a batch queue polls less often).
  virtual int run(Plan plan, const PlanPaths& paths, RunOptions opt, bool poll_given, std::FILE* out, RunInfo* info,
                  const std::string* plan_text) const = 0;
  /// "" for this machine; else the run's mode as PLAN.run.json and messages name it ("--slurm").
  virtual std::string run_flag() const { return ""; }
};

/// This machine: jobs are processes of `run`'s own.
std::unique_ptr<Backend> local_backend();

/// A cluster's batch queue, with `ask` for its submissions (the only batch queue gpuq drives is
/// Slurm: live/slurm.h).
std::unique_ptr<Backend> batch_backend(const BatchAsk& ask);

/// The backend a plan's jobs are in now: the batch queue when the state's running jobs were
/// submitted to one or its run (`info`) submits to one, else this machine.
std::unique_ptr<Backend> backend_in_use(const State* state, const RunInfo* info, const BatchAsk& ask = {});

/// Where a state's running jobs belong to the other kind of run than `batch` (queue ids read as
/// pids, or pids sent to the queue): the problem, or "".
std::string mode_mix_problem(const State& state, bool batch);

}  // namespace gpuq

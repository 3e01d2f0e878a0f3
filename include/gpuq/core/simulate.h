// The prediction: the engine (engine.h) driven by a virtual clock and an estimate launcher,
// which turns each launch into an exit at the job's est_hours, or a timeout at its limit
// (and, with retry_on_timeout, its automatic retries). `simulate` starts from an empty node;
// `status` and `simulate --from-state` from the live state. The rules are the engine's: this
// file only says what the predicted world does (when jobs end, when files appear).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gpuq/core/engine.h"
#include "gpuq/core/life.h"
#include "gpuq/core/plan.h"
#include "gpuq/core/rules.h"
#include "gpuq/core/schedule.h"

namespace gpuq {

/// Settings of a simulation: the rules' (the simulator reads the node's GPUs and the backfill limit).
using SimOptions = Policy;

/// The first instant after now: when a prediction from a live state lets happen
/// what the next tick cannot (an overdue job ends, a late file appears).
inline constexpr double kSoon = 1e-6;  // hours

/// The most nodes a simulation takes (SimOptions::nodes): it keeps a row of GPU end times per
/// node and looks over every node at each event.
inline constexpr int kMaxNodes = 4096;

/// GPUs a job of another run on a shared node holds, until when (core/node.h; status's node look);
/// or, for a job of theirs that waits, will hold from its predicted start.
struct HeldGpus {
  GpuMask gpus = 0;
  double until = 0;    ///< when its job is predicted to end (unix seconds, or hours from now in LiveStart)
  bool yours = false;  ///< a job of another run of the same user: it counts against their cap (Policy::max_gpus)
  /// When its job is predicted to start (same units as `until`; 0: it runs now). A job of the
  /// plan may start on those GPUs before then (the node's decision then is not known): the
  /// prediction does not end it there.
  double from = 0;
  bool holds_at(double t, double eps) const { return from <= t + eps && until > t + eps; }
};

/// What a node shared with other runs adds to a live prediction (status's node look), in unix
/// seconds: their jobs' GPUs (LiveStart::held), and when the node starts the plan's ready jobs
/// (LiveStart::not_before).
struct OnNode {
  std::vector<HeldGpus> held;
  std::vector<std::pair<size_t, double>> not_before;
};

/// Where a prediction of a live queue (`status`, `simulate --from-state`) starts: each job's
/// life as the state records it, its times in hours from now (a running job's start is then
/// negative), after the refresh of the jobs that ended. At time 0 the prediction's first tick
/// is the next tick of `run`: it starts exactly the jobs that tick starts.
struct LiveStart {
  std::vector<Life> lives;          ///< per job; times in hours from now
  /// Per job, the hours of work its preempted attempts did since it last started afresh (a
  /// resumed job runs what is left of its estimate); empty when none was preempted.
  std::vector<double> done_hours;
  std::vector<char> files_present;  ///< per job: every file: dep exists now
  GpuMask busy = 0;                 ///< GPUs busy now but not by a running job of the plan (another
                                    ///< user's memory, a kill in its grace time): free from busy_hours
  double busy_hours = kSoon;         ///< when `busy` are free: `run`'s next look (--poll), no sooner
  GpuMask ending = 0;               ///< GPUs of jobs gpuq stopped whose processes are ending (in
                                    ///< their --kill-grace): free at kSoon, as run frees them when
                                    ///< the group is gone (it wakes for that), not at its next poll
  bool others_running = false;      ///< an entry of the state that is no job of the plan runs
  /// On a shared node: the GPUs each job of the other runs holds, until it is predicted to end
  /// (hours from now, no sooner than kSoon), and those their waiting jobs are predicted to hold
  /// (from their start). They are busy meanwhile.
  std::vector<HeldGpus> held;
  /// (job, hours from now): on a shared node, when the node-wide prediction starts a ready job of
  /// the plan (its fair order, others' wants, the caps): it waits till then.
  std::vector<std::pair<size_t, double>> not_before;
  /// Where jobs pack: GiB per GPU in use beyond the running packed jobs' declared, until
  /// busy_hours (the engine's Tick::mem_other). Empty: none.
  std::vector<double> mem_other;
  /// Per job (empty: none): where a running job's progress says it ends (hours from now, as
  /// finish_from_entry says, progress.h); NaN where its estimate stands.
  std::vector<double> progress_end;
};

/// One job of the predicted timeline (one row per attempt).
struct SimRow {
  size_t job;
  double start;
  double end;
  std::vector<int> gpus;
  int node = 0;  ///< with SimOptions::nodes > 1: the node (0-based) its GPUs are on
};

/// A job predicted never to start, and why (as data: views word it).
struct Stuck {
  size_t job;
  Why why;
};

/// Why a prediction never starts job `s.job` ("waits for a, which never ran", "needs 4 GPUs, 2
/// of 8 are open to it; ..."), or, for Why::Blocked, which predicted failure blocks it: said by
/// `run`, `simulate`, `status` and `validate` alike.
std::string stuck_text(const Plan& plan, const Policy& p, const Stuck& s);
/// "needs 32 cores, 12 free", "needs 40 GiB of host memory, 12.5 free": what a Why::Host waits for.
std::string host_text(const Why& w);

/// The predicted timeline.
/// A preemption the prediction plays: `job` gives its GPUs to `by` at `at` (hours), having run
/// `ran` hours of that attempt; it resumes at its next row.
struct SimPreemption {
  size_t job, by;
  double at, ran;
};

struct Simulation {
  std::vector<SimRow> rows;          ///< in the order jobs were started
  std::vector<SimPreemption> preemptions;  ///< in the order they come
  /// When the job preemption `p` stopped starts again (its next row), if it does.
  std::optional<double> resumes_at(const SimPreemption& p) const {
    for (const SimRow& r : rows)
      if (r.job == p.job && r.start > p.at + 1e-9) return r.start;
    return std::nullopt;
  }
  std::vector<std::string> notes;    ///< stall-breaker notes (fix 12), for stderr
  std::vector<Stuck> stuck;          ///< non-empty when the plan cannot be scheduled
  std::vector<Stuck> blocked;        ///< jobs predicted never to run because a plain dep of theirs (or of
                                     ///< their deps) is predicted to fail for good: to time out (est_hours
                                     ///< over its limit) at its last attempt; Why::Blocked, `jobs` the root
  double stuck_at = 0;               ///< the time it got stuck
};

/// The engine over the predicted world, step by step (make_outlook keeps the engine as the
/// first tick left it, for the reasons; `simulate` runs it through).
class Prediction {
 public:
  /// From an empty node, or with `from` from a live state (`take`: its lives are moved from,
  /// not copied: `from` is not used again for them).
  Prediction(const Plan& plan, const SimOptions& opt, LiveStart* from = nullptr, bool take = false);
  ~Prediction();
  Prediction(const Prediction&) = delete;
  Prediction& operator=(const Prediction&) = delete;

  /// The first tick, at time 0 (with `explain`, the engine keeps why each job waits).
  void first_tick(bool explain);
  /// The engine as it stands.
  const Engine& engine() const;
  /// Runs to the end; the timeline.
  Simulation finish();

 private:
  struct World;
  std::unique_ptr<World> w_;
};

/// Simulates the plan with the engine, each job lasting est_hours, cut at its time limit
/// (limits.h). `file:` deps of a job with `produced_by` wait for that job to reach
/// produced_at_frac of its run; other `file:` deps count as present. With `from`, starts
/// from the live state; a file: dep then counts only if it exists now or a job yet to reach
/// it produces it.
Simulation simulate(const Plan& plan, const SimOptions& opt, LiveStart* from = nullptr);

/// `gpuq run`'s status when every job has finished but not every one is done: one failed,
/// timed out, was stopped as hung, could not start, was killed or lost, or is blocked by
/// such a dep (so `gpuq run && notify` notifies only a plan that is all done); `simulate`'s when
/// some jobs can never start on this node (only_never_here). 1 is a damaged state, 2 bad input
/// (the CLI's kExitFailure and kExitBadInput).
inline constexpr int kExitJobsNotDone = 3;

/// Of a prediction's stuck jobs, those that can never start on this node whatever happens: more
/// cores or host memory than the node has for jobs, more GiB than any GPU takes, more GPUs than the
/// user's cap; and the jobs that wait on them (their `deps`, through any chain). When every stuck
/// job is one of these, the rest of the plan is predicted and these are only listed (true).
bool only_never_here(const Plan& plan, const SimOptions& opt, const std::vector<Stuck>& stuck);

/// Some job of the plan packs under `p` (a gpu_mem_gib, and packing is on): GPUs may hold several jobs.
bool packs(const Plan& plan, const Policy& p);

/// The GPU-hours the timeline keeps GPUs busy: a GPU holding several packed jobs at once counts
/// once (utilization never passes 100%).
double busy_gpu_hours(const Plan& plan, const Simulation& sim, const Policy& p);

}  // namespace gpuq

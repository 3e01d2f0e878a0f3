// The rule book: what the original's rules say about each job of a live queue,
// from its state entry and the time. `run`'s tick, `status`'s reasons and the
// prediction from the live state all ask here, so they cannot disagree.
// Pure: no clock, no file, no process (file: deps are asked through a callback).
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gpuq/core/limits.h"
#include "gpuq/core/plan.h"
#include "gpuq/core/schedule.h"
#include "gpuq/core/state.h"

namespace gpuq {

/// The exit code the state file records for a job stopped by `gpuq kill` (the original's).
inline constexpr long long kKilledExit = -15;
/// The exit code recorded for a job whose process vanished, or that could not be started.
inline constexpr long long kLostExit = -1;

/// gpuq's field "outcome" of a job that could not be started for a cause no retry fixes
/// (its log cannot be opened, its script is missing): it is finished and never retried
/// automatically; its field "reason" says why, its exit is 127 (a missing script, as
/// bash gives) or kLostExit.
inline constexpr const char* kUnstartableOutcome = "unstartable";

/// How a job's last attempt ended, read from the state file's codes.
enum class Outcome {
  Done,    ///< exit 0
  Failed,  ///< a non-zero exit of the script
  Killed,  ///< `gpuq kill` (exit -15)
  Lost,    ///< its process vanished without an exit code, or it could not start (exit -1)
  Timeout, ///< stopped by `run` at its time limit (gpuq's field "outcome": "timeout"; exit -15, or 124
           ///< with retry_on_timeout)
  Hung,    ///< stopped by `run`'s hang watchdog, on_quiet "kill" (gpuq's field "outcome": "hung"); its exit
           ///< code as Timeout's
  Unstartable,  ///< could not be started, and a retry would not help (kUnstartableOutcome)
};

/// The outcome as `status --json` spells it: "done", "failed", "killed", "lost", "timeout", "hung",
/// "unstartable".
const char* outcome_name(Outcome o);

/// The outcome of a done or failed entry; nullopt for any other status.
std::optional<Outcome> outcome_of(const JobState& s);

/// `run --slurm`: submitted to Slurm (running to gpuq, so never submitted twice) but not
/// yet started by Slurm: a running entry with a slurm_id and no start. Its start is set
/// once, when Slurm starts it; until then it has no time limit and the event log has no
/// start for it (it is pending to the log).
bool queued_in_slurm(const JobState& s);

/// The settings the rules read: the flags of `run`, `status` and `simulate`.
struct Policy {
  std::vector<int> node_gpus{0, 1, 2, 3, 4, 5, 6, 7};
  double backfill_max_hours = 0.5;
  long long max_retries = 2;
  double retry_after = 300;
  double time_limit_factor = 0;  ///< --time-limit-factor: a job without a limit gets this x est_hours (0: off)
  double poll = 20;              ///< --poll: the longest wait of `run` between two looks (and GPU readings)
  double quiet_minutes = 0;      ///< --quiet-minutes: a job without quiet_minutes gets this watchdog (0: off)
  Placement placement;           ///< --pairs: how multi-GPU jobs are placed (the original's pairs by default)
  bool paused = false;           ///< `gpuq pause` holds the plan: a tick starts nothing new (running jobs go on)
  int nodes = 1;                 ///< simulate --nodes: that many nodes of node_gpus each; a job runs on one node
};

/// The job is finished for `after:` deps and for `run`'s end: no further attempt
/// will be made. Done, blocked, killed, unstartable, or failed with the automatic
/// retries used up. `st` is the job's status (a tick may have changed it from the entry's);
/// the entry `s` is read only when `st` is failed.
bool finished_as(Status st, const JobState* s, long long max_retries);

/// finished_as for the entry's own status; a missing entry is not finished.
bool finished(const JobState* s, long long max_retries);

/// A plain-id dep in this status blocks its dependents (failed or blocked).
bool blocks_dependents(Status st);

/// A member of a reservation in this status no longer keeps the reservation's
/// GPUs closed: done, failed (retries left or not) or blocked, as the original.
bool leaves_reservation(Status st);

/// A failed job with an automatic retry to come: not killed, retries left, and
/// an end time to count `--retry-after` from.
bool will_retry(const JobState* s, const Policy& p);

/// When the automatic retry of a job that will_retry falls due (unix seconds).
double retry_at(const JobState& s, const Policy& p);

/// A failed job due for its automatic retry at `now` (the original's test:
/// now - end >= retry_after, not killed, retries left).
bool retry_due(const JobState* s, const Policy& p, double now);

/// GPUs the state says are in use: those of running entries (jobs of the plan or
/// not) and of killed jobs still in their grace time (`kill_sent`).
GpuMask busy_in_state(const State& state);

/// GPUs with more memory in use than `max_used_mib` (MiB per GPU id): another
/// user's processes, or a finished job's still exiting.
GpuMask busy_by_memory(const std::map<int, long long>& used_mib, long long max_used_mib);

/// GPUs over `max_used_mib` in a reading that no running entry of the state holds
/// (nor a killed one in its grace time): another user's memory, with its MiB.
std::map<int, long long> used_by_others(const std::map<int, long long>& used_mib, long long max_used_mib,
                                        const State& state);

/// "GPU 1 busy: 20000 MiB in use by another process".
std::string busy_by_other_text(int gpu, long long mib);

/// The file checks of `file:` deps: a port. `run` and `status` look at the file
/// system; tests and `simulate` pass a table.
class FileChecks {
 public:
  virtual ~FileChecks() = default;
  /// The path as the job sees it: `~` and `$VARS` expanded.
  virtual std::string expand(const std::string& written) const = 0;
  /// Whether the expanded path exists now.
  virtual bool exists(const std::string& path) const = 0;
};

/// FileChecks over a function of the path, taken as written (no expansion).
class FileTable : public FileChecks {
 public:
  explicit FileTable(std::function<bool(const std::string&)> exists) : exists_(std::move(exists)) {}
  std::string expand(const std::string& written) const override { return written; }
  bool exists(const std::string& path) const override { return exists_(path); }

 private:
  std::function<bool(const std::string&)> exists_;
};

/// Every file: dep of the job exists now.
bool files_present(const Job& job, const FileChecks& files);

/// What one tick of `run` decides before it starts anything, as plain data:
/// the changes it makes to the state, every job's status once they are made,
/// the ready jobs and the scheduling pass's input.
struct TickPlan {
  std::vector<Status> status;                          ///< per job, after the changes below
  std::vector<std::pair<size_t, long long>> retried;   ///< automatic retries: job, attempts from now on
  bool unblock = false;                                ///< a retry made every blocked entry pending
  std::vector<size_t> blocked;                         ///< pending jobs that become blocked
  std::vector<size_t> ready;                           ///< pending, deps met; plan order
  PassInput input;                                     ///< for schedule_pass
  double next_retry_in = 1e300;                        ///< seconds until the next retry falls due
};

/// The tick's rules over the state at `now`, in the original's order: failed jobs
/// due for a retry become pending (and then every blocked job), pending jobs whose
/// plain dep failed or is blocked become blocked, and the pending jobs whose deps
/// are met are ready. `free` are the GPUs free now; `any_running`: some entry of
/// the state is running. Changes nothing.
TickPlan plan_tick(const Plan& plan, const State& state, const Policy& p, double now, GpuMask free,
                   bool any_running, const FileChecks& files, bool explain = false);

/// Makes the tick's changes to the state (not the starts).
void apply_tick(const Plan& plan, const TickPlan& tick, State& state);

/// The decisions of one tick of `run` that need no process or clock.
struct TickDecision {
  std::vector<std::pair<std::string, long long>> retried;  ///< automatic retries: id, retry number
  PassResult pass;                                         ///< the jobs to start now, and why others wait
  double next_retry_in = 1e300;                            ///< seconds until the next retry falls due
};

/// One tick over the state at `now`: plan_tick, its changes made to `state`,
/// and the scheduling pass (the jobs it starts are not recorded here).
TickDecision decide_tick(const Plan& plan, State& state, const Policy& p, double now, GpuMask free,
                         bool any_running, const FileChecks& files, bool explain = false);

/// The same decisions, explained, over a state it leaves as it is (`status`
/// shows what the next tick would do).
TickDecision preview_tick(const Plan& plan, const State& state, const Policy& p, double now, GpuMask free,
                          bool any_running, const FileChecks& files);

/// The job's deps are met over the statuses of the state: plain ids done,
/// after: ids finished, file: paths present.
bool deps_met(const Plan& plan, const Job& job, const State& state, long long max_retries,
              const FileChecks& files);

/// Some plain-id dep of the job failed or is blocked.
bool deps_failed(const Plan& plan, const Job& job, const State& state);

}  // namespace gpuq

// The state file PLAN.state.json: per job, its status and run record. The
// original's format, which gpuq extends with fields the original ignores.
#pragma once

#include <nlohmann/json.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpuq/core/id_index.h"
#include "gpuq/core/plan.h"

namespace gpuq {

/// A job's status, as the state file spells it.
enum class Status { Pending, Running, Done, Failed, Blocked, Held };

/// "pending", "running", ...
const char* status_name(Status s);

/// Parses a status name; nullopt for anything else.
std::optional<Status> parse_status(std::string_view name);

/// One job's entry. Fields absent in the file stay empty, as in the original's
/// dicts (which replace an entry whole, dropping fields). How the file names each
/// member, and its kind: state_fields.h (a new member needs a row there).
struct JobState {
  Status status = Status::Pending;
  std::optional<std::vector<int>> gpus;
  std::optional<long long> pid;
  std::optional<double> start;
  std::optional<double> end;
  std::optional<long long> exit;
  std::optional<long long> attempts;
  // gpuq's own fields (the original ignores them):
  std::optional<unsigned long long> pid_start;  ///< start time of `pid` (/proc/PID/stat field 22)
  std::optional<double> kill_sent;              ///< when `kill` sent SIGTERM; run escalates after --kill-grace
  std::optional<double> warn_sent;              ///< when run sent the job's warn_signal (sent once)
  std::optional<double> requeue;                ///< when `gpuq requeue` stopped it: pending again once its group is gone
  std::optional<double> preempt;                ///< when a preemption stopped it (its signal sent; SIGKILL after preempt_grace)
  std::optional<std::string> preempt_for;       ///< the job it gave way to ("" by hand: `gpuq preempt`)
  std::optional<std::string> cores;             ///< the cores it was pinned to, "0-3,8" (its cpus, where counted)
  std::optional<std::string> cgroup;            ///< the cgroup its attempt runs in (mem_gib, where the node allows)
  std::optional<long long> preemptions;         ///< how many times it was preempted (GPUQ_PREEMPTIONS), across attempts
  std::optional<double> removed;                ///< when a reload of the plan dropped the job (`run` never starts it
                                                ///< again; a running one is left to finish)
  std::optional<std::string> outcome;           ///< "timeout": stopped at its time limit (limits.h);
                                                ///< "hung": stopped by the watchdog (watchdog.h);
                                                ///< "over memory", "oom (GPU)", "oom (host)" (host_mem.h);
                                                ///< "unstartable": it could not be started (rules.h)
  std::optional<std::string> reason;            ///< why it could not be started (outcome "unstartable")
  std::optional<long long> queue_id;            ///< its job id in a batch queue (`run --slurm`); `pid` holds it too; the file's key is "slurm_id"
  std::optional<long long> attempt;             ///< the number of the entry's attempt (attempt_of): written only where
                                                ///< it is not `attempts` + 1, after a requeue or a retry by hand
  // What run's hang watchdog saw of a running job (watchdog.h):
  std::optional<long long> log_size;  ///< bytes of its log at run's last look
  std::optional<double> log_grew;     ///< when run last saw the log grow (absent: not since the start)
  std::optional<double> gpus_busy;    ///< when a reading last showed one of its GPUs over kIdlePercent
  std::optional<double> gpus_read;    ///< when run last had a utilization reading of all its GPUs
  std::optional<double> hung_noted;   ///< when run said it looks hung (said once, until the log grows)
  // What run's idle watch saw of a running job (watchdog.h):
  std::optional<double> idle_since;    ///< since when every reading showed all its GPUs idle (absent: busy, or unread)
  std::optional<double> unused_since;  ///< since when every process list showed none of its processes on its GPUs
  std::optional<long long> energy_j;   ///< the attempt's GPU energy so far, joules (NVML's counter, gpu_use.h)
  std::optional<long long> gpu_mem_peak_mib;  ///< the most GPU memory its attempt's processes used on one GPU (NVML)
  std::optional<long long> mem_peak_mib;      ///< the most resident host memory its attempt's process tree used (MiB;
                                              ///< sampled by run for a job with mem_gib, host_mem.h)
  std::optional<long long> cpu_seconds;          ///< the CPU time (user + system) its attempt's processes used
  std::optional<long long> mem_cgroup_peak_mib;  ///< the most memory its attempt's cgroup used (MiB; page cache too)
  std::optional<long long> oom_retries;       ///< on_oom retries used before this attempt (host_mem.h); absent: none
  std::optional<std::string> oom_values;     ///< what the attempt runs with after them ("mem_gib 0.375, BATCH_SIZE=32")
  // What run read of a running job's progress (progress.h): the first reading and the latest
  // that moved, each a fraction (0-1) and when.
  std::optional<double> progress_first;
  std::optional<double> progress_first_at;
  std::optional<double> progress;
  std::optional<double> progress_at;
  // The snapshot of the code it runs (snapshot.h), kept across its attempts:
  std::optional<std::string> snapshot;       ///< the commit
  std::optional<double> snapshot_at;         ///< when it was taken
  std::optional<bool> snapshot_dirty;        ///< it holds uncommitted changes
  std::optional<std::string> snapshot_repo;  ///< the repository's top folder
  nlohmann::ordered_json extra;  ///< unknown fields, kept as found (null when there are none: no allocation)

  long long attempts_or0() const { return attempts.value_or(0); }
};

/// The number of the attempt `s` records (GPUQ_ATTEMPT, the log's header, the event log): the
/// one it runs or ran, or, for a job waiting, held or blocked, its next. Numbers only grow, per
/// job: a requeue or a retry by hand goes on from the last. The original's `attempts` counts the
/// automatic retries alone (and a retry by hand resets it): its number is `attempts` + 1 until
/// gpuq's own "attempt" says otherwise.
inline long long attempt_of(const JobState& s) { return s.attempt.value_or(s.attempts_or0() + 1); }

/// One earlier run of a job: kept when its entry is replaced (retry, the automatic retry,
/// hold, the next start), so that pictures of the past show every attempt.
struct EarlierAttempt {
  double start = 0, end = 0;
  std::vector<int> gpus;
  std::optional<long long> exit;  ///< 0 done; anything else failed (kKilledExit: killed)
  bool preempted = false;         ///< a preemption (or its own checkpoint exit) ended it: it ran again
};

/// The state field that holds them (gpuq's own: a list of {start, end, gpus, exit}; the
/// original ignores it, and drops it when it replaces an entry).
inline constexpr const char* kEarlierAttemptsField = "earlier_attempts";

/// The earlier attempts recorded in `s`, oldest first; malformed items are skipped.
std::vector<EarlierAttempt> earlier_attempts(const JobState& s);

/// `next`, the entry that replaces `prev`, keeps prev's earlier attempts and prev's own run
/// when it ran (a start and an end). The newest kKeptAttempts are kept.
void keep_attempts(const JobState& prev, JobState& next);
inline constexpr size_t kKeptAttempts = 20;

/// Every job's entry, in file order (new entries at the end).
class State {
 public:
  /// The entry of `id`, or nullptr.
  const JobState* find(const std::string& id) const;
  JobState* find(const std::string& id);
  /// The entry of `id`, created pending if absent.
  JobState& at(const std::string& id);
  /// Replaces the entry of `id` whole (the original's `state[id] = {...}`).
  void set(const std::string& id, JobState s);
  /// The status of `id`, pending when it has no entry.
  Status status_of(const std::string& id) const;

  // The same by the job's position in `plan`: the first call for a plan maps
  // every job to its entry, and later calls cost an array read instead of
  // hashing the id (a tick looks at every job's deps, several times).
  const JobState* of(const Plan& plan, size_t job) const {
    bind(plan);
    return slot_[job] < 0 ? nullptr : &entries_[static_cast<size_t>(slot_[job])].second;
  }
  JobState* of(const Plan& plan, size_t job) {
    bind(plan);
    return slot_[job] < 0 ? nullptr : &entries_[static_cast<size_t>(slot_[job])].second;
  }
  Status status_of(const Plan& plan, size_t job) const {
    const JobState* s = of(plan, job);
    return s ? s->status : Status::Pending;
  }
  /// Replaces the entry of plan job `job` whole.
  void set(const Plan& plan, size_t job, JobState s);
  const std::vector<std::pair<std::string, JobState>>& entries() const { return entries_; }
  std::vector<std::pair<std::string, JobState>>& entries() { return entries_; }
  bool empty() const { return entries_.empty(); }
  /// Room for `n` entries without moving them.
  void reserve(size_t n) {
    entries_.reserve(n);
    index_.reserve(n);
  }

 private:
  void bind(const Plan& plan) const {
    if (bound_ != &plan || bound_serial_ != plan.serial || slot_.size() != plan.jobs.size()) rebind(plan);
  }
  void rebind(const Plan& plan) const;
  size_t position(std::string_view id) const;

  std::vector<std::pair<std::string, JobState>> entries_;
  IdIndex index_;  // id -> position in entries_
  // The plan the slots were made for (pointer and serial), and each of its jobs' entry or -1.
  mutable const Plan* bound_ = nullptr;
  mutable uint64_t bound_serial_ = 0;
  mutable std::vector<long> slot_;
};

}  // namespace gpuq

// The event log PLAN.events.jsonl as data: what happened to each job (start, end,
// retry, kill, hold, timeout), worked out by comparing a job's entry before
// and after a write of the state, so that every writer (run, the control commands)
// logs the same way and a crash between the state's write and the log's append is
// made good by the next comparison. Also the history and the learned estimates read
// from such a log. Plain data and functions: the files are live/journal.h's.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpuq/core/engine.h"
#include "gpuq/core/plan.h"
#include "gpuq/core/state.h"

namespace gpuq {

/// One line of the event log.
struct Event {
  double t = 0;              ///< when it happened (seconds since the epoch)
  std::string kind;          ///< start, end, retry, kill, hold, timeout; reload, pause, resume, eta (of the plan)
  std::string id;            ///< the job ("" for the plan's own events)
  long long attempt = 1;     ///< the attempt it concerns (GPUQ_ATTEMPT: 1 for the first run)
  std::optional<std::vector<int>> gpus;  ///< start (and end): the GPUs
  std::optional<long long> pid;          ///< start: the process group
  std::optional<std::string> outcome;    ///< end: done, failed, killed, lost, timeout (unknown if not recorded)
  std::optional<long long> exit;         ///< end: the exit code the state records
  std::optional<double> started;         ///< end: when the attempt started (key "start"), if known
  std::optional<double> seconds;         ///< end: how long the attempt ran
  std::optional<long long> gpu_mem_peak_mib;  ///< end: the most GPU memory (MiB) its processes used on one GPU (NVML)
  std::optional<long long> mem_peak_mib;      ///< end: the most resident host memory (MiB) of its process tree
  std::optional<long long> cpu_seconds;       ///< end: the CPU time (user + system, s) of its processes
  std::optional<long long> energy_j;          ///< end: its GPUs' energy, joules (NVML; none: no counter read)
  std::optional<std::string> snapshot;   ///< start: the commit of the code it runs (snapshot.h)
  std::optional<bool> snapshot_dirty;    ///< start: that snapshot holds uncommitted changes
  std::optional<std::string> repo;       ///< start: the repository the commit is in
  std::string by;            ///< who made the change: "run", "kill", "hold", "retry", ...
  std::optional<std::string> detail;     ///< reload: what changed ("+2 jobs (a, b), 1 removed (c)"); eta: the words
  std::optional<double> finish;          ///< eta: the plan's predicted finish now (unix seconds)
  std::optional<double> was;             ///< eta: the predicted finish it moved from

  bool operator==(const Event&) const = default;
};

/// The event kinds, in the order they are listed in help texts.
const std::vector<std::string>& event_kinds();

/// True for the events of a job (start ... timeout); false for the plan's own (reload,
/// pause, resume, eta) and the idle watch's notes (idle), which change no job's view.
bool job_event(const Event& e);

/// A plan event (reload, pause, resume) at `t`, made by `by`.
Event plan_event(const std::string& kind, double t, std::string_view by, std::optional<std::string> detail = {});

/// What the log last said of a job: enough to tell what a new entry changed. Blocked
/// counts as pending; `start` is kept for running, done and failed only.
struct Seen {
  Status status = Status::Pending;
  long long attempts = 0;  ///< its attempt's number (attempt_of, state.h), less one
  std::optional<double> start;
  bool operator==(const Seen&) const = default;
};

/// What an entry looks like to the log.
Seen seen_of(const JobState& s);

/// The events that take job `id` from `before` to `after`, in the order they happened:
/// an attempt's end (after its cause, kill or timeout), then retry or hold, then a new
/// start (and its end, when the entry was seen only after it ended). Replaying them
/// (apply_event) gives seen_of(after). A job never seen (`before` nullptr: no log when
/// this run began) gets only its start, if running. `now` dates the events the entry does not
/// date itself; `by` says who wrote the entry.
std::vector<Event> events_between(const std::string& id, const Seen* before, const JobState& after, double now,
                                  std::string_view by);

/// The events one change of a job's life makes (engine.h's Change): `before` is the job's entry
/// as it was, `after` as the change wrote it. A start's pid is the caller's to fill in once the
/// job is launched. Replaying them (apply_event) on seen_of(before) gives seen_of(after).
std::vector<Event> events_of(const std::string& id, const Change& c, const JobState& before, const JobState& after,
                             double now, std::string_view by);

/// A start's snapshot: the code the attempt runs, as its entry `s` records it (snapshot.h).
void note_snapshot(Event& e, const JobState& s);

/// The view after `e` (events replayed from the log rebuild what it last said).
void apply_event(const Event& e, Seen& seen);

/// One line of JSON (without the newline).
std::string event_line(const Event& e);

/// Parses one line; nullopt with `problem` set when it is not an event.
std::optional<Event> parse_event(std::string_view line, std::string* problem);

/// One attempt of a job, put together from its events.
struct Attempt {
  std::string id;
  long long attempt = 1;
  std::optional<std::vector<int>> gpus;
  std::optional<double> start, end;
  std::optional<std::string> outcome;  ///< nullopt while running (or when its end was never logged)
  std::optional<long long> exit;
  std::vector<std::string> causes;     ///< kill, timeout: what ended it
  std::optional<long long> gpu_mem_peak_mib;  ///< the most GPU memory its processes used on one GPU (NVML)
  std::optional<long long> mem_peak_mib;      ///< the most resident host memory of its process tree (MiB)
  std::optional<long long> cpu_seconds;       ///< the CPU time (user + system, s) its processes used
  std::optional<long long> energy_j;          ///< its GPUs' energy, joules (NVML; none: no counter read)
  std::optional<std::string> snapshot;        ///< the commit of the code it ran (snapshot.h)
  std::optional<bool> snapshot_dirty;         ///< that snapshot held uncommitted changes
  std::optional<std::string> repo;            ///< the repository the commit is in
  std::optional<std::string> on_oom;          ///< what it ran with after on_oom retries ("BATCH_SIZE=32")
};

/// Every attempt the events tell of, in the order they started (a job held or
/// blocked without starting has none).
std::vector<Attempt> attempts_of(const std::vector<Event>& events);

/// The learned ratio of run time to est_hours for one id prefix.
struct Learned {
  std::string prefix;        ///< "train_", "eval_", ... (the id up to its first '_' or '-'), or the whole id
  size_t runs = 0;           ///< finished (done) attempts with an estimate
  double median = 1;         ///< median of run time / est_hours
  double low = 1, high = 1;  ///< the lowest and highest ratio
  double median_hours = 0;   ///< median run time of those runs, in hours
  size_t peak_runs = 0;      ///< those runs with a GPU memory peak (run with NVML)
  double peak_gib = 0;       ///< the median of their peaks, GiB
  double peak_max_gib = 0;   ///< the highest of their peaks, GiB
  size_t host_peak_runs = 0;      ///< those runs with a host memory peak (run sampled them: mem_gib)
  double host_peak_gib = 0;       ///< the median of those peaks, GiB
  double host_peak_max_gib = 0;   ///< the highest of them, GiB
  size_t cpu_runs = 0;            ///< those runs with a CPU time (gpuq's own wrapper ran them)
  double cpu_hours = 0;           ///< the median of those CPU times, hours
  double cores_busy = 0;          ///< the median of CPU time / run time: the cores they kept busy
};

/// The prefix estimates group a job under.
std::string estimate_prefix(std::string_view id);

/// Ratios of done attempts to the plan's est_hours (jobs not in the plan, or with an
/// estimate of 0, are left out), per prefix, sorted by prefix.
std::vector<Learned> learn_estimates(const std::vector<Attempt>& attempts, const Plan& plan);

/// A job whose est_hours is more than `factor` times off the median run time of its
/// prefix's done runs (at least `min_runs` of them), and what to say of it.
struct EstimateWarning {
  std::string job;
  std::string text;
};
std::vector<EstimateWarning> estimate_warnings(const Plan& plan, const State& state,
                                               const std::vector<Learned>& learned, double factor = 3,
                                               size_t min_runs = 3);

/// Pending jobs whose GPU memory disagrees with what their prefix's done runs (at least
/// `min_runs` with a peak) used: a gpu_mem_gib below the highest peak (jobs sharing its GPU may
/// run out of memory), or a whole-GPU job whose peak would let several share a GPU (`room`: the
/// GiB a GPU takes, Policy::gpu_room); and a mem_gib below the highest host memory peak (run
/// would stop it over memory).
std::vector<EstimateWarning> memory_warnings(const Plan& plan, const State& state, const std::vector<Learned>& learned,
                                             double room, size_t min_runs = 3);

/// The plan with each pending job's est_hours scaled by its prefix's median ratio,
/// where the prefix has at least `min_runs` done runs. Jobs that have started keep theirs.
/// Returns the prefixes used.
std::vector<Learned> apply_learned(Plan& plan, const State& state, const std::vector<Learned>& learned,
                                   size_t min_runs = 3);

/// What --learned-estimates did, in words: the prefixes `used` (apply_learned) with their ratio;
/// else why nothing was scaled: no prefix of `learned` has `min_runs` done runs, or those that
/// have them (named, with their runs) have no pending job.
std::string learned_text(const std::vector<Learned>& learned, const std::vector<Learned>& used, size_t min_runs = 3);

}  // namespace gpuq

// A job's life cycle as a type: each state carries only what is valid in it. The engine
// (engine.h) moves jobs between them; the state file keeps the original's flat entries
// (state.h), read into a Life and written back from one at the file's edge (life_of,
// write_life), so that the file's numbers (exit -15, status "running" without a start)
// stay there.
#pragma once

#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "gpuq/core/plan.h"
#include "gpuq/core/state.h"

namespace gpuq {

/// The exit code the state file records for a job stopped by `gpuq kill` (the original's).
inline constexpr long long kKilledExit = -15;
/// The exit code recorded for a job whose process vanished, or that could not be started.
inline constexpr long long kLostExit = -1;
/// The exit code recorded for a timed-out job that may be retried (`retry_on_timeout`):
/// timeout(1)'s, a failure the original retries too.
inline constexpr long long kTimeoutRetryExit = 124;
/// A preemptible job's own "I checkpointed, run me again" (HTCondor's convention): not a failure.
inline constexpr long long kCheckpointExit = 85;
/// How the event log and history name an attempt a preemption (or a checkpoint exit) ended.
inline constexpr const char* kPreemptedOutcome = "preempted";

/// How an attempt ended.
enum class Outcome {
  Done,         ///< exit 0
  Failed,       ///< a non-zero exit of the script
  Killed,       ///< `gpuq kill` (exit -15)
  Lost,         ///< its process vanished without an exit code, or it could not be launched (exit -1)
  Timeout,      ///< stopped at its time limit (exit -15, or 124 with retry_on_timeout)
  Hung,         ///< stopped by the hang watchdog, on_quiet "kill" (its exit code as Timeout's)
  Idle,         ///< stopped by the idle watch, on_idle "kill" (its exit code as Timeout's)
  Unstartable,  ///< could not be started, and a retry would not help (a missing script)
  OverMemory,   ///< stopped by `run` above its mem_gib (host_mem.h; its exit code as Timeout's)
  OomGpu,       ///< failed with a GPU out-of-memory in its log's last lines
  OomHost,      ///< killed by the kernel's OOM killer (SIGKILL not sent by gpuq, seen in the kernel log)
};

/// The outcome as `status --json` and the event log spell it: "done", "failed", "killed", "lost",
/// "timeout", "hung", "idle", "unstartable", "over memory", "oom (GPU)", "oom (host)".
const char* outcome_name(Outcome o);

/// Not started: its deps, files, GPUs or the pass keep it waiting. `attempts`: automatic
/// retries used so far. `ended`: when the attempt before ended, where it ended waiting again (a
/// preemption, a checkpoint exit): its record keeps it.
struct Waiting {
  long long attempts = 0;
  std::optional<double> ended{};
  long long oom_retries = 0;  ///< on_oom retries used (host_mem.h): its next attempt's size
};

/// Held by hand (`gpuq hold`): nothing starts it until `gpuq retry` releases it. `in_queue`:
/// it was handed to a batch queue and is held there (released there by `retry`).
struct Held {
  long long attempts = 0;
  bool in_queue = false;
};

/// A plain dep of it failed or is blocked; the next retry of any job releases it.
struct Blocked {};

/// Handed to a batch queue (a cluster's scheduler), which has not started it yet.
struct Queued {
  long long attempts = 0;
  long long oom_retries = 0;  ///< on_oom retries before this attempt (host_mem.h): its --mem is their size
};

/// Running since `start` on `gpus` (of `node`, in a prediction over several nodes).
struct Running {
  long long attempts = 0;
  double start = 0;
  std::vector<int> gpus;
  int node = 0;
  std::optional<double> requeue;  ///< when `gpuq requeue` stopped it: waiting again once its processes are gone
  /// When a preemption stopped it (its preempt_signal sent): an exit 0 is done, any other end makes
  /// it wait again, not failed and no retry spent (preempt.h).
  std::optional<double> preempt{};
  long long oom_retries = 0;  ///< on_oom retries used before this attempt (host_mem.h)
};

/// Its last attempt ended.
struct Ended {
  long long attempts = 0;
  Outcome outcome = Outcome::Done;
  long long exit = 0;
  std::optional<double> end;            ///< absent only in entries written by hand
  std::optional<double> start;          ///< absent when it never started (a launch that failed)
  long long oom_retries = 0;            ///< on_oom retries used before this attempt (host_mem.h)
};

/// How an attempt whose script exited with `code` at `at` ended (started at `start`, if known).
Ended ended_by_exit(long long code, double at, std::optional<double> start, long long attempts);

/// How an attempt whose process vanished without an exit code at `at` ended.
Ended ended_lost(double at, std::optional<double> start, long long attempts);

/// One job's place in its life cycle.
using Life = std::variant<Waiting, Held, Blocked, Queued, Running, Ended>;

/// The alternatives by name, in Life's order.
enum class LifeKind { Waiting, Held, Blocked, Queued, Running, Ended };

inline LifeKind kind_of(const Life& l) { return static_cast<LifeKind>(l.index()); }

/// A running life stopping for another job (its preemption's signal sent).
inline bool preempting(const Life& l) {
  const Running* r = std::get_if<Running>(&l);
  return r && r->preempt;
}

/// The on_oom retries of a life (host_mem.h): of its next attempt (waiting), of its attempt
/// (queued, running) or its last (ended); 0 for the others.
long long oom_retries_of(const Life& l);

/// The state file's status of a life (a queued job is "running" to the file, so that neither
/// gpuq nor the original starts it twice).
Status status_of(const Life& l);

// --- The rules on a life: written once, here; the engine and the views ask them. ---

/// Done: its plain-id dependents may start.
bool is_done(const Life& l);

/// A failure (ended not done) or blocked: its plain-id dependents are blocked.
bool blocks_dependents(const Life& l);

/// Out of its reservations: done, failed (retries left or not) or blocked, as the original counts.
bool leaves_reservation(const Life& l);

/// An ended failure the automatic retry applies to: not killed (exit -15), not unstartable.
bool auto_retryable(const Ended& e);

/// No further attempt will be made (for `after:` deps and for `run`'s end): done, blocked,
/// or failed with no automatic retry to come (killed, unstartable, retries used up).
bool finished(const Life& l, long long max_retries);

/// An automatic retry of this ended attempt will come: auto_retryable, retries left, and an
/// end time to count --retry-after from.
bool will_retry(const Ended& e, long long max_retries);

// --- The state file's edge. ---

/// The life a state entry records (a missing entry is Waiting). `has_handle`: the entry
/// names a batch queue's job (a running entry with one and no start is Queued; a held one is
/// held in the queue). `now` dates a running entry that lacks its start.
Life life_of(const JobState* s, bool has_handle, double now);

/// Why a life changed, as far as the state file cares (what to keep of the old entry).
enum class Cause {
  Start,        ///< the pass started it (or handed it to a batch queue)
  QueueStart,   ///< the batch queue started it
  Exit,         ///< its script exited
  Vanish,       ///< its process is gone without an exit code
  Abort,        ///< its launch was cut short before it ran: waiting again
  LaunchFail,   ///< it could not be launched
  Limit,        ///< stopped at its time limit
  Hung,         ///< stopped by the hang watchdog or the idle watch (watchdog.h)
  OverMemory,   ///< stopped by `run` above its mem_gib
  OomRetry,     ///< on_oom runs it again at once after an out-of-memory (host_mem.h)
  AutoRetry,    ///< the automatic retry
  Retry,        ///< `gpuq retry`
  Unblock,      ///< a retry released it
  Block,        ///< a plain dep failed or is blocked
  Hold,         ///< `gpuq hold`
  Kill,         ///< `gpuq kill`
  Requeue,      ///< `gpuq requeue` stopped it (it runs until its processes are gone)
  Requeued,     ///< its processes are gone after `gpuq requeue`: waiting again
  Preempt,      ///< a preemption stopped it (more urgent work takes its GPUs; `gpuq preempt`)
  Preempted,    ///< it ended after a preemption, not done: waiting again
  Checkpointed, ///< a preemptible job exited 85 on its own ("checkpointed, run me again"): waiting again
  NodeRestarted,///< the machine restarted under it (a power cut, a reboot): waiting again, no retry spent
  GpuFault,     ///< it failed on a GPU drained for a fault (gpu_health.h): waiting again, no retry spent
};

/// Writes `l` into the entry `e` that recorded the job's previous life, as the original
/// writes its entries: an attempt that goes on (an end, a kill) is updated in place; a new
/// one (a start, a retry, a hold, a block) replaces the entry, keeping gpuq's record of the
/// earlier attempts. Fields of the backend (pid, pid_start, queue_id) and of the watchdog are
/// the caller's, kept in place while the same attempt goes on.
void write_life(JobState& e, const Life& l, Cause cause);

}  // namespace gpuq

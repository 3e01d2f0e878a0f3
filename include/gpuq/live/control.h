// The live queue's records, over the ports: the original's refresh (running jobs that
// ended, as events to the engine) and the control commands (events to the engine, under the
// store's lock), their stops carried out by the launcher.
#pragma once

#if defined(GPUQ_CORE) || defined(GPUQ_VIEWS)
#error "a live header (the OS behind ports) in the core or the views: pass data in instead"
#endif

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gpuq/core/plan.h"
#include "gpuq/core/queue_state.h"
#include "gpuq/core/rules.h"
#include "gpuq/core/state.h"
#include "gpuq/live/ports.h"
#include "gpuq/live/proc.h"
#include "gpuq/live/read.h"
#include "gpuq/live/store.h"

namespace gpuq {

/// A line of refresh: the job that ended and what to print for it.
struct EndedLine {
  std::string id;
  std::string line;  ///< "done ID", "failed ID (exit N)", ... (without the clock stamp)
  bool oom = false;  ///< it ran out of memory (an on_oom retry may follow)
  /// Its script never started: the wrapper was refused a process (the process limit, no file
  /// descriptor or memory left), said in its aborted file. It waits again, no retry spent.
  std::string not_started;
};

/// What the launcher saw of the queue's running jobs (read.h's see_jobs), settled: an attempt
/// that ended given to the engine (a job the plan no longer has settled alone), its entry
/// written. Signals nothing: the original's refresh of the queue is see_jobs then settle().
std::vector<EndedLine> settle(const JobsSeen& seen, QueueState& q, double now);

/// settle() of `state` without the engine: each running entry that ended settled alone, as
/// the engine would settle it (for those that only read: status, logs).
std::vector<EndedLine> settle_alone(const JobsSeen& seen, State& state, double now);

/// The running entries of `state` seen (see_jobs) by the launcher its jobs run under (this
/// machine's, or Slurm's for a plan run with --slurm) and settled alone: for `logs -f`.
std::vector<EndedLine> refresh(const Plan& plan, const PlanPaths& paths, State& state, double now);

/// The result of a control command: lines to print and the exit status.
struct ControlResult {
  std::vector<std::string> lines;
  int status = 0;
};

/// `gpuq retry|kill|hold|requeue IDS` as the original plus fixes 4-6, in one
/// read-modify-write of the store under its lock, each an event to the engine. Unknown ids
/// change nothing (status 2, `plan_name` in the message); a refused id gives status 1. kill
/// sends SIGTERM to the job's group (when its pid is still the job's), marks it failed with
/// kKilledExit and records when, for run's --kill-grace. `requeue` (gpuq's own) sends SIGTERM
/// to a running job's group and marks the entry "requeue" (and kill_sent, for run's SIGKILL
/// after --kill-grace); it stays running until the whole group is gone, then it is pending
/// (attempts kept): no `after:` dependent ever sees it finished.
/// With `events_log`, the events of the changes are appended to that event log (journal.h)
/// once the state is written; a failed append is a line in the result (the next `run` logs it).
ControlResult control(const Plan& plan, const std::string& plan_name, Store& store, Launcher& launcher, Clock& clock,
                      const std::string& action, const std::vector<std::string>& ids,
                      const std::string& events_log = "", const Policy& policy = Policy{});

/// A signal to a job's process group that a decision made (a stop at a limit, `gpuq kill`, a
/// preemption, a warning, a SIGKILL after the grace): data, sent by send_signals once the state
/// that records why is saved. A power cut or a failed write between the two never leaves a job
/// stopped with nothing on disk to say why: its exit would read as a failure, and be retried.
struct GroupSignal {
  long long group = 0;
  Signal sig = Signal::Term;
  std::optional<WarnSpec> warn = std::nullopt;       ///< sent in place of sig: a warn_signal, a preempt_signal
  std::optional<std::string> cgroup = std::nullopt;  ///< a SIGKILL's: the job's cgroup killed too (what left its group)
  /// The state records it (a stop, a warning, a preemption): the save before it is durable. A
  /// SIGKILL after the grace, or of what an ended job left, changes no record.
  bool recorded = true;
};

/// Sends each, in order.
void send_signals(Launcher& launcher, const std::vector<GroupSignal>& signals);

/// Whether `s`'s process group can be signalled: its pid is still the job's (fix 7: a recycled
/// pid's group is someone else's), and the group is alive. What a decision reads before it
/// records a stop; the signal itself goes after the save.
bool can_signal(Launcher& launcher, const JobState& s);

/// A stop of the job of `s` decided (`gpuq kill`, run at a limit or for a watchdog): SIGTERM to
/// its group added to `signals` while the pid is still the job's, and kill_sent recorded (run
/// sends SIGKILL after --kill-grace). False, and nothing added: its process is already gone.
bool stop_later(Launcher& launcher, JobState& s, double now, std::vector<GroupSignal>& signals);

/// A preemption's signal decided (its preempt_signal, else SIGTERM, to its process group, or to
/// its script's bash alone for "B:"): added to `signals` while the pid is still the job's. False,
/// and nothing added: its process is already gone.
bool preempt_later(Launcher& launcher, const JobState& s, const Job& job, std::vector<GroupSignal>& signals);

/// "SIGTERM to process group 42", "USR1 to the script's bash (through its wrapper)": what
/// preempt_later sends, for the lines that say it.
std::string preempt_signal_text(const JobState& s, const Job& job);

/// The end of `gpuq requeue` once it has waited for the groups of `ids` (jobs it stopped):
/// each still being requeued whose group is gone becomes pending, under the lock (a `run`
/// may have done it already). The lines to print.
std::vector<std::string> finish_requeues(const Plan& plan, Store& store, Launcher& launcher,
                                         const std::vector<std::string>& ids, double now,
                                         const std::string& events_log = "");

}  // namespace gpuq

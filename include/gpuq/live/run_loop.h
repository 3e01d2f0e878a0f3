// `gpuq run`: the original's loop as an object over the ports, tick by tick.
#pragma once

#if defined(GPUQ_CORE) || defined(GPUQ_VIEWS)
#error "a live header (the OS behind ports) in the core or the views: pass data in instead"
#endif

#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "gpuq/core/plan.h"
#include "gpuq/core/watchdog.h"
#include "gpuq/live/hooks.h"
#include "gpuq/live/journal.h"
#include "gpuq/live/ports.h"
#include "gpuq/live/queue.h"
#include "gpuq/live/store.h"

namespace gpuq {

/// Where `run` prints a line (without its newline).
using Say = std::function<void(const std::string&)>;

/// What a tick leaves for the loop.
struct TickResult {
  enum class Next {
    Wait,      ///< wait for an event, at most wake_in seconds, then tick again
    Finished,  ///< every job is finished and the state saved
    Fatal,     ///< the state cannot be used (a damaged file): `run` ends with status 1
  } next = Next::Wait;
  double wake_in = 0;  ///< Wait: the latest the next tick is due, in seconds from now
};

/// The loop of `gpuq run` over a plan. Each tick, under the store's lock:
/// refresh (jobs that ended, their leftover groups killed), enforce time limits
/// (the warning signal, then SIGTERM at the deadline: limits.h), escalate kills past
/// --kill-grace, probe the GPUs, watch for hung jobs (watchdog.h), decide (decide_tick), start the chosen jobs
/// held at their start lines, save, release them (or abandon them when the save
/// failed: they start again after a good save, so no job runs twice), and watch
/// (the events that can make another tick worth it). Prints the original's lines.
class RunLoop {
 public:
  /// `out` gets the log lines, `err` the message of a fatal error.
  RunLoop(const Plan& plan, const RunOptions& opt, const Ports& ports, Say out, Say err);

  /// Logs each tick's events to `journal` (journal.h) and runs `hooks` for them
  /// (and for those the control commands log); either may be null.
  void log_events(Journal* journal, HookRunner* hooks) {
    journal_ = journal;
    hooks_ = hooks;
  }

  /// One tick at the clock's now.
  TickResult tick();

  /// `done(now)` is called after each tick (run_queue writes PLAN.run.json there).
  void after_tick(std::function<void(double)> done) { after_tick_ = std::move(done); }

  /// Ticks, waiting between ticks, until every job is finished ("all jobs
  /// finished: 10 done, 1 failed (hang: killed)", status 0), a stop signal (its line, status 0: running jobs go on,
  /// the next run adopts them), or a damaged state (status 1).
  int run();

 private:
  struct Tick;
  void load_state(Tick& t);
  void say_changes(const Tick& t, const State& before);
  void say_adopted(const Tick& t);
  std::string outcomes(const State& state) const;
  void refresh_ended(Tick& t);
  void enforce_limits(Tick& t);
  bool stop_as(Tick& t, const Job& job, JobState& s, const char* outcome);
  void time_out(Tick& t, const Job& job, JobState& s);
  void escalate_kills(Tick& t);
  void note_running(Tick& t);
  void probe(Tick& t);
  void say_others(Tick& t, const GpuReading& r, const GpuRules& rules);
  void watch_quiet(Tick& t);
  void stop_hung(Tick& t, const Job& job, JobState& s, const QuietCheck& c);
  void decide(Tick& t);
  void start(Tick& t);
  void save(Tick& t);
  void release_started(Tick& t);
  void watch(Tick& t);
  void catch_up_events(Tick& t);
  void record_events(Tick& t);
  bool all_finished(const Tick& t) const;
  TickResult store_failed(Tick& t, const StoreError& e);
  int stopped(const Wake& w);
  void say(double now, const std::string& line) const;

  const Plan& plan_;
  const RunOptions opt_;
  Ports os_;
  Say out_, err_;
  std::vector<size_t> with_file_deps_;  // the jobs with a file: dep, found once
  std::optional<State> cached_;         // what the last tick saved; kept while the store is unchanged
  std::string last_probe_problem_;
  std::map<int, std::string> others_said_;  // GPUs said busy for another user, and what was said
  std::string last_source_note_;           // the probe's source, as last said
  std::string last_save_problem_;
  bool first_tick_ = true;
  std::function<void(double)> after_tick_;
  std::string summary_;  // how the jobs ended, for the last line
  Journal* journal_ = nullptr;
  HookRunner* hooks_ = nullptr;
  std::string last_journal_problem_;
  bool queue_stopped_ = false;   // this tick's launches stopped: the batch queue is full
  std::string queue_full_said_;  // what was said of the full queue (said once until a job is submitted)
};

struct RunInfo;
struct SlurmOptions;

/// `gpuq run` on this machine: a RunLoop over the POSIX ports (this process
/// becomes the subreaper of its jobs' orphans). With `info`, PLAN.run.json is
/// written at the start, after each tick and at the end (run_info.h). Returns the exit status.
/// With `slurm`, jobs are submitted to Slurm instead (slurm.h): the same loop over the Slurm ports.
int run_queue(const Plan& plan, const PlanPaths& paths, const RunOptions& opt, std::FILE* out,
              RunInfo* info = nullptr, const SlurmOptions* slurm = nullptr);

}  // namespace gpuq

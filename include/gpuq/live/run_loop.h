// `gpuq run`: the original's loop as an object over the ports, tick by tick.
#pragma once

#if defined(GPUQ_CORE) || defined(GPUQ_VIEWS)
#error "a live header (the OS behind ports) in the core or the views: pass data in instead"
#endif

#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "gpuq/core/clock_step.h"
#include "gpuq/core/notices.h"
#include "gpuq/core/plan.h"
#include "gpuq/core/queue_state.h"
#include "gpuq/core/simulate.h"
#include "gpuq/core/watchdog.h"
#include "gpuq/live/hooks.h"
#include "gpuq/live/journal.h"
#include "gpuq/live/node_dir.h"
#include "gpuq/live/plan_watch.h"
#include "gpuq/live/ports.h"
#include "gpuq/live/queue.h"
#include "gpuq/live/snapshots.h"
#include "gpuq/live/store.h"

namespace gpuq {

struct PredictionRecord;  // accuracy.h

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

/// The loop of `gpuq run` over a plan: the engine (engine.h, through queue_state.h) driven by
/// the real clock and the real ports. Each tick, under the store's lock: load the state (or
/// keep the engine as the last tick left it, when nobody replaced the file), refresh (jobs that
/// ended, given to the engine; their leftover groups killed), enforce time limits (the warning
/// signal; at the deadline the engine's timeout, SIGTERM), escalate kills past --kill-grace,
/// probe the GPUs, watch for hung jobs (watchdog.h), decide (the engine's tick), launch what it
/// chose held at their start lines, save, release them (or abandon them when the save failed:
/// they start again after a good save, so no job runs twice), log the engine's changes as
/// events, and watch (the events that can make another tick worth it). Prints the original's lines.
class RunLoop {
 public:
  /// `out` gets the log lines, `err` the message of a fatal error.
  RunLoop(Plan plan, const RunOptions& opt, const Ports& ports, Say out, Say err);

  /// Reload on edit: each tick looks at `source`; a valid new version replaces the plan
  /// (pending jobs take their new definition, running ones keep the one they started with
  /// until they end, jobs no longer in the plan are marked "removed" and never started
  /// again), one line says what changed, and `reloaded(text, now)` is called (run_queue
  /// keeps PLAN.run.json and the copy of the plan in step). A version with errors changes
  /// nothing: its problems are said once. Null: the plan is read once.
  void watch_plan(PlanSource* source, std::function<void(const std::string&, double)> reloaded = {}) {
    reload_.source = source;
    reload_.then = std::move(reloaded);
  }

  /// Jobs that use a snapshot (core/snapshot.h: their "snapshot", else `setting`, is "git") run
  /// from a read-only checkout under `root` of the snapshot of `workdir` (absolute) taken when
  /// they were loaded: at the first tick for each such job without one (a restart keeps what a
  /// queued job had), at each reload for the jobs it adds or changes. A checkout no job that is
  /// not finished needs is removed. Null: no job uses one (the settings' default).
  void use_snapshots(Snapshots* snapshots, std::string root, std::string workdir, std::string setting) {
    snap_.store = snapshots;
    snap_.root = std::move(root);
    snap_.workdir = std::move(workdir);
    snap_.setting = std::move(setting);
  }

  /// The jobs `ids` take a new snapshot at the first tick, as a reload that changed them would
  /// give them (run_queue: the jobs changed since the last run loaded the plan).
  void snapshot_again(const std::vector<std::string>& ids) { snap_.changed.insert(ids.begin(), ids.end()); }

  /// `paused()` says since when the plan is paused (`gpuq pause`), or nullopt: while it
  /// is, no job starts (running ones go on).
  void pause_from(std::function<std::optional<double>()> paused) { pause_.from = std::move(paused); }

  /// The plan in use (the last version reloaded).
  const Plan& plan() const { return plan_; }

  /// What the last tick read of the GPUs (gpu_use.h's see_reading, the read a look at the node
  /// makes too): the GPUs free before the node's decision and the drains, why each GPU someone
  /// else holds is busy, and where jobs pack, the GiB per GPU beyond what they declared.
  struct GpusRead {
    GpuMask free = 0;
    std::map<int, std::string> others;
    std::vector<double> mem_other;
  };
  const GpusRead& gpus_read() const { return read_; }

  /// Logs each tick's events to `journal` (journal.h) and runs `hooks` for them
  /// (and for those the control commands log); either may be null.
  void log_events(Journal* journal, HookRunner* hooks) {
    log_.journal = journal;
    log_.hooks = hooks;
  }

  /// Shares the node with other users' runs through `node` (node_dir.h): each tick decides under
  /// the node lock with every run's holds and wants, starts only the jobs the node-wide decision
  /// gives GPUs, and publishes what it holds and wants before its new jobs are let run. Null: alone.
  void share_node(NodeShare* node) { node_ = node; }

  /// Appends each prediction the eta step makes (accuracy.h) to `path` ("": none).
  void record_predictions(std::string path) { eta_.predictions_path = std::move(path); }

  /// One tick at the clock's now.
  TickResult tick();

  /// `done(now)` is called after each tick (run_queue writes PLAN.run.json there).
  void after_tick(std::function<void(double)> done) { after_tick_ = std::move(done); }

  /// Ticks, waiting between ticks, until every job is finished ("all jobs finished: 10 done",
  /// status 0; "..., 1 failed (hang: killed)", status kExitJobsNotDone), a stop signal (its line,
  /// status 0: running jobs go on, the next run adopts them), or a damaged state (status 1).
  int run();

 private:
  struct Tick;
  struct Told;
  void read(Tick& t, const ClockSeen& seen);
  void load_state(Tick& t);
  ClockSeen look_at_clock(Tick& t);
  void note_due(const Tick& t);
  std::optional<size_t> index_of(const std::string& id) const;
  bool stop(Tick& t, JobState& s);
  std::string stop_words(Tick& t, const std::string& id);
  void reload_plan(Tick& t);
  void take_plan(Tick& t, Plan next, const std::string& text);
  void note_pause(Tick& t);
  void take_snapshots(Tick& t);
  void prepare_snapshot(Tick& t, size_t i, LaunchSpec& spec);
  void prune_snapshots(Tick& t);
  const Job* job_of(const std::string& id) const;
  void say_changes(Tick& t, const State& before, const State& state);
  void say_adopted(Tick& t);
  std::string outcomes(const State& state) const;
  void refresh_ended(Tick& t);
  void sync_ends(Tick& t);
  void enforce_limits(Tick& t);
  void time_out(Tick& t, const Job& job, const std::string& id);
  void escalate_kills(Tick& t);
  void note_running(Tick& t);
  void watch_host(Tick& t);
  void watch_memory(Tick& t);
  void oom_launch(size_t i, const Life& life, LaunchSpec& spec);
  void stop_over_memory(Tick& t, const Job& job, const std::string& id, double resident_gib, double mem_gib);
  std::vector<int> cores_for(size_t job, const std::vector<int>& gpus) const;
  std::string cores_note(size_t job, const std::vector<int>& gpus) const;
  void probe(Tick& t);
  void say_others(Tick& t, const GpuReading& r, const GpuRules& rules, const std::map<int, std::string>& others);
  void note_memory(Tick& t, MemoryUse& use);
  void watch_activity(Tick& t);
  void note_progress(Tick& t);
  void watch_eta(Tick& t);
  void record_prediction(Tick& t, const PredictionRecord& record, bool moved);
  void stop_hung(Tick& t, const Job& job, const std::string& id, const QuietCheck& c);
  void act_on_idle(Tick& t, const Job& job, const std::string& id, const IdleCheck& c);
  void log_idle(Tick& t, const std::string& id, const std::string& detail);
  void node_enter(Tick& t);
  void watch_drains(Tick& t);
  void drain_for(Tick& t, const GpuFault& f);
  void requeue_fault_failures(Tick& t, const std::map<int, GpuDrain>& drained, bool all);
  void log_drain(Tick& t, const GpuDrain& d, const std::string& detail);
  std::vector<NodeWant> node_wants() const;
  void node_publish(Tick& t);
  void say_node_problem(Tick& t, const NodeError& e) const;
  std::vector<NodeHold> node_holds(const Tick& t) const;
  void decide(Tick& t);
  void choose(Tick& t);
  void act(Tick& t);
  bool record(Tick& t);
  void start(Tick& t);
  void launch_held(Tick& t, const std::string& problem, const std::string& detail);
  size_t running_count() const;
  void save(Tick& t, bool durable = false);  // durable: fsynced, the folder too
  void save_ends_before_relaunch(Tick& t);
  void remove_cgroups(Tick& t);
  void release_started(Tick& t);
  std::vector<double> last_checkpoints() const;
  void say_preempts(Tick& t);
  void signal_groups(Tick& t);
  void watch(Tick& t);
  void catch_up_events(Tick& t);
  void record_events(Tick& t);
  bool look_at_start_lines(bool fresh);
  bool all_finished(const Tick& t) const;
  bool never_finishes(Tick& t);
  TickResult store_failed(Tick& t, const StoreError& e);
  int stopped(const Wake& w);
  void say(double now, const std::string& line, const std::string& about = {}) const;
  void say(Tick& t, const std::string& line, const std::string& about = {}) const;
  void note_in_log(Tick& t, const std::string& id, const std::string& about, const std::string& line) const;
  void tell(Tick& t) const;

  Plan plan_;
  std::shared_ptr<const PlanIndex> index_;  // who depends on whom in plan_, for each engine over it
  const RunOptions opt_;
  Ports os_;
  Say out_, err_;
  std::vector<size_t> with_file_deps_;  // the jobs with a file: dep, found once
  std::optional<QueueState> q_;         // the state and the engine over it
  bool kept_ = false;                   // q_ is what the last tick saved: kept while the store is unchanged
  GpusRead read_;                       // the last tick's read of the GPUs (gpus_read)
  // What the pane has been told, by what it is about (notices.h): each line said once, and again
  // only when its condition has gone and come back. Mutable: say() itself keeps the lines said
  // while the state cannot be saved.
  mutable Notices told_;
  // The node's room for jobs, looked over for jobs too big for it, and the cgroups left to remove.
  struct HostSeen {
    std::pair<uint64_t, double> too_big_seen{0, -1};  // the plan (serial) and most_room last looked over for jobs too big
    uint64_t seen = 0;                                // the plan (serial) last looked over for jobs too big for the node
    std::vector<std::string> cgroups_left;            // cgroups of earlier attempts not yet removed (remove_cgroups)
    std::map<int, unsigned long long> energy_mj;      // each GPU's energy counter at the last reading that gave it
    std::vector<IdleHolder> idle_holders;             // processes of no job seen idle on GPUs (published to the node)
  } host_;
  // GPU health (gpu_health.h, run_health.cpp): the faults seen, and the drained GPUs last said.
  struct Health {
    FaultWatch watch;
    bool first = true;                  // no reading looked at yet
    GpuMask accept = 0;                 // GPUs undrained since: their conditions now are no fault
    std::map<int, GpuDrain> own;        // this run's drains where it shares no node directory
  } health_;
  std::string last_save_problem_;   // the fault that kept the last save from the disk ("": saved)
  struct TickClock {
    std::optional<ClockReading> last_look;  // both clocks at the last tick's start (clock_step.h)
    double began = 0;                       // the monotonic clock then
    double due_in = 0;                      // the next tick was due this long after it, at the latest
    double wait_in = 0;                     // the wait it asked for (due, were it stopped in the tick)
    bool first = true;
  } clock_;
  std::function<void(double)> after_tick_;
  struct Ending {
    std::string summary;             // how the jobs ended, for the last line
    std::optional<size_t> never_sig;  // the state never_finishes last looked at
    size_t never_count = 0;           // the jobs it found can never start, and their ids
    std::string never_ids;
    bool all_done = false;  // and whether every job of the plan ended done (run's status 0)
  } end_;
  NodeShare* node_ = nullptr;              // share_node
  struct EventLog {
    Journal* journal = nullptr;
    HookRunner* hooks = nullptr;
    bool hooks_begun = false;         // given the log's past (HookRunner::begin)
    std::vector<Event> unlogged;      // the engine's events not yet in the log (its append failed)
    // Running entries another run left held at their start lines (it died between its save and
    // their release), by id, with their start: not logged until the launcher sees them let run
    // (they never are: they end aborted, which is no event either).
    std::map<std::string, double> not_released;
  } log_;
  struct Reload {
    PlanSource* source = nullptr;
    std::function<void(const std::string&, double)> then;
    double loaded_at = 0;                   // when the plan in use was loaded
    std::map<std::string, Job> started_as;  // running jobs whose definition a reload changed: the one they run
  } reload_;
  struct PauseSeen {
    std::function<std::optional<double>()> from;
    std::optional<double> was;  // what the last tick saw
    bool seen = false;
  } pause_;
  struct SnapshotUse {
    Snapshots* store = nullptr;             // use_snapshots
    std::string root, workdir, setting;
    bool due = true;                        // a load (the first tick, a reload) whose jobs may need a snapshot
    std::set<std::string> changed;          // jobs the last reload changed: a new snapshot each
  } snap_;
  // The eta event (run_progress.cpp): the plan's predicted finish last told (or first predicted),
  // each job's predicted end then, and when and at what cost `run` last predicted.
  struct EtaWatch {
    std::optional<double> told;
    std::map<size_t, double> ends;
    bool due = true;                 // something changed since the last prediction
    double predicted_at = -1e300;
    double cost = 0;                 // seconds the last prediction took
    size_t sig = 0;                  // the jobs' statuses and starts then
    std::string predictions_path;    // PLAN.predictions.jsonl
    std::optional<Plan> learned;     // the plan with learned estimates (events.h), made at the first prediction
    uint64_t learned_for = 0;        // the serial of the plan it was made from
    bool learned_tried = false;
    std::optional<double> recorded_finish;  // the finish in the last line of PLAN.predictions.jsonl
    double recorded_at = 0;
  } eta_;
};

struct RunInfo;

/// A batch queue's ports, made by its adapter (backend.cpp) for run_queue in place of this
/// machine's: the same loop, its jobs submitted to the queue, their ends seen as files.
class BatchPorts {
 public:
  virtual ~BatchPorts() = default;
  virtual Launcher& launcher() = 0;
  virtual GpuProbe& probe() = 0;
  virtual Waker& waker() = 0;
  /// An edit of the plan as the run takes it: `p` made the queue's copy, or the problem.
  virtual std::string adapt(Plan& p) = 0;
  /// The launcher submits from `plan` (at the start, and after each edit taken).
  virtual void use_plan(const Plan& plan) = 0;
};

/// Makes a batch queue's ports around this machine's waker (files appearing wake it).
using BatchPortsMaker = std::function<std::unique_ptr<BatchPorts>(Waker& local)>;

/// `gpuq run` on this machine: a RunLoop over the POSIX ports (this process
/// becomes the subreaper of its jobs' orphans). With `info`, PLAN.run.json is
/// written at the start, after each tick and at the end (run_info.h). Returns the exit status.
/// `plan_text` is the text `plan` was loaded from: the plan file is watched for edits
/// against it (RunLoop::watch_plan).
/// With `batch`, jobs are submitted to a batch queue instead: the same loop over its ports.
int run_queue(Plan plan, const PlanPaths& paths, const RunOptions& opt, std::FILE* out, RunInfo* info = nullptr,
              const std::string* plan_text = nullptr, const BatchPortsMaker* batch = nullptr);

}  // namespace gpuq

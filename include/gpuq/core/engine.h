// The engine: every rule of the queue, once. It holds each job's life (life.h) and the
// indexes that make a decision cheap (unmet deps per job, the ready set, open reservations,
// GPUs in use, retries to come), takes one event at a time and says what to do.
//
// Two drivers move it. `run` (live/run_loop.h) feeds it what the OS saw (a job exited, a
// limit was reached, a control command) and a tick on the real clock, and carries out its
// launches and stops. The prediction (predict.h: `simulate`, `status`) feeds it a virtual
// clock and an estimate launcher that turns each launch into an exit at the estimate, or a
// timeout at the limit. Both see the same decisions because there is one place that makes
// them: ninja's dry run, one engine and two drivers.
//
// Pure: no clock, no file, no process. Times are in the driver's unit (seconds since the
// epoch for `run`, hours for the prediction; `unit_seconds` converts --retry-after).
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "gpuq/core/life.h"
#include "gpuq/core/plan.h"
#include "gpuq/core/rules.h"
#include "gpuq/core/schedule.h"

namespace gpuq {

/// The original's tolerance on times (in the driver's unit).
inline constexpr double kTimeEps = 1e-9;

/// What happens to the engine. Jobs are positions in the plan.
namespace ev {
/// Decide now: automatic retries that fell due, then (unless paused) the scheduling pass
/// over the ready jobs and the GPUs free (the node's, less those in use by running jobs of the
/// plan and `unavailable`: another user's memory, a job of no plan still dying, a GPU lost).
struct Tick {
  double now = 0;
  GpuMask unavailable = 0;
  bool others_running = false;  ///< something not of the plan runs (fix 12's "nothing running" is false)
  long long room = -1;          ///< batch queue: how many more jobs it takes now (-1: no limit)
  bool explain = false;         ///< keep why each ready job that did not start waits (Effects::pass)
  int held_elsewhere = 0;       ///< GPUs the user's other runs hold now: Policy::max_gpus counts them
  /// Where file: deps are looked at (`run`: the disk): each waiting job with its job deps met is
  /// looked at again. Null: as the last Files events said (the prediction).
  const FileChecks* files = nullptr;
  /// Per job, when its running attempt last checkpointed (driver's time; NaN or absent: never, its
  /// start): a preemption stops first the jobs that lose the least work.
  std::span<const double> checkpoints;
  /// Several jobs on one GPU: GiB per GPU id (node 0) in use beyond what its running packed jobs
  /// declared (processes of no job of the plan, a job using more than it declared, a stopped job's
  /// memory not yet let go); +inf closes a GPU to packed jobs. Given: an `unavailable` GPU takes
  /// packed jobs as its room allows. Empty: none beyond them, and `unavailable` GPUs take none.
  std::span<const double> mem_other;
  /// Cores and host memory that jobs of other runs on the node hold (node 0): not free to this plan.
  HostRoom host_other{};
};
struct Exited {                                                ///< its script exited with `code`; a failure
  size_t job;                                                  ///< `oom` names (Outcome::OomGpu, OomHost)
  double at;                                                   ///< ends with that outcome (host_mem.h)
  long long code;
  std::optional<Outcome> oom{};
};
struct Vanished {                                              ///< its process is gone without a code
  size_t job;
  double at;
  bool node_restarted = false;  ///< it began before the machine last booted: it ended with the node
};
struct Aborted { size_t job; };                                ///< its launch was cut short: it never ran
struct LaunchFailed {                                          ///< it could not be launched (why: the
  size_t job;                                                  ///< driver's to record, JobState::reason)
  double at;
  long long exit;                    ///< the code recorded (127 for a missing script, else kLostExit)
  bool for_good;                     ///< a retry would fail alike (Unstartable); else Lost
};
struct QueueStarted { size_t job; double at; };                ///< the batch queue started a queued job
struct LimitReached { size_t job; double at; };                ///< its time limit is reached
struct Hung {                                                  ///< a watchdog stops it: the hang watchdog
  size_t job;                                                  ///< (on_quiet "kill") or the idle watch
  double at;                                                   ///< (on_idle "kill", Outcome::Idle)
  Outcome outcome = Outcome::Hung;
};
struct OverMemory { size_t job; double at; };                  ///< run stops it above its mem_gib (host_mem.h)
struct OomRetry { size_t job; };                               ///< the processes of a job stopped over memory are
                                                               ///< gone: its on_oom retry, if one is due
struct GroupGone { size_t job; };                              ///< a requeued job's processes are all gone
struct Retry { size_t job; };                                  ///< `gpuq retry` (a job held in a batch
                                                               ///< queue: released there by the caller)
struct Hold { size_t job; };                                   ///< `gpuq hold` (a queued job: held in its
                                                               ///< batch queue by the caller)
struct Kill { size_t job; double at; };                        ///< `gpuq kill`
struct Requeue { size_t job; double at; };                     ///< `gpuq requeue`
struct Preempt {                                               ///< stop a running preemptible job to give
  size_t job;                                                  ///< its GPUs to `by` (none: `gpuq preempt`
  double at;                                                   ///< by hand, or `other`'s); it runs again later
  std::optional<size_t> by;
  std::string other{};                                         ///< another user's job it gives way to ("bo's eval")
  /// When its attempt last checkpointed (the newest file of its GPUQ_CHECKPOINT_DIR), where seen;
  /// none or NaN: no checkpoint seen.
  std::optional<double> checkpoint{};
};
struct GpuFault { size_t job; };                               ///< its last attempt failed on a GPU drained for
                                                               ///< a fault (gpu_health.h): it waits again, no
                                                               ///< retry spent, its dependents unblocked
struct Files { size_t job; bool present; };                    ///< its file: deps exist (or not) now
struct Dequeued { size_t job; };                               ///< its batch queue no longer has it (it never ran)
}  // namespace ev

using EngineEvent = std::variant<ev::Tick, ev::Exited, ev::Vanished, ev::Aborted, ev::LaunchFailed, ev::QueueStarted,
                           ev::LimitReached, ev::Hung, ev::OverMemory, ev::OomRetry, ev::GroupGone, ev::Retry, ev::Hold, ev::Kill, ev::Requeue,
                           ev::Files, ev::Dequeued, ev::Preempt, ev::GpuFault>;

/// A job to launch now: its GPUs are its life's (Running::gpus, of `node`); attempt = its
/// GPUQ_ATTEMPT. A batch queue's job (Queued) has none: the queue places it.
struct Launch {
  size_t job;
  int node = 0;
  long long attempt = 1;
};

/// A job to stop (SIGTERM to its process group, or its batch queue's cancel), and what asked
/// for it: a kill, its time limit, the watchdog, a requeue.
struct Stop {
  size_t job;
  Cause cause;
};

/// A change of one job's life, in the order they happened: the life it entered, and why.
struct Change {
  size_t job;
  LifeKind from;
  Life life;
  Cause cause;
};

/// Why a control command changed nothing.
enum class Refusal {
  Running,      ///< retry: it runs (a retry would start a second copy); hold: it runs (kill stops it)
  NotRunning,   ///< kill, requeue: it does not run
  AlreadyHeld,  ///< hold: it is held already (not an error)
  Requeueing,   ///< requeue, preempt: it is being requeued or preempted already (not an error)
  Done,         ///< hold: it is done
  NotPreemptible,  ///< preempt: the job is not preemptible
};

/// A preemption the engine made (or `gpuq preempt` asked for): `job` is stopped for `by`.
struct Preemption {
  size_t job;
  std::optional<size_t> by;  ///< none: by hand, or `other`
  double ran = 0;            ///< how long it ran since its start (driver's time)
  double unsaved = 0;        ///< how long since its last checkpoint (its start when none): the work lost
  std::string other{};       ///< another user's job it gives way to, on a shared node ("bo's eval")
  bool checkpointed = false;  ///< a checkpoint of this attempt was seen (else `unsaved` is all it ran)
  /// "it ran 2.1h, 4 min since its last checkpoint" / "it ran 1 min, no checkpoint seen": the work
  /// a preemption loses, in the pane, the state's reason and the event log alike.
  std::string work_text() const;
};

/// What the engine asks of its driver after an event.
struct Effects {
  std::vector<Launch> launches;  ///< in ready order
  std::vector<Stop> stops;
  std::vector<Change> changes;
  std::vector<size_t> retried;        ///< Tick: automatic retries, in plan order (their attempts: life)
  std::vector<Preemption> preempted;  ///< the jobs a preemption stopped (their stops are in `stops`)
  std::optional<Refusal> refused;     ///< a control command that changed nothing
  PassResult pass;                    ///< Tick: the pass's result (held: with explain)
  void clear();
};

/// Why a job waits, as data (views word it).
struct Why {
  enum class Kind {
    None,        ///< it does not wait (running, done)
    Held,        ///< held by hand
    Blocked,     ///< plain deps failed or blocked: `jobs`
    Failed,      ///< its attempt failed; `at`: when its automatic retry comes (none: no retry)
    Queued,      ///< in the batch queue, not started
    Deps,        ///< plain deps not done (`jobs`), after: deps not finished (`afters`), files missing (`files`)
    Ready,       ///< ready, and the pass starts it now
    Paused,      ///< ready, but the queue is paused
    Gpus,        ///< ready; needs more GPUs than are free to it (`free`, `closed` by reservations)
    Backfill,    ///< ready; longer than the backfill limit while `head` waits for GPUs
    Host,        ///< ready, its GPUs free; needs more cores or host memory than are free (`need`, `host`)
  } kind = Kind::None;
  std::vector<size_t> jobs, afters;
  bool files = false;                 ///< some file: dep is missing
  /// A prediction's word on a missing file that never comes.
  enum class Source {
    Unknown,        ///< (not a prediction's verdict)
    NoProducer,     ///< no job of the plan produces it
    ProducerGone,   ///< its producer will not run again
    ProducerNever,  ///< its producer never ran
  } source = Source::Unknown;
  std::optional<double> at;
  int free = 0;
  GpuMask closed = 0;
  double room = 0;  ///< Gpus, a job that packs: the most GiB a GPU open to it has room for
  HostNeed need{};  ///< Host: the cores and host GiB it needs
  HostRoom host{};  ///< Host: the most free on a node
  size_t head = 0;
  bool head_host = false;  ///< Backfill: `head` waits for cores or host memory, not GPUs
  /// Gpus: each open reservation that closes GPUs to the job, with its members that keep it open.
  std::vector<std::pair<size_t, std::vector<size_t>>> closing;
};

/// The parts of the engine that depend on the plan alone (who depends on whom), built once
/// per plan and shared by the engines over it.
struct PlanIndex {
  explicit PlanIndex(const Plan& plan);
  /// Jobs with a plain-id dep on job j, and with an after: dep on it.
  std::span<const uint32_t> plain_dependents(size_t j) const;
  std::span<const uint32_t> after_dependents(size_t j) const;
  std::vector<uint32_t> first_plain, plain, first_after, after;  // compressed rows
  std::vector<uint32_t> deps;   // per job: its plain and after: deps (repeats counted)
  std::vector<char> file_dep;   // per job: it has a file: dep
  std::vector<char> reserved;   // per job: some reservation lists it
  /// Some job has its own max_retries. Else the engine takes the policy's number without
  /// reading each Job (a cache miss per job and transition: simulate 1M jobs 1.3x slower).
  bool own_retries = false;
  /// Per job: its gpu_mem_gib (0: none); empty when no job gives one.
  std::vector<float> gib;
  /// Some job gives cpus or mem_gib: the plan counts cores and host memory (Policy::counts_host).
  bool host_fields = false;
  /// Some job gives on_oom: its next attempt's host memory follows its on_oom retries (host_mem.h).
  bool on_oom = false;
};

/// What the engine's reasons read of a tick, kept apart from the engine: a few bytes a job
/// (`status` keeps it from the next tick while the prediction carries the engine on).
struct WhySnapshot {
  std::vector<uint8_t> kinds, flags;               // per job: LifeKind, and what its life means to others
  std::vector<char> files;                         // per job: its file: deps are present
  std::vector<int32_t> slots;                      // per job: the tick's pass marks (see Engine)
  std::vector<PassedOver> held;                    // the tick's pass: why ready jobs did not start
  std::vector<char> open;                          // per reservation: some member keeps it closed
  std::vector<std::pair<size_t, double>> retries;  // ended jobs with an automatic retry to come, by job
  /// Engine::why, as of the tick it was taken after.
  Why why(const Plan& plan, const PlanIndex& index, size_t j) const;
};

/// The engine over one plan.
class Engine {
 public:
  /// `unit_seconds`: how many seconds one unit of the driver's time is (1: seconds; 3600: hours).
  /// `index` may be shared between engines over the same plan (made here when null). The jobs
  /// start as `lives` (all waiting when empty) and their files as `files_present` (load()).
  Engine(const Plan& plan, const Policy& policy, double unit_seconds,
         std::shared_ptr<const PlanIndex> index = nullptr, std::vector<Life> lives = {},
         std::vector<char> files_present = {});

  /// Sets every job's life at once (a state read, the start of a prediction) and the files each
  /// job waits for as present or not; indexes rebuilt, no change recorded. A job that is
  /// Waiting with a failed or blocked plain dep becomes Blocked (recorded as a change).
  void load(std::vector<Life> lives, std::vector<char> files_present = {});

  /// Applies one event; what to do is in effects() (cleared first).
  void apply(const EngineEvent& e);
  const Effects& effects() const { return fx_; }
  Effects& effects() { return fx_; }
  /// Keep Effects::changes (on by default; a prediction turns it off).
  void record_changes(bool on) { record_ = on; }

  const Life& life(size_t j) const { return lives_[j]; }
  const std::vector<Life>& lives() const { return lives_; }
  const Plan& plan() const { return plan_; }
  const Policy& policy() const { return policy_; }
  Policy& policy() { return policy_; }

  /// The job a preemption holds GPUs for while its victims stop, if any.
  std::optional<size_t> preempting_for() const { return preempt_.held_for ? std::optional<size_t>(preempt_.held_for->job) : std::nullopt; }
  /// Some job of the plan may be preempted (Policy::preemptible).
  bool preempts() const { return preempt_.on; }

  /// When the next automatic retry falls due (driver's time), if one will.
  std::optional<double> next_retry();
  /// After `now`, when the next running preemptible job (not stopping) has run preempt_min_minutes
  /// since its (re)start, while some job waits: a preemption may let a waiting job start then, so
  /// run's tick and the prediction both look again at that moment (driver's time).
  std::optional<double> next_preemptible(double now) const;
  /// When job j's automatic retry falls due, if it has ended and one will come.
  std::optional<double> retry_at(size_t j) const;
  /// Job j ended out of memory and its on_oom has a retry left: run once its processes are gone
  /// (ev::OomRetry), at once for an attempt that exited.
  bool oom_retry_due(size_t j) const;
  /// Jobs waiting with every job dep met whose file: deps decide whether they are ready.
  bool wants_files(size_t j) const;
  /// Jobs not yet finished that could still start or are running (the queue is not over).
  size_t waiting() const { return waiting_; }
  size_t running() const { return running_; }
  /// Every job dep of j is met (plain deps done, after: deps finished).
  bool deps_met(size_t j) const { return unmet_[j] == 0; }
  /// The GPUs running jobs of the plan hold on node 0 (and on each node).
  GpuMask busy(int node = 0) const { return nodes_.busy[static_cast<size_t>(node)]; }
  /// Some job packs (a gpu_mem_gib, packing on): GPUs may hold several jobs.
  bool packs() const { return pack_.on; }
  /// The plan counts cores and host memory (Policy::counts_host): a job starts where they fit.
  bool counts_host() const { return host_.on; }
  /// What job j needs of cores and host memory (nothing where the plan counts neither).
  HostNeed host_need(size_t j) const { return host_.on ? host_.need[j] : HostNeed{}; }
  /// The cores and host GiB the running jobs of the plan need on `node`.
  HostRoom host_used(int node = 0) const {
    return host_.on ? host_.used[static_cast<size_t>(node)] : HostRoom{};
  }
  /// The GiB job j declares on each of its GPUs where it packs (its gpu_mem_gib), else 0.
  double packed_gib(size_t j) const;
  /// The GiB the running packed jobs declared on GPU g (of `node`).
  double declared_gib(size_t g, int node = 0) const;
  /// Ready to start (waiting, deps met, files present).
  bool ready(size_t j) const { return ready_.contains(j); }
  /// The first `limit` ready jobs, in ready order (a shared node publishes them).
  std::vector<size_t> ready_jobs(size_t limit) const { return ready_.in_order(limit); }
  /// The incremental counts, counted again from the lives (for tests): "" when they agree, else
  /// what differs.
  std::string recount() const;

  /// Why job j waits now, from its life, its deps and the last Tick's pass: ask right after a
  /// Tick made with explain (a job that Tick launched is Ready; one it would launch but for a
  /// pause is Paused).
  Why why(size_t j) const;
  /// What why() reads, kept (take it right after a Tick made with explain).
  WhySnapshot snapshot() const;
  /// Who depends on whom in the plan.
  const PlanIndex& index() const { return *index_; }

 private:
  void enter(size_t j, Life next, Cause cause);
  void settle();
  void retry(size_t j, bool automatic);
  void unblock_all();
  void tick(const ev::Tick& t);
  void pass(const ev::Tick& t);
  void end_running(size_t j, Ended e, Cause cause, bool stop);
  void size_for(size_t j, long long oom_retries);
  void oom_retry(size_t j);
  void update_ready(size_t j);
  void hold_gpus(size_t j, const Running& r, int by);
  void mark(size_t j, int32_t slot);
  int32_t slot(size_t j) const { return j < explain_.slot.size() ? explain_.slot[j] : -1; }
  void push_retry(size_t j);
  bool running(size_t j) const { return kind(j) == LifeKind::Running; }
  LifeKind kind(size_t j) const { return static_cast<LifeKind>(kinds_[j]); }
  void operator()(const ev::Tick& e) { tick(e); }
  void operator()(const ev::Exited& e);
  void operator()(const ev::Vanished& e);
  void operator()(const ev::Aborted& e);
  void operator()(const ev::LaunchFailed& e);
  void operator()(const ev::QueueStarted& e);
  void operator()(const ev::LimitReached& e);
  void operator()(const ev::Hung& e);
  void operator()(const ev::OverMemory& e);
  void operator()(const ev::OomRetry& e);
  void operator()(const ev::GroupGone& e);
  void operator()(const ev::Retry& e);
  void operator()(const ev::Hold& e);
  void operator()(const ev::Kill& e);
  void operator()(const ev::Requeue& e);
  void operator()(const ev::Files& e);
  void operator()(const ev::Dequeued& e);
  void operator()(const ev::Preempt& e);
  void operator()(const ev::GpuFault& e);
  void preempt_for_head(const ev::Tick& t);
  bool start_held_head(const ev::Tick& t);
  friend struct EngineVisit;

  const Plan& plan_;
  /// Job j's automatic retries (rules.h's retries_of; the policy's alone when no job has its own).
  long long retries(size_t j) const {
    return index_->own_retries ? policy_.retries_of(plan_.jobs[j]) : policy_.max_retries;
  }
  Policy policy_;
  double unit_seconds_;
  std::shared_ptr<const PlanIndex> index_;
  std::vector<Life> lives_;
  std::vector<uint32_t> unmet_;    // job deps not met: plain deps not done, after: deps not finished
  std::vector<uint32_t> failing_;  // plain deps failed or blocked
  std::vector<uint8_t> flags_;     // per job, what its life means to others (kDone, kFinished, kLeft, kFailing)
  std::vector<uint8_t> kinds_;     // per job, its LifeKind (what the indexes ask, a byte apart from the life)
  std::vector<char> files_;        // its file: deps are present (as the driver last said)
  std::vector<uint32_t> version_;  // bumped as a job leaves Ended (its heaped retry is then stale)
  std::vector<long> res_open_;     // per reservation: members that keep it closed to others
  // Per node (the simulator's cluster has several; run's node is node 0).
  struct PerNode {
    std::vector<uint16_t> gpu_use;  // per node and GPU id: running jobs on it
    std::vector<GpuMask> busy;      // per node: GPUs with a running job of the plan
    std::vector<GpuMask> free;      // per node: the GPUs free at this pass
  } nodes_;
  // Packing (gpu_mem_gib): kept only where some job packs.
  struct Packing {
    bool on = false;              // some job packs: the members below are kept
    std::vector<uint16_t> whole_use;  // per node and GPU id: running jobs on it that take it whole
    std::vector<double> declared;     // per node and GPU id: the GiB its running packed jobs declared
    std::vector<double> room;         // per node and GPU id: PassInput::room of the last pass
    std::vector<float> gib;  // per job: the GiB it packs with, where an on_oom retry resized one (else empty)
  } pack_;
  // Cores and host memory: kept only where the plan counts them.
  struct HostUse {
    bool on = false;              // the plan counts cores and host memory: the members below are kept
    std::vector<HostNeed> need;   // per job
    std::vector<HostRoom> used;   // per node: what its running jobs need
    std::vector<HostRoom> room;   // per node: PassInput::host_room of the last pass
  } host_;
  ReadySet ready_;
  std::vector<std::pair<double, std::pair<size_t, uint32_t>>> retries_;  // min-heap: (due, (job, version))
  std::vector<char> in_ready_;     // per job: in ready_ (update_ready's shortcut)
  // Blocking and its release (a failure's cascade, a retry's release).
  struct Blocking {
    std::vector<size_t> loose;   // blocked jobs whose failing deps fell to 0 (some may have left or
                                 // failed again since): what the next retry releases
    size_t releasable = 0;       // blocked jobs no plain dep of which fails: a retry releases them
    std::vector<size_t> work;    // jobs to block (the cascade, without recursion)
  } block_;
  std::vector<size_t> file_jobs_;  // jobs with a file: dep
  size_t waiting_ = 0, running_ = 0;
  bool record_ = true;
  PassInput in_;
  struct HeldFor {
    size_t job;
    GpuMask gpus;                 // the free GPUs and the victims' that it starts on
    std::vector<size_t> victims;
  };
  // Preemption: whether any job may be preempted (else none of it runs), the running jobs that
  // may be, and the GPUs held for the job a preemption is for until its victims are gone.
  struct Preempting {
    bool on = false;
    std::vector<size_t> running;
    std::optional<HeldFor> held_for;
  } preempt_;
  // After a Tick with explain: per job, -2 launched by it, -3 would be launched but for the
  // pause, k >= 0 its place in fx_.pass.held, -1 none; `marked` lists the jobs to reset.
  struct Explained {
    std::vector<int32_t> slot;
    std::vector<size_t> marked;
  } explain_;
  Effects fx_;
};

}  // namespace gpuq

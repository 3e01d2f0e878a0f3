// The OS behind small interfaces: what `run` and the control commands ask of
// the clock, the job launcher, the GPU probe, the state store, the file system
// (rules.h's FileChecks) and the event wait. The POSIX implementations are in
// launcher.h, probe.h, store.h, proc.h, local_files.h and waker.h; the tests have fakes of each (tests/fakes.h).
// The signatures take plain values (ids, numbers, entries of the state), so that
// other backends (a Slurm launcher, an NVML probe) fit without reshaping.
#pragma once

#if defined(GPUQ_CORE) || defined(GPUQ_VIEWS)
#error "a live header (the OS behind ports) in the core or the views: pass data in instead"
#endif

#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpuq/core/gpu_use.h"
#include "gpuq/core/life.h"
#include "gpuq/core/rules.h"
#include "gpuq/core/topology.h"
#include "gpuq/core/state.h"

namespace gpuq {

/// Wall time.
class Clock {
 public:
  virtual ~Clock() = default;
  /// Seconds since the epoch, as a float (what the state file records).
  virtual double now() = 0;
  /// Seconds of a clock that never steps (CLOCK_MONOTONIC), to tell a step of the wall clock
  /// from time passing (clock_step.h); nullopt where there is none (then no step is looked for).
  virtual std::optional<double> monotonic() { return std::nullopt; }
  /// Whether this process was continued (SIGCONT: it had been stopped, by SIGSTOP or ^Z) since
  /// the last call: the time a tick took then includes time nobody looked (clock_step.h).
  virtual bool continued() { return false; }
};

/// A job's progress as its launcher read it: a fraction (0-1), and when its source last changed.
struct ProgressSeen {
  double fraction = 0;
  double at = 0;  ///< unix seconds: the source's mtime
};

/// What to start.
struct LaunchSpec {
  std::string id;
  std::string script;        ///< as written in the plan; the launcher expands ~ and $VARS
  std::vector<int> gpus;     ///< the GPUs it runs on (none for a batch queue, which places it)
  int width = 0;             ///< how many GPUs it needs (the plan's "gpus")
  long long attempt = 1;     ///< GPUQ_ATTEMPT: 1 for the first run
  std::vector<std::string> args;  ///< the plan's "args": passed to the script
  std::vector<std::pair<std::string, std::string>> env;  ///< the plan's "env": set for the job
  bool warn_shell_only = false;  ///< its warn_signal is "B:": the wrapper passes it on to the script's bash
  std::string cwd;  ///< where it runs and its relative script is taken from ("": the launcher's workdir): a snapshot's checkout
  long long preemptions = 0;  ///< GPUQ_PREEMPTIONS: how many times it was preempted so far
  bool checkpoint_dir = false;  ///< a preemptible job: GPUQ_CHECKPOINT_DIR, its folder (made), kept across attempts
  /// The cores it is pinned to (its `cpus`, where the plan counts cores): GPUQ_CORES, GPUQ_CPUS and
  /// OMP_NUM_THREADS and the like unless its "env" sets them. Empty: not pinned, nothing set.
  std::vector<int> cores;
  /// The host memory its attempt may use before the kernel stops it (its mem_gib after on_oom, plus
  /// --mem-margin-percent), in bytes: where the node lets gpuq make a cgroup, the job gets one with
  /// this limit (cgroup.h). 0: none.
  long long mem_limit_bytes = 0;
  /// Its attempt's mem_gib: the plan's, times on_oom's mem_factor after its retries (0: none).
  double mem_gib = 0;
};

/// In a job wrapper's environment: the warning signals it gets go on to the script's bash
/// (warn_signal "B:", sent to the wrapper alone). The wrapper takes it out of the job's environment.
inline constexpr const char* kWarnShellEnv = "GPUQ_WARN_SHELL_ONLY";
/// In a preemptible job's wrapper's environment: it outlives SIGTERM, to write the code the script
/// ends with (a preemption's exit 0 is done). The wrapper takes it out of the job's environment.
inline constexpr const char* kOutliveTermEnv = "GPUQ_OUTLIVE_TERM";
/// In a job wrapper's environment: the path of its exit code's room, open on its fd 4
/// (PlanPaths::exit_room). The wrapper takes it out of the job's environment.
inline constexpr const char* kExitRoomEnv = "GPUQ_EXIT_ROOM";
/// In a job wrapper's environment: the cores (a Cpus_allowed_list text) it pins itself to before
/// it runs the script, so that every process of the job has them. Taken out of the job's environment.
inline constexpr const char* kPinCoresEnv = "GPUQ_PIN_CORES";

/// A job as a batch queue shows it (Slurm's squeue or sacct).
struct QueueJob {
  long long id = 0;
  std::string name;
  std::string state;   ///< PENDING, RUNNING, COMPLETED, FAILED, CANCELLED, TIMEOUT, ...
  std::string reason;  ///< Slurm's pending reason (Priority, Resources, JobHeldUser, None)
  std::optional<long long> exit;  ///< sacct's exit code, where known
  std::optional<double> start;    ///< when it started (squeue --json's start_time of a job no longer pending)
};

/// Thrown by a batch queue's launch() when the queue takes no more jobs now (Slurm's
/// AssocMaxSubmitJobLimit, QOSMaxSubmitJobPerUserLimit): the job stays pending; submitting waits
/// for the queue to drain.
struct QueueFull : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// What a batch queue (a cluster's scheduler, live/slurm.h) adds to a launcher: jobs wait in
/// it, and it starts them when it will (the engine's Queued life). This machine's launcher has
/// none (Launcher::queue() is null).
class BatchQueue {
 public:
  virtual ~BatchQueue() = default;
  /// Looks at every recorded job at once (before observe() looks at them one by one): the
  /// queued jobs it has started, or that are over, since (their ids, and when they started).
  /// Only looks: what it finds to mend is mended by mend() (run's), never by a look.
  virtual std::vector<std::pair<std::string, double>> survey(const State& state, double now) = 0;
  /// Mends what the last survey found: a job recorded running but still held in the queue, whose
  /// run died between its save and its release, is released. `run` calls it as it acts.
  virtual void mend() = 0;
  /// Holds a job waiting in the queue; false when it cannot be (it started, it left).
  virtual bool hold(const JobState& s) = 0;
  /// Lets a held job go on waiting; false when it is not in the queue any more.
  virtual bool release(const JobState& s) = 0;
  /// The queue's view of a job (its id, state and pending reason); none when it does not know it.
  virtual std::optional<QueueJob> view(const JobState& s) = 0;
  /// How many more jobs it takes now.
  virtual long long room(const State& state) = 0;
};

/// A job launched and held at its start line: what the state records of it.
struct Launched {
  long long pid = 0;                           ///< the job's id for observe and signals (its process group)
  std::optional<unsigned long long> pid_start; ///< tells this process from a later one with the same pid
  std::optional<long long> queue_id;           ///< a batch queue's job id (then `pid` is the same number)
  std::optional<std::string> cgroup;           ///< the cgroup it was put in (LaunchSpec::mem_limit_bytes)
  std::string note;                            ///< a line for run to say once (what enforces its memory)
};

/// What removing an ended job's cgroup found.
struct CgroupGone {
  bool gone = true;                     ///< removed (or already gone); false while its processes still die
  std::optional<long long> peak_bytes;  ///< the most memory it used, page cache included, where it was read
};

/// How a running job looks from outside.
struct Observed {
  enum class Kind { Running, Exited, Vanished, Aborted } kind = Kind::Running;
  long long exit = 0;         ///< Exited: its exit code; Vanished, Aborted: kLostExit
  std::string note;           ///< a problem with what the job left (for the log line)
  std::optional<double> cpu_seconds;  ///< Exited: the user + system CPU time of its processes, where known
  /// Exited: when its exit code was written (seconds since the epoch: the exit file's time, the
  /// wrapper's write of it at the script's end), where known. A run that looks late (stopped, a
  /// full disk, killed and restarted) ends the attempt then, not when it noticed (issue 51).
  std::optional<double> ended;
  /// Aborted: it was started before the machine last booted (a power cut, a reboot): its attempt
  /// ended with the node (`ended`: by the boot), not by its own doing, and it waits again, no retry
  /// spent; the next attempt's number grows (it may have run).
  bool node_restarted = false;
};

/// A job's process tree as /proc shows it now (its group and their descendants): the sum of their
/// resident memory, and their pids.
struct ResidentTree {
  long long bytes = 0;
  std::vector<long long> pids;
};

/// A signal to a job's process group.
enum class Signal { Term, Kill };

/// Whether the pid an entry records is still the job's process.
enum class Identity {
  Same,   ///< alive, and the process recorded (same start time where one is recorded)
  Gone,   ///< no live process has that pid (or only a zombie)
  Other,  ///< the pid now belongs to a different process (recycled)
};

/// A launch failure that a retry cannot fix: the job's log cannot be opened (a symbolic
/// link, permissions), its script is missing or unreadable. Failures that pass (no memory,
/// too many processes, a full disk) are CannotStartNow: the job waits for them.
struct CannotStart : std::runtime_error {
  explicit CannotStart(const std::string& what, long long exit_code = -1) : std::runtime_error(what), exit(exit_code) {}
  long long exit;  ///< the exit code the state records: 127 for a missing script (bash's), else kLostExit
};

/// A launch that cannot be made now, for a cause that passes (store.h's fault_passes: a full disk,
/// a read-only folder, no process or file descriptor left): the job waits, neither started nor
/// failed, and is launched again once the cause has passed.
struct CannotStartNow : std::runtime_error {
  CannotStartNow(const std::string& what, std::string path, int error)
      : std::runtime_error(what), file(std::move(path)), err(error) {}
  std::string file;  ///< the file it could not make or open ("" for a process)
  int err;           ///< the errno
};

/// Starts jobs, watches them and signals them.
class Launcher {
 public:
  virtual ~Launcher() = default;
  /// Starts the job held at its start line: it runs only after release(), and
  /// never if abandon() (or the death of gpuq) comes first. Throws
  /// CannotStart, or std::runtime_error, saying what failed.
  virtual Launched launch(const LaunchSpec& spec) = 0;
  /// Lets launched jobs run: call once the state that records them is saved.
  virtual void release(const std::vector<Launched>& jobs) = 0;
  /// Makes a launched job end without running (its state could not be saved).
  virtual void abandon(const Launched& job) = 0;
  /// How the running job `id`, whose entry is `s`, looks now.
  virtual Observed observe(const std::string& id, const JobState& s) = 0;
  /// Whether the pid of `s` is still that job's process.
  virtual Identity identify(const JobState& s) = 0;
  /// True while the running entry `s` of job `id` is a launch not (yet) let run: held at its
  /// start line, or cut short there (it left logs/ID.aborted). A run that finds such an entry
  /// left by another run does not log its start: the launch may never be released.
  virtual bool at_start_line(const std::string& id, const JobState& s) {
    (void)id;
    (void)s;
    return false;
  }
  /// Sends `sig` to process group `group`; false when there was none.
  virtual bool signal_group(long long group, Signal sig) = 0;
  /// Sends a job's warning signal (its plan's warn_signal) to group `group`; false when there was none.
  virtual bool warn_group(long long group, const WarnSpec& sig) = 0;
  /// Appends one line of gpuq's (a newline added) to the job's own log.
  virtual void note_in_log(const std::string& id, const std::string& line) = 0;
  /// The size in bytes of the job's own log; nullopt when it cannot be looked at.
  virtual std::optional<long long> log_size(const std::string& id) = 0;
  /// When the job last wrote a checkpoint: the newest file of its GPUQ_CHECKPOINT_DIR (unix
  /// seconds), or nullopt (none, or no such folder here).
  virtual std::optional<double> checkpointed_at(const std::string&) { return std::nullopt; }
  /// How far the job says it is (progress.h) and when it said so: its GPUQ_PROGRESS file, else
  /// (with `from_log`) a progress bar at the end of its log. nullopt: it says nothing.
  virtual std::optional<ProgressSeen> progress(const std::string& id, bool from_log) {
    (void)id, (void)from_log;
    return std::nullopt;
  }
  /// True while some process is still in group `group`.
  virtual bool group_alive(long long group) = 0;
  /// The resident memory of each job's process tree, by its group (a job's pid): the processes of
  /// the group and their descendants. Empty where the launcher cannot look (a batch queue's nodes).
  virtual std::map<long long, ResidentTree> resident(const std::vector<long long>& groups) {
    (void)groups;
    return {};
  }
  /// Whether the attempt of job `id` (entry `s`), which failed with `exit`, ran out of memory:
  /// Outcome::OomGpu (its log's last lines), Outcome::OomHost (a SIGKILL the kernel's OOM killer
  /// recorded for one of its processes), Outcome::OverMemory (killed at the memory limit its
  /// cgroup or batch queue held it to, `why` says which), else nullopt. Best effort: nullopt when
  /// it cannot tell.
  virtual std::optional<Outcome> out_of_memory(const std::string& id, const JobState& s, long long exit,
                                               std::string* why) {
    (void)id, (void)s, (void)exit, (void)why;
    return std::nullopt;
  }
  /// SIGKILL to every process of a job's cgroup (LaunchSpec::mem_limit_bytes): what left its
  /// process group goes too.
  virtual void kill_cgroup(const std::string& group) { (void)group; }
  /// An ended job's cgroup: what is left in it killed, its peak read, the group removed.
  virtual CgroupGone remove_cgroup(const std::string& group) {
    (void)group;
    return {};
  }
  /// Makes the exit codes of jobs `ids` durable, where they are written: those run read (their
  /// wrappers may still be syncing them) and those of groups it is about to SIGKILL, before a
  /// save records the ends. Returns a line per code it could not sync.
  virtual std::vector<std::string> sync_ends(const std::vector<std::string>& ids) = 0;
  /// Collects the exits of finished children, so that none stays a zombie.
  virtual void reap() = 0;
  /// The batch queue the jobs wait in, for a launcher over one; null on this machine.
  virtual BatchQueue* queue() { return nullptr; }
};

/// Reads the memory in use (and the utilization) of each GPU.
class GpuProbe {
 public:
  virtual ~GpuProbe() = default;
  /// A reading now; never throws (a failure is a reading with its problem said).
  virtual GpuReading read() = 0;
  /// How the GPUs are connected; nullopt when the source cannot say (read once, at the start).
  virtual std::optional<Topology> topology() { return std::nullopt; }
};

/// Where the state lives. Every method but read() may be called only while
/// locked; each throws StoreError (store.h) on failure.
class Store {
 public:
  virtual ~Store() = default;
  /// Takes the lock for one read-modify-write (blocks while another holds it).
  virtual void lock() = 0;
  /// Lets the lock go.
  virtual void unlock() = 0;
  /// The state as stored: empty when there is none yet.
  virtual State read() = 0;
  /// Replaces the state atomically: afterwards a reader sees the old one or this
  /// one whole. With `defer_sync` its durability waits for sync().
  virtual void write(const State& state, bool defer_sync) = 0;
  /// Makes the last write durable (survives a power cut).
  virtual void sync() = 0;
  /// True when the stored state is still the one this store last wrote: nobody
  /// replaced it since (a control command, the original). False before a write.
  virtual bool unchanged_since_write() = 0;

  /// Holds the lock for its scope.
  class Locked {
   public:
    explicit Locked(Store& s) : s_(s) { s_.lock(); }
    ~Locked() { s_.unlock(); }
    Locked(const Locked&) = delete;
    Locked& operator=(const Locked&) = delete;

   private:
    Store& s_;
  };
};

// The file checks of `file:` deps are the rule book's FileChecks (rules.h).

/// Why a wait ended.
struct Wake {
  bool stop = false;        ///< a stop signal came: `run` ends
  std::string stop_name;    ///< its name as strsignal gives it ("Terminated")
};

/// The wait between two ticks of `run`.
/// How often `run` looks for a file: dep that no watch covers (its folder not made yet, no
/// inotify), whatever --poll (seconds).
constexpr double kUnwatchedFileLook = 5.0;

/// A job whose end wakes the wait: its group (Launched::pid; a batch queue's id) and its id.
struct WatchedJob {
  long long group = 0;
  std::string id;
};

class Waker {
 public:
  virtual ~Waker() = default;
  /// Wakes the wait when one of these jobs ends: its group is gone, or its exit code is written
  /// (logs/ID.exit appears, before its wrapper has synced it and gone). Replaces the last set;
  /// the exit files are watched from the next watch_files on (call it after).
  virtual void watch_jobs(const std::vector<WatchedJob>& jobs) = 0;
  /// Wakes the wait when one of these files appears (a replaced state file
  /// wakes it too, always). Replaces the last set. Returns the paths it could
  /// watch (a backend may watch only some, e.g. those in folders that exist):
  /// the caller looks once more at those, for a file made just before its watch, and for
  /// the others every kUnwatchedFileLook seconds.
  virtual std::vector<std::string> watch_files(const std::vector<std::string>& paths) = 0;
  /// Forgets the events so far (those of this process's own writes).
  virtual void drain() = 0;
  /// Returns after `timeout_s` seconds, at the first event above, or at a stop signal.
  virtual Wake wait(double timeout_s) = 0;
};

/// Everything `run` asks of the OS.
struct Ports {
  Clock& clock;
  Launcher& launcher;
  GpuProbe& probe;
  Store& store;
  const FileChecks& files;
  Waker& waker;
};

}  // namespace gpuq

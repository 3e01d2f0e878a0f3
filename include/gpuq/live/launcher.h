// Starting jobs on this machine: posix_spawn in a new session, output appended to
// logs/ID.log, the exit code left in logs/ID.exit by write-then-rename.
#pragma once

#if defined(GPUQ_CORE) || defined(GPUQ_VIEWS)
#error "a live header (the OS behind ports) in the core or the views: pass data in instead"
#endif

#include <map>
#include <string>

#include "gpuq/live/cgroup.h"
#include "gpuq/live/ports.h"
#include "gpuq/live/store.h"

namespace gpuq {

/// The argument that makes the gpuq binary act as a job's wrapper.
inline constexpr const char* kJobWrapperArg = "__job";

/// The wrapper, run as `gpuq __job SCRIPT EXITFILE ABORTEDFILE [ARG...]` with the start
/// line on fd 3: waits for "go" (else leaves ABORTEDFILE and exits; ABORTEDFILE "-": there is
/// no start line, as under Slurm, whose hold on the job is its start line), runs
/// `bash SCRIPT`, and renames its exit code into EXITFILE. Returns the status.
/// The wrapper outlives the warning signals its group gets (USR1, USR2, HUP, ALRM,
/// ...: what a warn_signal may name, other than TERM, INT and the job-control and
/// fault signals); bash and its children get them with their default actions.
int job_wrapper(int argc, char** argv);

/// Makes the folder `dir` for a launch (`what` names it in the error): one that cannot be made
/// for a cause that passes (a full disk, no inode left) is CannotStartNow, the job waits; any
/// other is CannotStart, the job fails. This machine's launcher and Slurm's check alike.
void make_folder(const std::string& dir, const std::string& what);

/// The script of `spec` that bash will run (a relative one from `workdir`, or the folder `gpuq
/// run` was started in), checked readable: else CannotStart (127), as bash would fail at once,
/// and every retry too. This machine's launcher and Slurm's check alike.
std::string readable_script(const LaunchSpec& spec, const std::string& workdir);

/// logs/ID.cpu, the CPU time the wrapper wrote for the attempt that ended (nullopt: none, or not a
/// number: the original's wrapper writes none).
std::optional<double> read_cpu_seconds(const PlanPaths& paths, const std::string& id);

/// The Launcher of this machine. A job is the wrapper (gpuq itself) for its
/// script, in a session of its own (its pid is its process group) with stdin
/// from /dev/null and stdout+stderr appended to logs/ID.log; its environment
/// gets CUDA_VISIBLE_DEVICES, TDPRM_GPU0, CUDA_DEVICE_ORDER=PCI_BUS_ID (unless
/// set), GPUQ_JOB_ID and GPUQ_ATTEMPT. The start line is a pipe: "go" lets it
/// run; EOF (abandon, or gpuq's death) makes it leave logs/ID.aborted and exit.
/// With a `workdir`, a job runs in that folder and a relative script path is taken
/// from it; without one, from the folder gpuq runs in (the original's way).
/// A job's progress from the files `paths` names for it (PosixLauncher::progress; a launcher whose
/// jobs write the same files reads them alike).
std::optional<ProgressSeen> read_progress(const PlanPaths& paths, const std::string& id, bool from_log);

class PosixLauncher : public Launcher {
 public:
  explicit PosixLauncher(PlanPaths paths, std::string workdir = "")
      : paths_(std::move(paths)), workdir_(std::move(workdir)) {}
  /// Abandons the jobs launched and not yet released.
  ~PosixLauncher() override;
  PosixLauncher(const PosixLauncher&) = delete;
  PosixLauncher& operator=(const PosixLauncher&) = delete;

  /// Removes a stale exit file first. Throws std::runtime_error naming the call and path.
  Launched launch(const LaunchSpec& spec) override;
  void release(const std::vector<Launched>& jobs) override;
  void abandon(const Launched& job) override;
  /// Reads logs/ID.exit and the process: an exit file gives its code (garbage
  /// counts as failure, with a note); a dead process without one vanished,
  /// unless it left logs/ID.aborted (it never started: gpuq died first).
  Observed observe(const std::string& id, const JobState& s) override;
  /// The wrapper (its pid, with the start time recorded) still holds its start line on fd 3
  /// (/proc/PID/fd/3 a pipe), or logs/ID.aborted is there.
  bool at_start_line(const std::string& id, const JobState& s) override;
  /// From /proc/PID/stat: a zombie is gone; a start time other than the one recorded is Other.
  Identity identify(const JobState& s) override;
  bool signal_group(long long group, Signal sig) override;
  bool warn_group(long long group, const WarnSpec& sig) override;
  /// "[HH:MM:SS gpuq] LINE" appended to logs/ID.log (nothing when it cannot be opened).
  void note_in_log(const std::string& id, const std::string& line) override;
  /// stat(2) of logs/ID.log.
  std::optional<long long> log_size(const std::string& id) override;
  std::optional<double> checkpointed_at(const std::string& id) override;
  /// logs/ID.progress (GPUQ_PROGRESS), else the last kProgressTailBytes of logs/ID.log.
  std::optional<ProgressSeen> progress(const std::string& id, bool from_log) override;
  bool group_alive(long long group) override;
  void reap() override;
  /// fdatasync of logs/ID.exit (else its room, logs/ID.exit.new).
  std::vector<std::string> sync_ends(const std::vector<std::string>& ids) override;
  /// One pass over /proc (proc.h's resident_trees); the pids seen are kept for out_of_memory.
  std::map<long long, ResidentTree> resident(const std::vector<long long>& groups) override;
  /// The last kOomLogTail bytes of logs/ID.log (host_mem.h's gpu_oom_in_log); for a SIGKILL (exit
  /// 137), the kernel log (/dev/kmsg, read without blocking; nothing when unreadable) for an OOM
  /// kill of the job's pid or of a pid resident() saw in its tree. Both in resident.cpp.
  std::optional<Outcome> out_of_memory(const std::string& id, const JobState& s, long long exit,
                                       std::string* why) override;
  /// --mem-cgroup off: no job is put in a cgroup (its memory is sampled only).
  void no_cgroups() { cgroups_ = Cgroups{Cgroups::Kind::None, "", "--mem-cgroup off"}; }
  void kill_cgroup(const std::string& group) override;
  CgroupGone remove_cgroup(const std::string& group) override;

 private:
  PlanPaths paths_;
  std::string workdir_;
  std::map<long long, int> start_lines_;  // pid -> write end of its start line
  std::map<long long, std::vector<long long>> tree_pids_;  // by group: the pids resident() saw in its tree
  std::optional<Cgroups> cgroups_;  // looked at (and the parent made) at the first launch with a memory limit
  bool cgroups_said_ = false;
  bool cgroup_failed_said_ = false;       // what holds the jobs' memory said (Launched::note), at that first launch
  std::optional<double> boot_;            // when the machine booted (0: unknown), read at the first lost process
};

}  // namespace gpuq

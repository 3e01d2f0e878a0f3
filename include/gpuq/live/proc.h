// Processes: start times from /proc, liveness, process groups, path expansion;
// the wall clock of this machine.
#pragma once

#if defined(GPUQ_CORE) || defined(GPUQ_VIEWS)
#error "a live header (the OS behind ports) in the core or the views: pass data in instead"
#endif

#include <map>
#include <optional>
#include <string>
#include <sys/types.h>
#include <vector>

#include "gpuq/live/ports.h"

namespace gpuq {

/// Seconds since the epoch, as a float (CLOCK_REALTIME).
double unix_now();

/// Seconds on the monotonic clock (for timeouts: never jumps with the wall clock).
double monotonic_now();

/// The Clock of this machine (unix_now).
class SystemClock : public Clock {
 public:
  double now() override { return unix_now(); }
  std::optional<double> monotonic() override { return monotonic_now(); }
  /// SIGCONT's handler is set at the first call (a stop before it is not seen).
  bool continued() override;
};

/// The start time of `pid` (field 22 of /proc/PID/stat, clock ticks since
/// boot), or nullopt if there is no such process.
std::optional<unsigned long long> process_start_time(long long pid);

/// When this machine booted (seconds since the epoch: /proc/stat's btime), or nullopt where it
/// cannot be read. A job recorded as started before it cannot be running: the node restarted.
std::optional<double> boot_time();

/// True when `pid` is a live process (not a zombie) and, when `start` is
/// given, the same process that had that start time (not a recycled pid).
bool process_alive(long long pid, std::optional<unsigned long long> start);

/// A process as /proc shows it now: its name (comm), its command line (shortened), and its
/// lineage: its pid, process group, session, then each parent's pid up to init. Only the
/// pid when /proc has no such process (gone, or in another pid namespace).
GpuProcess describe_process(long long pid);

/// True when some process is still in process group `pgid`.
bool group_alive(long long pgid);

/// The resident memory of each of `groups`' process trees, in one pass over /proc/PID/stat: a
/// process belongs to the tree of a group when it is in that group or descends from a process that
/// is (a child that made a group or session of its own stays its job's). Processes gone between
/// the listing and their reading are skipped.
std::map<long long, ResidentTree> resident_trees(const std::vector<long long>& groups);

/// The kernel log's lines, read from /dev/kmsg without blocking (as much as it holds now); nullopt
/// when it cannot be read (no permission, a container without it).
std::optional<std::string> kernel_log();

/// Sends `sig` to process group `pgid`; false when there was none.
bool signal_group(long long pgid, int sig);

/// The original's expand(): `~` / `~user` at the start, then `$NAME` and
/// `${NAME}` from the environment; unknown variables are left as written.
std::string expand_path(const std::string& s);

/// This process's environment, NAME -> value.
std::map<std::string, std::string> environment();

/// "NAME=value" for each entry, as a process's environment lists them.
std::vector<std::string> environment_strings(const std::map<std::string, std::string>& env);

/// posix_spawn (posix_spawnp with `search_path`) of `argv` with the environment `env`
/// ("NAME=value" each; null: this process's), fd i of the child taken from
/// `fds[i]`, every signal unblocked and back to its default (run blocks some for
/// its signalfd), and `flags` added (POSIX_SPAWN_SETSID, POSIX_SPAWN_SETPGROUP with
/// group 0), in the folder `cwd` when given. Returns 0 or the error number, as posix_spawn does.
int spawn_process(pid_t* pid, const char* path, bool search_path, const std::vector<int>& fds, short flags,
                  const std::vector<std::string>& argv, const std::vector<std::string>* env = nullptr,
                  const char* cwd = nullptr);

/// A job's script as `run` starts it: ~ and $VARS expanded (expand_path), and a
/// relative path taken from `workdir` when one is given.
std::string resolve_script(const std::string& written, const std::string& workdir);

/// The output and exit status of a command run without a shell.
struct CommandResult {
  int status = -1;  ///< the exit status; -1 when it could not run
  std::string out, err;
};
/// Runs argv (found on PATH) with `extra_env` added to the environment, stdin from /dev/null
/// (defined in slurm_commands.cpp, whose commands were its first).
CommandResult run_command(const std::vector<std::string>& argv,
                          const std::vector<std::pair<std::string, std::string>>& extra_env = {});

/// Reaps every exited child without waiting. Returns how many were reaped.
int reap_children();

}  // namespace gpuq

#include "gpuq/live/launcher.h"

#include <fcntl.h>
#include <sched.h>
#include <fmt/format.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <ctime>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>

#include "gpuq/core/progress.h"
#include "gpuq/live/host.h"
#include "gpuq/live/proc.h"
#include "fd.h"

extern char** environ;

namespace gpuq {

namespace {

// One line before each attempt in the job's log, so that attempts appended to one log can be
// told apart (the original appends them with nothing between; a line of text keeps the log a log).
std::string attempt_header(const std::string& attempt, const std::string& gpus, std::time_t now) {
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S", std::localtime(&now));
  return fmt::format("== gpuq: attempt {} on GPUs {} at {}\n", attempt, gpus, stamp);
}

// "0,3" (CUDA_VISIBLE_DEVICES) -> "0, 3", as a Python list prints its items.
std::string comma_spaced(const std::string& list) {
  std::string out;
  for (char c : list) out += c == ',' ? std::string(", ") : std::string(1, c);
  return out;
}

// Causes that pass (store.h's fault_passes) leave the job waiting; the others (a symbolic
// link, permissions) stay until someone acts, and fail it.
[[noreturn]] void launch_fail(const std::string& what, const std::string& file = "") {
  int e = errno;
  std::string text = what + ": " + std::strerror(e);
  if (fault_passes(e)) throw CannotStartNow(text, file, e);
  throw CannotStart(text);
}

/// The exit code's room (PlanPaths::exit_room): a file of kExitRoomBytes spaces, so that the
/// wrapper's code later overwrites blocks the file system has already given (no space is
/// asked for then; the rename that puts it in place asks for none either). Returns its fd.
constexpr size_t kExitRoomBytes = 32;
int make_exit_room(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) launch_fail("cannot make the exit record " + path, path);
  std::string blank(kExitRoomBytes - 1, ' ');
  blank += '\n';
  ssize_t n = ::write(fd, blank.data(), blank.size());
  if (n != static_cast<ssize_t>(blank.size())) {
    int e = n < 0 ? errno : ENOSPC;
    ::close(fd);
    ::unlink(path.c_str());
    errno = e;
    launch_fail("cannot make the exit record " + path, path);
  }
  return fd;
}

/// A job spawned and held at its start line.
struct Spawned {
  long long pid = 0;
  std::optional<unsigned long long> pid_start;
  int go_fd = -1;  ///< write end of the start line
};

/// The job's environment: gpuq's own, then the job's variables, then the plan's "env"
/// (after gpuq's: a plan may set what it must), as NAME=value strings.
std::vector<std::string> job_environment(const LaunchSpec& spec, const std::string& progress_file,
                                         const std::string& checkpoint_dir) {
  std::map<std::string, std::string> env = environment();
  std::string visible;
  for (size_t i = 0; i < spec.gpus.size(); ++i) visible += (i ? "," : "") + std::to_string(spec.gpus[i]);
  env["CUDA_VISIBLE_DEVICES"] = visible;
  env["TDPRM_GPU0"] = spec.gpus.empty() ? "9" : std::to_string(spec.gpus[0]);
  env.emplace("CUDA_DEVICE_ORDER", "PCI_BUS_ID");  // kept when already set
  env["GPUQ_JOB_ID"] = spec.id;
  env["GPUQ_ATTEMPT"] = std::to_string(spec.attempt);
  env["GPUQ_PROGRESS"] = progress_file;
  env["GPUQ_PREEMPTIONS"] = std::to_string(spec.preemptions);
  if (!checkpoint_dir.empty()) env["GPUQ_CHECKPOINT_DIR"] = checkpoint_dir;
  if (!spec.cores.empty()) {
    // Its cores: the thread pools of OpenMP, MKL and OpenBLAS take their number (unless its "env"
    // sets them, below); the wrapper pins itself to them.
    std::string n = std::to_string(spec.cores.size()), list = core_list_text(spec.cores);
    env["GPUQ_CPUS"] = n;
    env["GPUQ_CORES"] = list;
    for (const char* pool : {"OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"}) env[pool] = n;
    env[kPinCoresEnv] = list;
  }
  for (const auto& [k, v] : spec.env) env[k] = v;
  if (spec.warn_shell_only) env[kWarnShellEnv] = "1";
  if (spec.checkpoint_dir) env[kOutliveTermEnv] = "1";  // preemptible: its code after SIGTERM tells done from preempted
  return environment_strings(env);
}

// A path made absolute: the job may run in another folder (workdir).
std::string absolute_path(const std::string& p) {
  std::error_code e;
  std::filesystem::path a = std::filesystem::absolute(p, e);
  return e ? p : a.string();
}

// The job's log, open to append, with the attempt's header written: a log that cannot take it (its
// disk full) would lose the job's output too.
Fd open_attempt_log(const std::string& logf, const LaunchSpec& spec) {
  Fd log(::open(logf.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644));
  if (log.fd < 0) {
    if (errno == ELOOP)
      throw CannotStart(fmt::format("its log {} is a symbolic link, which gpuq does not follow; remove it", logf));
    launch_fail("cannot open the log " + logf, logf);
  }
  std::string line = attempt_header(std::to_string(spec.attempt), py_list(spec.gpus), std::time(nullptr));
  if (::write(log.fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
    if (!errno) errno = ENOSPC;
    launch_fail("cannot write to the log " + logf, logf);
  }
  return log;
}

/// An attempt's files (absolute paths), made before its wrapper is spawned: one that cannot be made
/// (a full disk, no file descriptor left) leaves the job waiting, never started and never failed for it.
struct AttemptFiles {
  std::string exit, log, aborted, progress, room, checkpoints;
  Fd room_fd, log_fd;
};

AttemptFiles attempt_files(const PlanPaths& paths, const LaunchSpec& spec) {
  AttemptFiles f{absolute_path(paths.exit(spec.id)),     absolute_path(paths.log(spec.id)),
                 absolute_path(paths.aborted(spec.id)),  absolute_path(paths.progress(spec.id)),
                 absolute_path(paths.exit_room(spec.id)), {}, {}, {}};
  ::unlink(f.exit.c_str());
  ::unlink(paths.cpu(spec.id).c_str());  // an earlier attempt's CPU time says nothing of this one
  ::unlink(f.aborted.c_str());
  ::unlink(f.progress.c_str());  // an earlier attempt's progress says nothing of this one
  f.room_fd = Fd(make_exit_room(f.room));
  f.log_fd = open_attempt_log(f.log, spec);
  if (spec.checkpoint_dir) {  // a preemptible job's own folder, kept across its attempts: made before it may start
    f.checkpoints = absolute_path(paths.checkpoints(spec.id));
    make_folder(f.checkpoints, "its checkpoint folder");
  }
  return f;
}

Spawned spawn_job(const PlanPaths& paths, const std::string& run_workdir, const LaunchSpec& spec) {
  const std::string& workdir = spec.cwd.empty() ? run_workdir : spec.cwd;  // a snapshot's checkout (snapshots.h)
  make_folder(paths.logs, "the log folder");
  std::string script = readable_script(spec, workdir);
  AttemptFiles f = attempt_files(paths, spec);
  Fd devnull(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (devnull.fd < 0) launch_fail("open(/dev/null)");
  int go[2];
  if (::pipe2(go, O_CLOEXEC) != 0) launch_fail("pipe2 (the start line of " + spec.id + ")");
  Fd line(go[0]), go_w(go[1]);
  std::vector<std::string> env = job_environment(spec, f.progress, f.checkpoints);
  env.push_back(fmt::format("{}={}", kExitRoomEnv, f.room));
  // The wrapper is gpuq itself (see job_wrapper): the paths are arguments, never pasted into a shell
  // string (fix 2), and the exit code is renamed into place without a helper process.
  std::vector<std::string> args{"gpuq-job", kJobWrapperArg, script, f.exit, f.aborted};
  args.insert(args.end(), spec.args.begin(), spec.args.end());
  pid_t pid = 0;
  int rc = spawn_process(&pid, "/proc/self/exe", false, {devnull.fd, f.log_fd.fd, f.log_fd.fd, line.fd, f.room_fd.fd},
                         POSIX_SPAWN_SETSID, args, &env, workdir.empty() ? nullptr : workdir.c_str());
  if (rc != 0) {
    errno = rc;
    launch_fail(fmt::format("posix_spawn(gpuq-job {}) failed", script));
  }
  // The removals above, and the room, durable before the state that records this attempt is (saved
  // after this returns): after a power cut, an earlier attempt's exit code come back would be
  // taken for this one's; and the wrapper's code, synced into the room, is found there (observe)
  // when its rename into place did not last. After the spawn, not before: the wrapper, held at its
  // start line, loads while the folder syncs (a chain's hand-off: bench/side_by_side.sh).
  sync_folder_of(f.exit);
  return {pid, process_start_time(pid), go_w.release()};
}

/// When a file was last written (its mtime, seconds since the epoch), or nullopt.
std::optional<double> written_at(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return static_cast<double>(st.st_mtim.tv_sec) + static_cast<double>(st.st_mtim.tv_nsec) / 1e9;
}

/// The code in an exit file, or nullopt when it is blank; garbage counts as 1, with a note. NULs
/// are blank: a power cut that kept the size the wrapper gave the file and not the code it wrote
/// (before the wrapper's sync, or run's) leaves zeros, which are no code, not an exit 0 (strtoll reads "" as 0).
std::optional<long long> parse_exit_file(std::string t, const std::string& path, std::string* note) {
  auto blank = [](char c) { return c == '\0' || std::isspace(static_cast<unsigned char>(c)); };
  while (!t.empty() && blank(t.back())) t.pop_back();
  size_t i = 0;
  while (i < t.size() && blank(t[i])) ++i;
  t = t.substr(i);
  if (t.empty()) return std::nullopt;
  char* endp = nullptr;
  errno = 0;
  long long code = std::strtoll(t.c_str(), &endp, 10);
  if (errno || *endp) {
    *note = fmt::format("{} holds '{}', not an exit code; the job counts as failed (exit 1)", path, t.substr(0, 40));
    return 1;
  }
  return code;
}

int signal_number(Signal sig) { return sig == Signal::Kill ? SIGKILL : SIGTERM; }

// The number of a warn_signal (parse_warn_signal checked its name), or 0.
int signal_number(const WarnSpec& w) {
  if (w.name.empty()) return w.number;
  static const std::map<std::string, int> kByName = {
      {"HUP", SIGHUP},   {"INT", SIGINT},   {"QUIT", SIGQUIT},     {"ILL", SIGILL},   {"TRAP", SIGTRAP},
      {"ABRT", SIGABRT}, {"BUS", SIGBUS},   {"FPE", SIGFPE},       {"KILL", SIGKILL}, {"USR1", SIGUSR1},
      {"SEGV", SIGSEGV}, {"USR2", SIGUSR2}, {"PIPE", SIGPIPE},     {"ALRM", SIGALRM}, {"TERM", SIGTERM},
      {"CHLD", SIGCHLD}, {"CONT", SIGCONT}, {"STOP", SIGSTOP},     {"TSTP", SIGTSTP}, {"TTIN", SIGTTIN},
      {"TTOU", SIGTTOU}, {"URG", SIGURG},   {"XCPU", SIGXCPU},     {"XFSZ", SIGXFSZ}, {"VTALRM", SIGVTALRM},
      {"PROF", SIGPROF}, {"WINCH", SIGWINCH}, {"IO", SIGIO},       {"PWR", SIGPWR},   {"SYS", SIGSYS}};
  auto it = kByName.find(w.name);
  return it == kByName.end() ? 0 : it->second;
}

// The script's bash, once started: a "B:" warning goes on to it.
volatile sig_atomic_t shell_pid = 0;

// The wrapper survives the signals a warning may send its group (exec resets the
// handler, so bash gets each with its default action and may trap it). With "B:"
// (kWarnShellEnv), a warning is sent to the wrapper alone and it passes it on to bash.
void outlive_warnings() {
  bool pass_on = std::getenv(kWarnShellEnv) != nullptr;
  ::unsetenv(kWarnShellEnv);
  bool outlive_term = std::getenv(kOutliveTermEnv) != nullptr;
  ::unsetenv(kOutliveTermEnv);
  struct sigaction sa {};
  if (pass_on)
    sa.sa_handler = [](int sig) {
      if (shell_pid > 0) ::kill(static_cast<pid_t>(shell_pid), sig);
    };
  else
    sa.sa_handler = [](int) {};
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGHUP, SIGUSR1, SIGUSR2, SIGALRM, SIGPWR, SIGVTALRM, SIGPROF, SIGXCPU, SIGXFSZ, SIGIO, SIGURG,
                  SIGWINCH})
    ::sigaction(sig, &sa, nullptr);
  // A preemptible job's wrapper outlives SIGTERM too: a preemption's SIGTERM to the group is the
  // script's to answer, and the wrapper writes its code (an exit 0 then is done). SIGKILL stops it.
  if (outlive_term) ::sigaction(SIGTERM, &sa, nullptr);
  for (int sig = SIGRTMIN; sig <= SIGRTMAX; ++sig) ::sigaction(sig, &sa, nullptr);
}

}  // namespace

void make_folder(const std::string& dir, const std::string& what) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (!ec) return;
  std::string text = fmt::format("cannot create {} {}: {}", what, dir, ec.message());
  if (fault_passes(ec.value())) throw CannotStartNow(text, dir, ec.value());
  throw CannotStart(text);
}

std::string readable_script(const LaunchSpec& spec, const std::string& workdir) {
  std::string script = resolve_script(spec.script, workdir);
  struct stat sst;
  if (::access(script.c_str(), R_OK) != 0 || ::stat(script.c_str(), &sst) != 0 || !S_ISREG(sst.st_mode))
    throw CannotStart(fmt::format("its script {} is missing or not a readable file (a relative path is taken from "
                                  "{})",
                                  script, workdir.empty() ? "the folder `gpuq run` was started in" : workdir),
                      127);
  return script;
}

PosixLauncher::~PosixLauncher() {
  for (auto& [pid, fd] : start_lines_) ::close(fd);  // EOF on the start line: they end without running
}

Launched PosixLauncher::launch(const LaunchSpec& spec) {
  Spawned s = spawn_job(paths_, workdir_, spec);
  start_lines_[s.pid] = s.go_fd;
  Launched l{s.pid, s.pid_start, std::nullopt};
  if (spec.mem_limit_bytes > 0) {
    // Its memory held by the kernel too, where the node lets gpuq make a cgroup: the wrapper, held
    // at its start line, is put in the group before it starts anything, so the whole job is in it.
    // A node without (or a group that cannot be made) leaves the sampling alone: said once.
    bool first = !cgroups_said_;
    cgroups_said_ = true;
    if (!cgroups_) cgroups_ = look_at_cgroups(true);
    if (cgroups_->kind != Cgroups::Kind::None) {
      std::string name = spec.id;
      std::replace(name.begin(), name.end(), '/', '_');
      try {
        l.cgroup = make_job_cgroup(*cgroups_, fmt::format("{}.{}", name, s.pid), spec.mem_limit_bytes, s.pid);
        if (first) l.note = "host memory of jobs with mem_gib: sampled, and held by the kernel: " + cgroups_->why;
      } catch (const std::exception& e) {
        // Said for the first such job (run says each note once): the others are alike, as a rule.
        if (!cgroup_failed_said_)
          l.note = fmt::format("host memory of jobs with mem_gib: sampled only for {} and any other job whose cgroup "
                               "cannot be made ({})",
                               spec.id, e.what());
        cgroup_failed_said_ = true;
      }
    } else if (first) {
      l.note = fmt::format("host memory of jobs with mem_gib: sampled only ({})", cgroups_->why);
    }
  }
  return l;
}

void PosixLauncher::kill_cgroup(const std::string& group) { gpuq::kill_cgroup(group); }

CgroupGone PosixLauncher::remove_cgroup(const std::string& group) {
  CgroupGone g;
  g.peak_bytes = cgroup_peak_bytes(group);
  // Its processes get SIGKILL; those that left the job's tree are run's children (its subreaper),
  // and a zombie keeps the group busy: reaped, and the removal tried again, for up to 0.1 s.
  for (int i = 0; i < 20 && !(g.gone = gpuq::remove_cgroup(group)); ++i) {
    reap_children();
    ::usleep(5000);
  }
  return g;
}

void PosixLauncher::release(const std::vector<Launched>& jobs) {
  for (const Launched& job : jobs) {
    auto it = start_lines_.find(job.pid);
    if (it == start_lines_.end()) continue;
    // SIGPIPE is blocked or ignored by the caller; a job that died already just gets EPIPE.
    ssize_t n = ::write(it->second, "go\n", 3);
    (void)n;
    ::close(it->second);
    start_lines_.erase(it);
  }
}

void PosixLauncher::abandon(const Launched& job) {
  auto it = start_lines_.find(job.pid);
  if (it == start_lines_.end()) return;
  ::close(it->second);
  start_lines_.erase(it);
  // Its group is in no saved state: removed now (the wrapper, let go, leaves it at once).
  if (job.cgroup) remove_cgroup(*job.cgroup);
}

Observed PosixLauncher::observe(const std::string& id, const JobState& s) {
  Observed o;
  bool alive = s.pid && process_alive(*s.pid, s.pid_start);
  std::optional<std::string> text;
  try {
    text = read_file(paths_.exit(id), true);
  } catch (const StoreError& e) {
    o.note = e.what();
  }
  if (text) {
    std::optional<long long> code = parse_exit_file(*text, paths_.exit(id), &o.note);
    // Empty: the original's wrapper writes the file in place ("being written" while it lives); with
    // its process gone, no code was written (a write cut short, a power cut's undone one): as if
    // there were no file, not an exit 1.
    if (code) {
      o.kind = Observed::Kind::Exited;
      o.exit = *code;
      o.cpu_seconds = read_cpu_seconds(paths_, id);
      o.ended = written_at(paths_.exit(id));
      return o;
    }
  }
  if (alive) return o;
  // Its code written in its room, and the rename into place failed (or came after this look).
  try {
    if (std::optional<std::string> room = read_file(paths_.exit_room(id), true))
      if (std::optional<long long> code = parse_exit_file(*room, paths_.exit_room(id), &o.note)) {
        o.kind = Observed::Kind::Exited;
        o.exit = *code;
        o.cpu_seconds = read_cpu_seconds(paths_, id);
        o.ended = written_at(paths_.exit_room(id));
        return o;
      }
  } catch (const StoreError&) {
  }
  struct stat st;
  o.kind = ::lstat(paths_.aborted(id).c_str(), &st) == 0 ? Observed::Kind::Aborted : Observed::Kind::Vanished;
  o.exit = kLostExit;
  // Started before this boot: the node went down under it (its wrapper too, so no file says so).
  // Whether its script had begun or was still held at its start line, it waits again, and the
  // node's restart costs it no retry.
  if (!boot_) boot_ = boot_time().value_or(0);
  if (o.kind == Observed::Kind::Vanished && s.start && *s.start < *boot_ - 1) {
    o.kind = Observed::Kind::Aborted;
    o.node_restarted = true;
    o.ended = *boot_;  // it ended before the machine was up again
    return o;
  }
  // Why its script never started, where the wrapper said (a process refused it): the file's line.
  if (o.kind == Observed::Kind::Aborted) try {
      if (std::optional<std::string> why = read_file(paths_.aborted(id), true)) {
        o.note = why->substr(0, why->find('\n'));
        if (o.note.size() > 300) o.note.resize(300);
      }
    } catch (const StoreError&) {
    }
  return o;
}

// The wrapper holds its start line on fd 3 until it reads "go" or EOF; on EOF it makes the
// aborted file before it closes the line (job_wrapper). So: the line still open, or the aborted
// file there, is a launch not let run; the line closed and no aborted file, one let run. The
// line is looked at first: an aborted file made after that look was made before the line closed.
bool PosixLauncher::at_start_line(const std::string& id, const JobState& s) {
  auto aborted = [&] {
    struct stat st;
    return ::lstat(paths_.aborted(id).c_str(), &st) == 0;
  };
  // Gone: as observe() tells it (looked at after the process: it made the file before it exited).
  if (!s.pid || !process_alive(*s.pid, s.pid_start)) return aborted();
  std::string proc = "/proc/" + std::to_string(*s.pid);
  std::optional<std::string> cmdline;
  try {
    cmdline = read_file(proc + "/cmdline", true);
  } catch (const StoreError&) {
  }
  // argv[1] is the wrapper's mark; a process of the original's has no start line, and runs.
  // (No cmdline: it has just exited, or is a zombie: the aborted file tells.)
  size_t arg1 = cmdline ? cmdline->find('\0') : std::string::npos;
  if (arg1 == std::string::npos) return aborted();
  std::string mark = std::string(kJobWrapperArg) + '\0';
  if (cmdline->compare(arg1 + 1, mark.size(), mark) != 0) return false;
  char target[64] = {};
  ssize_t n = ::readlink((proc + "/fd/3").c_str(), target, sizeof target - 1);
  if (n > 0 && std::string(target, static_cast<size_t>(n)).rfind("pipe:", 0) == 0) return true;
  return aborted();  // looked at after the line: made before it closed
}

Identity PosixLauncher::identify(const JobState& s) {
  if (!s.pid) return Identity::Gone;
  std::optional<unsigned long long> start = process_start_time(*s.pid);  // zombies too
  if (start && s.pid_start && *start != *s.pid_start) return Identity::Other;
  return process_alive(*s.pid, s.pid_start) ? Identity::Same : Identity::Gone;
}

bool PosixLauncher::signal_group(long long group, Signal sig) { return gpuq::signal_group(group, signal_number(sig)); }

bool PosixLauncher::warn_group(long long group, const WarnSpec& sig) {
  int n = signal_number(sig);
  if (n <= 0) return false;
  // "B:": to the wrapper (the group's leader) alone, which passes it on to the script's bash.
  if (sig.shell_only) return ::kill(static_cast<pid_t>(group), n) == 0;
  return gpuq::signal_group(group, n);
}

std::optional<double> PosixLauncher::checkpointed_at(const std::string& id) {
  std::error_code ec;
  std::optional<double> newest;
  for (const auto& e : std::filesystem::directory_iterator(paths_.checkpoints(id), ec)) {
    struct stat st;
    if (::lstat(e.path().c_str(), &st) != 0) continue;
    double t = static_cast<double>(st.st_mtim.tv_sec) + static_cast<double>(st.st_mtim.tv_nsec) / 1e9;
    newest = std::max(newest.value_or(t), t);
  }
  return newest;
}

std::optional<long long> PosixLauncher::log_size(const std::string& id) {
  struct stat st;
  if (::stat(paths_.log(id).c_str(), &st) != 0) return std::nullopt;
  return static_cast<long long>(st.st_size);
}

namespace {

// The last `bytes` of the file at `path` (read with pread: never the whole file), and its mtime.
std::optional<std::pair<std::string, double>> file_tail(const std::string& path, long long bytes) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return std::nullopt;
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return std::nullopt;
  }
  long long size = static_cast<long long>(st.st_size), from = std::max(0LL, size - bytes);
  std::string text(static_cast<size_t>(size - from), '\0');
  ssize_t n = text.empty() ? 0 : ::pread(fd, text.data(), text.size(), static_cast<off_t>(from));
  ::close(fd);
  if (n < 0) return std::nullopt;
  text.resize(static_cast<size_t>(n));
  return std::pair{std::move(text), static_cast<double>(st.st_mtim.tv_sec) + st.st_mtim.tv_nsec / 1e9};
}

}  // namespace

std::optional<ProgressSeen> read_progress(const PlanPaths& paths, const std::string& id, bool from_log) {
  // The job's own file wins, even while it reads as nothing (caught between its truncation
  // and its write): its log's bar may count something else.
  if (auto file = file_tail(paths.progress(id), 256)) {
    if (auto f = parse_progress_text(file->first)) return ProgressSeen{*f, file->second};
    return std::nullopt;
  }
  if (!from_log) return std::nullopt;
  if (auto log = file_tail(paths.log(id), kProgressTailBytes))
    if (auto f = progress_in_log(log->first)) return ProgressSeen{*f, log->second};
  return std::nullopt;
}

std::optional<ProgressSeen> PosixLauncher::progress(const std::string& id, bool from_log) {
  return read_progress(paths_, id, from_log);
}

void PosixLauncher::note_in_log(const std::string& id, const std::string& line) {
  int fd = ::open(paths_.log(id).c_str(), O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return;
  std::time_t now = std::time(nullptr);
  char stamp[16];
  std::strftime(stamp, sizeof stamp, "%H:%M:%S", std::localtime(&now));
  std::string text = fmt::format("[{} gpuq] {}\n", stamp, line);
  ssize_t n = ::write(fd, text.data(), text.size());
  (void)n;  // a note that cannot be written leaves the log as it is
  ::close(fd);
}

bool PosixLauncher::group_alive(long long group) { return gpuq::group_alive(group); }

void PosixLauncher::reap() { reap_children(); }

// Each code where observe read it: in place, else in its room (a rename that failed). A file that
// is gone (removed by hand) has nothing left to sync.
std::vector<std::string> PosixLauncher::sync_ends(const std::vector<std::string>& ids) {
  std::vector<std::string> problems;
  for (const std::string& id : ids)
    for (const std::string& path : {paths_.exit(id), paths_.exit_room(id)}) {
      int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
      if (fd < 0) {
        if (errno == ENOENT) continue;
        problems.push_back(fmt::format("cannot open {} to sync {}'s exit code: {}", path, id, std::strerror(errno)));
        break;
      }
      if (::fdatasync(fd) != 0)
        problems.push_back(fmt::format("cannot sync {} ({}'s exit code; the state records it): {}", path, id,
                                       std::strerror(errno)));
      ::close(fd);
      break;
    }
  return problems;
}

namespace {

// The file of an attempt's CPU time beside its exit file: logs/ID.exit -> logs/ID.cpu (PlanPaths::cpu).
std::string cpu_file_of(const std::string& exitf) {
  const std::string ext = ".exit";
  if (exitf.size() > ext.size() && exitf.compare(exitf.size() - ext.size(), ext.size(), ext) == 0)
    return exitf.substr(0, exitf.size() - ext.size()) + ".cpu";
  return exitf + ".cpu";
}

// The CPU time (user + system) of what the wrapper waited for: the script's bash and every
// process it waited for in turn (a process that left the tree is not counted). Written before the
// exit file, whole or not at all (write, then rename); best effort: a full disk loses it alone.
void write_cpu_time(const std::string& exitf) {
  struct rusage ru;
  if (::getrusage(RUSAGE_CHILDREN, &ru) != 0) return;
  double s = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
             static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
  std::string file = cpu_file_of(exitf), tmp = file + ".tmp." + std::to_string(::getpid());
  std::string text = fmt::format("{:.3f}\n", s);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return;
  bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ok = ::close(fd) == 0 && ok;
  if (!ok || ::rename(tmp.c_str(), file.c_str()) != 0) ::unlink(tmp.c_str());
}

}  // namespace

std::optional<double> read_cpu_seconds(const PlanPaths& paths, const std::string& id) {
  try {
    std::optional<std::string> text = read_file(paths.cpu(id), true);
    if (!text) return std::nullopt;
    size_t used = 0;
    double s = std::stod(*text, &used);
    if (!(s >= 0) || s > 1e12) return std::nullopt;
    return s;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

namespace {

// The start line (fd 3): true once "go" is read (the state that records this job is saved), false
// at EOF (gpuq died first). ABORTEDFILE "-": no start line (a batch queue's hold is the line: run
// --slurm), and the job goes.
bool wait_for_go(bool start_line) {
  if (!start_line) return true;
  char buf[8];
  size_t got = 0;
  while (got < 3) {
    ssize_t n = ::read(3, buf + got, 3 - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  return std::string(buf, got) == "go\n";
}

// Its cores (kPinCoresEnv): set before the script runs, every process of the job inherits them.
// The kernel refusing them (cores offline, a cpuset of this process without them) is said in the
// log, and the job runs unpinned.
void pin_to_cores(bool go) {
  const char* pin = std::getenv(kPinCoresEnv);
  if (!pin) return;
  std::string list = pin;
  ::unsetenv(kPinCoresEnv);
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : parse_core_list(list))
    if (c >= 0 && c < CPU_SETSIZE) CPU_SET(c, &set);
  if (go && ::sched_setaffinity(0, sizeof set, &set) != 0)
    std::fprintf(stderr, "gpuq: cannot pin the job to cores %s (sched_setaffinity: %s); it runs on any core\n",
                 list.c_str(), std::strerror(errno));
}

// Under Slurm: the job's environment as on one node (Slurm set CUDA_VISIBLE_DEVICES for its GPUs),
// and the attempt's line in its log (stdout: Slurm's --output), as run writes it for a local job.
void batch_job_environment() {
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  std::string v = visible ? visible : "";
  if (!visible) ::setenv("CUDA_VISIBLE_DEVICES", "", 1);
  if (!std::getenv("TDPRM_GPU0")) ::setenv("TDPRM_GPU0", v.empty() ? "9" : v.substr(0, v.find(',')).c_str(), 1);
  ::setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID", 0);
  const char* attempt = std::getenv("GPUQ_ATTEMPT");
  std::string line = attempt_header(attempt ? attempt : "?", "[" + comma_spaced(v) + "]", std::time(nullptr));
  std::fwrite(line.data(), 1, line.size(), stdout);
  std::fflush(stdout);
}

// Runs the script with bash (the plan's "args" after it) and waits for it: its exit code (127:
// it could not run), or nullopt when the machine refused a process (the process limit, no file
// descriptor or memory left). Then the script never ran, so the job has not run: no exit code,
// the aborted file says why, and run puts the job back to waiting, no retry spent, and starts it
// again once that has passed. Not even the aborted file: an exit code as before (the job fails).
std::optional<int> run_script(const char* script, const char* exitf, const char* abortf, int argc, char** argv) {
  struct stat st;
  if (::access(script, R_OK) != 0 || ::stat(script, &st) != 0 || !S_ISREG(st.st_mode)) {
    std::fprintf(stderr, "gpuq: cannot run the script %s: it is missing or not a readable file\n", script);
    return 127;
  }
  std::vector<char*> args{const_cast<char*>("bash"), const_cast<char*>(script)};
  for (int a = 5; a < argc; ++a) args.push_back(argv[a]);
  args.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, "bash", nullptr, nullptr, args.data(), environ);
  if (rc == EAGAIN || rc == EMFILE || rc == ENFILE || rc == ENOMEM) {
    std::string why = fmt::format("posix_spawn(bash {}) failed: {}", script, std::strerror(rc));
    std::fprintf(stderr, "gpuq: %s: the job did not start; gpuq starts it again once that passes\n", why.c_str());
    Fd fd(::open(abortf, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644));
    if (fd.fd >= 0) {
      why += "\n";
      ssize_t n = ::write(fd.fd, why.data(), why.size());
      (void)n;
      return std::nullopt;
    }
  }
  if (rc != 0) {
    std::fprintf(stderr, "gpuq: posix_spawn(bash %s) failed: %s\n", script, std::strerror(rc));
    return 127;
  }
  shell_pid = pid;
  int wst = 0;
  while (::waitpid(pid, &wst, 0) < 0 && errno == EINTR) {
  }
  write_cpu_time(exitf);
  return WIFEXITED(wst) ? WEXITSTATUS(wst) : 128 + WTERMSIG(wst);
}

// Puts the code in EXITFILE. With a room (fd 4, made by the launcher): in place, in blocks already
// given, then renamed, so that a full disk cannot lose the code; where the rename fails, the room
// holds it (PosixLauncher::observe reads it there). Renamed, then synced: the rename wakes `run`
// (its waker watches the exit files), which reads the code and starts what waits for it while
// this process syncs the code and exits, so a chain's hand-off waits for neither
// (bench/side_by_side.sh). Nothing records the code before it is durable: `run` syncs it itself
// before the save that records the end (RunLoop::sync_ends), and before any SIGKILL of this group
// can cut this sync short. A power cut before this sync
// leaves the code in the room or renamed, or neither (the room's blank or the exit file's: a code
// never written, as when the cut comes before the write), never a wrong one; the room's name was
// made durable before the spawn (attempt_files). The folder is not synced after the rename: a
// rename that did not last leaves the room, which holds the code. Without a room (Slurm):
// write-then-rename (a reader never sees a half-written exit file, fix 3), the file and its folder
// synced.
int write_exit_code(int code, const std::string& room, const char* exitf) {
  std::string text = std::to_string(code) + "\n";
  if (!room.empty()) {
    bool ok = ::pwrite(4, text.data(), text.size(), 0) == static_cast<ssize_t>(text.size());
    ok = ok && ::ftruncate(4, static_cast<off_t>(text.size())) == 0;
    ok = ok && ::rename(room.c_str(), exitf) == 0;
    if (!ok) std::fprintf(stderr, "gpuq: cannot write %s: %s\n", exitf, std::strerror(errno));
    // The room is synced in place or under its new name alike (a failed rename leaves it the room).
    bool synced = ::fdatasync(4) == 0;
    if (!synced) std::fprintf(stderr, "gpuq: cannot sync %s: %s\n", ok ? exitf : room.c_str(), std::strerror(errno));
    ::close(4);
    return ok && synced ? 0 : 1;
  }
  std::string tmp = std::string(exitf) + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) {
    std::fprintf(stderr, "gpuq: cannot write %s: %s\n", tmp.c_str(), std::strerror(errno));
    return 1;
  }
  bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ok = ok && ::fdatasync(fd) == 0;
  ok = (::close(fd) == 0) && ok;
  if (!ok || ::rename(tmp.c_str(), exitf) != 0) {
    std::fprintf(stderr, "gpuq: cannot write %s: %s\n", exitf, std::strerror(errno));
    ::unlink(tmp.c_str());
    return 1;
  }
  sync_folder_of(exitf);
  return 0;
}

}  // namespace

int job_wrapper(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "gpuq-job: usage: gpuq %s SCRIPT EXITFILE ABORTEDFILE [ARG...]\n", kJobWrapperArg);
    return 2;
  }
  const char *script = argv[2], *exitf = argv[3], *abortf = argv[4];
  outlive_warnings();
  // The exit code's room, on fd 4 (made by the launcher before the spawn); none under Slurm.
  std::string room;
  if (const char* r = std::getenv(kExitRoomEnv)) {
    room = r;
    ::unsetenv(kExitRoomEnv);
    if (::fcntl(4, F_SETFD, FD_CLOEXEC) != 0) room.clear();
  }
  bool start_line = std::string(abortf) != "-";
  bool go = wait_for_go(start_line);
  pin_to_cores(go);
  // Cut short: the aborted file is made before the start line closes, so that whoever sees the
  // line closed and no aborted file knows the job was let run (PosixLauncher::at_start_line).
  if (!go) {
    int fd = ::open(abortf, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd >= 0) ::close(fd);
  }
  if (start_line) ::close(3);
  if (!go) return 0;
  if (!start_line) batch_job_environment();
  std::optional<int> code = run_script(script, exitf, abortf, argc, argv);
  if (!code) return 0;
  return write_exit_code(*code, room, exitf);
}

}  // namespace gpuq

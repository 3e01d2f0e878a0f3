// `gpuq run`: the original's loop, tick by tick, woken by events rather than only a timer.
#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>

#include "gpuq/phase.h"
#include "gpuq/launcher.h"
#include "gpuq/local_files.h"
#include "gpuq/probe.h"
#include "gpuq/proc.h"
#include "gpuq/queue.h"

namespace gpuq {

namespace fs = std::filesystem;

namespace {

bool path_exists(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0;
}

void say(std::FILE* out, const std::string& line) {
  fmt::print(out, "{}\n", line);
  std::fflush(out);
}

/// What wakes `run` between ticks: signals (SIGCHLD, stop signals), the exit
/// of any running job (pidfd), a change to the state file (a control command),
/// and the creation of a file a pending job waits for.
class Waker {
 public:
  Waker() {
    sigset_t set;
    sigemptyset(&set);
    for (int s : {SIGCHLD, SIGINT, SIGTERM, SIGHUP}) sigaddset(&set, s);
    sigprocmask(SIG_BLOCK, &set, nullptr);
    signal(SIGPIPE, SIG_IGN);
    sigfd_ = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    inotify_ = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
  }
  ~Waker() {
    for (auto& [pid, fd] : pidfds_) ::close(fd);
    if (sigfd_ >= 0) ::close(sigfd_);
    if (inotify_ >= 0) ::close(inotify_);
  }

  /// Watches `dir` for entries named `name` appearing (or the state file being replaced).
  void watch(const std::string& dir, const std::string& name) {
    if (inotify_ < 0) return;
    int wd = inotify_add_watch(inotify_, dir.empty() ? "." : dir.c_str(),
                               IN_CREATE | IN_MOVED_TO | IN_CLOSE_WRITE | IN_ATTRIB);
    if (wd >= 0) names_[wd].insert(name);
  }
  void clear_watches() {
    for (auto& [wd, _] : names_) inotify_rm_watch(inotify_, wd);
    names_.clear();
  }

  /// Keeps one pidfd per running job's pid.
  void track(const std::set<long long>& pids) {
    for (auto it = pidfds_.begin(); it != pidfds_.end();) {
      if (!pids.count(it->first)) {
        ::close(it->second);
        it = pidfds_.erase(it);
      } else {
        ++it;
      }
    }
    for (long long pid : pids) {
      if (pidfds_.count(pid)) continue;
      int fd = static_cast<int>(syscall(SYS_pidfd_open, static_cast<pid_t>(pid), 0));
      if (fd >= 0) pidfds_[pid] = fd;
    }
  }

  /// Drops events caused by this process's own writes.
  void drain() { read_inotify(); }

  /// Sleeps at most `timeout_s`, or until an event that matters. Returns the stop signal number, or 0.
  int wait(double timeout_s) {
    std::vector<pollfd> fds;
    fds.push_back({sigfd_, POLLIN, 0});
    fds.push_back({inotify_, POLLIN, 0});
    for (auto& [pid, fd] : pidfds_) fds.push_back({fd, POLLIN, 0});
    timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (true) {
      timespec t1;
      clock_gettime(CLOCK_MONOTONIC, &t1);
      double left = std::min(timeout_s, 86400.0) - ((t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9);
      if (left <= 0) return 0;
      int n = ::poll(fds.data(), fds.size(), static_cast<int>(left * 1000) + 1);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return 0;
      bool wake = false;
      if (fds[0].revents & POLLIN) {
        int stop = 0;
        signalfd_siginfo si;
        while (::read(sigfd_, &si, sizeof si) == sizeof si) {
          // SIGCHLD also comes from gpuq's own nvidia-smi probe: job exits wake through their pidfds.
          if (si.ssi_signo != SIGCHLD) stop = static_cast<int>(si.ssi_signo);
          else reap_children();
        }
        if (stop) return stop;
      }
      if (inotify_ >= 0 && (fds[1].revents & POLLIN) && read_inotify()) wake = true;
      for (size_t i = 2; i < fds.size(); ++i)
        if (fds[i].revents) wake = true;
      if (wake) return 0;
    }
  }

 private:
  bool read_inotify() {
    bool relevant = false;
    alignas(inotify_event) char buf[8192];
    while (true) {
      ssize_t n = ::read(inotify_, buf, sizeof buf);
      if (n <= 0) break;
      for (char* p = buf; p < buf + n;) {
        auto* ev = reinterpret_cast<inotify_event*>(p);
        auto it = names_.find(ev->wd);
        if (it != names_.end() && ev->len && it->second.count(ev->name)) relevant = true;
        p += sizeof(inotify_event) + ev->len;
      }
    }
    return relevant;
  }

  int sigfd_ = -1;
  int inotify_ = -1;
  std::map<long long, int> pidfds_;
  std::map<int, std::set<std::string>> names_;
};

}  // namespace

int run_queue(const Plan& plan, const PlanPaths& paths, const RunOptions& opt, std::FILE* out) {
  // Orphans of our jobs come back to us to be reaped (fix 8).
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  Waker waker;
  const GpuMask node = mask_of(opt.node_gpus);
  std::string last_probe_problem;
  std::string last_save_problem;
  const LocalFiles files;
  std::optional<State> cached;  // what the last tick wrote, with the file's identity when it did
  struct stat cached_stat {};
  // The jobs with a file: dep, found once: each tick looks at them for folders to watch
  // (walking every job's deps each tick cost 20 ms at 100,000 jobs).
  std::vector<size_t> with_file_deps;
  for (size_t i = 0; i < plan.jobs.size(); ++i)
    if (plan.jobs[i].has_file_dep()) with_file_deps.push_back(i);

  while (true) {
    phase("tick: wait");
    reap_children();
    double next_wake = opt.poll;
    std::vector<std::pair<size_t, Launch>> launched;
    bool all_finished = false;
    std::set<long long> running_pids;
    try {
      StateLock lock(paths);
      // The state as this process last wrote it, unless someone has replaced the file since
      // (control commands and the original write a new file and rename it over).
      struct stat st;
      bool same = cached && ::lstat(paths.state.c_str(), &st) == 0 && st.st_ino == cached_stat.st_ino &&
                  st.st_size == cached_stat.st_size && st.st_mtim.tv_sec == cached_stat.st_mtim.tv_sec &&
                  st.st_mtim.tv_nsec == cached_stat.st_mtim.tv_nsec;
      State state = same ? std::move(*cached) : read_state(paths);
      cached.reset();
      bool keep = false;
      double now = unix_now();
      phase(same ? "tick: state (kept)" : "tick: state (read)");

      // Jobs that ended: record, then kill what they left in their process group.
      for (auto& [id, line] : refresh(paths, state, now)) {
        const JobState& s = *state.find(id);
        if (s.pid && s.status != Status::Pending) {
          auto start = process_start_time(*s.pid);
          // Only if the pid is not now some other process (fix 7).
          if (!s.pid_start || !start || *start == *s.pid_start) signal_group(*s.pid, SIGKILL);
        }
        say(out, fmt::format("{} {}", clock_stamp(now), line));
      }

      // Killed jobs that outlive --kill-grace get SIGKILL (fix 6); until gone they keep their GPUs.
      GpuMask busy = 0;
      for (auto& [id, s] : state.entries()) {
        if (!s.kill_sent || !s.pid) continue;
        if (!group_alive(*s.pid)) {
          s.kill_sent.reset();
          continue;
        }
        if (now - *s.kill_sent >= opt.kill_grace) {
          signal_group(*s.pid, SIGKILL);
          say(out, fmt::format("{} SIGKILL to {} (process group {}): still alive {:.0f} s after SIGTERM",
                               clock_stamp(now), id, *s.pid, now - *s.kill_sent));
          s.kill_sent.reset();
        } else {
          if (s.gpus) busy |= mask_of(*s.gpus);
          next_wake = std::min(next_wake, *s.kill_sent + opt.kill_grace - now);
        }
      }

      bool any_running = false;
      for (auto& [id, s] : state.entries()) {
        if (s.status != Status::Running) continue;
        any_running = true;
        if (s.gpus) busy |= mask_of(*s.gpus);
        if (s.pid) running_pids.insert(*s.pid);
      }
      // Memory held on a GPU (a foreign process, or a finished job's processes exiting) makes it busy.
      GpuReading reading = probe_gpus(opt.nvidia_smi, opt.nvidia_smi_timeout);
      if (reading.used_mib) {
        for (auto& [g, mib] : *reading.used_mib)
          if (mib > opt.max_used_mib && g <= kMaxGpuId) busy |= GpuMask{1} << g;
        if (!last_probe_problem.empty()) say(out, fmt::format("{} nvidia-smi gives readings again", clock_stamp(now)));
        last_probe_problem.clear();
      } else if (reading.problem != last_probe_problem) {
        last_probe_problem = reading.problem;
        say(out, fmt::format("{} no GPU memory reading ({}); every GPU not used by a job counts as free, as the "
                             "original does",
                             clock_stamp(now), reading.problem));
      }
      GpuMask free = node & ~busy;
      phase("tick: refresh, probe");

      TickDecision tick = decide_tick(plan, state, opt, now, free, any_running, files);
      phase("tick: decide");
      for (auto& [id, n] : tick.retried) say(out, fmt::format("{} auto-retry {} (retry {})", clock_stamp(now), id, n));
      next_wake = std::min(next_wake, tick.next_retry_in);
      PassResult& pass = tick.pass;
      if (pass.stall_broken)
        say(out, fmt::format("{} nothing could start: {} waits for GPUs that reservations close to it, and their "
                             "jobs are longer than --backfill-max-hours; starting them without the limit",
                             clock_stamp(now), plan.jobs[*pass.waiting_head].id));

      for (Start& s : pass.starts) {
        const Job& j = plan.jobs[s.job];
        long long attempts = state.of(plan, s.job) ? state.of(plan, s.job)->attempts_or0() : 0;
        try {
          Launch l = launch(paths, {j.id, j.script, s.gpus, attempts + 1});
          JobState run;
          run.status = Status::Running;
          run.gpus = s.gpus;
          run.pid = l.pid;
          run.start = now;
          run.attempts = attempts;
          run.pid_start = l.pid_start;
          state.set(plan, s.job, run);
          launched.push_back({s.job, l});
          running_pids.insert(l.pid);
        } catch (const std::exception& e) {
          JobState failed;
          failed.status = Status::Failed;
          failed.exit = -1;
          failed.end = now;
          failed.attempts = attempts;
          state.set(plan, s.job, failed);
          say(out, fmt::format("{} cannot start {}: {}", clock_stamp(now), j.id, e.what()));
        }
      }

      try {
        write_state(paths, state, !launched.empty());
        keep = ::lstat(paths.state.c_str(), &cached_stat) == 0;
        if (!last_save_problem.empty()) say(out, fmt::format("{} the state is saved again", clock_stamp(now)));
        last_save_problem.clear();
      } catch (const StoreError& e) {
        // The jobs just spawned never run; they are started again once a save succeeds.
        for (auto& [i, l] : launched) abandon(l);
        launched.clear();
        if (last_save_problem != e.what())
          say(out, fmt::format("{} cannot save the state ({}); the previous state is intact, running jobs are "
                               "untouched, and the save is tried again at the next tick",
                               clock_stamp(now), e.what()));
        last_save_problem = e.what();
        next_wake = std::min(next_wake, 5.0);
      }
      phase("tick: start, save");
      for (auto& [i, l] : launched) release(l);
      // The new state is in place (a crash of run cannot lose it); make the rename survive a power cut too.
      if (!launched.empty()) sync_state_folder(paths);
      for (auto& [i, l] : launched) {
        say(out, fmt::format("{} start {} on GPUs {} (pid {})", clock_stamp(now), plan.jobs[i].id,
                             py_list(*state.of(plan, i)->gpus), l.pid));
      }

      // Wake when a file a ready-but-for-files job waits for appears, or the state file changes.
      waker.clear_watches();
      fs::path state_path(paths.state);
      waker.watch(state_path.parent_path().string(), state_path.filename().string());
      // Only jobs that wait for files alone: any other wait ends with a job's exit, which wakes
      // run anyway (and watching every pending job's folder would run into inotify's limit).
      const FileTable every_file([](const std::string&) { return true; });
      for (size_t i : with_file_deps) {
        const Job& j = plan.jobs[i];
        if (state.status_of(plan, i) != Status::Pending || !deps_met(plan, j, state, opt.max_retries, every_file))
          continue;
        for (const Dep& d : j.deps) {
          if (d.kind != Dep::Kind::File) continue;
          fs::path p(expand_path(d.target));
          fs::path dir = p.parent_path();
          if (path_exists(dir.empty() ? "." : dir.string())) waker.watch(dir.string(), p.filename().string());
        }
      }

      phase("tick: watches");
      waker.drain();  // our own write, before the lock lets a control command in
      all_finished = last_save_problem.empty();  // never finish with the last state unsaved
      for (size_t i = 0; i < plan.jobs.size(); ++i) {
        const JobState* s = state.of(plan, i);
        Status st = s ? s->status : Status::Pending;
        // A killed job still finishing (within --kill-grace) is not finished either.
        if (st == Status::Pending || st == Status::Running || st == Status::Held || (s && s->kill_sent) ||
            retry_due(s, opt, std::numeric_limits<double>::infinity())) {
          all_finished = false;
          break;
        }
      }
      phase("tick: finished?");
      if (keep) cached = std::move(state);  // the next tick starts from it, unless the file changed
    } catch (const StoreError& e) {
      for (auto& [i, l] : launched) abandon(l);
      if (e.kind == StoreError::Kind::Content) {
        fmt::print(stderr, "gpuq run: {}\n", e.what());
        return 1;
      }
      // The lock or state could not be reached (read-only, no space, permissions): try again later.
      if (last_save_problem != e.what())
        say(out, fmt::format("{} cannot reach the state ({}); running jobs are untouched, trying again shortly",
                             clock_stamp(unix_now()), e.what()));
      last_save_problem = e.what();
      next_wake = std::min(next_wake, 5.0);
      all_finished = false;
    }
    if (all_finished) {
      say(out, "all jobs finished");
      return 0;
    }
    waker.track(running_pids);
    int stop = waker.wait(std::max(0.0, next_wake));
    if (stop) {
      State state;
      try {
        state = read_state(paths);
      } catch (const StoreError&) {
      }
      std::vector<std::string> still;
      for (auto& [id, s] : state.entries())
        if (s.status == Status::Running) still.push_back(id);
      std::string list;
      for (auto& id : still) list += (list.empty() ? "" : ", ") + id;
      say(out, fmt::format("{} stopped by {}: the state is saved; {} job(s) left running{}{}; the next `gpuq run` "
                           "adopts them",
                           clock_stamp(unix_now()), strsignal(stop), still.size(), still.empty() ? "" : ": ", list));
      return 0;
    }
  }
}

}  // namespace gpuq

#include "gpuq/live/follow.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <chrono>
#include <thread>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "gpuq/core/rules.h"
#include "gpuq/live/control.h"
#include "gpuq/live/queue.h"
#include "gpuq/live/run_info.h"
#include "fd.h"

namespace gpuq {

namespace {

namespace fs = std::filesystem;

/// Names the failed call, what it was on, and the system's reason.
[[noreturn]] void fail(const char* call, const std::string& on) {
  throw StoreError(fmt::format("{} on {}: {}", call, on, std::strerror(errno)));
}

/// Opens a log for reading without following a symbolic link; -1 when it does not exist.
int open_log(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd >= 0 || errno == ENOENT) return fd;
  if (errno == ELOOP)
    throw StoreError(fmt::format("{} is a symbolic link; refusing to follow it", path), StoreError::Kind::Content);
  fail("open", path);
}

/// Reads up to `n` bytes at `at`; fewer only at the end of the file.
size_t read_at(int fd, const std::string& path, char* buf, size_t n, uint64_t at) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = ::pread(fd, buf + got, n - got, static_cast<off_t>(at + got));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) fail("pread", path);
    if (r == 0) break;
    got += static_cast<size_t>(r);
  }
  return got;
}

void write_out(const char* data, size_t n, std::FILE* out, const std::string& path) {
  if (n && std::fwrite(data, 1, n, out) != n) fail("write of the log's text to the output", path);
}

/// Prints the file from `at` to its end (which may be past what fstat said); returns the new offset.
uint64_t print_from(int fd, const std::string& path, uint64_t at, std::FILE* out) {
  std::vector<char> buf(65536);
  while (size_t n = read_at(fd, path, buf.data(), buf.size(), at)) {
    write_out(buf.data(), n, out, path);
    at += n;
  }
  if (std::fflush(out) != 0) fail("write of the log's text to the output", path);
  return at;
}

/// Where the last `lines` lines of the first `size` bytes begin, reading back `block` bytes at a time.
uint64_t tail_offset(int fd, const std::string& path, uint64_t size, long lines, size_t block) {
  if (size == 0) return 0;
  char last = 0;
  read_at(fd, path, &last, 1, size - 1);
  uint64_t hi = last == '\n' ? size - 1 : size;  // a final newline ends the last line; it starts none
  std::vector<char> buf(std::max<size_t>(block, 1));
  long found = 0;
  while (hi > 0) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(hi, buf.size()));
    if (read_at(fd, path, buf.data(), n, hi - n) != n)
      throw StoreError(fmt::format("{} became shorter while its end was read", path));
    for (size_t i = n; i-- > 0;)
      if (buf[i] == '\n' && ++found == lines) return hi - n + i + 1;
    hi -= n;
  }
  return 0;
}

}  // namespace

std::optional<LogCursor> print_tail(const std::string& path, long lines, std::FILE* out, size_t block) {
  Fd f(open_log(path));
  if (f.fd < 0) return std::nullopt;
  struct stat st;
  if (::fstat(f.fd, &st) != 0) fail("fstat", path);
  uint64_t size = static_cast<uint64_t>(st.st_size);
  uint64_t from = lines <= 0 ? 0 : tail_offset(f.fd, path, size, lines, block);
  std::vector<char> buf(65536);
  for (uint64_t at = from; at < size;) {
    size_t n = read_at(f.fd, path, buf.data(), static_cast<size_t>(std::min<uint64_t>(buf.size(), size - at)), at);
    if (n == 0) break;  // shrank meanwhile: following starts it again
    write_out(buf.data(), n, out, path);
    at += n;
  }
  if (std::fflush(out) != 0) fail("write of the log's text to the output", path);
  return LogCursor{size, st.st_dev, st.st_ino};
}

uint64_t print_appended(const std::string& path, LogCursor& cursor, std::FILE* out) {
  Fd f(open_log(path));
  if (f.fd < 0) return 0;
  struct stat st;
  if (::fstat(f.fd, &st) != 0) fail("fstat", path);
  if (st.st_dev != cursor.dev || st.st_ino != cursor.ino || static_cast<uint64_t>(st.st_size) < cursor.offset)
    cursor = LogCursor{0, st.st_dev, st.st_ino};  // another file, or truncated: from its start
  uint64_t before = cursor.offset;
  cursor.offset = print_from(f.fd, path, cursor.offset, out);
  return cursor.offset - before;
}

namespace {

/// What woke the follower.
struct Woken {
  bool log = false;    ///< the log may have grown or been made
  bool state = false;  ///< the job may have ended: look at the state
};

/// inotify on the state's folder (the state file, the logs/ folder appearing) and on
/// logs/ (the job's log, exit and aborted files), set up before the log is first read
/// so that nothing written after that read goes unnoticed.
class Watcher {
 public:
  Watcher(const PlanPaths& paths, const std::string& id, std::FILE* err) : err_(err) {
    fs::path state(paths.state);
    state_dir_ = state.parent_path().empty() ? "." : state.parent_path().string();
    state_name_ = state.filename().string();
    logs_dir_ = paths.logs;
    logs_name_ = fs::path(paths.logs).filename().string();
    log_name_ = fs::path(paths.log(id)).filename().string();
    exit_name_ = fs::path(paths.exit(id)).filename().string();
    aborted_name_ = fs::path(paths.aborted(id)).filename().string();
    fd_ = ::inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    if (fd_ < 0) {
      degrade("inotify_init1", "a new inotify instance");
      return;
    }
    state_wd_ = ::inotify_add_watch(fd_, state_dir_.c_str(), IN_CREATE | IN_MOVED_TO | IN_CLOSE_WRITE | IN_DELETE);
    if (state_wd_ < 0) {
      degrade("inotify_add_watch", state_dir_);
      return;
    }
    watch_logs();
  }
  ~Watcher() {
    if (fd_ >= 0) ::close(fd_);
  }
  Watcher(const Watcher&) = delete;
  Watcher& operator=(const Watcher&) = delete;

  /// Watches logs/ once it exists (a pending job's run makes it).
  void watch_logs() {
    if (degraded_ || logs_wd_ >= 0) return;
    logs_wd_ = ::inotify_add_watch(fd_, logs_dir_.c_str(),
                                   IN_MODIFY | IN_CREATE | IN_MOVED_TO | IN_CLOSE_WRITE | IN_DELETE | IN_MOVED_FROM);
    if (logs_wd_ < 0 && errno != ENOENT) degrade("inotify_add_watch", logs_dir_);
  }

  /// Sleeps until an event that matters or `timeout_ms`; a timeout wakes for everything.
  Woken wait(int timeout_ms) {
    if (degraded_) {
      ::usleep(1000 * 1000);
      return {true, true};
    }
    Woken w;
    while (!w.log && !w.state) {
      struct pollfd p{fd_, POLLIN, 0};
      int n = ::poll(&p, 1, timeout_ms);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) fail("poll", "the inotify instance");
      if (n == 0) return {true, true};
      w = drain_events();
    }
    return w;
  }

 private:
  /// Reads every queued event and sorts out the ones about this job.
  Woken drain_events() {
    Woken w;
    alignas(struct inotify_event) char buf[16384];
    while (true) {
      ssize_t n = ::read(fd_, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) return w;
      if (n <= 0) fail("read", "the inotify instance");
      for (ssize_t at = 0; at < n;) {
        const auto* e = reinterpret_cast<const struct inotify_event*>(buf + at);
        at += static_cast<ssize_t>(sizeof(struct inotify_event) + e->len);
        std::string name = e->len ? e->name : "";
        if (e->mask & IN_Q_OVERFLOW) w = {true, true};
        if (e->wd == logs_wd_ && (e->mask & IN_IGNORED)) logs_wd_ = -1, w.log = true;  // logs/ was removed
        if (e->wd == state_wd_ && name == logs_name_) w.log = true;  // logs/ made: watched on waking
        if (e->wd == state_wd_ && name == state_name_) w.state = true;
        if (e->wd == logs_wd_ && name == log_name_) w.log = true;
        if (e->wd == logs_wd_ && (name == exit_name_ || name == aborted_name_)) w.state = true;
      }
    }
  }

  void degrade(const char* call, const std::string& on) {
    fmt::print(err_, "gpuq logs: {} on {}: {}; looking every second instead\n", call, on, std::strerror(errno));
    degraded_ = true;
  }

  std::FILE* err_;
  int fd_ = -1, state_wd_ = -1, logs_wd_ = -1;
  bool degraded_ = false;
  std::string state_dir_, state_name_, logs_dir_, logs_name_, log_name_, exit_name_, aborted_name_;
};

/// The job's entry as `status` would show it: the state, with ended processes seen. A running
/// entry whose process is gone without its exit file may be one that `run` has just ended and
/// launched again (the launch removes the old exit file before the new state is saved): the
/// state is read once more before it is taken for lost.
JobState entry_now(const PlanPaths& paths, const std::string& id) {
  for (int look = 0;; ++look) {
    State state = read_state(paths);
    const JobState* raw = state.find(id);
    std::optional<long long> pid = raw ? raw->pid : std::nullopt;
    bool was_running = raw && raw->status == Status::Running;
    refresh(Plan{}, paths, state, unix_now());
    const JobState* s = state.find(id);
    JobState seen = s ? *s : JobState{};
    bool lost = was_running && seen.status == Status::Failed && seen.exit == kLostExit;
    if (!lost || look == 5) return seen;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    State again = read_state(paths);
    const JobState* now = again.find(id);
    if (now && now->status == Status::Running && now->pid == pid) return seen;  // the same attempt: lost indeed
  }
}

}  // namespace

Status follow_log(const PlanPaths& paths, const std::string& id, long lines, std::FILE* out, std::FILE* err,
                  int safety_net_ms, JobState* last, const Job* job) {
  // The automatic retries the job gets from the run going (its --max-retries, or the job's own).
  auto retries = [&](const RunPresence& run) { return job ? retries_of(*job, *run.info->max_retries) : *run.info->max_retries; };
  const std::string path = paths.log(id);
  Watcher watcher(paths, id, err);  // before the first read
  std::optional<LogCursor> first = print_tail(path, lines, out);
  LogCursor cursor = first.value_or(LogCursor{});
  bool waiting_said = false;
  long long retry_said = -1;  // the attempt whose automatic retry was said
  std::optional<long long> followed;  // the pid of the attempt followed so far
  Woken woken{true, true};
  while (true) {
    if (woken.state) {
      JobState s = entry_now(paths, id);
      // A new attempt where the last one ran: `run` ended it and retried it between two looks
      // (with --retry-after 0, in one tick). How it ended is the entry's last earlier attempt.
      if (s.status == Status::Running && s.pid && followed && *followed != *s.pid &&
          retry_said != s.attempts_or0() - 1) {
        std::vector<EarlierAttempt> before = earlier_attempts(s);
        RunPresence run = run_presence(paths);
        if (!before.empty() && before.back().exit != 0 && run.info && run.info->max_retries) {
          print_appended(path, cursor, out);
          std::fflush(out);
          fmt::print(err, "gpuq logs: {} failed (exit {}); `gpuq run` retries it (automatic retry {} of {}): "
                          "following on\n",
                     id, before.back().exit ? std::to_string(*before.back().exit) : "?", s.attempts_or0(),
                     retries(run));
          std::fflush(err);
          retry_said = s.attempts_or0() - 1;
        }
      }
      if (s.status == Status::Running && s.pid) followed = s.pid;
      // A failure that the run going retries by itself is not the end: the next attempt
      // appends to this log. Whether that run is still there is asked again each second.
      bool retried = false;
      if (s.status == Status::Failed) {
        RunPresence run = run_presence(paths);
        retried = run.running && run.info && run.info->max_retries && !finished(life_of(&s, false, 0), retries(run));
        if (retried && retry_said != s.attempts_or0()) {
          print_appended(path, cursor, out);
          std::fflush(out);
          fmt::print(err, "gpuq logs: {} failed (exit {}); `gpuq run` retries it (automatic retry {} of {}): "
                          "following on\n",
                     id, s.exit ? std::to_string(*s.exit) : "?", s.attempts_or0() + 1, retries(run));
          std::fflush(err);
          retry_said = s.attempts_or0();
        }
      }
      if (s.status != Status::Running && s.status != Status::Pending && !retried) {
        print_appended(path, cursor, out);  // what it wrote before it ended
        if (last) *last = s;
        return s.status;
      }
      // A job without a log has not started: say so once, so that the wait is not silent.
      if (!first && !waiting_said && s.status == Status::Pending && cursor.ino == 0) {
        fmt::print(err, "gpuq logs: {} has not started yet (pending); waiting for it to start (Ctrl-C to stop)\n", id);
        std::fflush(err);
        waiting_said = true;
      }
    }
    if (woken.log) {
      watcher.watch_logs();  // then read: what is written after the watch starts wakes us again
      print_appended(path, cursor, out);
    }
    woken = watcher.wait(retry_said >= 0 ? std::min(safety_net_ms, 1000) : safety_net_ms);
  }
}

}  // namespace gpuq

#include "gpuq/live/waker.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <set>

#include "gpuq/live/proc.h"

namespace gpuq {

namespace {

void warn(const std::string& call) { fmt::print(stderr, "gpuq run: {}: {}\n", call, std::strerror(errno)); }

}  // namespace

PosixWaker::PosixWaker(std::string state_file, std::vector<std::string> also,
                       std::function<std::string(const std::string&)> exit_file)
    : state_file_(std::move(state_file)), also_(std::move(also)), exit_file_(std::move(exit_file)) {
  sigset_t set;
  sigemptyset(&set);
  for (int s : {SIGCHLD, SIGINT, SIGTERM, SIGHUP}) sigaddset(&set, s);
  sigprocmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);
  sigfd_ = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sigfd_ < 0) warn("signalfd (stop signals will not be seen)");
  inotify_ = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
  if (inotify_ < 0)
    warn(fmt::format("inotify_init1 (plan edits and control commands wait for --poll, file: deps are looked for every "
                     "{:g} s)",
                     kUnwatchedFileLook));
}

PosixWaker::~PosixWaker() {
  for (auto& [pid, fd] : pidfds_) ::close(fd);
  if (sigfd_ >= 0) ::close(sigfd_);
  if (inotify_ >= 0) ::close(inotify_);
}

namespace {

// A path's folder and its name there.
std::pair<std::string, std::string> split_path(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return {".", path};
  return {slash == 0 ? "/" : path.substr(0, slash), path.substr(slash + 1)};
}

}  // namespace

std::vector<std::string> PosixWaker::watch_files(const std::vector<std::string>& paths) {
  for (auto& [wd, _] : names_) inotify_rm_watch(inotify_, wd);
  names_.clear();
  // Folder -> the events watched there and the names that wake: one watch per folder. A job's
  // exit code lands by a rename alone (write_exit_code), so a folder of exit codes alone (logs/)
  // is watched for renames: a job writing its progress there many times a second wakes nothing.
  constexpr uint32_t kAnyChange = IN_CREATE | IN_MOVED_TO | IN_CLOSE_WRITE | IN_ATTRIB | IN_DELETE | IN_MOVED_FROM;
  std::map<std::string, std::pair<uint32_t, std::set<std::string>>> folders;
  auto ask = [&](const std::string& path, uint32_t events) {
    auto [dir, name] = split_path(path);
    auto& f = folders[dir];
    f.first |= events;
    f.second.insert(name);
  };
  ask(state_file_, kAnyChange);
  for (const std::string& p : also_) ask(p, kAnyChange);
  for (const std::string& p : exit_files_) ask(p, IN_MOVED_TO);
  for (const std::string& p : paths) ask(p, kAnyChange);
  std::set<std::string> unwatched;  // folders that do not exist (or no inotify)
  for (auto& [dir, f] : folders) {
    int wd = inotify_ < 0 ? -1 : inotify_add_watch(inotify_, dir.c_str(), f.first);
    if (wd < 0) unwatched.insert(dir);
    else names_[wd].insert(f.second.begin(), f.second.end());
  }
  std::vector<std::string> watched;
  for (const std::string& p : paths)
    if (!unwatched.count(split_path(p).first)) watched.push_back(p);
  return watched;
}

void PosixWaker::watch_jobs(const std::vector<WatchedJob>& jobs) {
  exit_files_.clear();
  std::set<long long> want;
  for (const WatchedJob& j : jobs) {
    if (exit_file_ && !j.id.empty()) exit_files_.push_back(exit_file_(j.id));
    if (j.group > 0) want.insert(j.group);
  }
  for (auto it = pidfds_.begin(); it != pidfds_.end();) {
    if (!want.count(it->first)) {
      ::close(it->second);
      it = pidfds_.erase(it);
    } else {
      ++it;
    }
  }
  std::erase_if(ended_, [&](long long pid) { return !want.count(pid); });
  for (long long pid : want) {
    if (pidfds_.count(pid) || ended_.count(pid)) continue;
    int fd = static_cast<int>(syscall(SYS_pidfd_open, static_cast<pid_t>(pid), 0));
    if (fd >= 0) {
      pidfds_[pid] = fd;
    } else if (errno == ESRCH) {
      // Gone already (an adopted job, reaped by init, between its tick and now): look again at once.
      wake_now_ = true;
      ended_.insert(pid);
    }
  }
}

void PosixWaker::drain() { read_inotify(); }

Wake PosixWaker::wait(double timeout_s) {
  if (wake_now_) {
    wake_now_ = false;
    return {};
  }
  std::vector<pollfd> fds;
  std::vector<long long> pids;  // of fds[2...]
  fds.push_back({sigfd_, POLLIN, 0});
  fds.push_back({inotify_, POLLIN, 0});
  for (auto& [pid, fd] : pidfds_) {
    fds.push_back({fd, POLLIN, 0});
    pids.push_back(pid);
  }
  const double t0 = monotonic_now();
  while (true) {
    double left = std::min(timeout_s, 86400.0) - (monotonic_now() - t0);
    if (left <= 0) return {};
    int n = ::poll(fds.data(), fds.size(), static_cast<int>(left * 1000) + 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return {};
    if (fds[0].revents & POLLIN) {
      int stop = 0;
      signalfd_siginfo si;
      while (::read(sigfd_, &si, sizeof si) == sizeof si) {
        // SIGCHLD also comes from gpuq's own nvidia-smi probe: job exits wake through their pidfds.
        if (si.ssi_signo != SIGCHLD) stop = static_cast<int>(si.ssi_signo);
        else reap_children();
      }
      if (stop) return {true, strsignal(stop)};
    }
    bool wake = inotify_ >= 0 && (fds[1].revents & POLLIN) && read_inotify();
    // A job's end wakes one wait: its pidfd stays readable, and is let go.
    for (size_t i = 2; i < fds.size(); ++i)
      if (fds[i].revents) {
        wake = true;
        ::close(fds[i].fd);
        pidfds_.erase(pids[i - 2]);
        ended_.insert(pids[i - 2]);
      }
    if (wake) return {};
  }
}

bool PosixWaker::read_inotify() {
  if (inotify_ < 0) return false;
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

}  // namespace gpuq

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
#include <set>
#include <unordered_map>

#include "gpuq/live/proc.h"

namespace gpuq {

namespace {

void warn(const std::string& call) { fmt::print(stderr, "gpuq run: {}: {}\n", call, std::strerror(errno)); }

}  // namespace

PosixWaker::PosixWaker(std::string state_file, std::vector<std::string> also)
    : state_file_(std::move(state_file)), also_(std::move(also)) {
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

int PosixWaker::watch_folder(const std::string& dir) {
  if (inotify_ < 0) return -1;
  return inotify_add_watch(inotify_, dir.c_str(), IN_CREATE | IN_MOVED_TO | IN_CLOSE_WRITE | IN_ATTRIB | IN_DELETE | IN_MOVED_FROM);
}

std::vector<std::string> PosixWaker::watch_files(const std::vector<std::string>& paths) {
  for (auto& [wd, _] : names_) inotify_rm_watch(inotify_, wd);
  names_.clear();
  std::vector<std::string> watched;
  // Folder -> its watch (-1: none: it does not exist), so that files sharing a folder cost one call.
  std::unordered_map<std::string, int> folders;
  auto add = [&](const std::string& path) {
    size_t slash = path.rfind('/');
    std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
    auto [it, fresh] = folders.try_emplace(std::move(dir), -1);
    if (fresh) it->second = watch_folder(it->first);
    if (it->second < 0) return false;
    names_[it->second].insert(slash == std::string::npos ? path : path.substr(slash + 1));
    return true;
  };
  add(state_file_);
  for (const std::string& p : also_) add(p);
  for (const std::string& p : paths)
    if (add(p)) watched.push_back(p);
  return watched;
}

void PosixWaker::watch_jobs(const std::vector<long long>& pids) {
  std::set<long long> want(pids.begin(), pids.end());
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

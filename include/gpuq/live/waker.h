// The wait of `run` on this machine: a signalfd, an inotify and a pidfd per job in one poll(2).
#pragma once

#if defined(GPUQ_CORE) || defined(GPUQ_VIEWS)
#error "a live header (the OS behind ports) in the core or the views: pass data in instead"
#endif

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "gpuq/live/ports.h"

namespace gpuq {

/// The Waker of this machine. Blocks SIGCHLD, SIGINT, SIGTERM and SIGHUP for
/// the process (they arrive through a signalfd; SIGCHLD reaps children) and
/// ignores SIGPIPE. A job's end wakes it through a pidfd of the job's pid, and as soon
/// as its exit code is in place (logs/ID.exit renamed there: the wrapper syncs it and exits
/// meanwhile, off the hand-off of a chain); a file's appearance or the state file's
/// replacement through inotify on their folders (a folder that does not exist is not watched).
class PosixWaker : public Waker {
 public:
  /// `state_file`: the state, whose replacement always wakes the wait; `also`: more files
  /// whose change (written, replaced, made or removed) always wakes it (the plan, PLAN.paused);
  /// `exit_file`: where a watched job's exit code lands (PlanPaths::exit; none: its group alone).
  explicit PosixWaker(std::string state_file, std::vector<std::string> also = {},
                      std::function<std::string(const std::string&)> exit_file = {});
  ~PosixWaker() override;
  PosixWaker(const PosixWaker&) = delete;
  PosixWaker& operator=(const PosixWaker&) = delete;

  /// A pid that is already gone (no pidfd can be had) makes the next wait return at once, once:
  /// each job's end wakes one wait. A group of 0 (a batch queue's job) is watched by its exit file alone.
  void watch_jobs(const std::vector<WatchedJob>& jobs) override;
  /// Watches the folders that exist, once each (with the watched jobs' exit files); returns the
  /// paths in them.
  std::vector<std::string> watch_files(const std::vector<std::string>& paths) override;
  void drain() override;
  Wake wait(double timeout_s) override;

 private:
  bool read_inotify();

  std::string state_file_;
  std::vector<std::string> also_;
  std::function<std::string(const std::string&)> exit_file_;
  std::vector<std::string> exit_files_;  // of the watched jobs
  int sigfd_ = -1;
  int inotify_ = -1;
  bool wake_now_ = false;
  std::map<long long, int> pidfds_;
  /// Jobs whose end has woken a wait: not again while they are watched (a tick that could not
  /// record the end, the state's disk full, looks again by its timer, not in a loop).
  std::set<long long> ended_;
  std::map<int, std::set<std::string>> names_;  // watch descriptor -> names in its folder
};

}  // namespace gpuq

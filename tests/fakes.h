// Fakes of the ports (gpuq/ports.h): `run`'s loop and the control commands tested tick
// by tick, in memory, with no process, no file and no sleep.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gpuq/live/ports.h"
#include "gpuq/live/store.h"

namespace gpuq::test {

/// What the fakes were asked to do, in order ("lock", "read", "launch a", "save",
/// "release a", "term a", ...): the order of launch, save and release is the exactly-once rule,
/// and a signal that stops a job comes after the save (and sync) that records why.
using Journal = std::vector<std::string>;

/// A clock moved by hand. Starts at a whole second, so that sums of halves stay exact.
class FakeClock : public Clock {
 public:
  double t = 1'000'000;
  /// The monotonic clock, where a test has one (clock_step.h): advance() moves it with the wall,
  /// step() moves the wall alone.
  std::optional<double> mono;
  double now() override { return t; }
  std::optional<double> monotonic() override { return mono; }
  bool stopped = false;  ///< the process was stopped and continued: continued() says so, once
  bool continued() override { return std::exchange(stopped, false); }
  void advance(double s) {
    t += s;
    if (mono) *mono += s;
  }
  void step(double s) { t += s; }
};

/// Jobs that run only when the test says how they end. Pids are 1000, 1001, ... in
/// launch order; a pid it never launched (an adopted job) is running until told.
class FakeLauncher : public Launcher {
 public:
  /// A process as the fake sees it.
  struct Proc {
    std::string id;
    Observed seen;             ///< what observe() answers
    bool group = true;         ///< some process of its group is alive
    bool ignores_term = false;
    bool recycled = false;     ///< the pid is now another process's
    bool syncing = false;      ///< ended, its wrapper still syncing the code (identify: the same process)
  };

  explicit FakeLauncher(Journal* journal = nullptr) : journal_(journal) {}

  std::vector<LaunchSpec> launches;                  ///< every launch asked for
  std::vector<std::pair<long long, Signal>> signals; ///< every signal sent
  std::vector<std::pair<long long, std::string>> warnings;  ///< every warn_signal sent: group, "USR1@90"
  std::vector<std::pair<std::string, std::string>> log_notes;  ///< every line noted in a job's log: id, line
  std::optional<std::string> fail_next;              ///< the next launch throws this
  std::optional<CannotStartNow> short_of;            ///< each launch throws this (a full disk, no process), until reset
  std::map<std::string, std::string> cannot_start;   ///< id -> why: each launch of that job throws CannotStart
  std::map<long long, Proc> procs;
  std::set<long long> held, released, abandoned;
  std::map<std::string, long long> log_bytes;        ///< each job's log size (absent: none can be read)

  /// The pid of the last launch of `id` (0 if none).
  long long pid_of(const std::string& id) const {
    for (auto it = procs.rbegin(); it != procs.rend(); ++it)
      if (it->second.id == id && it->first >= 1000) return it->first;
    return 0;
  }
  /// The job of `pid` exits with `code`; with `leftover`, its group keeps a process.
  void exit(long long pid, long long code, bool leftover = false) {
    Proc& p = procs[pid];
    p.seen = {Observed::Kind::Exited, code, ""};
    p.group = leftover;
  }
  /// As exit(), with the code in place while its wrapper still lives to sync it (write_exit_code).
  void exit_syncing(long long pid, long long code) {
    exit(pid, code);
    procs[pid].syncing = true;
  }
  void vanish(long long pid) {
    procs[pid].seen = {Observed::Kind::Vanished, -1, ""};
    procs[pid].group = false;
  }
  void abort(long long pid) {
    procs[pid].seen = {Observed::Kind::Aborted, -1, ""};
    procs[pid].group = false;
  }
  /// Every job released and still running exits with `code`.
  void exit_all_running(long long code) {
    for (auto& [pid, p] : procs)
      if (released.count(pid) && p.seen.kind == Observed::Kind::Running) exit(pid, code);
  }

  Launched launch(const LaunchSpec& spec) override {
    note("launch " + spec.id);
    launches.push_back(spec);
    if (fail_next) {
      std::string why = *fail_next;
      fail_next.reset();
      throw std::runtime_error(why);
    }
    if (auto it = cannot_start.find(spec.id); it != cannot_start.end()) throw CannotStart(it->second);
    if (short_of) throw *short_of;
    long long pid = next_pid_++;
    procs[pid].id = spec.id;
    held.insert(pid);
    Launched l{pid, static_cast<unsigned long long>(pid) * 10, std::nullopt};
    if (spec.mem_limit_bytes) l.cgroup = "cg-" + spec.id;  // a cgroup of its own, as PosixLauncher's
    return l;
  }
  void release(const std::vector<Launched>& jobs) override {
    for (const Launched& job : jobs) {
      note("release " + procs[job.pid].id);
      EXPECT_EQ(held.erase(job.pid), 1u) << "release of a job not held: " << job.pid;
      released.insert(job.pid);
    }
  }
  void abandon(const Launched& job) override {
    note("abandon " + procs[job.pid].id);
    EXPECT_EQ(held.erase(job.pid), 1u) << "abandon of a job not held: " << job.pid;
    abandoned.insert(job.pid);
    procs[job.pid].seen = {Observed::Kind::Aborted, -1, ""};
    procs[job.pid].group = false;
  }
  Observed observe(const std::string&, const JobState& s) override {
    auto it = s.pid ? procs.find(*s.pid) : procs.end();
    return it == procs.end() ? Observed{} : it->second.seen;
  }
  Identity identify(const JobState& s) override {
    auto it = s.pid ? procs.find(*s.pid) : procs.end();
    if (it == procs.end()) return Identity::Same;
    if (it->second.recycled) return Identity::Other;
    return it->second.seen.kind == Observed::Kind::Running || it->second.syncing ? Identity::Same : Identity::Gone;
  }
  bool signal_group(long long group, Signal sig) override {
    note(std::string(sig == Signal::Kill ? "kill " : "term ") + who(group));
    signals.push_back({group, sig});
    auto it = procs.find(group);
    if (it != procs.end() && !it->second.group) return false;
    Proc& p = procs[group];
    if (sig == Signal::Kill || !p.ignores_term) {
      p.group = false;
      if (p.seen.kind == Observed::Kind::Running) p.seen = {Observed::Kind::Exited, 143, ""};
    }
    return true;
  }
  bool warn_group(long long group, const WarnSpec& sig) override {
    note("warn " + who(group));
    warnings.push_back({group, sig.text()});
    auto it = procs.find(group);
    return it == procs.end() || it->second.group;
  }
  void note_in_log(const std::string& id, const std::string& line) override { log_notes.push_back({id, line}); }
  std::optional<long long> log_size(const std::string& id) override {
    auto it = log_bytes.find(id);
    return it == log_bytes.end() ? std::nullopt : std::optional<long long>(it->second);
  }
  bool group_alive(long long group) override {
    auto it = procs.find(group);
    return it == procs.end() || it->second.group;
  }
  void reap() override {}
  CgroupGone remove_cgroup(const std::string& group) override {
    note("remove " + group);
    return {};
  }
  std::vector<std::vector<std::string>> synced;  ///< every sync_ends asked for
  std::vector<std::string> sync_ends(const std::vector<std::string>& ids) override {
    synced.push_back(ids);
    std::string what = "sync code";
    for (const std::string& id : ids) what += " " + id;
    note(what);
    return {};
  }

 private:
  void note(const std::string& what) {
    if (journal_) journal_->push_back(what);
    if (on_note) on_note(what);
  }

 public:
  std::function<void(const std::string&)> on_note;  ///< each journal line as it happens

 private:
  // The job of a process group, for the journal ("a"; an adopted one's number if it has no name).
  std::string who(long long group) const {
    auto it = procs.find(group);
    return it != procs.end() && !it->second.id.empty() ? it->second.id : std::to_string(group);
  }
  Journal* journal_;
  long long next_pid_ = 1000;
};

/// The state in memory that the FakeStores of several "processes" share (one for
/// run, one for the control commands), with its lock and a version bumped by each write.
struct FakeDisk {
  State state;
  long long version = 0;
  bool locked = false;
  /// Another process replaces the state.
  void replace(State s) {
    state = std::move(s);
    ++version;
  }
};

/// One process's view of a FakeDisk.
class FakeStore : public Store {
 public:
  explicit FakeStore(FakeDisk& disk, Journal* journal = nullptr) : disk_(disk), journal_(journal) {}

  std::optional<std::string> fail_next_write;  ///< the next write throws StoreError (Io) with this
  std::optional<StoreError> fail_next_error;   ///< the next write throws this (a file and an errno)
  std::optional<StoreError> fail_reads;        ///< every read throws this, until reset
  std::optional<StoreError> fail_writes;       ///< every write throws this, until reset (a disk that stays full)
  int reads = 0, writes = 0, syncs = 0;

  void lock() override {
    note("lock");
    EXPECT_FALSE(disk_.locked) << "locked twice";
    disk_.locked = true;
  }
  void unlock() override {
    note("unlock");
    disk_.locked = false;
  }
  State read() override {
    note("read");
    ++reads;
    if (fail_reads) throw *fail_reads;
    return disk_.state;
  }
  void write(const State& s, bool) override {
    note("save");
    EXPECT_TRUE(disk_.locked) << "a write without the lock";
    if (fail_next_write) {
      std::string why = *fail_next_write;
      fail_next_write.reset();
      throw StoreError(why);
    }
    if (fail_next_error) {
      StoreError e = *fail_next_error;
      fail_next_error.reset();
      throw e;
    }
    if (fail_writes) throw *fail_writes;
    ++writes;
    disk_.state = s;
    written_ = ++disk_.version;
  }
  void sync() override {
    note("sync");
    ++syncs;
  }
  bool unchanged_since_write() override { return written_ == disk_.version; }

 private:
  void note(const std::string& what) {
    if (journal_) journal_->push_back(what);
    if (on_note) on_note(what);
  }

 public:
  std::function<void(const std::string&)> on_note;  ///< each journal line as it happens

 private:
  FakeDisk& disk_;
  Journal* journal_;
  long long written_ = -1;
};

/// A probe whose reading the test sets (8 idle GPUs at first).
/// A reading of memory alone (or none, with the problem), as an older nvidia-smi gives.
inline GpuReading reading_of(std::optional<std::map<int, long long>> used_mib, std::string problem = "") {
  GpuReading r;
  r.used_mib = std::move(used_mib);
  r.problem = std::move(problem);
  return r;
}

class FakeProbe : public GpuProbe {
 public:
  GpuReading reading = reading_of(std::map<int, long long>{{0, 0}, {1, 0}, {2, 0}, {3, 0}, {4, 0}, {5, 0}, {6, 0}, {7, 0}});
  int reads = 0;
  GpuReading read() override {
    ++reads;
    return reading;
  }
};

/// Files that exist because the test says so (paths taken as written).
class FakeFiles : public FileChecks {
 public:
  std::set<std::string> present;
  std::string expand(const std::string& written) const override { return written; }
  bool exists(const std::string& path) const override { return present.count(path) > 0; }
};

/// The wait between ticks: by default the time asked for passes on the fake clock
/// and nothing happens; `on_wait` lets a test make something happen instead.
class FakeWaker : public Waker {
 public:
  explicit FakeWaker(FakeClock& clock) : clock_(clock) {}

  std::vector<long long> jobs;        ///< the last watch_jobs: the groups
  std::vector<std::string> ids;       ///< and the jobs' ids (their exit files wake the wait too)
  std::vector<std::string> files;     ///< the last watch_files
  std::vector<double> waits;          ///< each wait's timeout
  int drains = 0;
  std::function<Wake(double)> on_wait;
  std::function<void()> on_watch_files;  ///< runs after the watches are set

  void watch_jobs(const std::vector<WatchedJob>& watched) override {
    jobs.clear();
    ids.clear();
    for (const WatchedJob& j : watched) {
      jobs.push_back(j.group);
      ids.push_back(j.id);
    }
  }
  std::vector<std::string> watch_files(const std::vector<std::string>& paths) override {
    files = paths;
    if (on_watch_files) on_watch_files();
    return paths;
  }
  void drain() override { ++drains; }
  Wake wait(double timeout_s) override {
    waits.push_back(timeout_s);
    if (on_wait) return on_wait(timeout_s);
    clock_.advance(timeout_s);
    return {};
  }

 private:
  FakeClock& clock_;
};

}  // namespace gpuq::test

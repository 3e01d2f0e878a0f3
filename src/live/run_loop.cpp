// `gpuq run`: the original's loop, tick by tick, woken by events rather than only a timer.
#include "gpuq/live/run_loop.h"

#include <fmt/format.h>

#include <algorithm>
#include <unordered_set>

#include "gpuq/core/local_time.h"
#include "gpuq/core/watchdog.h"
#include "gpuq/live/phase.h"
#include "gpuq/live/slurm.h"
#include "run_tick.h"

namespace gpuq {

// How soon the next tick comes when the GPU reading predates a job's end (seconds).
constexpr double kStaleReadingWake = 1.5;

RunLoop::RunLoop(Plan plan, const RunOptions& opt, const Ports& ports, Say out, Say err)
    : plan_(std::move(plan)), opt_(opt), os_(ports), out_(std::move(out)), err_(std::move(err)) {
  for (size_t i = 0; i < plan_.jobs.size(); ++i)
    if (plan_.jobs[i].has_file_dep()) with_file_deps_.push_back(i);
  loaded_at_ = os_.clock.now();
}

void RunLoop::say(double now, const std::string& line) const { out_(fmt::format("{} {}", clock_stamp(now), line)); }

TickResult RunLoop::tick() {
  phase("tick: wait");
  Tick t;
  t.wake_in = opt_.poll;
  try {
    Store::Locked lock(os_.store);
    load_state(t);
    catch_up_events(t);
    reload_plan(t);
    note_pause(t);
    refresh_ended(t);
    enforce_limits(t);
    escalate_kills(t);
    note_running(t);
    probe(t);
    watch_quiet(t);
    phase("tick: refresh, probe");
    decide(t);
    phase("tick: decide");
    start(t);
    // A batch queue (Slurm) places the jobs: the node's GPU ids only limit how many one
    // decision picks, so decide again while it picks more (each round's jobs are running now).
    for (size_t before = 0; !t.starts.empty() && t.launched.size() > before && !queue_stopped_;) {
      before = t.launched.size();
      if (os_.launcher.queue_room(t.state) <= 0) break;
      decide(t);
      start(t);
    }
    save(t);
    phase("tick: start, save");
    release_started(t);
    record_events(t);
    phase("tick: events");
    watch(t);
    phase("tick: watches");
    bool done = all_finished(t);
    if (done) summary_ = outcomes(t.state);
    phase("tick: finished?");
    if (t.saved) cached_ = std::move(t.state);  // the next tick starts from it, unless the store changes
    return {done ? TickResult::Next::Finished : TickResult::Next::Wait, t.wake_in};
  } catch (const StoreError& e) {
    return store_failed(t, e);
  }
}

// The state as this loop last saved it, unless someone has replaced it since (control
// commands and the original write a new file and rename it over).
void RunLoop::load_state(Tick& t) {
  bool same = cached_ && os_.store.unchanged_since_write();
  t.state = same ? std::move(*cached_) : os_.store.read();
  t.now = os_.clock.now();
  if (cached_ && !same) say_changes(t, *cached_);
  cached_.reset();
  if (first_tick_) say_adopted(t);
  first_tick_ = false;
  phase(same ? "tick: state (kept)" : "tick: state (read)");
}

namespace {

// The command that most likely made an entry go from `was` to `now` (kill, hold, ...).
std::string command_of(Status was, const JobState& now) {
  if (now.status == Status::Held) return "hold";
  if (was == Status::Held && queued_in_slurm(now)) return "retry";  // released in Slurm's queue
  if (was == Status::Running && now.status == Status::Failed && now.exit == kKilledExit) return "kill";
  if (was == Status::Running && now.status == Status::Pending) return "requeue";
  if (now.status == Status::Pending) return "retry";
  return "";
}

}  // namespace

std::string id_list(const std::vector<std::string>& ids) {
  std::string out;
  for (size_t k = 0; k < ids.size() && k < 10; ++k) out += (k ? ", " : "") + ids[k];
  if (ids.size() > 10) out += fmt::format(" and {} more", ids.size() - 10);
  return out;
}

// The state was replaced since this loop saved it: a control command from another shell
// (or the original's). One line per job of the plan whose status it changed.
void RunLoop::say_changes(const Tick& t, const State& before) {
  for (size_t i = 0; i < plan_.jobs.size(); ++i) {
    const JobState* was = before.of(plan_, i);
    const JobState* now = t.state.of(plan_, i);
    Status a = was ? was->status : Status::Pending, b = now ? now->status : Status::Pending;
    if (a == b && now && now->requeue && !(was && was->requeue))
      say(t.now, fmt::format("gpuq requeue {} from another shell: SIGTERM to its process group; it is pending again "
                             "once the group is gone",
                             plan_.jobs[i].id));
    if (a == b) continue;
    JobState shown = now ? *now : JobState{};
    std::string cmd = command_of(a, shown);
    // A job submitted to Slurm that Slurm has not started is "queued in Slurm", not running.
    auto name = [](Status st, const JobState* s) -> std::string {
      return s && queued_in_slurm(*s) ? "queued in Slurm" : status_name(st);
    };
    say(t.now, fmt::format("{} {} from another shell: {} (was {})", cmd.empty() ? "changed" : "gpuq " + cmd,
                           plan_.jobs[i].id, name(b, now), name(a, was)));
  }
}

// The first tick: the jobs an earlier run (gpuq's or the original's) left running.
void RunLoop::say_adopted(const Tick& t) {
  std::vector<std::string> ids;
  for (const auto& [id, s] : t.state.entries())
    if (s.status == Status::Running) ids.push_back(id);
  if (!ids.empty())
    say(t.now, fmt::format("adopted {} running job{}: {}", ids.size(), ids.size() == 1 ? "" : "s", id_list(ids)));
}

// Running jobs and killed ones still dying (escalate_kills has let go of those gone) keep their GPUs.
void RunLoop::note_running(Tick& t) {
  for (auto it = started_as_.begin(); it != started_as_.end();) {  // ended: their next attempt takes the plan's
    const JobState* s = t.state.find(it->first);
    it = s && s->status == Status::Running ? std::next(it) : started_as_.erase(it);
  }
  t.busy |= busy_in_state(t.state);
  for (auto& [id, s] : t.state.entries()) {
    if (s.status != Status::Running) continue;
    t.any_running = true;
    if (s.pid) t.running.push_back(*s.pid);
  }
}

// Memory held on a GPU, a compute process of no gpuq job's, or a GPU lost to the driver makes
// it busy (gpu_use.h). The reading comes from the probe's last refresh (BackgroundProbe): one
// taken before a job ended may still show that job's memory, so the next tick comes soon.
void RunLoop::probe(Tick& t) {
  GpuReading reading = os_.probe.read();
  if (!reading.source_note.empty() && reading.source_note != last_source_note_)
    say(t.now, "GPU probe: " + reading.source_note);
  last_source_note_ = reading.source_note;
  t.util_pct = reading.util_pct;
  t.have_reading = reading.used_mib.has_value();
  GpuRules rules{opt_.max_used_mib, opt_.ignore_process};
  if (reading.used_mib) {
    t.busy |= busy_by_reading(reading, t.state, rules);
    say_others(t, reading, rules);
    if (!last_probe_problem_.empty())
      say(t.now, fmt::format("{} gives readings again", reading.source == "nvml" ? "NVML" : "nvidia-smi"));
    last_probe_problem_.clear();
    for (const auto& [id, s] : t.state.entries())
      if (reading.taken && s.status != Status::Running && s.end && *s.end > *reading.taken &&
          t.now - *s.end < 60)
        t.wake_in = std::min(t.wake_in, kStaleReadingWake);
  } else if (reading.problem != last_probe_problem_) {
    last_probe_problem_ = reading.problem;
    say(t.now, fmt::format("no GPU memory reading ({}); every GPU not used by a job counts as free, as the "
                           "original does",
                           reading.problem));
  }
}

// Says once when a GPU of the node becomes busy for another user (memory, a process, lost),
// and when it is free again. The GPUs of a job that ended in the last minute are left out:
// its processes may still be letting go of their memory.
void RunLoop::say_others(Tick& t, const GpuReading& r, const GpuRules& rules) {
  constexpr double kSettle = 60;
  GpuMask node = mask_of(opt_.node_gpus), settling = 0;
  for (const auto& [id, s] : t.state.entries())
    if (s.status != Status::Running && s.end && s.gpus && t.now - *s.end < kSettle) settling |= mask_of(*s.gpus);
  std::map<int, std::string> others = held_by_others(r, t.state, rules);
  auto foreign = foreign_processes(r, t.state, rules);
  for (auto& [g, text] : others) {
    GpuMask bit = GpuMask{1} << g;
    if (!(node & bit) || (settling & bit) || others_said_.count(g)) continue;
    others_said_[g] = text;
    const char* until = r.lost.count(g)       ? "; no job starts on it"
                        : foreign.count(g)    ? "; no job starts on it until that process ends"
                                              : "; no job starts on it until that memory is let go";
    say(t.now, text + until);
  }
  for (auto it = others_said_.begin(); it != others_said_.end();) {
    if (others.count(it->first)) {
      ++it;
      continue;
    }
    auto used = r.used_mib->find(it->first);
    say(t.now, fmt::format("GPU {} free again: {} MiB in use (at most --max-used-mib {})", it->first,
                           used == r.used_mib->end() ? 0 : used->second, opt_.max_used_mib));
    it = others_said_.erase(it);
  }
}

namespace {

/// The file checks, noting each file found missing (the watch step watches those).
class NotingFiles : public FileChecks {
 public:
  NotingFiles(const FileChecks& files, std::vector<std::string>& missing) : files_(files), missing_(missing) {}
  std::string expand(const std::string& written) const override { return files_.expand(written); }
  bool exists(const std::string& path) const override {
    bool there = files_.exists(path);
    if (!there) missing_.push_back(path);
    return there;
  }

 private:
  const FileChecks& files_;
  std::vector<std::string>& missing_;
};

}  // namespace

void RunLoop::decide(Tick& t) {
  GpuMask free = mask_of(opt_.node_gpus) & ~t.busy;
  const NotingFiles files(os_.files, t.missing_files);
  Policy paused;  // `gpuq pause`: the rule book starts nothing new
  if (t.paused) (paused = opt_).paused = true;
  TickDecision d = decide_tick(plan_, t.state, t.paused ? paused : static_cast<const Policy&>(opt_), t.now, free, t.any_running, files);
  for (auto& [id, n] : d.retried) say(t.now, fmt::format("auto-retry {} (retry {})", id, n));
  t.wake_in = std::min(t.wake_in, d.next_retry_in);
  if (d.pass.stall_broken)
    say(t.now, fmt::format("nothing could start: {} waits for GPUs that reservations close to it, and their jobs "
                           "are longer than --backfill-max-hours; starting them without the limit",
                           plan_.jobs[*d.pass.waiting_head].id));
  t.starts = std::move(d.pass.starts);
}

// The chosen jobs, launched held at their start lines; a launch that fails fails its job (kLostExit).
// A batch queue takes at most its room (--max-queued); a full one (QueueFull) leaves the rest pending.
void RunLoop::start(Tick& t) {
  long long room = os_.launcher.queue_room(t.state);
  queue_stopped_ = false;
  for (const Start& s : t.starts) {
    const Job& j = plan_.jobs[s.job];
    if (room == 0 || queue_stopped_) break;
    if (room > 0) --room;
    long long attempts = t.state.of(plan_, s.job) ? t.state.of(plan_, s.job)->attempts_or0() : 0;
    JobState entry;
    entry.attempts = attempts;
    if (const JobState* prev = t.state.of(plan_, s.job)) keep_attempts(*prev, entry);
    try {
      Launched l = os_.launcher.launch({j.id, j.script, s.gpus, attempts + 1, j.args, j.env});
      entry.status = Status::Running;
      entry.gpus = s.gpus;
      if (l.slurm_id) entry.gpus = std::vector<int>{};  // Slurm's to place: none of this node's
      entry.slurm_id = l.slurm_id;
      entry.pid = l.pid;
      if (!l.slurm_id) entry.start = t.now;  // in Slurm: once Slurm starts it (survey)
      entry.pid_start = l.pid_start;
      t.wake_in = std::min(t.wake_in, check_limit(j, entry, opt_.time_limit_factor, t.now).next_in);
      t.wake_in = std::min(t.wake_in, check_quiet(j, entry, opt_, t.now).next_in);
      t.launched.push_back({s.job, l});
      t.running.push_back(l.pid);
    } catch (const QueueFull& e) {
      // Slurm takes no more now: pending still, submitted once the queue has room.
      queue_stopped_ = true;
      if (queue_full_said_ != e.what())
        say(t.now, fmt::format("not submitting more jobs for now: {}; submitting goes on once the queue drains",
                               e.what()));
      queue_full_said_ = e.what();
      t.wake_in = std::min(t.wake_in, 10.0);
      continue;
    } catch (const CannotStart& e) {
      // Failed for good: a retry would fail alike.
      entry.status = Status::Failed;
      entry.exit = e.exit;
      entry.end = t.now;
      entry.outcome = kUnstartableOutcome;
      entry.reason = e.what();
      os_.launcher.note_in_log(j.id, fmt::format("cannot start: {}", e.what()));
      say(t.now, fmt::format("cannot start {}: {}; it is failed and not retried automatically (fix that, then "
                             "`gpuq retry {}`)",
                             j.id, e.what(), j.id));
    } catch (const std::exception& e) {
      entry.status = Status::Failed;
      entry.exit = kLostExit;
      entry.end = t.now;
      say(t.now, fmt::format("cannot start {}: {}", j.id, e.what()));
    }
    t.state.set(plan_, s.job, std::move(entry));
  }
}

// The jobs just launched never run unless this save succeeds; after a failed one they are
// started again once a save succeeds.
void RunLoop::save(Tick& t) {
  try {
    os_.store.write(t.state, !t.launched.empty());
    t.saved = true;
    if (!last_save_problem_.empty()) say(t.now, "the state is saved again");
    last_save_problem_.clear();
  } catch (const StoreError& e) {
    for (auto& [i, l] : t.launched) os_.launcher.abandon(l);
    t.launched.clear();
    if (last_save_problem_ != e.what())
      say(t.now, fmt::format("cannot save the state ({}); the previous state is intact, running jobs are "
                             "untouched, and the save is tried again at the next tick",
                             e.what()));
    last_save_problem_ = e.what();
    t.wake_in = std::min(t.wake_in, 5.0);
  }
}

void RunLoop::release_started(Tick& t) {
  std::vector<Launched> all;
  for (auto& [i, l] : t.launched) all.push_back(l);
  if (!all.empty()) {
    os_.launcher.release_many(all);
    queue_full_said_.clear();
  }
  // The new state is in place (a crash of run cannot lose it); make the rename survive a power cut too.
  if (!t.launched.empty()) os_.store.sync();
  for (auto& [i, l] : t.launched) {
    if (l.slurm_id) {
      int n = plan_.jobs[i].gpus;
      say(t.now, fmt::format("submit {} as Slurm job {} ({})", plan_.jobs[i].id, *l.slurm_id,
                             n ? fmt::format("gpu:{}", n) : std::string("no GPU")));
      continue;
    }
    say(t.now, fmt::format("start {} on GPUs {} (pid {})", plan_.jobs[i].id, py_list(*t.state.of(plan_, i)->gpus),
                           l.pid));
  }
}

// What can make another tick worth it: a running job's end, the state replaced, or a file
// that a job waiting for files alone lacks. Any other wait ends with a job's end (and
// watching every pending job's folder would run into inotify's limit).
void RunLoop::watch(Tick& t) {
  os_.waker.drain();  // our own write, before the lock lets a control command in
  os_.waker.watch_jobs(t.running);
  std::vector<std::string> files;
  if (!t.missing_files.empty()) {
    std::unordered_set<std::string> waited;
    const FileTable every_file([](const std::string&) { return true; });
    for (size_t i : with_file_deps_) {
      const Job& j = plan_.jobs[i];
      if (t.state.status_of(plan_, i) != Status::Pending ||
          !deps_met(plan_, j, t.state, opt_.max_retries, every_file))
        continue;
      for (const Dep& d : j.deps)
        if (d.kind == Dep::Kind::File) waited.insert(os_.files.expand(d.target));
    }
    for (std::string& p : t.missing_files)
      if (waited.erase(p)) files.push_back(std::move(p));
  }
  // A file made between decide's look and its watch has no event: look once more.
  for (const std::string& p : os_.waker.watch_files(files))
    if (os_.files.exists(p)) t.wake_in = 0;
}

// What the control commands logged since the last tick: the log's view follows, and the hooks run.
void RunLoop::catch_up_events(Tick& t) {
  if (!journal_) return;
  std::vector<std::string> warnings;
  std::vector<Event> others = journal_->catch_up(t.state, &warnings);
  for (const std::string& w : warnings) say(t.now, "event log: " + w);
  if (hooks_) hooks_->fire(others);
}

// What this tick changed, logged once the state that records it is saved (a crash in
// between: the next run's comparison logs it), then the hooks started (never awaited).
void RunLoop::record_events(Tick& t) {
  if (hooks_) hooks_->poll();
  if (journal_ && t.saved) {
    try {
      std::vector<Event> events = journal_->record(t.state, t.now, "run");
      if (!last_journal_problem_.empty()) say(t.now, "the event log is written again");
      last_journal_problem_.clear();
      if (hooks_) hooks_->fire(events);
    } catch (const StoreError& e) {
      if (last_journal_problem_ != e.what())
        say(t.now, fmt::format("cannot append to the event log ({}); the events are logged at the next tick that "
                               "can",
                               e.what()));
      last_journal_problem_ = e.what();
      t.wake_in = std::min(t.wake_in, 5.0);
    }
  }
  // Hooks running or waiting their turn: look again soon, to say their failures and start the rest.
  if (hooks_ && hooks_->busy()) t.wake_in = std::min(t.wake_in, 0.5);
}

TickResult RunLoop::store_failed(Tick& t, const StoreError& e) {
  for (auto& [i, l] : t.launched) os_.launcher.abandon(l);
  if (e.kind == StoreError::Kind::Content) {
    err_(fmt::format("gpuq run: {}", e.what()));
    return {TickResult::Next::Fatal, 0};
  }
  // The lock or state could not be reached (read-only, no space, permissions): try again later.
  if (last_save_problem_ != e.what())
    say(os_.clock.now(), fmt::format("cannot reach the state ({}); running jobs are untouched, trying again shortly",
                                     e.what()));
  last_save_problem_ = e.what();
  return {TickResult::Next::Wait, std::min(t.wake_in, 5.0)};
}

int RunLoop::run() {
  while (true) {
    double before = os_.clock.now();
    TickResult r = tick();
    if (after_tick_) after_tick_(os_.clock.now());
    // wake_in counts from the tick's start: a tick that started many jobs took a while,
    // and a deadline must not come that much later.
    r.wake_in -= os_.clock.now() - before;
    if (r.next == TickResult::Next::Fatal) return 1;
    if (r.next == TickResult::Next::Finished) {
      if (hooks_) {
        hooks_->drain(std::min(opt_.hook_timeout + 6, 30.0));  // the last events' hooks, within reason
        if (hooks_->busy())
          say(os_.clock.now(), fmt::format("{} hook(s) still running and {} waiting at the end: those waiting are not "
                                           "run",
                                           hooks_->running_count(), hooks_->waiting_count()));
      }
      out_("all jobs finished: " + summary_);
      return 0;
    }
    Wake w = os_.waker.wait(std::max(0.0, r.wake_in));
    if (w.stop) return stopped(w);
  }
}

}  // namespace gpuq

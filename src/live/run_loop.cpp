// `gpuq run`: the original's loop, tick by tick, woken by events rather than only a timer.
#include "gpuq/live/run_loop.h"
#include "gpuq/core/hint.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_set>

#include "gpuq/core/clock_step.h"
#include "gpuq/core/limits.h"
#include "gpuq/core/local_time.h"
#include "gpuq/core/watchdog.h"
#include "gpuq/live/control.h"
#include "gpuq/live/host.h"
#include "gpuq/live/phase.h"
#include "run_tick.h"

namespace gpuq {

// How soon the next tick comes when the GPU reading predates a job's end (seconds).
constexpr double kStaleReadingWake = 1.5;
// How soon a run held by a fault (a full disk, no process left: start, save) looks again (seconds).
constexpr double kFaultRetry = 2.0;

RunLoop::RunLoop(Plan plan, const RunOptions& opt, const Ports& ports, Say out, Say err)
    : plan_(std::move(plan)), opt_(opt), os_(ports), out_(std::move(out)), err_(std::move(err)) {
  index_ = std::make_shared<PlanIndex>(plan_);
  for (size_t i = 0; i < plan_.jobs.size(); ++i)
    if (plan_.jobs[i].has_file_dep()) with_file_deps_.push_back(i);
  reload_.loaded_at = os_.clock.now();
}

// While the state cannot be saved, each tick starts again from the one on disk and sees the same
// ends again: each line (or each line `about` one thing: a job's end, whose line may say how late
// it was seen) is said once until a save succeeds, the lines of the tick whose save first failed
// included (tick() forgets them at the start of a tick after a good save). Outside a tick (the
// run's end, a stop): said at once.
void RunLoop::say(double now, const std::string& line, const std::string& about) const {
  if (!told_.fresh("unsaved:" + (about.empty() ? line : about))) return;
  out_(fmt::format("{} {}", clock_stamp(now), line));
}

// In a tick, a line is an effect like the others: kept in the tick's list, in the order decided,
// and told by tell() after the save (before the signals it may announce go) and at the tick's end.
void RunLoop::say(Tick& t, const std::string& line, const std::string& about) const {
  t.told.push_back({fmt::format("{} {}", clock_stamp(t.now), line), about.empty() ? line : about, ""});
}

// A line in a job's log: an effect as say()'s lines are, told once in the same way (no `about`:
// each time).
void RunLoop::note_in_log(Tick& t, const std::string& id, const std::string& about, const std::string& line) const {
  t.told.push_back({line, about.empty() ? "" : "note " + about, id});
}

// The tick's lines and log notes so far, in order: each said once while the state cannot be saved
// (say), a line without a key each time.
void RunLoop::tell(Tick& t) const {
  for (const Told& x : t.told) {
    if (!x.about.empty() && !told_.fresh("unsaved:" + x.about)) continue;
    if (x.job.empty())
      out_(x.text);
    else
      os_.launcher.note_in_log(x.job, x.text);
  }
  t.told.clear();
}

TickResult RunLoop::tick() {
  phase("tick: wait");
  Tick t;
  t.wake_in = opt_.poll;
  ClockSeen seen = look_at_clock(t);  // before the lock: a wait for it is no stop of this run
  if (last_save_problem_.empty()) told_.forget("unsaved:");  // the last tick's lines are saved
  // The node lock node_enter takes is let go by the publication, else at the tick's end, whatever
  // ends it (a store fault, a damaged state).
  struct LeaveNode {
    NodeShare* node;
    ~LeaveNode() {
      if (node) node->leave();
    }
  } leave_node{node_};
  try {
    Store::Locked lock(os_.store);
    read(t, seen);
    decide(t);
    act(t);
    bool done = record(t);
    phase("tick: finished?");
    kept_ = t.saved;  // the next tick starts from it, unless the store changes
    tell(t);
    note_due(t);
    return {done ? TickResult::Next::Finished : TickResult::Next::Wait, t.wake_in};
  } catch (const StoreError& e) {
    tell(t);  // what the tick decided before the fault, then the fault
    TickResult r = store_failed(t, e);
    t.wake_in = r.wake_in;
    note_due(t);
    return r;
  }
}

// When the next tick is due at the latest, from this one's start: its wait, or the tick itself
// when it took longer (a slow tick is work, not time nobody looked: many sbatch calls, a git
// snapshot, a wait for a lock), unless run was stopped since (look_at_clock).
void RunLoop::note_due(const Tick& t) {
  clock_.wait_in = t.wake_in;
  if (std::optional<double> mono = os_.clock.monotonic()) clock_.due_in = std::max(t.wake_in, *mono - clock_.began);
}

// The one read (read.h), as every look reads: the state (this loop's own, kept, unless someone
// has replaced the file since: control commands and the original write a new file and rename it
// over; across a clock step or a long stop, its times moved as read), what the launcher sees of
// its running jobs (their orphans reaped first), the GPUs (the reading the background probe last
// took), the pause. The steps after decide on it.
void RunLoop::read(Tick& t, const ClockSeen& seen) {
  const bool same = kept_ && q_ && os_.store.unchanged_since_write() && !seen.step && !seen.late;
  os_.launcher.reap();
  ReadFrom from;
  from.state = [&]() -> std::optional<State> {
    if (same) return std::nullopt;
    State read = os_.store.read();
    if (seen.step) move_times(read, seen.step, seen.old_now);
    if (seen.late) forgive_unwatched(read, seen.late, os_.clock.now());
    return read;
  };
  from.clock = [&] { return os_.clock.now(); };
  from.launcher = [&](const State&) { return &os_.launcher; };
  from.oom_of = &plan_;  // a failure out of memory: on_oom's retry
  from.gpus = [&] { return os_.probe.read(); };
  from.paused = pause_.from;
  // Not the node directory: node_enter reads it under the node lock it then holds to the
  // publication. Taken here, the lock would span the tick's slow steps (a git snapshot's syncfs,
  // durable saves, hooks' marks) and keep every other run's tick waiting.
  t.world = read_world(from, same ? &q_->state() : nullptr);
  t.now = t.world.now;
}

// The state and the engine over it as this loop last saved them, or the state read, and the
// engine loaded from it (a change from another shell said).
void RunLoop::load_state(Tick& t) {
  const bool had = kept_ && q_;
  kept_ = false;
  if (t.world.state) {
    if (had) say_changes(t, q_->state(), *t.world.state);
    Policy policy = opt_;
    q_.emplace(plan_, policy, std::move(*t.world.state), t.now, "run", index_);
    t.world.state.reset();
    t.fresh = true;
  }
  if (clock_.first) say_adopted(t);
  clock_.first = false;
  phase(t.fresh ? "tick: state (read)" : "tick: state (kept)");
}

// The wall clock against the monotonic one since the last tick (clock_step.h): a step is said,
// and the times this loop keeps move with it (the state's move in load_state); a tick far later
// than due (run was stopped) is said, and the watchdog forgives the time nobody looked.
ClockSeen RunLoop::look_at_clock(Tick& t) {
  ClockSeen seen;
  std::optional<double> mono = os_.clock.monotonic();
  if (!mono) return seen;
  ClockReading now{os_.clock.now(), *mono};
  // Stopped (SIGSTOP, ^Z) and continued since the last look: the stop may have landed in the
  // last tick, so its own time is not due, only its wait (a stop between ticks is late either way).
  const bool continued = os_.clock.continued();
  if (clock_.last_look) seen = see_clock(*clock_.last_look, now, continued ? clock_.wait_in : clock_.due_in);
  clock_.last_look = now;
  clock_.began = *mono;
  if (seen.step) {
    auto move = [&](double& v) {
      if (v <= seen.old_now) v += seen.step;
    };
    move(reload_.loaded_at);
    move(eta_.predicted_at);
    move(eta_.recorded_at);
    if (eta_.told) move(*eta_.told);
    if (eta_.recorded_finish) move(*eta_.recorded_finish);
    for (auto& [j, end] : eta_.ends) move(end);
    t.now = now.wall;  // read() reads the clock again
    say(t, fmt::format("the wall clock jumped {} (against the monotonic clock): the times of running and "
                              "waiting jobs move with it, so that no time limit, watchdog or retry comes early or "
                              "late; the times written stay wall-clock",
                              step_text(seen.step)));
  }
  if (seen.late) {
    t.now = now.wall;
    say(t, fmt::format("this run did not look for {} (it was stopped, or the machine was busy): the jobs "
                              "ran meanwhile; the hang watchdog does not count that time as silence",
                              duration_text(seen.late)));
  }
  return seen;
}

std::optional<size_t> RunLoop::index_of(const std::string& id) const {
  const Job* j = plan_.find(id);
  if (!j) return std::nullopt;
  return static_cast<size_t>(j - plan_.jobs.data());
}

// The running jobs' pids, to wake on their ends (their GPUs and those of killed ones still dying
// are the read's: probe).
void RunLoop::note_running(Tick& t) {
  const State& state = q_->state();
  for (auto it = reload_.started_as.begin(); it != reload_.started_as.end();) {  // ended: their next attempt takes the plan's
    const JobState* s = state.find(it->first);
    it = s && s->status == Status::Running ? std::next(it) : reload_.started_as.erase(it);
  }
  for (auto& [id, s] : state.entries())
    if (s.status == Status::Running && s.pid) t.running.push_back({*s.pid, id});
}

// Memory held on a GPU, a compute process of no gpuq job's, or a GPU lost to the driver makes
// it busy (gpu_use.h). The reading comes from the probe's last refresh (BackgroundProbe): one
// taken before a job ended may still show that job's memory, so the next tick comes soon.
void RunLoop::probe(Tick& t) {
  GpuReading reading = std::move(t.world.gpus).value_or(GpuReading{});
  if (reading.source_note.empty()) told_.gone("probe source");
  else if (told_.fresh("probe source", reading.source_note)) say(t, "GPU probe: " + reading.source_note);
  t.activity = activity_of(reading, opt_);
  GpuRules rules{opt_.max_used_mib, opt_.ignore_process};
  Engine& engine = q_->engine();
  // The one read of the GPUs, as a look at the node reads them (gpu_use.h): free are those no
  // running job, no killed one still dying (escalate_kills has let go of those gone) and nothing
  // the reading holds keeps.
  ReadingSeen seen = read_gpus(reading, q_->state(), plan_, engine.policy(), rules, mask_of(opt_.node_gpus),
                               engine.packs() || reading.processes);
  t.busy |= mask_of(opt_.node_gpus) & ~seen.free;
  if (seen.memory) note_memory(t, *seen.memory);
  if (reading.processes)  // hoarded GPUs: reported to the node directory (status --node, gpus), never stopped
    host_.idle_holders = note_idle_holders(host_.idle_holders, seen.foreign, reading.util_pct,
                                           opt_.settings.idle_util_percent, t.now);
  // Each job's energy: the counters' rise since the last reading, shared by the jobs on each GPU.
  if (!reading.energy_mj.empty()) {
    share_energy(host_.energy_mj, reading.energy_mj, q_->state(), packed_sizes(plan_, engine.policy(), q_->state()));
    host_.energy_mj = reading.energy_mj;
  }
  read_ = {seen.free, seen.others, t.mem_other};
  if (reading.used_mib) {
    say_others(t, reading, rules, seen.others);
    if (told_.gone("probe problem"))
      say(t, fmt::format("{} gives readings again", reading.source == "nvml" ? "NVML" : "nvidia-smi"));
    for (const auto& [id, s] : q_->state().entries())
      if (reading.taken && s.status != Status::Running && s.end && *s.end > *reading.taken &&
          t.now - *s.end < 60)
        t.wake_in = std::min(t.wake_in, kStaleReadingWake);
  } else if (told_.fresh("probe problem", reading.problem)) {
    say(t, fmt::format("no GPU memory reading ({}); every GPU not used by a job counts as free, as the "
                           "original does",
                           reading.problem));
  }
  t.reading = std::move(reading);
}

// Several jobs on one GPU: what else uses each GPU's memory, for the engine's room (a GPU's
// memory from the probe where it gives it), and a packed job using more than it declared, said
// once per job and GPU.
void RunLoop::note_memory(Tick& t, MemoryUse& use) {
  Engine& engine = q_->engine();
  if (engine.packs()) t.mem_other = std::move(use.other);
  // A job that packs with more GiB than any GPU takes never starts: said once, when the plan or
  // the GPUs' memory is new (validate refuses it; run goes on with the rest).
  if (engine.packs() && host_.too_big_seen != std::pair{plan_.serial, engine.policy().most_room()}) {
    host_.too_big_seen = {plan_.serial, engine.policy().most_room()};
    for (const Job& j : plan_.jobs)
      if (engine.policy().too_big(j) && told_.fresh("too big:" + j.id))
        say(t, fmt::format("{} {}: it never starts here (edit the plan: run reloads it; GPUs with more memory: "
                               "--gpu-mem-gib)",
                               j.id, too_big_text(engine.policy(), j)));
  }
  for (const MemoryUse::Over& o : use.over)
    if (told_.fresh(fmt::format("over:{}:{}", o.id, o.gpu)))
      say(t, fmt::format("{} uses {:.1f} GiB on GPU {}, more than its gpu_mem_gib {:g}: no more jobs are placed "
                             "on GPU {} while it does",
                             o.id, o.used_gib, o.gpu, o.declared_gib, o.gpu));
  // Each attempt's peak, in its entry (the event log's end of the attempt carries it on).
  for (const auto& [id, gib] : use.used_gib) {
    const Job* j = plan_.find(id);
    if (!j) continue;
    JobState& e = q_->entry(static_cast<size_t>(j - plan_.jobs.data()));
    long long mib = std::llround(gib * 1024);
    if (e.status == Status::Running && mib > e.gpu_mem_peak_mib.value_or(-1)) e.gpu_mem_peak_mib = mib;
  }
}

// Says once when a GPU of the node becomes busy for another user (memory, a process, lost),
// and when it is free again. The GPUs of a job that ended in the last minute are left out:
// its processes may still be letting go of their memory.
void RunLoop::say_others(Tick& t, const GpuReading& r, const GpuRules& rules, const std::map<int, std::string>& others) {
  constexpr double kSettle = 60;
  GpuMask node = mask_of(opt_.node_gpus), settling = 0;
  const State& state = q_->state();
  for (const auto& [id, s] : state.entries())
    if (s.status != Status::Running && s.end && s.gpus && t.now - *s.end < kSettle) settling |= mask_of(*s.gpus);
  auto foreign = foreign_processes(r, state, rules);
  for (auto& [g, text] : others) {
    GpuMask bit = GpuMask{1} << g;
    if (!(node & bit) || (settling & bit) || told_.active(fmt::format("busy GPU {}", g))) continue;
    told_.fresh(fmt::format("busy GPU {}", g), text);
    const char* until = r.lost.count(g)       ? "; no job starts on it"
                        : foreign.count(g)    ? "; no job starts on it until that process ends"
                                              : "; no job starts on it until that memory is let go";
    say(t, text + until);
  }
  for (const std::string& key : told_.under("busy GPU ")) {
    int g = std::stoi(key);
    if (others.count(g)) continue;
    auto used = r.used_mib->find(g);
    say(t, fmt::format("GPU {} free again: {} MiB in use (at most --max-used-mib {})", g,
                           used == r.used_mib->end() ? 0 : used->second, opt_.max_used_mib));
    told_.gone("busy GPU " + key);
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

// DECIDE, on the read: the state taken in (a change from another shell said), the event log caught
// up, the plan reloaded, the jobs that ended settled, time limits, memory, kills past their grace
// and the watchdog (stops and signals as data), the GPUs, the host and progress; the node's
// decision under its lock; the engine's pass. Nothing is sent or started here (act); a save comes
// first only where a failed one must succeed before anything starts, or an end read must be durable
// before its job runs again (save_ends_before_relaunch).
void RunLoop::decide(Tick& t) {
  load_state(t);
  catch_up_events(t);
  reload_plan(t);
  take_snapshots(t);
  note_pause(t);
  refresh_ended(t);
  enforce_limits(t);
  watch_memory(t);
  escalate_kills(t);
  note_running(t);
  watch_host(t);
  probe(t);
  watch_activity(t);
  note_progress(t);
  phase("tick: refresh, probe");
  if (!last_save_problem_.empty()) save(t);  // alone, first: nothing starts until a save succeeds
  else save_ends_before_relaunch(t);
  node_enter(t);
  watch_drains(t);
  choose(t);
  phase("tick: decide");
}

// ACT: the decision's effects, through the ports, in the one order that keeps "no job starts
// without a durable record" (doc/architecture.md): each chosen job spawned held at its start
// line, this run's entry published for the other runs, the state saved (the codes read synced
// first), the lines and log notes told, the signals sent, the start lines let go.
void RunLoop::act(Tick& t) {
  start(t);
  node_publish(t);
  save(t);
  phase("tick: start, save");
  tell(t);
  signal_groups(t);
  release_started(t);
}

// RECORD: the snapshots pruned, the events appended and the hooks run, the waits set (the jobs
// to wake on, the next wake-up), the ETA; whether every job is finished.
bool RunLoop::record(Tick& t) {
  prune_snapshots(t);
  record_events(t);
  phase("tick: events");
  watch(t);
  phase("tick: watches");
  watch_eta(t);
  phase("tick: eta");
  bool done = all_finished(t) || never_finishes(t);
  // The last failure may be a bad GPU's, its Xid not read yet: one more look first (once: the
  // next reading is taken after the failure).
  if (done && t.fault_unread) {
    done = false;
    t.wake_in = std::min(t.wake_in, kStaleReadingWake);
  }
  if (done) {
    end_.summary = outcomes(q_->state());
    end_.all_done = true;
    for (size_t i = 0; i < plan_.jobs.size() && end_.all_done; ++i) end_.all_done = q_->state().status_of(plan_, i) == Status::Done;
  }
  return done;
}

// The engine's tick: automatic retries due, then the scheduling pass over the jobs ready now
// (file: deps looked at on disk) and the GPUs free (none of a running job, a killed one dying,
// memory in use). What it launches is started next.
void RunLoop::choose(Tick& t) {
  const NotingFiles files(os_.files, t.missing_files);
  Engine& engine = q_->engine();
  engine.policy().paused = t.paused;  // `gpuq pause`: the engine starts nothing new
  ev::Tick tick;
  tick.now = t.now;
  tick.unavailable = t.busy;
  tick.mem_other = t.mem_other;
  if (node_ && t.node_in) tick.host_other = {node_->others_host().cpus, node_->others_host().mem_gib};
  tick.others_running = q_->others_running();
  tick.files = &files;
  if (BatchQueue* queue = os_.launcher.queue()) tick.room = queue->room(q_->state());
  std::vector<double> checkpoints;  // a preemption takes first the jobs that lose the least work
  if (engine.preempts()) {
    checkpoints = last_checkpoints();
    tick.checkpoints = checkpoints;
  }
  const Effects& fx = q_->apply(tick, t.now);
  t.preempts.insert(t.preempts.end(), fx.preempted.begin(), fx.preempted.end());
  for (size_t j : fx.retried) {
    long long n = 0;
    for (const Change& c : fx.changes)
      if (c.job == j && c.cause == Cause::AutoRetry) n = std::get<Waiting>(c.life).attempts;
    say(t, fmt::format("auto-retry {} (retry {})", plan_.jobs[j].id, n));
  }
  if (std::optional<double> next = engine.next_retry()) t.wake_in = std::min(t.wake_in, *next - t.now);
  if (std::optional<double> next = engine.next_preemptible(t.now)) t.wake_in = std::min(t.wake_in, *next - t.now);
  if (fx.pass.stall_broken)
    say(t, fmt::format("nothing could start: {} waits for GPUs that reservations close to it, and their jobs "
                           "are longer than --backfill-max-hours; starting them without the limit",
                           plan_.jobs[*fx.pass.waiting_head].id));
  t.launches = fx.launches;
  say_preempts(t);
}

// The engine's launches, held at their start lines; a launch that fails fails its job (the
// engine's LaunchFailed). A full batch queue (QueueFull) leaves this one and the rest waiting.
void RunLoop::start(Tick& t) {
  if (!last_save_problem_.empty()) {
    for (const Launch& l : t.launches) q_->apply(ev::Aborted{l.job}, t.now);
    return;
  }
  if (!t.not_started.empty()) {
    // A job's wrapper was just refused a process: what the engine chose waits for it to pass (a
    // launch now would be refused alike), looked at again in a few seconds.
    // (Its "requeued" line says why; no more is said.)
    for (const Launch& l : t.launches) q_->apply(ev::Aborted{l.job}, t.now);
    t.wake_in = std::min(t.wake_in, kFaultRetry);
    return;
  }
  for (size_t k = 0; k < t.launches.size(); ++k) {
    size_t i = t.launches[k].job;
    const Job& j = plan_.jobs[i];
    const Life& life = q_->engine().life(i);
    std::vector<int> gpus;
    if (const Running* r = std::get_if<Running>(&life)) gpus = r->gpus;
    try {
      // The attempt's number as its entry says (numbers go on after a requeue or a retry by hand).
      LaunchSpec spec{j.id, j.script, gpus, j.gpus, attempt_of(q_->entry(i)), j.args, j.env,
                      (j.warn_signal && j.warn_signal->shell_only) || j.preempt_signal.shell_only, ""};
      spec.preemptions = q_->entry(i).preemptions.value_or(0);
      spec.checkpoint_dir = q_->engine().policy().preemptible(j);
      if (q_->engine().counts_host()) spec.cores = cores_for(i, gpus);
      if (j.mem_gib > 0 || j.on_oom) oom_launch(i, life, spec);
      if (snap_.store && uses_snapshot(j, snap_.setting)) prepare_snapshot(t, i, spec);
      Launched l = os_.launcher.launch(spec);
      q_->launched(i, l.pid, l.pid_start, l.queue_id);
      if (!spec.cores.empty()) q_->entry(i).cores = core_list_text(spec.cores);
      if (std::optional<std::string>& group = q_->entry(i).cgroup; group != l.cgroup) {
        if (group) host_.cgroups_left.push_back(*group);  // an earlier attempt's, its processes still dying
        group = l.cgroup;
      }
      if (!l.note.empty() && told_.fresh("launch note:" + l.note)) say(t, l.note);
      const JobState& entry = q_->entry(i);
      t.wake_in = std::min(t.wake_in, check_limit(j, entry, opt_.time_limit_factor, t.now).next_in);
      t.wake_in = std::min(t.wake_in, check_quiet(j, entry, opt_, t.now).next_in);
      t.wake_in = std::min(t.wake_in, check_idle(j, entry, opt_, t.now).next_in);
      t.launched.push_back({i, l});
      t.running.push_back({l.pid, j.id});
    } catch (const QueueFull& e) {
      // Slurm takes no more now: waiting still, submitted once the queue has room.
      for (size_t rest = k; rest < t.launches.size(); ++rest) q_->apply(ev::Aborted{t.launches[rest].job}, t.now);
      if (told_.fresh("queue full", e.what()))
        say(t, fmt::format("not submitting more jobs for now: {}; submitting goes on once the queue drains",
                               e.what()));
      t.wake_in = std::min(t.wake_in, 10.0);
      return;
    } catch (const CannotStart& e) {
      // Failed for good: a retry would fail alike.
      q_->apply(ev::LaunchFailed{i, t.now, e.exit, true}, t.now);
      q_->entry(i).reason = e.what();
      note_in_log(t, j.id, "", fmt::format("cannot start: {}", e.what()));
      say(t, fmt::format("cannot start {}: {}; it is failed and not retried automatically (fix that, then {})",
                             j.id, e.what(), hint("retry", {j.id})));
    } catch (const CannotStartNow& e) {
      // The node ran out of something (disk, processes, file descriptors): this job and the rest
      // wait, neither started nor failed, and are launched again once the cause has passed.
      for (size_t rest = k; rest < t.launches.size(); ++rest) q_->apply(ev::Aborted{t.launches[rest].job}, t.now);
      launch_held(t, fault_words(e.file, e.err), fmt::format("cannot start {}: {}", j.id, e.what()));
      return;
    } catch (const std::exception& e) {
      q_->apply(ev::LaunchFailed{i, t.now, kLostExit, false}, t.now);
      say(t, fmt::format("cannot start {}: {}", j.id, e.what()));
    }
  }
  if (!t.launches.empty())
    if (std::optional<std::string> past = told_.gone("launch held")) say(t, fmt::format("jobs start again: {} is past", *past));
}

// Nothing starts while `problem` lasts: said once (with `detail`, the call and file that failed),
// and looked at again every few seconds.
void RunLoop::launch_held(Tick& t, const std::string& problem, const std::string& detail) {
  if (told_.fresh("launch held", problem))
    say(t, fmt::format("{}: no job starts until it passes; {} running job(s) go on ({})", problem,
                           running_count(), detail));
  t.wake_in = std::min(t.wake_in, kFaultRetry);
}

size_t RunLoop::running_count() const {
  size_t n = 0;
  for (const auto& [id, s] : q_->state().entries())
    if (s.status == Status::Running && plan_.find(id)) ++n;
  return n;
}

// A job this tick saw end, other than done, may be launched again in it (requeued after a launch
// cut short, preempted, retried at once): its end is saved, durably, before decide. The launch
// removes the last attempt's exit and aborted files, and a run killed before its own save would
// leave a state still naming the last attempt with no trace left of how it ended: the next run
// would take it for one gone without an exit code, and fail it. Before decide, not after: then
// the state holds the new launches as running, without their pids. (A failed save: nothing
// starts, as after any.)
void RunLoop::save_ends_before_relaunch(Tick& t) {
  bool again = false;
  for (const std::string& id : t.ended)
    if (const JobState* s = q_->state().find(id); s && s->status != Status::Done) again = true;
  if (again) save(t, true);
}

// The jobs just launched never run unless this save succeeds; after a failed one they are
// started again once a save succeeds.
// A launched job passes its start line only once this save, and the folder's record of it, are
// on disk (fsynced): a start is never lost, so a restart adopts the job rather than run it
// again. A failed save abandons them (they never run), and nothing else starts until a save
// succeeds (decide's look first saves alone).
void RunLoop::save(Tick& t, bool durable) {
  sync_ends(t);  // no save records an end whose code is not durable (refresh_ended)
  try {
    // A launch, or a signal that stops or warns a job: on disk (fsynced) before its start line
    // opens or the signal goes (signal_groups), so that a power cut never leaves one done with
    // no record of it.
    durable = durable || !t.launched.empty() ||
              std::any_of(t.signals.begin() + static_cast<std::ptrdiff_t>(t.signals_saved), t.signals.end(),
                          [](const GroupSignal& g) { return g.recorded; });
    os_.store.write(q_->state(), durable);
    if (durable) os_.store.sync();  // the rename too, before any start line opens
    t.saved = true;
    t.signals_saved = t.signals.size();
    if (!last_save_problem_.empty()) {
      // What this tick decides again after this save was said while it failed: its lines are
      // forgotten at the next tick's start, not now (tick()).
      last_save_problem_.clear();
      t.told.push_back({fmt::format("{} the state is saved again: jobs start again", clock_stamp(t.now)), "", ""});  // each time
    }
  } catch (const StoreError& e) {
    for (auto& [i, l] : t.launched) os_.launcher.abandon(l);
    size_t abandoned = t.launched.size();
    t.launched.clear();
    t.saved = false;
    std::string problem = e.err ? fault_words(e.file, e.err) : std::string(e.what());
    if (last_save_problem_ != problem)
      say(t, fmt::format("{}: no job starts until the state can be saved; {} running job(s) go on (the previous "
                             "state is intact; {})",
                             problem, running_count() - abandoned, e.what()));
    last_save_problem_ = problem;
    t.wake_in = std::min(t.wake_in, kFaultRetry);
  }
}

// When each running preemptible job last checkpointed: the newest file of its GPUQ_CHECKPOINT_DIR,
// else when its progress last moved (NaN: neither; the engine takes its start).
std::vector<double> RunLoop::last_checkpoints() const {
  std::vector<double> out(plan_.jobs.size(), std::numeric_limits<double>::quiet_NaN());
  for (const auto& [id, s] : q_->state().entries()) {
    if (s.status != Status::Running) continue;
    const Job* j = plan_.find(id);
    if (!j || !q_->engine().policy().preemptible(*j)) continue;
    // A checkpoint is a file the job wrote in its GPUQ_CHECKPOINT_DIR (the newest one's time);
    // progress it reports is no checkpoint (issue 51: a job that never checkpoints was said to
    // have lost nothing).
    if (std::optional<double> newest = os_.launcher.checkpointed_at(id)) out[static_cast<size_t>(j - plan_.jobs.data())] = *newest;
  }
  return out;
}

// The preemptions decided (the engine's, and the node's in node_enter), each said and its signal
// decided; signal_groups sends them once the state that records them is saved (SIGKILL of the
// group after --preempt-grace: escalate_kills).
void RunLoop::say_preempts(Tick& t) {
  for (const Preemption& p : t.preempts) {
    const Job& job = plan_.jobs[p.job];
    JobState& s = q_->entry(p.job);
    bool sent = preempt_later(os_.launcher, s, job, t.signals);
    std::string why = p.by ? fmt::format("for {} (more urgent: priority {:g} before {:g})", plan_.jobs[*p.by].id,
                                         plan_.jobs[*p.by].priority, job.priority)
                      : !p.other.empty() ? fmt::format("for {} (the shared node's fair share: theirs is below yours)", p.other)
                                         : std::string("by hand");
    say(t,
        fmt::format("preempt {} {}: {}; {}{}", job.id, why, p.work_text(),
                    sent ? preempt_signal_text(s, job) : std::string("its process was already gone"),
                    sent ? fmt::format(", SIGKILL after --preempt-grace {:g} s", opt_.preempt_grace) : ""),
        "preempt " + job.id);
    note_in_log(t, job.id, "preempt " + job.id, fmt::format("preempted {}: {}; it runs again when GPUs allow (GPUQ_PREEMPTIONS "
                                                 "grows; GPUQ_CHECKPOINT_DIR is kept)",
                                                 why, sent ? preempt_signal_text(s, job) : "its process was gone"));
    if (s.pid) t.running.push_back({*s.pid, job.id});
  }
  t.preempts.clear();
}

// The act's signals, once the save. One whose record no save took (the disk is full) is not sent:
// the next tick starts again from the state on disk, where the job still runs, and decides it
// again (its lines said once: say()); a SIGKILL that changes no record goes all the same.
// A group whose number is a job started in this tick is not signalled: the kernel gave an ended
// job's number to the new job's wrapper, so the ended job's group was empty.
void RunLoop::signal_groups(Tick& t) {
  std::vector<GroupSignal> go;
  for (size_t k = 0; k < t.signals.size(); ++k)
    if (k < t.signals_saved || !t.signals[k].recorded)
      if (std::none_of(t.launched.begin(), t.launched.end(), [&](const auto& l) { return l.second.pid == t.signals[k].group; }))
        go.push_back(t.signals[k]);
  send_signals(os_.launcher, go);
  t.signals.clear();
  t.signals_saved = 0;
}

void RunLoop::release_started(Tick& t) {
  if (BatchQueue* queue = os_.launcher.queue()) queue->mend();  // what its survey (the read) found to mend
  std::vector<Launched> all;
  for (auto& [i, l] : t.launched) all.push_back(l);
  if (!all.empty()) {
    os_.launcher.release(all);
    told_.gone("queue full");
  }
  for (auto& [i, l] : t.launched) {
    if (l.queue_id) {
      int n = plan_.jobs[i].gpus;
      say(t, fmt::format("submit {} as Slurm job {} ({})", plan_.jobs[i].id, *l.queue_id,
                             n ? fmt::format("gpu:{}", n) : std::string("no GPU")));
      continue;
    }
    std::vector<int> gpus = q_->state().of(plan_, i)->gpus.value_or(std::vector<int>{});
    say(t.now,
        fmt::format("start {} on GPUs {} (pid {}){}", plan_.jobs[i].id, py_list(gpus), l.pid, cores_note(i, gpus)));
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
    for (size_t i : with_file_deps_) {
      const Job& j = plan_.jobs[i];
      if (!q_->engine().wants_files(i)) continue;
      for (const Dep& d : j.deps)
        if (d.kind == Dep::Kind::File) waited.insert(os_.files.expand(d.target));
    }
    for (std::string& p : t.missing_files)
      if (waited.erase(p)) files.push_back(std::move(p));
  }
  // On a shared node, jobs waiting for GPUs: another user's file replaced (their run published)
  // may free GPUs for them, so it wakes this run rather than its next look (up to 1 s later).
  size_t job_files = files.size();
  if (node_ && t.node_in && !q_->engine().ready_jobs(1).empty())
    files.insert(files.end(), node_->others_files().begin(), node_->others_files().end());
  // A file made between decide's look and its watch has no event: look once more.
  std::vector<std::string> watched = os_.waker.watch_files(files);
  std::unordered_set<std::string> for_jobs(files.begin(), files.begin() + static_cast<std::ptrdiff_t>(job_files));
  for (const std::string& p : watched)
    if (for_jobs.erase(p) && os_.files.exists(p)) t.wake_in = 0;
  // A file no watch covers (its folder not made yet, or no inotify: a user's 128 instances used
  // up) is looked for every few seconds, whatever --poll: its job starts soon after it appears.
  if (!for_jobs.empty()) t.wake_in = std::min(t.wake_in, kUnwatchedFileLook);
}

// What the control commands logged since the last tick: the log's view follows, and the hooks run.
// A state others wrote without a word to the log (the original's commands, a crash of a writer
// between its save and its append) is logged now, before this tick changes it.
void RunLoop::catch_up_events(Tick& t) {
  if (!log_.journal) return;
  std::vector<std::string> warnings;
  std::vector<Event> past;
  bool first = log_.hooks && !log_.hooks_begun;
  std::vector<Event> others = log_.journal->catch_up(q_->state(), &warnings, first ? &past : nullptr, t.now);
  for (const std::string& w : warnings) say(t, "event log: " + w);
  if (first) {  // the events logged since each hook's last run (while no run was going)
    log_.hooks->begin(past);
    log_.hooks_begun = true;
  }
  bool let_run = look_at_start_lines(t.fresh);
  if (t.fresh || !log_.unlogged.empty() || let_run) {
    try {
      std::vector<Event> late = log_.journal->record(q_->state(), t.now, "run", log_.unlogged, log_.not_released);
      log_.unlogged.clear();
      others.insert(others.end(), late.begin(), late.end());
    } catch (const StoreError&) {
      // said when this tick's own events cannot be appended either
    }
  }
  if (log_.hooks) log_.hooks->fire(others, log_.journal->count());
}

// A state read afresh may hold launches that another run saved and died before releasing
// (their wrappers wait at their start lines, or gave up there): their start is not logged
// while the launcher sees them there. Each tick looks again; true when one was let run since
// (its start is logged now) or its entry moved on.
bool RunLoop::look_at_start_lines(bool fresh) {
  if (fresh) log_.not_released.clear();
  bool changed = false;
  for (auto it = log_.not_released.begin(); it != log_.not_released.end();) {
    const JobState* s = q_->state().find(it->first);
    if (s && s->status == Status::Running && s->start == it->second && os_.launcher.at_start_line(it->first, *s)) {
      ++it;
    } else {
      it = log_.not_released.erase(it);
      changed = true;
    }
  }
  if (fresh)
    for (const auto& [id, s] : q_->state().entries())
      if (s.status == Status::Running && s.start && !s.queue_id && os_.launcher.at_start_line(id, s))
        log_.not_released.emplace(id, *s.start);
  return changed;
}

// What this tick changed, logged once the state that records it is saved (a crash in
// between: the next run's comparison logs it), then the hooks started (never awaited).
void RunLoop::record_events(Tick& t) {
  if (log_.hooks) log_.hooks->poll();
  q_->take_changes();  // (the events are made from them as they happen)
  std::vector<Event> made = q_->take_events();
  if (log_.journal && t.saved) {
    try {
      for (Event& e : made) log_.unlogged.push_back(std::move(e));
      // Held back and moved on this tick: aborted (no event), or let run and already ended (seen
      // late: the comparison logs its start and its end, rather than the engine's end alone).
      std::unordered_set<std::string> moved_on;
      for (auto it = log_.not_released.begin(); it != log_.not_released.end();) {
        const JobState* s = q_->state().find(it->first);
        if (s && s->status == Status::Running && s->start == it->second) {
          ++it;
        } else {
          moved_on.insert(it->first);
          it = log_.not_released.erase(it);
        }
      }
      if (!moved_on.empty())
        std::erase_if(log_.unlogged, [&](const Event& e) { return moved_on.count(e.id) > 0; });
      std::vector<Event> events = log_.journal->record(q_->state(), t.now, "run", log_.unlogged, log_.not_released);
      log_.unlogged.clear();
      if (told_.gone("event log")) say(t, "the event log is written again");
      if (log_.hooks) log_.hooks->fire(events, log_.journal->count());
    } catch (const StoreError& e) {
      std::string problem = e.err ? fault_words(e.file, e.err) : std::string(e.what());
      if (told_.fresh("event log", problem))
        say(t, fmt::format("{}: the events are kept and logged at the first tick that can append them; jobs "
                               "start and end as before (the state records them; {})",
                               problem, e.what()));
      t.wake_in = std::min(t.wake_in, kFaultRetry);
    }
  }
  // Hooks running or waiting their turn: look again soon, to say their failures and start the rest.
  if (log_.hooks && log_.hooks->busy()) t.wake_in = std::min(t.wake_in, 0.5);
}

TickResult RunLoop::store_failed(Tick& t, const StoreError& e) {
  for (auto& [i, l] : t.launched) os_.launcher.abandon(l);
  sync_ends(t);      // before a SIGKILL cuts a wrapper's own sync short
  signal_groups(t);  // what changes no record (as after a failed save)
  kept_ = false;  // the next tick reads the state again, and loads the engine from it
  if (e.kind == StoreError::Kind::Content) {
    err_(fmt::format("gpuq run: {}", e.what()));
    return {TickResult::Next::Fatal, 0};
  }
  // The lock or state could not be reached (read-only, no space, permissions): try again later.
  std::string problem = e.err ? fault_words(e.file, e.err) : std::string(e.what());
  if (last_save_problem_ != problem)
    say(os_.clock.now(), fmt::format("cannot reach the state ({}): no job starts until it can; running jobs go on, "
                                     "and it is tried again shortly",
                                     e.what()));
  last_save_problem_ = problem;
  return {TickResult::Next::Wait, std::min(t.wake_in, kFaultRetry)};
}

int RunLoop::run() {
  while (true) {
    // On the monotonic clock where there is one: a step of the wall clock during the tick
    // must not stretch or cut the wait.
    auto elapsed = [&] { return os_.clock.monotonic().value_or(os_.clock.now()); };
    double before = elapsed();
    TickResult r = tick();
    if (after_tick_) after_tick_(os_.clock.now());
    // wake_in counts from the tick's start: a tick that started many jobs took a while,
    // and a deadline must not come that much later.
    r.wake_in -= elapsed() - before;
    if (r.next == TickResult::Next::Fatal) return 1;
    if (r.next == TickResult::Next::Finished) {
      if (log_.hooks) {
        log_.hooks->drain(std::min(opt_.hook_timeout + 6, 30.0));  // the last events' hooks, within reason
        if (log_.hooks->busy())
          say(os_.clock.now(), fmt::format("{} hook(s) still running and {} waiting at the end: those waiting get "
                                           "their events from the next `gpuq run` given the same --on-event",
                                           log_.hooks->running_count(), log_.hooks->waiting_count()));
      }
      out_("all jobs finished: " + end_.summary);
      return end_.all_done ? 0 : kExitJobsNotDone;
    }
    Wake w = os_.waker.wait(std::max(0.0, r.wake_in));
    if (w.stop) return stopped(w);
  }
}

}  // namespace gpuq

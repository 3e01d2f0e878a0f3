// The prediction: the engine over a virtual clock, with an estimate launcher. This file
// says only what the predicted world does: when a launched job ends (its estimate, or its
// time limit), when a produced file appears, when GPUs another user holds come free. Every
// decision (deps, blocking, retries, reservations, the pass) is the engine's.
#include "gpuq/core/simulate.h"

#include <map>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <queue>
#include <span>

#include "gpuq/core/limits.h"

namespace gpuq {

namespace {

constexpr double kEps = 1e-9;  // the original's tolerance on times
constexpr double kNever = std::numeric_limits<double>::infinity();
constexpr uint32_t kNone = UINT32_MAX;

template <class T>
using MinHeap = std::priority_queue<T, std::vector<T>, std::greater<T>>;

}  // namespace

struct Prediction::World {
  World(const Plan& plan, const SimOptions& opt, LiveStart* from, bool take);

  struct Packed {  // what the world reads of a job at every event, packed together
    double est_hours;         // how long its first attempt runs: est_hours, cut at its limit
    double produced_at_frac;
    uint32_t producer;        // kNone when no job produces its files
    uint8_t file_dep;         // it has a file: dep
    uint8_t limited;          // it has a time limit (attempt_hours asks the job)
  };

  // Preemption (only where some job may be preempted, Engine::preempts): per job, when its
  // running attempt ends (an entry of `running` for another end is one a preemption cut short),
  // its sim row, and the hours of work earlier preempted attempts did (a resumed job runs the rest).
  struct Resumed {
    double end = 0;
    double done = 0;
    uint32_t row = 0;
  };
  void note_attempt(size_t j, double end);
  void stop_preempted();

  void init();
  static std::vector<Life> lives_at_start(LiveStart* from, bool take);
  static std::vector<LifeKind> start_kinds(const LiveStart* from);
  static std::vector<char> files_at_start(const Plan& plan, const PlanIndex& index, const LiveStart* from);
  void take_live_state();
  void start_queued();
  void tick(bool explain);
  void passes_at_instant(bool ticked);
  bool files_due();
  void started(const Launch& l);
  double attempt_hours(size_t j, long long attempts, bool& times_out) const;
  double next_event();
  void finish_due();
  void explain_stuck();
  void note_blocked();
  Why stuck_why(size_t j) const;
  double file_time(size_t k) const;
  bool waits_for_producer(size_t k) const {
    return pk[k].producer != kNone && pk[k].file_dep && !(from && from->files_present[k]);
  }
  GpuMask unavailable() const {
    GpuMask m = (from && busy_until > t + kEps ? from->busy : 0) | (dying_until > t + kEps ? dying : 0);
    if (from)
      for (const HeldGpus& h : from->held)
        if (h.holds_at(t, kEps)) m |= h.gpus;
    return m;
  }

  const Plan& plan;
  const SimOptions& opt;
  LiveStart* from;
  const size_t n;
  std::vector<LifeKind> kind0;                     // each job's life at the start (from a live state)
  std::shared_ptr<const PlanIndex> index;          // made once, for the world and its engine
  Engine eng;
  std::vector<Packed> pk;
  std::vector<uint32_t> first_produced, produced;  // per job: the jobs whose files it produces (rows)
  struct Now {  // per job, its attempt in the predicted world
    double start = 0;     // the start of its last attempt
    uint8_t started = 0;  // it started (or ran at the start)
    uint8_t at_limit = 0; // its running attempt ends at its time limit
  };
  std::vector<Now> now;
  std::vector<char> blocked_at_start;
  MinHeap<std::pair<double, size_t>> running;      // (end, job): jobs ending together all end at once
  MinHeap<std::pair<double, size_t>> file_wait;    // (when its files appear, job)
  MinHeap<std::pair<double, size_t>> produce;      // (when a job not yet started gets its files, job)
  MinHeap<double> gates;                           // when a shared node lets a job of the plan start (not_before)
  std::vector<Resumed> rs;                         // per job, where jobs may be preempted; else empty
  double busy_until = 0;
  GpuMask dying = 0;          // GPUs of jobs stopped at their limit now: free once their processes are
  double dying_until = 0;     // gone, at the next instant (the tick that stops a job starts none on them)
  double t = 0;
  bool ticked = false;
  Simulation sim;
};

namespace {
// The prediction places jobs on GPUs itself, also for a plan run in a batch queue (run --slurm's
// policy): its launches are runs, never submissions that wait in a queue.
Policy placing(const Policy& o) {
  Policy p = o;
  p.batch = false;
  return p;
}
}  // namespace

Prediction::World::World(const Plan& p, const SimOptions& o, LiveStart* f, bool take)
    : plan(p), opt(o), from(f), n(p.jobs.size()),
      kind0(start_kinds(f)),
      index(std::make_shared<const PlanIndex>(p)),
      eng(p, placing(o), 3600, index, lives_at_start(f, take), files_at_start(p, *index, f)),
      pk(n), now(n), blocked_at_start(n, 0) {
  eng.record_changes(false);
  sim.rows.reserve(n);  // a row per job that runs: no copies as it grows
  first_produced.assign(n + 1, 0);
  for (size_t j = 0; j < n; ++j) {
    const Job& job = plan.jobs[j];
    pk[j].est_hours = run_hours(job, opt.time_limit_factor);  // est_hours, cut at its time limit
    pk[j].limited = limit_hours(job, opt.time_limit_factor).has_value();
    pk[j].produced_at_frac = job.produced_at_frac;
    pk[j].producer = job.produced_by ? static_cast<uint32_t>(*job.produced_by) : kNone;
    pk[j].file_dep = index->file_dep[j];
    if (job.produced_by) ++first_produced[*job.produced_by + 1];
  }
  for (size_t j = 0; j < n; ++j) first_produced[j + 1] += first_produced[j];
  if (eng.preempts()) {
    rs.resize(n);
    if (f)
      for (size_t j = 0; j < n && j < f->done_hours.size(); ++j) rs[j].done = f->done_hours[j];
  }
  produced.resize(first_produced[n]);
  std::vector<uint32_t> at(first_produced.begin(), first_produced.end() - 1);
  for (size_t j = 0; j < n; ++j)
    if (pk[j].producer != kNone) produced[at[pk[j].producer]++] = static_cast<uint32_t>(j);
  init();
}

// How long an attempt of job j runs, `attempts` retries in: its estimate, cut at its limit
// (`times_out`). A job retried on timeout (retry_on_timeout) is taken to resume from its
// checkpoint: each attempt runs what is left of its estimate, up to its limit.
double Prediction::World::attempt_hours(size_t j, long long attempts, bool& times_out) const {
  times_out = false;
  double done = rs.empty() ? 0 : rs[j].done;  // a preempted job resumes: what is left of its estimate
  if (!pk[j].limited) return std::max(0.0, pk[j].est_hours - done);  // most jobs: their estimate
  const Job& job = plan.jobs[j];
  double limit = *limit_hours(job, opt.time_limit_factor);
  double left = std::max(0.0, job.est_hours - done);
  if (job.retry_on_timeout) left = std::max(0.0, job.est_hours - static_cast<double>(attempts) * limit);
  times_out = left > limit;
  return times_out ? limit : left;
}

// When job k's files appear: when its producer reaches produced_at_frac of its run. From a
// live state a file missing now appears no sooner than kSoon, and one its running producer
// should already have written, when the producer ends.
double Prediction::World::file_time(size_t k) const {
  uint32_t src = pk[k].producer;
  double at = now[src].start + pk[k].produced_at_frac * pk[src].est_hours;
  if (!from) return at;
  if (at <= 0 && now[src].started && now[src].start < 0) at = now[src].start + pk[src].est_hours;
  return std::max(at, kSoon);
}

// The engine's start: every job waiting, or the live state's lives (moved from it with `take`).
std::vector<Life> Prediction::World::lives_at_start(LiveStart* from, bool take) {
  if (!from) return {};
  return take ? std::move(from->lives) : from->lives;
}

std::vector<LifeKind> Prediction::World::start_kinds(const LiveStart* from) {
  std::vector<LifeKind> kinds;
  if (!from) return kinds;
  kinds.reserve(from->lives.size());
  for (const Life& l : from->lives) kinds.push_back(kind_of(l));
  return kinds;
}

// Files: present from the start unless a job of the plan produces them (and, from a live
// state, they are missing now).
std::vector<char> Prediction::World::files_at_start(const Plan& plan, const PlanIndex& index, const LiveStart* from) {
  std::vector<char> files(plan.jobs.size(), 1);
  for (size_t j = 0; j < plan.jobs.size(); ++j) {
    if (!index.file_dep[j]) continue;  // (the index's byte, not the job's deps: a cache miss less a job)
    files[j] = from ? from->files_present[j] : !plan.jobs[j].produced_by;
  }
  return files;
}

void Prediction::World::init() {
  if (!from) return;
  for (size_t j = 0; j < n; ++j) blocked_at_start[j] = kind0[j] == LifeKind::Blocked;
  take_live_state();
}

// The live state: running jobs end at their estimate (no sooner than kSoon); queued ones start
// now; the files running producers will write appear on schedule; GPUs held by others free up
// at `busy_hours`.
void Prediction::World::take_live_state() {
  for (size_t j = 0; j < n; ++j) {
    const Running* r = std::get_if<Running>(&eng.life(j));
    if (!r) continue;
    now[j].start = r->start;
    now[j].started = 1;
    bool limit = false;
    double end = std::max(r->start + attempt_hours(j, r->attempts, limit), kSoon);
    if (j < from->progress_end.size() && !std::isnan(from->progress_end[j])) {
      // Its progress says when it ends; its time limit still stops it.
      double by_progress = std::max(from->progress_end[j], kSoon);
      std::optional<double> lim = limit_hours(plan.jobs[j], opt.time_limit_factor);
      limit = lim && by_progress > r->start + *lim;
      end = limit ? std::max(r->start + *lim, kSoon) : by_progress;
    }
    if (r->preempt && !rs.empty()) {  // stopping on its preemption signal: gone at the next look
      end = kSoon;
      limit = false;
    }
    now[j].at_limit = limit;
    running.push({end, j});
    note_attempt(j, end);
    sim.rows.push_back({j, r->start, end, r->gpus, r->node});
  }
  for (size_t j = 0; j < n; ++j) {
    if (!now[j].started) continue;
    for (uint32_t k = first_produced[j]; k < first_produced[j + 1]; ++k) {
      size_t d = produced[k];
      if (waits_for_producer(d)) file_wait.push({file_time(d), d});
      if (kind_of(eng.life(d)) == LifeKind::Waiting) produce.push({file_time(d), d});
    }
  }
  // A shared node starts these ready jobs later: they wait as for a file that appears then.
  for (const auto& [j, at] : from->not_before)
    if (j < n && at > kEps && !pk[j].file_dep && kind_of(eng.life(j)) == LifeKind::Waiting) {
      eng.apply(ev::Files{j, false});
      file_wait.push({at, j});
      gates.push(at);
    }
  if (from->busy) busy_until = from->busy_hours;
  if (from->ending) {  // as the GPUs of a job the prediction stops at its limit
    dying = from->ending;
    dying_until = kSoon;
  }
}

// Jobs waiting in a batch queue: the prediction takes them to start now (after the first
// tick, which sees them queued, as `run`'s next tick does).
void Prediction::World::start_queued() {
  for (size_t j = 0; j < n; ++j) {
    if (kind_of(eng.life(j)) != LifeKind::Queued) continue;
    eng.apply(ev::QueueStarted{j, t});
    const Running& r = std::get<Running>(eng.life(j));
    now[j].start = t;
    now[j].started = 1;
    bool limit = false;
    double end = std::max(t + attempt_hours(j, r.attempts, limit), kSoon);
    now[j].at_limit = limit;
    running.push({end, j});
    note_attempt(j, end);
    sim.rows.push_back({j, t, end, r.gpus, r.node});
  }
}

// A job the engine launched: its attempt ends at its estimate (or its limit), and the files
// it produces appear as it reaches their fraction of its run.
void Prediction::World::started(const Launch& l) {
  size_t j = l.job;
  const Running& r = std::get<Running>(eng.life(j));
  now[j].start = t;
  now[j].started = 1;
  // From a live state a job takes some time, however short its estimate: one started now
  // does not end before the next tick.
  bool limit = false;
  double hours = attempt_hours(j, r.attempts, limit);
  now[j].at_limit = limit;
  double end = t + (from ? std::max(hours, kSoon) : hours);
  running.push({end, j});
  note_attempt(j, end);
  for (uint32_t k = first_produced[j]; k < first_produced[j + 1]; ++k) {
    size_t d = produced[k];
    if (waits_for_producer(d)) file_wait.push({file_time(d), d});
    if (kind_of(eng.life(d)) == LifeKind::Waiting) produce.push({file_time(d), d});
  }
  sim.rows.push_back({j, t, end, r.gpus, r.node});
}

void Prediction::World::tick(bool explain) {
  ev::Tick tk;
  tk.now = t;
  tk.unavailable = unavailable();
  // What else uses the GPUs' memory where jobs pack (LiveStart::mem_other), as run's next tick
  // counts it: at the first instant always (another's memory on a packed job's GPU makes no GPU
  // busy, and status predicted a job to start there that run would not start), and after it
  // while the reading's holders are predicted to hold their GPUs.
  if (from && (busy_until > t + kEps || t < kSoon) && !(dying_until > t + kEps)) tk.mem_other = from->mem_other;
  tk.others_running = from && t < kSoon && from->others_running;  // now, as the next tick sees it
  tk.explain = explain;
  if (from)  // the user's other runs' jobs count against their cap while they hold GPUs
    for (const HeldGpus& h : from->held)
      if (h.yours && h.holds_at(t, kEps)) tk.held_elsewhere += count(h.gpus);
  eng.apply(tk);
  const PassResult& pass = eng.effects().pass;
  if (pass.stall_broken)
    sim.notes.push_back(fmt::format(
        "at {:.2f}h nothing could start: {} waits for GPUs that reservations close to it, and the jobs of "
        "those reservations are longer than --backfill-max-hours {}; started them without the limit",
        t, plan.jobs[*pass.waiting_head].id, opt.backfill_max_hours));
  // The launches are read before the next event clears them.
  for (const Launch& l : eng.effects().launches) started(l);
  if (!eng.effects().preempted.empty()) stop_preempted();
}

// The row of job j's attempt just started, and when it ends (where jobs may be preempted; when a
// preemptible job may give way is the engine's next_preemptible).
void Prediction::World::note_attempt(size_t j, double end) {
  if (rs.empty()) return;
  rs[j].end = end;
  rs[j].row = static_cast<uint32_t>(sim.rows.size());
}

// The jobs the tick preempted give way at once (a checkpointing job exits on its signal): each
// attempt ends now, not done, its work counted for its resume; then the job they gave way to
// starts at this instant, on their GPUs (another tick).
void Prediction::World::stop_preempted() {
  std::vector<size_t> victims;
  for (const Preemption& p : eng.effects().preempted) {
    victims.push_back(p.job);
    if (p.by) sim.preemptions.push_back({p.job, *p.by, t, t - now[p.job].start});
  }
  for (size_t v : victims) {
    rs[v].done += t - now[v].start;
    rs[v].end = -1;  // its entry in `running` is void
    sim.rows[rs[v].row].end = t;
    eng.apply(ev::Exited{v, t, 128 + 15});
  }
  tick(false);
}

// Files that appear by now: their jobs may be ready. True when one did.
bool Prediction::World::files_due() {
  bool any = false;
  while (!file_wait.empty() && !(file_wait.top().first > t + kEps)) {
    eng.apply(ev::Files{file_wait.top().second, true});
    file_wait.pop();
    any = true;
  }
  return any;
}

// Passes at this instant until one starts nothing. After a pass that started jobs, another
// with no file newly there would start none: a job it passed over did not fit with more GPUs
// free, or was held by the backfill limit behind a head that still waits (and nothing ends,
// so no reservation opens).
// `ticked`: the instant's first pass was made already (Prediction::first_tick).
void Prediction::World::passes_at_instant(bool ticked) {
  if (ticked && eng.effects().launches.empty()) return;
  for (bool first = !ticked;; first = false) {
    bool newly = files_due();
    if (!first && !newly) break;
    tick(false);
    if (eng.effects().launches.empty()) break;
  }
}

// The time of the next event, or kNever when nothing is left to happen. Running jobs end,
// files appear (only while something runs, as the original), retries fall due, GPUs busy
// now become free.
double Prediction::World::next_event() {
  double nxt = running.empty() ? kNever : running.top().first;
  if (!running.empty()) {
    while (!produce.empty() &&
           (kind_of(eng.life(produce.top().second)) != LifeKind::Waiting || produce.top().first <= t + kEps))
      produce.pop();
    if (!produce.empty() && produce.top().first < nxt) nxt = produce.top().first;
    if (!(nxt > t + kEps)) nxt = running.top().first;
  }
  if (std::optional<double> r = eng.next_retry()) nxt = std::min(nxt, std::max(*r, t));
  if (from && busy_until > t + kEps) nxt = std::min(nxt, busy_until);
  if (from)
    for (const HeldGpus& h : from->held) {
      if (h.from > t + kEps) nxt = std::min(nxt, h.from);
      else if (h.until > t + kEps) nxt = std::min(nxt, h.until);
    }
  while (!gates.empty() && !(gates.top() > t + kEps)) gates.pop();
  if (!gates.empty()) nxt = std::min(nxt, gates.top());
  // A waiting job may preempt a running one once it has run its least: the pass looks again then.
  if (std::optional<double> p = eng.next_preemptible(t)) nxt = std::min(nxt, *p);
  if (dying && dying_until > t + kEps) nxt = std::min(nxt, dying_until);
  return nxt;
}

// Attempts ending now: at their estimate (an exit 0), or at their limit (a timeout).
void Prediction::World::finish_due() {
  while (!running.empty() && running.top().first <= t + kEps) {
    auto [end, j] = running.top();
    running.pop();
    if (!rs.empty() && rs[j].end != end) continue;  // an attempt a preemption cut short
    if (!rs.empty()) {
      const Running* r = std::get_if<Running>(&eng.life(j));
      if (r && r->preempt) {  // stopping when the prediction began: it gives way, its work counted
        rs[j].done += end - r->start;
        eng.apply(ev::Exited{j, end, 128 + 15});
        continue;
      }
    }
    if (now[j].at_limit) {
      const Running& r = std::get<Running>(eng.life(j));
      if (r.node == 0) {
        if (!(dying_until > t + kEps)) dying = 0;
        dying |= mask_of(r.gpus);
        dying_until = t + kSoon;
      }
      eng.apply(ev::LimitReached{j, end});
    }
    else
      eng.apply(ev::Exited{j, end, 0});
  }
}

Why Prediction::World::stuck_why(size_t j) const {
  Why w = eng.why(j);
  if (!w.files || !pk[j].file_dep) return w;
  uint32_t src = pk[j].producer;
  if (src == kNone)
    w.source = Why::Source::NoProducer;
  else if (from && !from->files_present[j] && kind0[src] != LifeKind::Waiting && kind0[src] != LifeKind::Running &&
           kind0[src] != LifeKind::Queued)
    w.source = Why::Source::ProducerGone;
  else
    w.source = Why::Source::ProducerNever;
  return w;
}

void Prediction::World::explain_stuck() {
  sim.stuck_at = t;
  tick(true);
  for (size_t j = 0; j < n; ++j) {
    const Life& l = eng.life(j);
    if (kind_of(l) == LifeKind::Waiting) {
      sim.stuck.push_back({j, stuck_why(j)});
    } else if (const Ended* e = std::get_if<Ended>(&l); e && !finished(l, opt.retries_of(plan.jobs[j])) && !eng.retry_at(j)) {
      sim.stuck.push_back({j, eng.why(j)});  // failed, and no automatic retry will come
    }
  }
}

// Jobs the prediction blocked: a plain dep of theirs (or of their deps) failed for good in it
// (timed out at its last attempt). Why::Blocked with the failure at the root in `jobs`.
void Prediction::World::note_blocked() {
  for (size_t j = 0; j < n; ++j) {
    if (kind_of(eng.life(j)) != LifeKind::Blocked || blocked_at_start[j]) continue;
    size_t at = j;
    for (int hops = 0; hops < 1 << 20 && kind_of(eng.life(at)) == LifeKind::Blocked; ++hops) {
      size_t next = at;
      for (const Dep& d : plan.jobs[at].deps)
        if (d.kind == Dep::Kind::Done && blocks_dependents(eng.life(d.job))) {
          next = d.job;
          break;
        }
      if (next == at) break;
      at = next;
    }
    const Ended* root = std::get_if<Ended>(&eng.life(at));
    if (!root || !now[at].started) continue;
    Why w;
    w.kind = Why::Kind::Blocked;
    w.jobs = {at};
    sim.blocked.push_back({j, std::move(w)});
  }
}

Prediction::Prediction(const Plan& plan, const SimOptions& opt, LiveStart* from, bool take)
    : w_(std::make_unique<World>(plan, opt, from, take)) {}

Prediction::~Prediction() = default;

void Prediction::first_tick(bool explain) {
  w_->ticked = true;
  w_->files_due();
  w_->tick(explain);
}

const Engine& Prediction::engine() const { return w_->eng; }

Simulation Prediction::finish() {
  World& w = *w_;
  w.passes_at_instant(w.ticked);  // (the rest of) the first instant's passes
  w.ticked = true;
  if (w.from) w.start_queued();
  while (true) {
    double nxt = w.next_event();
    if (nxt == kNever) {
      if (w.eng.waiting()) w.explain_stuck();
      break;
    }
    w.t = nxt;
    w.finish_due();
    w.passes_at_instant(false);
  }
  w.note_blocked();
  return std::move(w.sim);
}

Simulation simulate(const Plan& plan, const SimOptions& opt, LiveStart* from) {
  return Prediction(plan, opt, from).finish();
}

bool only_never_here(const Plan& plan, const SimOptions& opt, const std::vector<Stuck>& stuck) {
  std::vector<char> never(plan.jobs.size(), 0);
  bool any = false;
  for (const Stuck& s : stuck) {
    const Job& j = plan.jobs[s.job];
    if (opt.host_too_big(j) || opt.too_big(j) || opt.over_cap(j)) {
      never[s.job] = 1;
      any = true;
    }
  }
  if (!any) return false;
  // The jobs waiting on them, through any chain of deps (each round marks at least one more).
  for (bool more = true; more;) {
    more = false;
    for (const Stuck& s : stuck)
      if (!never[s.job])
        for (const Dep& d : plan.jobs[s.job].deps)
          if (d.kind == Dep::Kind::Done && never[d.job] && !never[s.job]) {
            never[s.job] = 1;
            more = true;
          }
  }
  return std::all_of(stuck.begin(), stuck.end(), [&](const Stuck& s) { return never[s.job] != 0; });
}

bool packs(const Plan& plan, const Policy& p) {
  if (!p.pack || p.batch) return false;
  return std::any_of(plan.jobs.begin(), plan.jobs.end(), [](const Job& j) { return j.gpu_mem_gib && j.gpus > 0; });
}

double busy_gpu_hours(const Plan& plan, const Simulation& sim, const Policy& p) {
  double busy = 0;
  if (!packs(plan, p)) {  // no GPU holds two jobs at once: the rows' GPU-hours (the original's sum)
    for (const SimRow& r : sim.rows) busy += static_cast<double>(r.gpus.size()) * (r.end - r.start);
    return busy;
  }
  // Per node and GPU, the union of its jobs' times.
  std::map<std::pair<int, int>, std::vector<std::pair<double, double>>> spans;
  for (const SimRow& r : sim.rows)
    for (int g : r.gpus) spans[{r.node, g}].push_back({r.start, r.end});
  for (auto& [gpu, v] : spans) {
    std::sort(v.begin(), v.end());
    double lo = v[0].first, hi = v[0].second;
    for (auto [a, b] : v) {
      if (a > hi) {
        busy += hi - lo;
        lo = a;
      }
      hi = std::max(hi, b);
    }
    busy += hi - lo;
  }
  return busy;
}

}  // namespace gpuq

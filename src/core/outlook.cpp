// The live queue seen from outside: the engine loaded with the live state takes the next
// tick (why each job waits), and the prediction carries it on (when each job starts).
#include "gpuq/core/outlook.h"
#include "gpuq/core/gpu_use.h"
#include "gpuq/core/progress.h"
#include "gpuq/core/watchdog.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <future>
#include <system_error>
#include <limits>
#include <unordered_map>

namespace gpuq {

namespace {

// File checks that look at each path once: the start, the reasons and the prediction all ask.
// On a file system (FileChecks::nested) a missing folder answers for every path under it: a
// folder with two missing paths under it is looked at, and when it is missing too, the paths
// under it are not (status of bench/run.sh's 100,000 jobs, whose 11,500 waiting file: deps lie
// in an output folder not made yet: 91 stat calls in all instead of 11,516, and 5 % less time
// against the same binary without it). At most one look more per folder.
class OnceFiles : public FileChecks {
 public:
  explicit OnceFiles(const FileChecks& files) : files_(files), nested_(files.nested()) {}
  std::string expand(const std::string& written) const override { return files_.expand(written); }
  bool exists(const std::string& path) const override {
    auto [it, fresh] = seen_.emplace(path, false);
    if (!fresh) return it->second;
    if (nested_ && under_missing(path)) return false;
    it->second = files_.exists(path);
    if (!it->second && nested_) missed(path);
    return it->second;
  }

 private:
  // The folders of `path`, nearest last ("a/b/c": "a", "a/b"; "/a/b": "/a").
  template <typename F>
  static void folders(const std::string& path, F&& each) {
    for (size_t k = path.find('/', 1); k != std::string::npos && k + 1 < path.size(); k = path.find('/', k + 1))
      if (!each(std::string_view(path).substr(0, k))) return;
  }
  bool under_missing(const std::string& path) const {
    bool missing = false;
    folders(path, [&](std::string_view d) {
      auto f = seen_.find(std::string(d));
      missing = f != seen_.end() && !f->second;
      return !missing;
    });
    return missing;
  }
  // A path is missing: each folder of it that now has two missing paths under it is looked at,
  // from the top down, until one is missing (those under it are then missing too).
  void missed(const std::string& path) const {
    folders(path, [&](std::string_view d) {
      std::string dir(d);
      if (++misses_[dir] < 2) return true;
      auto [it, fresh] = seen_.emplace(dir, false);
      if (fresh) it->second = files_.exists(dir);
      return it->second;
    });
  }

  const FileChecks& files_;
  bool nested_;
  mutable std::unordered_map<std::string, bool> seen_;
  mutable std::unordered_map<std::string, uint32_t> misses_;
};

// A life's times from unix seconds to hours from `now` (a running job's start no later than now).
Life in_hours(Life l, double now) {
  auto h = [now](double t) { return (t - now) / 3600; };
  if (Running* r = std::get_if<Running>(&l)) {
    r->start = std::min(0.0, h(r->start));
    if (r->preempt) r->preempt = std::min(0.0, h(*r->preempt));
  }
  if (Ended* e = std::get_if<Ended>(&l)) {
    if (e->end) e->end = h(*e->end);
    if (e->start) e->start = h(*e->start);
  }
  return l;
}

// The views' fields that come from the state alone.
std::vector<JobView> views_of(const Plan& plan, const State& state, const Policy& p, double now) {
  std::vector<JobView> views(plan.jobs.size());
  for (size_t i = 0; i < plan.jobs.size(); ++i) {
    const JobState* s = state.of(plan, i);
    JobView& v = views[i];
    v.job = i;
    Status st = s ? s->status : Status::Pending;
    v.status = status_name(st);
    if (s) {
      v.gpus = s->gpus.value_or(std::vector<int>{});
      v.attempts = s->attempts_or0();
      v.exit = s->exit;
      if (auto o = outcome_of(*s)) v.outcome = outcome_name(*o);
      v.start = s->start;
      v.end = s->end;
      v.queued = kind_of(life_of(s, s->queue_id.has_value(), now)) == LifeKind::Queued;
      if (s->start) v.elapsed = (s->end && *s->end != 0 ? *s->end : now) - *s->start;
    }
    v.overdue = st == Status::Running && v.elapsed / 3600 > plan.jobs[i].est_hours;
    if (st == Status::Running && s) {
      v.progress = s->progress;
      v.finish_source = finish_from_entry(plan.jobs[i], *s, now) ? FinishSource::Progress : FinishSource::Estimate;
    }
    if (s) v.hung = check_quiet(plan.jobs[i], *s, p, now).hung;
    if (s && st == Status::Running)
      if (IdleCheck c = check_idle(plan.jobs[i], *s, p, now); c.idle) v.idle_for = c.idle_for;
  }
  return views;
}

}  // namespace

LiveStart live_start(const Plan& plan, const State& state, const Policy& p, double now, GpuMask free,
                     const FileChecks& files, std::vector<double> mem_other,
                     const OnNode& node) {
  const size_t n = plan.jobs.size();
  LiveStart st;
  st.lives.reserve(n);
  st.files_present.assign(n, 1);
  GpuMask plan_running = 0;
  size_t running_jobs = 0;
  for (size_t i = 0; i < n; ++i) {
    const JobState* s = state.of(plan, i);
    Life l = in_hours(life_of(s, s && s->queue_id, now), now);
    LifeKind k = kind_of(l);
    if (const Running* r = std::get_if<Running>(&l)) {
      plan_running |= mask_of(r->gpus);
      if (s && s->progress)
        if (std::optional<ProgressFinish> f = finish_from_entry(plan.jobs[i], *s, now)) {
          if (st.progress_end.empty()) st.progress_end.assign(n, std::numeric_limits<double>::quiet_NaN());
          st.progress_end[i] = (f->end - now) / 3600;
        }
    }
    running_jobs += k == LifeKind::Running || k == LifeKind::Queued;
    // A job preempted before runs what is left of its estimate: the work of its preempted
    // attempts since its last attempt that ended otherwise.
    if (s && s->preemptions && *s->preemptions > 0) {
      double done = 0;
      for (const EarlierAttempt& a : earlier_attempts(*s)) done = a.preempted ? done + (a.end - a.start) / 3600 : 0;
      if (done > 0) {
        if (st.done_hours.empty()) st.done_hours.assign(n, 0);
        st.done_hours[i] = done;
      }
    }
    // Files matter only to jobs that are yet to start (a done job's outputs may be long gone).
    if (k != LifeKind::Running && k != LifeKind::Queued && !is_done(l) && plan.jobs[i].has_file_dep())
      st.files_present[i] = files_present(plan.jobs[i], files);
    st.lives.push_back(std::move(l));
  }
  size_t running_entries = 0;
  for (const auto& [id, s] : state.entries()) running_entries += s.status == Status::Running;
  st.others_running = running_entries > running_jobs;
  st.ending = mask_of(p.node_gpus) & ~free & ~plan_running & ending_gpus(state);
  st.busy = mask_of(p.node_gpus) & ~free & ~plan_running & ~st.ending;
  st.busy_hours = std::max(kSoon, p.poll / 3600);  // busy until run's next look at them, at the latest
  st.mem_other = std::move(mem_other);
  GpuMask held_any = 0;
  for (const HeldGpus& h : node.held) {
    double from = h.from > now ? (h.from - now) / 3600 : 0;
    st.held.push_back({h.gpus, std::max((h.until - now) / 3600, std::max(from, kSoon)), h.yours, from});
    if (from == 0) held_any |= h.gpus;
  }
  for (const auto& [j, at] : node.not_before)
    if (at > now) st.not_before.push_back({j, (at - now) / 3600});
  st.busy &= ~held_any;  // busy until their job ends, not only until run's next look
  return st;
}

namespace {

// The prediction onto the jobs' views: each job's predicted start (its first attempt's) and end (its
// last one's), the plan's end, the jobs predicted never to start. Paused: only the running jobs'
// rows are kept; the others start after `gpuq resume`, at a time no one knows.
void place_predictions(Outlook& o, const Plan& plan, const State& state, const std::vector<uint8_t>& kind0) {
  const double now = o.now;
  if (o.paused) {
    std::vector<SimRow> running;
    for (SimRow& r : o.sim.rows)
      if (static_cast<LifeKind>(kind0[r.job]) == LifeKind::Running ||
          static_cast<LifeKind>(kind0[r.job]) == LifeKind::Queued)
        running.push_back(std::move(r));
      else
        o.jobs[r.job].after_resume = true;
    o.sim.rows = std::move(running);
  }
  double last_end = 0;
  for (const SimRow& r : o.sim.rows) {
    last_end = std::max(last_end, r.end);
    JobView& v = o.jobs[r.job];
    const JobState* s = state.of(plan, r.job);
    double start_at = s && s->status == Status::Running && s->start ? *s->start : now + r.start * 3600;
    if (!v.predicted_start || start_at < *v.predicted_start) v.predicted_start = start_at;
    v.predicted_finish = std::max(v.predicted_finish.value_or(now + r.end * 3600), now + r.end * 3600);
  }
  bool after_resume = std::any_of(o.jobs.begin(), o.jobs.end(), [](const JobView& v) { return v.after_resume; });
  if (!o.sim.rows.empty() && !after_resume) o.finish = now + last_end * 3600;
  for (size_t k = 0; k < o.sim.stuck.size(); ++k) {
    o.never.push_back(o.sim.stuck[k].job);
    o.jobs[o.sim.stuck[k].job].fate_at = static_cast<int32_t>(k);
  }
  for (size_t k = 0; k < o.sim.blocked.size(); ++k) {
    o.never.push_back(o.sim.blocked[k].job);
    o.jobs[o.sim.blocked[k].job].fate_at = static_cast<int32_t>(k);
    o.jobs[o.sim.blocked[k].job].doomed = true;
  }
}

// Why each job waits at the next tick, for all jobs or the first `explain_first` in predicted
// order (the rows `status` shows), with the files its file: deps miss now.
void explain_waits(Outlook& o, const Plan& plan, const WhySnapshot& tick, const PlanIndex& index, OnceFiles& files,
                   std::optional<size_t> explain_first) {
  std::vector<size_t> explain;
  if (explain_first) {
    o.order = predicted_order(o, *explain_first);
    o.order_sorted = std::min(o.order.size(), *explain_first);
    explain.assign(o.order.begin(), o.order.begin() + static_cast<std::ptrdiff_t>(o.order_sorted));
  } else {
    for (size_t i = 0; i < plan.jobs.size(); ++i) explain.push_back(i);
  }
  o.waits.reserve(explain.size());
  o.missing_files.reserve(explain.size());
  for (size_t i : explain) {
    JobView& v = o.jobs[i];
    v.wait_at = static_cast<int32_t>(o.waits.size());
    o.waits.push_back(tick.why(plan, index, i));
    std::vector<std::string>& missing = o.missing_files.emplace_back();
    if (o.waits.back().files)
      for (const Dep& d : plan.jobs[i].deps)
        if (d.kind == Dep::Kind::File) {
          std::string path = files.expand(d.target);
          if (!files.exists(path)) missing.push_back(path);
        }
  }
}

}  // namespace

Outlook make_outlook(const Plan& plan, const State& state, const Policy& p, double now, GpuMask free,
                     const FileChecks& files_uncached, std::optional<size_t> explain_first,
                     const std::map<int, std::string>& others, std::vector<double> mem_other,
                     const OnNode& node) {
  Outlook o;
  o.now = now;
  o.policy = p;
  o.others = others;
  const size_t n = plan.jobs.size();
  OnceFiles files(files_uncached);
  // The views read the state alone: they are made on another core while this one predicts
  // (status of 100,000 jobs: 9 ms less; bench/run.sh). The state binds to the plan first (of()
  // binds on its first call, and the two threads must not both do it).
  if (n) (void)state.of(plan, 0);
  std::future<std::vector<JobView>> views;
  auto make_views = [&plan, &state, &p, now] { return views_of(plan, state, p, now); };
  try {
    views = std::async(std::launch::async, make_views);
  } catch (const std::system_error&) {
    views = std::async(std::launch::deferred, make_views);
  }
  LiveStart start = live_start(plan, state, p, now, free, files, std::move(mem_other), node);
  // The engine takes the next tick with the settings of the run; the prediction carries it on
  // as if resumed now (paused, the jobs it starts wait for `gpuq resume`, at a time no one knows).
  Policy resumed = p;
  resumed.paused = false;
  std::vector<uint8_t> kind0(n);
  for (size_t i = 0; i < n; ++i) kind0[i] = static_cast<uint8_t>(kind_of(start.lives[i]));
  WhySnapshot tick;  // what the reasons read of the next tick
  if (p.paused) {
    Prediction paused(plan, p, &start);
    paused.first_tick(true);
    tick = paused.engine().snapshot();
  }
  Prediction pred(plan, resumed, &start, true);
  pred.first_tick(true);
  if (!p.paused) tick = pred.engine().snapshot();
  o.sim = pred.finish();
  o.jobs = views.get();
  o.paused = p.paused;
  place_predictions(o, plan, state, kind0);
  explain_waits(o, plan, tick, pred.engine().index(), files, explain_first);
  return o;
}

std::vector<size_t> predicted_order(const Outlook& o, size_t first) {
  // By predicted start, ties in plan order; (start, job) pairs are unique, so sorting them is
  // the stable sort by start.
  std::vector<std::pair<double, size_t>> keyed;
  for (const JobView& v : o.jobs)
    if (v.status != "done") keyed.emplace_back(v.predicted_start.value_or(1e300), v.job);
  if (first < keyed.size())
    std::partial_sort(keyed.begin(), keyed.begin() + static_cast<std::ptrdiff_t>(first), keyed.end());
  else
    std::sort(keyed.begin(), keyed.end());
  std::vector<size_t> open(keyed.size());
  for (size_t k = 0; k < keyed.size(); ++k) open[k] = keyed[k].second;
  return open;
}

}  // namespace gpuq

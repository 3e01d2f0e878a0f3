#include "gpuq/simulate.h"

#include <fmt/format.h>

#include <algorithm>
#include <queue>
#include <span>

#include "gpuq/schedule.h"

namespace gpuq {

namespace {

constexpr double kEps = 1e-9;  // the original's tolerance on times

template <class T>
using MinHeap = std::priority_queue<T, std::vector<T>, std::greater<T>>;

std::string job_list(const Plan& plan, const std::vector<size_t>& jobs) {
  std::string s;
  for (size_t j : jobs) s += (s.empty() ? "" : ", ") + plan.jobs[j].id;
  return s;
}

}  // namespace

void SimModel::JobLists::fill() {
  for (size_t j = 2; j < first_.size(); ++j) first_[j] += first_[j - 1];
  items_.resize(first_.back());
}

SimModel::SimModel(const Plan& plan, const SimOptions& opt)
    : job_(plan.jobs.size()),
      unmet_(plan.jobs.size(), 0),
      dependents_(plan.jobs.size()),
      after_dependents_(plan.jobs.size()),  // through after: deps only
      produced_for_(plan.jobs.size()),
      ready_(plan, opt.backfill_max_hours) {
  const size_t n = plan.jobs.size();
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t j = 0; j < n; ++j) {
      const Job& job = plan.jobs[j];
      for (const Dep& d : job.deps) {
        if (d.kind == Dep::Kind::File) {
          job_[j].file_dep = 1;
          continue;
        }
        if (pass == 0) {
          ++unmet_[j];
          dependents_.count(d.job);
          if (d.kind == Dep::Kind::After) after_dependents_.count(d.job);
        } else {
          dependents_.add(d.job, j);
          if (d.kind == Dep::Kind::After) after_dependents_.add(d.job, j);
        }
      }
      if (const auto& p = job.produced_by) pass == 0 ? produced_for_.count(*p) : produced_for_.add(*p, j);
      if (pass == 0) {
        job_[j].est_hours = job.est_hours;
        job_[j].produced_at_frac = job.produced_at_frac;
        job_[j].producer = job.produced_by ? static_cast<uint32_t>(*job.produced_by) : kNone;
      }
    }
    if (pass == 0) {
      dependents_.fill();
      produced_for_.fill();
      after_dependents_.fill();
    }
  }
}

Simulation simulate(const Plan& plan, const SimOptions& opt, const SimStart* from) {
  return simulate(plan, opt, SimModel(plan, opt), from);
}

Simulation simulate(const Plan& plan, const SimOptions& opt, SimModel model, const SimStart* from) {
  const size_t n = plan.jobs.size();
  Simulation sim;
  sim.rows.reserve(n);  // a row per job that runs: no copies as it grows
  GpuMask node = mask_of(opt.node_gpus);

  std::vector<double> start(n, 0), end(n, 0);
  std::vector<char> started(n, 0), done(n, 0);
  const auto& pk = model.job_;
  constexpr uint32_t kNone = SimModel::kNone;
  std::vector<uint32_t>& unmet = model.unmet_;
  const auto& dependents = model.dependents_;
  const auto& after_dependents = model.after_dependents_;
  const auto& produced_for = model.produced_for_;
  const bool reservations = !plan.reservations.empty();
  std::vector<size_t> res_unfinished(plan.reservations.size());
  for (size_t r = 0; r < plan.reservations.size(); ++r) res_unfinished[r] = plan.reservations[r].jobs.size();

  // A job whose job deps are done is ready once its file: deps exist: at once when no job of
  // the plan produces them, else when its producer reaches produced_at_frac of its run.
  auto produced_at = [&](size_t j) {
    uint32_t src = pk[j].producer;
    return start[src] + pk[j].produced_at_frac * pk[src].est_hours;
  };
  using Kind = SimStart::Kind;
  auto kind = [&](size_t j) { return from ? from->kind[j] : Kind::Pending; };
  // Live: a missing file appears only through a producer that has yet to reach it.
  auto file_never = [&](size_t j) {
    if (!from || from->files_present[j] || !pk[j].file_dep) return false;
    uint32_t src = pk[j].producer;
    return src == kNone || (kind(src) != Kind::Pending && kind(src) != Kind::Running);
  };
  // Its files wait for a producer to reach them (else they exist, or never will).
  auto waits_for_producer = [&](size_t j) {
    return pk[j].producer != kNone && pk[j].file_dep && !(from && from->files_present[j]);
  };
  auto files_ok = [&](size_t j, double t) {
    if (!waits_for_producer(j)) return !file_never(j);
    return !file_never(j) && started[pk[j].producer] && !(produced_at(j) > t + kEps);
  };
  ReadySet& ready = model.ready_;
  MinHeap<std::pair<double, size_t>> file_wait;        // (when its files appear, job)
  std::vector<char> waits_producer(n, 0);              // jobs waiting for their producer to start
  auto deps_done = [&](size_t j) {
    if (file_never(j)) return;
    if (!waits_for_producer(j))
      ready.insert(j);
    else if (started[pk[j].producer])
      file_wait.push({produced_at(j), j});
    else
      waits_producer[j] = 1;
  };
  std::vector<double> gpu_free_at(kMaxGpuId + 1, 0.0);
  MinHeap<std::pair<double, size_t>> running;  // (end, job): jobs ending together all finish at once
  MinHeap<std::pair<double, size_t>> produce;       // (time a pending job's file appears, job)
  size_t pending = n;

  if (from) {
    // The live state: jobs already done, finished or held are out; running ones hold their GPUs.
    for (size_t j = 0; j < n; ++j) {
      Kind k = kind(j);
      if (k == Kind::Pending) continue;
      started[j] = 1;
      --pending;
      if (k == Kind::Running) {
        start[j] = -from->elapsed[j];
        end[j] = std::max(pk[j].est_hours - from->elapsed[j], 0.0);
        for (int g : from->gpus[j]) gpu_free_at[g] = end[j];
        running.push({end[j], j});
        sim.rows.push_back({j, start[j], end[j], from->gpus[j]});
      } else if (k == Kind::Done || k == Kind::Finished) {
        done[j] = 1;
        for (size_t d : k == Kind::Done ? dependents[j] : after_dependents[j]) --unmet[d];
        if (reservations)
          for (size_t r : plan.reservations_of[j]) --res_unfinished[r];
      }
    }
  }
  for (size_t j = 0; j < n; ++j)
    if (unmet[j] == 0 && !started[j]) deps_done(j);
  for (size_t j = 0; j < n; ++j)  // producers already running: their files appear on schedule
    if (started[j] && kind(j) == Kind::Running)
      for (size_t k : produced_for[j])
        if (!started[k]) produce.push({produced_at(k), k});

  double t = 0;
  PassResult last;
  PassInput in;
  in.node = node;
  auto pass_input = [&](GpuMask free, bool explain) -> const PassInput& {
    in.free = free;
    in.open.resize(plan.reservations.size());
    for (size_t r = 0; r < plan.reservations.size(); ++r) in.open[r] = res_unfinished[r] > 0;
    in.nothing_running = running.empty();
    in.explain = explain;
    return in;
  };

  auto free_now = [&] {
    GpuMask free = 0;
    for (int g : opt.node_gpus)
      if (gpu_free_at[g] <= t + kEps) free |= GpuMask{1} << g;
    return free;
  };
  while (pending || !running.empty()) {
    GpuMask free = free_now();
    bool progressed = true, first = true;
    while (progressed) {
      progressed = false;
      bool newly_ready = false;
      while (!file_wait.empty() && !(file_wait.top().first > t + kEps)) {
        ready.insert(file_wait.top().second);
        file_wait.pop();
        newly_ready = true;
      }
      // After a pass that started jobs, another with no job newly ready would start none: a
      // job it passed over did not fit with more GPUs free, or was held by the backfill
      // limit behind a head that still waits (and nothing ends, so no reservation opens).
      // Skipping it saves a third of the passes.
      if (!first && !newly_ready) break;
      first = false;
      schedule_pass(plan, ready, pass_input(free, false), last);  // into last: its lists' room is kept
      if (last.stall_broken)
        sim.notes.push_back(fmt::format(
            "at {:.2f}h nothing could start: {} waits for GPUs that reservations close to it, and the jobs of "
            "those reservations are longer than --backfill-max-hours {}; started them without the limit",
            t, plan.jobs[*last.waiting_head].id, opt.backfill_max_hours));
      for (Start& s : last.starts) {
        size_t j = s.job;
        start[j] = t;
        end[j] = t + pk[j].est_hours;
        started[j] = 1;
        for (int g : s.gpus) gpu_free_at[g] = end[j];
        free &= ~mask_of(s.gpus);
        running.push({end[j], j});
        ready.erase(j);
        --pending;
        for (size_t k : produced_for[j]) {
          if (waits_producer[k]) file_wait.push({produced_at(k), k});
          waits_producer[k] = 0;
          if (!started[k]) produce.push({produced_at(k), k});
        }
        sim.rows.push_back({j, start[j], end[j], std::move(s.gpus)});
        progressed = true;
      }
    }
    if (running.empty()) {
      if (pending) {
        sim.stuck_at = t;
        last = schedule_pass(plan, ready, pass_input(free_now(), true));
        for (size_t j = 0; j < n; ++j) {
          if (started[j]) continue;
          const Job& job = plan.jobs[j];
          std::string why;
          if (unmet[j]) {
            std::vector<size_t> waits;
            for (const Dep& d : job.deps)
              if (d.kind != Dep::Kind::File && !done[d.job]) waits.push_back(d.job);
            why = "waits for " + job_list(plan, waits) + ", which never ran";
          } else if (file_never(j) && !job.produced_by) {
            why = "waits for a file: dep that does not exist, and no job of the plan produces it";
          } else if (file_never(j)) {
            why = fmt::format("waits for a file: dep that does not exist, and {} (its producer) will not run again",
                              plan.jobs[*job.produced_by].id);
          } else if (!files_ok(j, t)) {
            why = fmt::format("waits for the file: dep that {} produces, and {} never ran",
                              plan.jobs[*job.produced_by].id, plan.jobs[*job.produced_by].id);
          } else {
            auto h = std::find_if(last.held.begin(), last.held.end(), [&](const Held& x) { return x.job == j; });
            if (h != last.held.end() && h->why == Held::Why::Backfill) {
              why = fmt::format("est_hours {} is over --backfill-max-hours {} while {} waits for GPUs",
                                job.est_hours, opt.backfill_max_hours, plan.jobs[h->head].id);
            } else {
              std::vector<bool> open(plan.reservations.size());
              for (size_t r = 0; r < open.size(); ++r) open[r] = res_unfinished[r] > 0;
              why = fmt::format("needs {} GPUs, {} of {} are open to it", job.gpus,
                                count(node & ~reserved_gpus(plan, j, open)), count(node));
              const auto& mine = plan.reservations_of[j];
              for (size_t r = 0; r < plan.reservations.size(); ++r) {
                if (!open[r] || std::find(mine.begin(), mine.end(), r) != mine.end()) continue;
                std::vector<size_t> waiting;
                for (size_t m : plan.reservations[r].jobs)
                  if (!done[m]) waiting.push_back(m);
                why += fmt::format("; reservation #{} closes GPUs {} until {} {}", r + 1,
                                   py_list(plan.reservations[r].gpu_list), job_list(plan, waiting),
                                   waiting.size() == 1 ? "finishes" : "finish");
              }
            }
          }
          sim.stuck.push_back({j, why});
        }
      }
      break;
    }
    double nxt = running.top().first;
    while (!produce.empty() && (started[produce.top().second] || produce.top().first <= t + kEps)) produce.pop();
    if (!produce.empty() && produce.top().first < nxt) nxt = produce.top().first;
    if (!(nxt > t + kEps)) nxt = running.top().first;
    t = nxt;
    while (!running.empty() && running.top().first <= t + kEps) {
      size_t j = running.top().second;
      running.pop();
      done[j] = 1;
      for (size_t k : dependents[j])
        if (--unmet[k] == 0 && !started[k]) deps_done(k);
      if (reservations)
        for (size_t r : plan.reservations_of[j]) --res_unfinished[r];
    }
  }
  return sim;
}

std::string format_timeline(const Plan& plan, const Simulation& sim, const SimOptions& opt, bool all) {
  std::string out;
  std::vector<const SimRow*> rows;
  for (const SimRow& r : sim.rows) rows.push_back(&r);
  std::sort(rows.begin(), rows.end(), [&](const SimRow* a, const SimRow* b) {
    if (a->start != b->start) return a->start < b->start;
    return plan.jobs[a->job].id < plan.jobs[b->job].id;
  });
  for (const SimRow* r : rows) {
    const std::string& id = plan.jobs[r->job].id;
    if (!all && id.rfind("eval_", 0) == 0) continue;
    out += fmt::format("{:6.2f}h -> {:6.2f}h gpus={:<8} {}\n", r->start, r->end, py_list(r->gpus), id);
  }
  double makespan = 0, busy = 0;
  for (const SimRow& r : sim.rows) {
    makespan = std::max(makespan, r.end);
    busy += static_cast<double>(r.gpus.size()) * (r.end - r.start);
  }
  if (makespan != 0)
    out += fmt::format("makespan {:.1f}h, GPU utilization {:.1f}%\n", makespan,
                       busy / (static_cast<double>(opt.node_gpus.size()) * makespan) * 100);
  else
    out += "empty plan\n";
  std::vector<double> started_at(plan.jobs.size(), -1);
  for (const SimRow& r : sim.rows) started_at[r.job] = r.start;
  bool any = false;
  double lo = 0, hi = 0;
  for (size_t j = 0; j < plan.jobs.size(); ++j) {
    const Job& job = plan.jobs[j];
    if (!job.first_look_frac || started_at[j] < 0) continue;
    double mark = started_at[j] + *job.first_look_frac * job.est_hours;
    if (!any || mark < lo) lo = mark;
    if (!any || mark > hi) hi = mark;
    any = true;
  }
  if (any)
    out += fmt::format("round-100 in-loop eval of the first-wave arms: earliest ~{:.1f}h, all ~{:.1f}h\n", lo, hi);
  return out;
}

std::string format_stuck(const Plan& plan, const Simulation& sim) {
  std::string out = fmt::format("the plan cannot be scheduled: at {:.2f}h nothing runs and {} job(s) can never start:\n",
                                sim.stuck_at, sim.stuck.size());
  for (const Stuck& s : sim.stuck) out += fmt::format("  {}: {}\n", plan.jobs[s.job].id, s.why);
  return out;
}

}  // namespace gpuq

// The engine's preemption (engine.h): a ready job that waits for GPUs may take those of
// running preemptible jobs of a larger priority value, only when it then starts on them.
#include "gpuq/core/engine.h"
#include "gpuq/core/local_time.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>

namespace gpuq {

std::string Preemption::work_text() const {
  return checkpointed ? fmt::format("it ran {}, {} since its last checkpoint", duration_text(ran), duration_text(unsaved))
                      : fmt::format("it ran {}, no checkpoint seen", duration_text(ran));
}

void Engine::operator()(const ev::Preempt& e) {
  Running* r = std::get_if<Running>(&lives_[e.job]);
  if (!r) {
    fx_.refused = Refusal::NotRunning;
    return;
  }
  if (!policy_.preemptible(plan_.jobs[e.job])) {
    fx_.refused = Refusal::NotPreemptible;
    return;
  }
  if (r->requeue || r->preempt) {
    fx_.refused = Refusal::Requeueing;
    return;
  }
  Preemption p{e.job, e.by, e.at - r->start, e.at - r->start, e.other};
  // A checkpoint of this attempt (made after its start; one kept from an earlier attempt is not
  // this one's) saves the work up to it.
  if (e.checkpoint && !std::isnan(*e.checkpoint) && *e.checkpoint >= r->start) {
    p.unsaved = std::max(0.0, e.at - *e.checkpoint);
    p.checkpointed = true;
  }
  Running next = *r;
  next.preempt = e.at;
  fx_.stops.push_back({e.job, Cause::Preempt});
  fx_.preempted.push_back(p);
  enter(e.job, std::move(next), Cause::Preempt);
  settle();
}

// The job a preemption holds GPUs for starts on them once they are free (its victims gone, and
// nothing else holding them). False while it waits; the hold is let go when the job no longer
// waits, or when the victims are gone and it still does not fit (another user took a GPU).
bool Engine::start_held_head(const ev::Tick& t) {
  size_t h = preempt_.held_for->job;
  if (!ready(h)) {
    preempt_.held_for.reset();
    return false;
  }
  GpuMask avail = preempt_.held_for->gpus & in_.node & ~nodes_.busy[0] & ~t.unavailable;
  std::optional<std::vector<int>> gpus = pick_gpus(plan_.jobs[h].gpus, avail, &policy_.placement);
  if (gpus && host_.on &&
      !HostRoom{in_.host_total.cpus - host_.used[0].cpus - t.host_other.cpus,
                in_.host_total.mem_gib - host_.used[0].mem_gib - t.host_other.mem_gib}
           .fits(
          host_.need[h]))
    gpus.reset();  // its cores or memory are not free yet: as if its GPUs were not
  if (!gpus) {
    bool stopping = std::any_of(preempt_.held_for->victims.begin(), preempt_.held_for->victims.end(),
                                [&](size_t v) { return preempting(lives_[v]); });
    if (!stopping) preempt_.held_for.reset();
    return false;
  }
  preempt_.held_for.reset();
  long long attempts = std::get<Waiting>(lives_[h]).attempts, oom = std::get<Waiting>(lives_[h]).oom_retries;
  fx_.launches.push_back({h, 0, attempts + 1});
  if (t.explain) {
    explain_.slot.resize(plan_.jobs.size(), -1);
    mark(h, -2);
  }
  enter(h, Running{attempts, t.now, std::move(*gpus), 0, std::nullopt, std::nullopt, oom}, Cause::Start);
  settle();
  nodes_.free[0] = in_.node & ~nodes_.busy[0] & ~t.unavailable;
  in_.free = nodes_.free[0];
  return true;
}

// After the pass: the ready job that set its backfill limit (the first, in ready order, that
// could not get GPUs) may take the GPUs of running preemptible jobs of a larger priority value
// that have run preempt_min_minutes since their (re)start. The victims are the fewest that let it
// start (its placement kept), then those that lose the least work (the least time since their
// last checkpoint), then the latest started; none when no such set lets it start. Their GPUs,
// and the free ones it takes, are held for it until they are gone.
void Engine::preempt_for_head(const ev::Tick& t) {
  if (preempt_.held_for || !fx_.pass.waiting_head || preempt_.running.empty()) return;
  size_t h = *fx_.pass.waiting_head;
  const Job& head = plan_.jobs[h];
  if (head.gpus <= 0 || packed_gib(h) > 0 || !ready(h) || policy_.over_cap(head)) return;
  GpuMask closed = reserved_gpus(plan_, h, in_.open);
  GpuMask free = in_.node & ~nodes_.busy[0] & ~t.unavailable & ~closed;
  // Jobs being preempted already (a hold lost with a reload of the engine): their GPUs come free
  // soon; when they are enough, the hold is made again for them and nothing more is stopped.
  std::vector<size_t> stopping;
  for (size_t j : preempt_.running) {
    const Running& r = std::get<Running>(lives_[j]);
    if (r.preempt && r.node == 0) {
      stopping.push_back(j);
      free |= mask_of(r.gpus) & in_.node & ~closed;
    }
  }
  if (std::optional<std::vector<int>> now = pick_gpus(head.gpus, free, &policy_.placement)) {
    if (!stopping.empty()) preempt_.held_for = HeldFor{h, mask_of(*now), stopping};
    return;
  }
  const double min_run = policy_.preempt_min_minutes * 60 / unit_seconds_;
  struct Victim {
    size_t job;
    GpuMask gpus;
    double unsaved, start;
  };
  std::vector<Victim> c;
  for (size_t j : preempt_.running) {
    const Running& r = std::get<Running>(lives_[j]);
    if (r.preempt || r.requeue || r.node != 0 || packed_gib(j) > 0) continue;
    if (!(plan_.jobs[j].priority > head.priority)) continue;  // only less urgent work gives way
    if (t.now - r.start < min_run - kTimeEps) continue;         // no thrashing: it runs a while first
    double saved = j < t.checkpoints.size() && !std::isnan(t.checkpoints[j]) ? std::max(t.checkpoints[j], r.start)
                                                                             : r.start;
    c.push_back({j, mask_of(r.gpus) & in_.node & ~closed, t.now - saved, r.start});
  }
  if (c.empty()) return;
  std::sort(c.begin(), c.end(), [](const Victim& a, const Victim& b) {
    if (a.unsaved != b.unsaved) return a.unsaved < b.unsaved;
    if (a.start != b.start) return a.start > b.start;
    return a.job < b.job;
  });
  // The fewest victims first; among as many, the first set in the candidates' order.
  std::optional<std::vector<int>> gpus;
  std::optional<std::vector<size_t>> pick = fewest_that_fit(c.size(), [&](const std::vector<size_t>& idx) {
    GpuMask m = free;
    for (size_t i : idx) m |= c[i].gpus;
    return (gpus = pick_gpus(head.gpus, m, &policy_.placement)).has_value();
  });
  if (!pick) return;
  HeldFor hold{h, mask_of(*gpus), stopping};
  for (size_t i : *pick) {
    // Only victims whose GPUs the job takes (the set is the fewest: each one's are needed).
    hold.victims.push_back(c[i].job);
    ev::Preempt p{c[i].job, t.now, h};
    if (c[i].job < t.checkpoints.size()) p.checkpoint = t.checkpoints[c[i].job];
    (*this)(p);
  }
  preempt_.held_for = std::move(hold);
}

}  // namespace gpuq

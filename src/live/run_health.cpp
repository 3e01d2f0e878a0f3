// `run` and GPU health (gpu_health.h): the faults of each reading, the drains they make (in the
// node directory, where every user's run reads them), the drains others make said and logged,
// and a job that failed on a GPU drained for a fault run again without spending a retry.
#include <fmt/format.h>

#include <algorithm>

#include "gpuq/core/gpu_health.h"
#include "gpuq/core/local_time.h"
#include "run_tick.h"

namespace gpuq {

// After the node's decision: the faults of this tick's reading, the drained GPUs (the node's, or
// this run's own without a node directory) kept from every job this tick starts, each change
// said once and logged, and the failures they caused made waiting again.
void RunLoop::watch_drains(Tick& t) {
  const GpuMask node = mask_of(opt_.node_gpus);
  const bool first = health_.first;
  if (t.reading) {  // a failed reading too: it may carry Xid events
    // Conditions a GPU someone undrained still has are no new fault: taken as they are at the
    // first reading (an undrain before this run) and at the reading after an undrain. While the
    // node directory cannot be read no undrain is known: conditions are taken as they are then
    // (Xid events still count).
    const bool node_read = !node_ || t.node_in;
    GpuMask accept = health_.accept;
    if (!node_read) accept = node;
    else if (first && node_)
      for (const auto& [g, u] : node_->undrains()) accept |= GpuMask{1} << g;
    if (node_read) health_.first = false;
    health_.accept = 0;
    XidRules rules = xid_rules(opt_.settings.xid_drain, opt_.settings.xid_ignore);
    for (const GpuFault& f : find_faults(*t.reading, health_.watch, rules, node, accept)) drain_for(t, f);
  }
  const std::map<int, GpuDrain>& now = node_ ? node_->drained() : health_.own;
  bool news = false;  // a drain new to this run: failures before it are looked at again
  for (const auto& [g, d] : now) {
    // Said when it is news (notices.h): a GPU drained since the last tick, or for another reason
    // (a second run's record of the same fault is none). Logged only when it changed while this
    // run looked: a restart says the drains it finds, and logs none.
    if (!told_.fresh(fmt::format("drained GPU {}", g), fmt::format("{}|{}", d.fault, d.why))) continue;
    news = true;
    std::string on;  // this plan's jobs running on it: they go on
    for (const auto& [id, s] : q_->state().entries())
      if (s.status == Status::Running && s.gpus && std::count(s.gpus->begin(), s.gpus->end(), g))
        on += (on.empty() ? "" : ", ") + id;
    std::string text = drain_text(d, local_time(d.at, t.now));
    say(t, fmt::format("{}; no job starts on it until `gpuq undrain {}`{}", text, g,
                           on.empty() ? "" : fmt::format(" ({} on it go{} on)", on, on.find(',') == std::string::npos ? "es" : "")));
    if (!first) log_drain(t, d, text);
  }
  for (const std::string& key : told_.under("drained GPU ")) {
    int g = std::stoi(key);
    if (!now.count(g)) {
      told_.gone("drained GPU " + key);
      GpuDrain back{g, false, t.now, "", "", false};  // who undrained it, where the node says
      if (node_)
        if (auto u = node_->undrains().find(g); u != node_->undrains().end()) back = u->second;
      std::string text = back.by.empty() ? fmt::format("GPU {} undrained", g)
                                         : drain_text(back, local_time(back.at, t.now));
      say(t, text + ": jobs may start on it again");
      log_drain(t, back, text);
      health_.accept |= GpuMask{1} << g;
    }
  }
  t.busy |= drained_mask(now) & node;
  if (!now.empty()) requeue_fault_failures(t, now, news);
  // A job that failed after the reading was taken may have failed by a fault not read yet (an
  // Xid is read with the next reading): a run whose jobs are all finished looks once more.
  if (t.reading && t.reading->taken && !t.reading->faults_seen.empty())
    for (const auto& [id, s] : q_->state().entries())
      if (s.status == Status::Failed && s.end && *s.end >= *t.reading->taken && index_of(id)) t.fault_unread = true;
}

// A fault of the reading: said, and where it drains its GPU (not drained for a fault already), a
// drain record of this run's, written with its publish into the node directory. A GPU drained by
// hand gets the fault's record: a job that failed there by it runs again, no retry spent.
void RunLoop::drain_for(Tick& t, const GpuFault& f) {
  const std::map<int, GpuDrain>& now = node_ ? node_->drained() : health_.own;
  if (!f.drains) {
    say(t, fmt::format("GPU {}: {}: the GPU is not drained (doc/gpu-health.md; xid_drain drains it)", f.gpu,
                           f.what));
    return;
  }
  if (auto it = now.find(f.gpu); it != now.end() && it->second.fault) {
    say(t, fmt::format("GPU {}: {} (drained already)", f.gpu, f.what));
    return;
  }
  GpuDrain d{f.gpu, true, t.now, f.what, node_user_me(), true};
  if (node_) node_->drain(d);
  else health_.own[f.gpu] = d;
}

// Each job of the plan whose last attempt failed on a GPU drained for a fault (read while it ran
// or just after it ended): waiting again, no retry spent, said with the drain. Only the jobs that
// ended this tick are looked at, unless a drain is news (`all`): then every one that ended.
void RunLoop::requeue_fault_failures(Tick& t, const std::map<int, GpuDrain>& drained, bool all) {
  Engine& engine = q_->engine();
  std::vector<size_t> jobs;
  if (all)
    for (size_t j = 0; j < plan_.jobs.size(); ++j) jobs.push_back(j);
  else
    for (const std::string& id : t.ended)
      if (std::optional<size_t> j = index_of(id)) jobs.push_back(*j);
  for (size_t j : jobs) {
    const Ended* e = std::get_if<Ended>(&engine.life(j));
    if (!e || !(e->outcome == Outcome::Failed || e->outcome == Outcome::Lost || e->outcome == Outcome::OomGpu) || !e->end)
      continue;
    const JobState* s = q_->state().find(plan_.jobs[j].id);
    if (!s || !s->gpus) continue;
    for (const auto& [g, d] : drained) {
      if (!ended_by_fault(d, *s->gpus, e->start ? e->start : s->start, *e->end, opt_.poll)) continue;
      std::string how = e->outcome == Outcome::Lost ? "its process vanished" : fmt::format("exit {}", e->exit);
      q_->apply(ev::GpuFault{j}, t.now);
      say(t, fmt::format("requeued {}: it failed ({}) on GPU {}, drained for {}; it runs again on other GPUs, not "
                             "counted against max_retries",
                             plan_.jobs[j].id, how, g, d.why));
      note_in_log(t, plan_.jobs[j].id, "",
                  fmt::format("GPU {} drained for {}: this attempt's failure is counted as the GPU's; "
                                           "the job runs again on other GPUs",
                                           g, d.why));
      break;
    }
  }
}

// A drain or undrain in the plan's event log (hooks take it): the GPU, and what it says.
void RunLoop::log_drain(Tick& t, const GpuDrain& d, const std::string& detail) {
  if (!log_.journal) return;
  Event e = plan_event(d.drained ? "drain" : "undrain", t.now, d.by.empty() ? "run" : d.by, detail);
  e.gpus = std::vector<int>{d.gpu};
  try {
    if (log_.journal->append_plan_event(e) && log_.hooks) log_.hooks->fire({e}, log_.journal->count());
  } catch (const StoreError& x) {
    say(t, fmt::format("cannot append the {} event of GPU {} to the event log ({})", e.kind, d.gpu, x.what()));
  }
}

}  // namespace gpuq

// `run` on a shared node: the node-wide decision before the engine's, and this run's entry
// published before its new jobs are let run (node_dir.h).
#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "run_tick.h"

namespace gpuq {

namespace {

// How often a run whose jobs wait for GPUs looks at the node again (others' jobs end unseen).
constexpr double kNodeLook = 1;

}  // namespace

// This run's ready GPU jobs, as the node sees them (in the run's ready order).
std::vector<NodeWant> RunLoop::node_wants() const {
  std::vector<NodeWant> wants;
  const Engine& engine = q_->engine();
  for (size_t i : engine.ready_jobs(kNodeMaxWants)) {
    const Job& j = plan_.jobs[i];
    if (j.gpus > 0) wants.push_back(node_want(j, engine.packed_gib(i), engine.host_need(i)));
  }
  return wants;
}

// Under the node lock, taken here and held to the publication (node_publish; the tick's end lets
// it go otherwise): the node directory read (NodeShare::read, as every look reads it without the
// lock: read.h), every run's holds and wants, and one decision for the node; the GPUs it does not
// give this run's jobs are unavailable to the engine's pass. No lock, no GPU start.
void RunLoop::node_enter(Tick& t) {
  if (!node_) return;
  std::vector<NodeWant> wants = node_wants();
  const Engine& engine = q_->engine();
  GpuMask node = mask_of(opt_.node_gpus);
  try {
    NodeView view = node_->read(30);
    // The node lock may have been waited for (another run holds it through its publication): what
    // this tick starts is stamped from now, when the node's GPUs were seen free, not from the
    // tick's start, which came before another run's job ended (the power-cut test's scenario d saw
    // two users' jobs on one GPU for the 0.3 s of such a wait, in the event logs only).
    t.now = std::max(t.now, os_.clock.now());
    if (engine.packs()) node_->set_room(engine.policy().gpu_rooms());
    node_->set_host(node_host_room(opt_.node_cpus, opt_.node_mem_gib));
    const std::vector<NodeHold> holds = node_holds(t);
    GpuMask closed = node_->enter(std::move(view), t.now, wants, node & ~t.busy,
                                  [&](const std::string& line) { say(t, "node: " + line); }, &holds);
    t.busy |= closed;
    // Packed jobs (Tick::mem_other): none on a GPU the node gives this run no job on; on one it
    // gives, the room is less by what the other runs' packed jobs there declared, at least.
    if (!t.mem_other.empty()) {
      const std::vector<double>& others = node_->others_packed();
      for (size_t g = 0; g < t.mem_other.size(); ++g) {
        if (closed >> g & 1) t.mem_other[g] = std::numeric_limits<double>::infinity();
        else if (g < others.size()) t.mem_other[g] = std::max(t.mem_other[g], others[g]);
      }
    }
    t.node_in = true;
    // The node-wide decision preempts jobs of this run for another user's (a fair share below
    // its user's): each stops as the engine's own preemptions do, signalled once the state is saved.
    for (const auto& [id, other] : node_->preempts())
      if (std::optional<size_t> j = index_of(id)) {
        ev::Preempt p{*j, t.now, std::nullopt, other};
        p.checkpoint = os_.launcher.checkpointed_at(id);
        const Effects& fx = q_->apply(p, t.now);
        for (const Preemption& p : fx.preempted) t.preempts.push_back(p);
      }
    if (told_.gone("node dir")) say(t, fmt::format("the node directory {} is usable again", node_->dir()));
    // Ready jobs waiting while other runs hold GPUs, or cores and host memory: looked at again soon.
    const HostTaken& host = node_->others_host();
    if (!wants.empty() || ((host.cpus > 0 || host.mem_gib > 0) && !engine.ready_jobs(1).empty()))
      t.wake_in = std::min(t.wake_in, std::min(opt_.poll, kNodeLook));
    if (std::optional<double> at = node_->deciding_at())  // its first decision, with the runs that start with it
      t.wake_in = std::min(t.wake_in, std::max(0.0, *at - t.now));
  } catch (const NodeError& e) {
    t.busy |= node;
    say_node_problem(t, e);
    t.wake_in = std::min(t.wake_in, 5.0);
  }
}

// This run's holds now: its running jobs' GPUs and processes (a job whose process has ended but
// that is not reaped yet still holds its GPUs), and where the plan counts them, their cores and
// host memory (a job without GPUs too: other users' runs count them taken).
std::vector<NodeHold> RunLoop::node_holds(const Tick& t) const {
  std::vector<NodeHold> holds;
  const Engine& engine = q_->engine();
  for (const auto& [id, s] : q_->state().entries()) {
    if (s.status != Status::Running) continue;
    const Job* j = job_of(id);
    HostNeed host;
    if (j && engine.counts_host()) host = engine.host_need(static_cast<size_t>(j - plan_.jobs.data()));
    bool gpus = s.gpus && !s.gpus->empty();
    if (!gpus && !(host.cpus > 0 || host.mem_gib > 0)) continue;
    holds.push_back({id, s.gpus.value_or(std::vector<int>{}), s.pid.value_or(0), s.pid_start.value_or(0),
                     s.start.value_or(t.now),
                     j ? j->est_hours : 0, j ? q_->engine().packed_gib(static_cast<size_t>(j - plan_.jobs.data())) : 0});
    // Whether another user's waiting job may preempt it, from when, and whether it is stopping.
    holds.back().preemptible = j && q_->engine().policy().preemptible(*j);
    holds.back().preempt_after = s.start.value_or(t.now) + opt_.preempt_min_minutes * 60;
    holds.back().preempting = s.preempt.has_value();
    holds.back().cpus = host.cpus;
    holds.back().host_mem_gib = host.mem_gib;
    holds.back().cores = s.cores.value_or("");
  }
  return holds;
}

// This run's holds (its running jobs' GPUs and processes) and wants (its ready jobs that wait
// for GPUs), written before the jobs just launched are let run; the node lock goes with it.
// A run that cannot publish lets none of its new GPU jobs run: their claims would be unseen.
void RunLoop::node_publish(Tick& t) {
  if (!node_ || !t.node_in) return;
  try {
    node_->publish(t.now, node_holds(t), node_wants(), host_.idle_holders);
  } catch (const NodeError& e) {
    std::erase_if(t.launched, [&](const std::pair<size_t, Launched>& p) {
      HostNeed host = q_->engine().counts_host() ? q_->engine().host_need(p.first) : HostNeed{};
      if (plan_.jobs[p.first].gpus == 0 && !(host.cpus > 0 || host.mem_gib > 0)) return false;
      os_.launcher.abandon(p.second);
      q_->apply(ev::Aborted{p.first}, t.now);
      return true;
    });
    say_node_problem(t, e);
    t.wake_in = std::min(t.wake_in, 5.0);
  }
}

// A node directory that cannot be used: said once for each problem, until it can be used again.
void RunLoop::say_node_problem(Tick& t, const NodeError& e) const {
  if (told_.fresh("node dir", e.what()))
    say(t, fmt::format("node directory {}: {}; no job starts on a GPU until it can be used", node_->dir(),
                           e.what()));
}

}  // namespace gpuq

// The engine: each rule of the queue once, over incremental indexes.
#include "gpuq/core/engine.h"
#include "gpuq/core/local_time.h"
#include "gpuq/core/host_mem.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "gpuq/core/limits.h"

namespace gpuq {

namespace {


template <class T>
void heap_push(std::vector<T>& h, T v) {
  h.push_back(std::move(v));
  std::push_heap(h.begin(), h.end(), std::greater<T>());
}

template <class T>
void heap_pop(std::vector<T>& h) {
  std::pop_heap(h.begin(), h.end(), std::greater<T>());
  h.pop_back();
}

}  // namespace

void Effects::clear() {
  launches.clear();
  stops.clear();
  changes.clear();
  retried.clear();
  preempted.clear();
  refused.reset();
  pass.starts.clear();
  pass.held.clear();
  pass.waiting_head.reset();
  pass.stall_broken = false;
}

PlanIndex::PlanIndex(const Plan& plan) {
  const size_t n = plan.jobs.size();
  first_plain.assign(n + 1, 0);
  first_after.assign(n + 1, 0);
  deps.assign(n, 0);
  file_dep.assign(n, 0);
  reserved.assign(n, 0);
  for (size_t j = 0; j < n && j < plan.reservations_of.size(); ++j) reserved[j] = !plan.reservations_of[j].empty();
  // One walk over the jobs (each a cache miss at 100k jobs), their edges kept in order to be
  // sorted into rows by the job they name.
  struct Edge {
    uint32_t on, job;
    bool after;
  };
  std::vector<Edge> edges;
  edges.reserve(n);
  for (size_t j = 0; j < n; ++j) {
    const Job& job = plan.jobs[j];
    own_retries |= job.max_retries.has_value();
    host_fields |= job.cpus || job.mem_gib > 0;
    on_oom |= job.on_oom.has_value();
    if (job.gpu_mem_gib && job.gpus > 0) {
      if (gib.empty()) gib.assign(n, 0);
      gib[j] = static_cast<float>(*job.gpu_mem_gib);
    }
    for (const Dep& d : job.deps) {
      if (d.kind == Dep::Kind::File) {
        file_dep[j] = 1;
        continue;
      }
      ++deps[j];
      bool after_dep = d.kind == Dep::Kind::After;
      ++(after_dep ? first_after : first_plain)[d.job + 1];
      edges.push_back({static_cast<uint32_t>(d.job), static_cast<uint32_t>(j), after_dep});
    }
  }
  for (size_t j = 0; j < n; ++j) {
    first_plain[j + 1] += first_plain[j];
    first_after[j + 1] += first_after[j];
  }
  plain.resize(first_plain[n]);
  after.resize(first_after[n]);
  std::vector<uint32_t> at_plain(first_plain.begin(), first_plain.end() - 1);
  std::vector<uint32_t> at_after(first_after.begin(), first_after.end() - 1);
  for (const Edge& e : edges) {
    if (e.after)
      after[at_after[e.on]++] = e.job;
    else
      plain[at_plain[e.on]++] = e.job;
  }
}

std::span<const uint32_t> PlanIndex::plain_dependents(size_t j) const {
  return {plain.data() + first_plain[j], plain.data() + first_plain[j + 1]};
}

std::span<const uint32_t> PlanIndex::after_dependents(size_t j) const {
  return {after.data() + first_after[j], after.data() + first_after[j + 1]};
}

namespace {

// What a life means to other jobs, as bits (Engine::flags_): worked out once per change.
constexpr uint8_t kDone = 1, kFinished = 2, kLeft = 4, kFailing = 8;

uint8_t meaning(const Life& l, long long max_retries) {
  return static_cast<uint8_t>((is_done(l) ? kDone : 0) | (finished(l, max_retries) ? kFinished : 0) |
                              (leaves_reservation(l) ? kLeft : 0) | (blocks_dependents(l) ? kFailing : 0));
}

}  // namespace

Engine::Engine(const Plan& plan, const Policy& policy, double unit_seconds, std::shared_ptr<const PlanIndex> index,
               std::vector<Life> lives, std::vector<char> files_present)
    : plan_(plan),
      policy_(policy),
      unit_seconds_(unit_seconds),
      index_(index ? std::move(index) : std::make_shared<PlanIndex>(plan)),
      ready_(plan, policy.backfill_max_hours, policy.pack && !policy.batch) {
  const size_t nodes = static_cast<size_t>(std::max(policy.nodes, 1));
  nodes_.busy.assign(nodes, 0);
  nodes_.gpu_use.assign(nodes * (kMaxGpuId + 1), 0);
  pack_.on = ready_.any_packed();
  if (pack_.on) {
    pack_.whole_use.assign(nodes_.gpu_use.size(), 0);
    pack_.declared.assign(nodes_.gpu_use.size(), 0);
    pack_.room.assign(nodes_.gpu_use.size(), -1);
  }
  in_.node = mask_of(policy.node_gpus);
  in_.placement = &policy_.placement;
  host_.on = index_->host_fields && !policy.batch;
  if (host_.on) {
    const double inf = std::numeric_limits<double>::infinity();
    host_.need.resize(plan.jobs.size());
    HostNeed least{std::numeric_limits<float>::max(), std::numeric_limits<uint16_t>::max()};
    for (size_t j = 0; j < plan.jobs.size(); ++j) {
      const Job& job = plan.jobs[j];
      HostNeed& n = host_.need[j];
      n.cpus = static_cast<uint16_t>(std::min(policy.cpus_of(job), 65535));
      n.mem_gib = job.mem_gib;
      least = {std::min(least.mem_gib, n.mem_gib), std::min(least.cpus, n.cpus)};
    }
    in_.host_total = {policy.node_cpus > 0 ? policy.node_cpus : inf, policy.node_mem_gib > 0 ? policy.node_mem_gib : inf};
    in_.host_least = least;
    host_.used.assign(nodes, HostRoom{});
    host_.room.assign(nodes, HostRoom{});
  }
  for (size_t j = 0; j < plan.jobs.size(); ++j)
    if (index_->file_dep[j]) file_jobs_.push_back(j);
  // Preemption places jobs on one node's GPUs: none in a batch queue or across a cluster's nodes.
  if (!policy.batch && nodes == 1)
    for (const Job& job : plan.jobs)
      if (policy.preemptible(job)) {
        preempt_.on = true;
        break;
      }
  nodes_.free.assign(nodes, 0);
  load(std::move(lives), std::move(files_present));
}

void Engine::load(std::vector<Life> lives, std::vector<char> files_present) {
  const size_t n = plan_.jobs.size();
  lives_ = std::move(lives);
  lives_.resize(n, Waiting{});
  files_ = files_present.empty() ? std::vector<char>(n, 1) : std::move(files_present);
  files_.resize(n, 1);
  unmet_.assign(n, 0);
  failing_.assign(n, 0);
  version_.assign(n, 0);
  res_open_.assign(plan_.reservations.size(), 0);
  std::fill(nodes_.gpu_use.begin(), nodes_.gpu_use.end(), 0);
  std::fill(pack_.whole_use.begin(), pack_.whole_use.end(), 0);
  std::fill(pack_.declared.begin(), pack_.declared.end(), 0);
  std::fill(nodes_.busy.begin(), nodes_.busy.end(), 0);
  std::fill(host_.used.begin(), host_.used.end(), HostRoom{});
  ready_.clear();
  in_ready_.assign(n, 0);
  retries_.clear();
  block_.loose.clear();
  block_.work.clear();
  fx_.clear();
  waiting_ = running_ = 0;
  preempt_.running.clear();
  preempt_.held_for.reset();  // made again at the next tick from the jobs being preempted (preempt_for_head)
  pack_.gib.clear();
  if (index_->on_oom)  // on_oom: each job's size is that of its next (or running) attempt
    for (size_t j = 0; j < n; ++j) size_for(j, oom_retries_of(lives_[j]));
  flags_.resize(n);
  kinds_.resize(n);
  for (size_t j = 0; j < n; ++j) {
    flags_[j] = meaning(lives_[j], retries(j));
    kinds_[j] = static_cast<uint8_t>(kind_of(lives_[j]));
  }
  // The unmet and failing deps, from the index's rows (not each job's deps: a cache miss a job).
  for (size_t d = 0; d < n; ++d) {
    uint8_t dep = flags_[d];
    if (!(dep & kFinished))
      for (uint32_t k : index_->after_dependents(d)) ++unmet_[k];
    if (!(dep & kDone) || (dep & kFailing))
      for (uint32_t k : index_->plain_dependents(d)) {
        unmet_[k] += !(dep & kDone);
        failing_[k] += (dep & kFailing) != 0;
      }
  }
  for (size_t j = 0; j < n; ++j) {
    const Life& l = lives_[j];
    if (!(flags_[j] & kLeft))
      for (size_t r : plan_.reservations_of[j]) ++res_open_[r];
    switch (kind_of(l)) {
      case LifeKind::Waiting: ++waiting_; break;
      case LifeKind::Queued: ++running_; break;
      case LifeKind::Running:
        ++running_;
        hold_gpus(j, std::get<Running>(l), 1);
        if (preempt_.on && policy_.preemptible(plan_.jobs[j])) preempt_.running.push_back(j);
        break;
      case LifeKind::Ended: push_retry(j); break;
      default: break;
    }
  }
  block_.releasable = 0;
  for (size_t j = 0; j < n; ++j) {
    update_ready(j);
    if (kind(j) == LifeKind::Waiting && failing_[j] > 0) block_.work.push_back(j);
    if (kind(j) == LifeKind::Blocked && failing_[j] == 0) {
      ++block_.releasable;
      block_.loose.push_back(j);
    }
  }
  settle();
}

// A running job takes (`by` 1) or lets go of (-1) its GPUs: each counts its jobs, and, where
// jobs pack, its whole jobs and the GiB its packed jobs declared.
void Engine::hold_gpus(size_t j, const Running& r, int by) {
  size_t node = static_cast<size_t>(std::clamp(r.node, 0, static_cast<int>(nodes_.busy.size()) - 1));
  double gib = packed_gib(j);
  for (int g : r.gpus) {
    if (g < 0 || g > kMaxGpuId) continue;
    size_t at = node * (kMaxGpuId + 1) + static_cast<size_t>(g);
    uint16_t& use = nodes_.gpu_use[at];
    if (by > 0 ? use++ == 0 : --use == 0) nodes_.busy[node] ^= GpuMask{1} << g;
    if (!pack_.on) continue;
    if (gib > 0)
      pack_.declared[at] = use == 0 ? 0 : pack_.declared[at] + by * gib;  // no drift once it is empty
    else
      pack_.whole_use[at] += static_cast<uint16_t>(by);
  }
  if (host_.on) {
    HostRoom& u = host_.used[node];
    u.cpus += by * host_.need[j].cpus;
    u.mem_gib = std::max(0.0, u.mem_gib + by * static_cast<double>(host_.need[j].mem_gib));
  }
}

double Engine::packed_gib(size_t j) const {
  if (!pack_.gib.empty()) return pack_.gib[j];
  return pack_.on && !index_->gib.empty() ? index_->gib[j] : 0;
}

double Engine::declared_gib(size_t g, int node) const {
  return pack_.on ? pack_.declared[static_cast<size_t>(node) * (kMaxGpuId + 1) + g] : 0;
}

void Engine::update_ready(size_t j) {
  bool want = kind(j) == LifeKind::Waiting && unmet_[j] == 0 && files_[j];
  // Most calls change nothing (a dependent of a job that started is still not ready): a byte
  // per job says so without the ready set's rank lookup (320,000 calls in a status of 100k jobs).
  if (want == static_cast<bool>(in_ready_[j])) return;
  in_ready_[j] = want;
  if (want)
    ready_.insert(j);
  else
    ready_.erase(j);
}

void Engine::push_retry(size_t j) {
  const Ended* e = std::get_if<Ended>(&lives_[j]);
  if (!e || !will_retry(*e, retries(j))) return;
  heap_push(retries_, {*e->end + policy_.retry_after / unit_seconds_, {j, version_[j]}});
}

std::optional<double> Engine::retry_at(size_t j) const {
  const Ended* e = std::get_if<Ended>(&lives_[j]);
  if (!e || !will_retry(*e, retries(j))) return std::nullopt;
  return *e->end + policy_.retry_after / unit_seconds_;
}

std::optional<double> Engine::next_preemptible(double now) const {
  if (!preempt_.on || !waiting_) return std::nullopt;
  const double min_run = policy_.preempt_min_minutes * 60 / unit_seconds_;
  std::optional<double> next;
  for (size_t j : preempt_.running) {
    const Running& r = std::get<Running>(lives_[j]);
    if (r.preempt || r.requeue) continue;
    if (double at = r.start + min_run; at > now + kTimeEps) next = std::min(next.value_or(at), at);
  }
  return next;
}

std::optional<double> Engine::next_retry() {
  while (!retries_.empty() && retries_.front().second.second != version_[retries_.front().second.first])
    heap_pop(retries_);
  if (retries_.empty()) return std::nullopt;
  return retries_.front().first;
}

bool Engine::wants_files(size_t j) const {
  return index_->file_dep[j] && kind(j) == LifeKind::Waiting && unmet_[j] == 0;
}

// Every change of a job's life goes through here: the indexes follow it (the dependents'
// unmet deps, the reservations, the GPUs, the ready set, the retry to come), and a failure
// blocks the waiting plain dependents (settle() carries the cascade on).
void Engine::enter(size_t j, Life next, Cause cause) {
  Life& cur = lives_[j];
  LifeKind from = kind_of(cur), to = kind_of(next);
  uint8_t was = flags_[j], now = meaning(next, retries(j));
  flags_[j] = now;
  bool done0 = was & kDone, done1 = now & kDone;
  bool fin0 = was & kFinished, fin1 = now & kFinished;
  bool left0 = was & kLeft, left1 = now & kLeft;
  bool fail0 = was & kFailing, fail1 = now & kFailing;
  if (from == LifeKind::Blocked && failing_[j] == 0) --block_.releasable;
  if (from == LifeKind::Running) hold_gpus(j, std::get<Running>(cur), -1);
  if (preempt_.on && from == LifeKind::Running && to != LifeKind::Running)
    std::erase(preempt_.running, j);
  if (preempt_.on && to == LifeKind::Running && from != LifeKind::Running && policy_.preemptible(plan_.jobs[j]))
    preempt_.running.push_back(j);
  if (from == LifeKind::Waiting) --waiting_;
  if (from == LifeKind::Running || from == LifeKind::Queued) --running_;
  cur = std::move(next);
  kinds_[j] = static_cast<uint8_t>(to);
  if (from == LifeKind::Ended) ++version_[j];  // its retry to come, if any, is void
  if (to == LifeKind::Waiting) ++waiting_;
  if (to == LifeKind::Running || to == LifeKind::Queued) ++running_;
  if (to == LifeKind::Running) hold_gpus(j, std::get<Running>(cur), 1);
  if (to == LifeKind::Blocked && failing_[j] == 0) {
    ++block_.releasable;
    block_.loose.push_back(j);
  }
  if (record_) fx_.changes.push_back({j, from, cur, cause});
  if (left0 != left1 && index_->reserved[j])
    for (size_t r : plan_.reservations_of[j]) res_open_[r] += left1 ? -1 : 1;
  if (done0 != done1)
    for (uint32_t k : index_->plain_dependents(j)) {
      unmet_[k] += done1 ? -1 : 1;
      update_ready(k);
    }
  if (fin0 != fin1)
    for (uint32_t k : index_->after_dependents(j)) {
      unmet_[k] += fin1 ? -1 : 1;
      update_ready(k);
    }
  if (fail0 != fail1)
    for (uint32_t k : index_->plain_dependents(j)) {
      if (kind(k) == LifeKind::Blocked && failing_[k] == 0) --block_.releasable;  // (fail1: 0 -> 1)
      failing_[k] += fail1 ? 1 : -1;
      if (kind(k) == LifeKind::Blocked && failing_[k] == 0) {  // (!fail1: 1 -> 0)
        ++block_.releasable;
        block_.loose.push_back(k);
      }
      if (fail1 && kind(k) == LifeKind::Waiting) block_.work.push_back(k);
    }
  update_ready(j);
  if (to == LifeKind::Waiting && failing_[j] > 0) block_.work.push_back(j);
  if (to == LifeKind::Ended) push_retry(j);
}

// The rule "a job whose plain dep failed or is blocked is blocked", carried through.
void Engine::settle() {
  while (!block_.work.empty()) {
    size_t k = block_.work.back();
    block_.work.pop_back();
    if (kind(k) == LifeKind::Waiting && failing_[k] > 0) enter(k, Blocked{}, Cause::Block);
  }
}

// A retry (automatic, or by hand) makes the job waiting, and releases every blocked job:
// those whose plain deps no longer fail wait again (the original makes every blocked job
// pending at a retry, and its next tick blocks again those whose deps still fail).
void Engine::retry(size_t j, bool automatic) {
  long long attempts = 0;
  long long oom = 0;  // an automatic retry keeps the on_oom size; one by hand starts over
  if (automatic)
    if (const Ended* e = std::get_if<Ended>(&lives_[j])) attempts = e->attempts + 1, oom = e->oom_retries;
  enter(j, Waiting{attempts, std::nullopt, oom}, automatic ? Cause::AutoRetry : Cause::Retry);
  size_for(j, oom);
  unblock_all();
  settle();
}

std::string Engine::recount() const {
  const size_t n = plan_.jobs.size();
  size_t waiting = 0, running = 0, releasable = 0;
  std::string out;
  for (size_t j = 0; j < n; ++j) {
    LifeKind k = kind_of(lives_[j]);
    if (k != kind(j)) out += fmt::format("{}: kind {} kept as {}; ", plan_.jobs[j].id, int(k), int(kind(j)));
    waiting += k == LifeKind::Waiting;
    running += k == LifeKind::Running || k == LifeKind::Queued;
    uint32_t unmet = 0, failing = 0;
    for (const Dep& d : plan_.jobs[j].deps) {
      if (d.kind == Dep::Kind::File) continue;
      uint8_t dep = meaning(lives_[d.job], retries(d.job));
      if (d.kind == Dep::Kind::After)
        unmet += !(dep & kFinished);
      else {
        unmet += !(dep & kDone);
        failing += (dep & kFailing) != 0;
      }
    }
    if (unmet != unmet_[j]) out += fmt::format("{}: {} unmet deps, kept {}; ", plan_.jobs[j].id, unmet, unmet_[j]);
    if (failing != failing_[j]) out += fmt::format("{}: {} failing deps, kept {}; ", plan_.jobs[j].id, failing, failing_[j]);
    bool ready = k == LifeKind::Waiting && unmet == 0 && files_[j];
    if (ready != ready_.contains(j) || ready != static_cast<bool>(in_ready_[j]))
      out += fmt::format("{}: ready {}, in the ready set {}, marked {}; ", plan_.jobs[j].id, ready, ready_.contains(j),
                         int(in_ready_[j]));
    if (k == LifeKind::Blocked && failing == 0) {
      ++releasable;
      if (std::find(block_.loose.begin(), block_.loose.end(), j) == block_.loose.end())
        out += fmt::format("{}: releasable but not listed; ", plan_.jobs[j].id);
    }
  }
  if (waiting != waiting_) out += fmt::format("{} waiting, kept {}; ", waiting, waiting_);
  if (running != running_) out += fmt::format("{} running, kept {}; ", running, running_);
  if (releasable != block_.releasable) out += fmt::format("{} releasable, kept {}; ", releasable, block_.releasable);
  return out;
}

void Engine::unblock_all() {
  // Every blocked job has a failing plain dep: none is released.
  if (block_.releasable == 0) {
    block_.loose.clear();
    return;
  }
  // Only the releasable ones are looked at, not every blocked job (a status with 40,000
  // blocked jobs and 8 retries due walked them all 8 times: 15 M instructions). In plan order,
  // as a walk over them all would release them.
  std::vector<size_t> todo;
  todo.swap(block_.loose);
  std::sort(todo.begin(), todo.end());
  todo.erase(std::unique(todo.begin(), todo.end()), todo.end());
  // Released jobs release their blocked dependents in turn (the cascade of the block, undone).
  for (size_t at = 0; at < todo.size(); ++at) {
    size_t k = todo[at];
    if (kind(k) != LifeKind::Blocked || failing_[k] > 0) continue;
    enter(k, Waiting{}, Cause::Unblock);
    for (uint32_t d : index_->plain_dependents(k))
      if (kind(d) == LifeKind::Blocked) todo.push_back(d);
  }
  block_.loose.clear();  // every releasable job was released (those it names came in through the cascade)
}

void Engine::tick(const ev::Tick& t) {
  // Automatic retries that fell due, in plan order (the original's loop over the plan).
  std::vector<size_t> due;
  while (!retries_.empty() && retries_.front().first <= t.now + kTimeEps) {
    auto [at, jv] = retries_.front();
    heap_pop(retries_);
    if (jv.second == version_[jv.first]) due.push_back(jv.first);
  }
  std::sort(due.begin(), due.end());
  for (size_t j : due) {
    retry(j, true);
    fx_.retried.push_back(j);
  }
  for (size_t k : explain_.marked) explain_.slot[k] = -1;
  explain_.marked.clear();
  // File deps as they are now, for the jobs they decide.
  if (t.files)
    for (size_t j : file_jobs_)
      if (wants_files(j)) {
        files_[j] = files_present(plan_.jobs[j], *t.files);
        update_ready(j);
      }
  // `gpuq pause`: the running jobs go on, nothing new starts (the pass only explains).
  if (policy_.paused && !t.explain) return;
  if (policy_.batch) {
    if (policy_.paused) return;
    // A batch queue places jobs itself: every ready job in ready order, as many as it takes now.
    for (size_t j : ready_.in_order(t.room < 0 ? ready_.size() : static_cast<size_t>(t.room))) {
      const Waiting& w = std::get<Waiting>(lives_[j]);
      long long attempts = w.attempts;
      enter(j, Queued{attempts, w.oom_retries}, Cause::Start);
      fx_.launches.push_back({j, 0, attempts + 1});
    }
    settle();
    return;
  }
  pass(t);
  if (preempt_.on && !policy_.paused) preempt_for_head(t);
}

void Engine::mark(size_t j, int32_t slot) {
  explain_.slot[j] = slot;
  explain_.marked.push_back(j);
}

void Engine::pass(const ev::Tick& t) {
  in_.placement = &policy_.placement;  // this engine's (a copy of an engine points at its own)
  in_.gib = pack_.gib;                      // likewise: empty unless an on_oom retry resized a packed job
  for (size_t k = 0; k < nodes_.free.size(); ++k) nodes_.free[k] = in_.node & ~nodes_.busy[k];
  nodes_.free[0] &= ~t.unavailable;
  in_.free = nodes_.free[0];
  in_.nodes = nodes_.free.size() > 1 ? std::span<const GpuMask>(nodes_.free) : std::span<const GpuMask>();
  in_.open.resize(plan_.reservations.size());
  for (size_t r = 0; r < plan_.reservations.size(); ++r) in_.open[r] = res_open_[r] > 0;
  in_.nothing_running = running_ == 0 && !t.others_running;
  in_.gpu_budget = policy_.max_gpus ? std::max(0, *policy_.max_gpus - count(nodes_.busy[0]) - t.held_elsewhere) : -1;
  in_.explain = t.explain;
  // A preemption's GPUs wait for the job it is for: it starts on them once its victims are gone,
  // and no other job takes them meanwhile.
  if (preempt_.held_for && !policy_.paused) start_held_head(t);
  if (preempt_.held_for) {
    nodes_.free[0] &= ~preempt_.held_for->gpus;
    in_.free = nodes_.free[0];
  }
  if (pack_.on) {
    // What a packed job may still declare on each GPU: its memory less the headroom, what the
    // running packed jobs declared and what else uses it (Tick::mem_other). None on a GPU a whole
    // job holds, nor on one the driver keeps from new jobs without saying how much memory it uses.
    in_.room_empty = 0;
    for (size_t n = 0; n < nodes_.busy.size(); ++n)
      for (GpuMask m = in_.node; m; m &= m - 1) {
        int g = std::countr_zero(m);
        size_t at = n * (kMaxGpuId + 1) + static_cast<size_t>(g);
        double full = policy_.gpu_room(g);
        in_.room_empty = std::max(in_.room_empty, full);
        bool shut = pack_.whole_use[at] > 0 || (n == 0 && (t.unavailable >> g & 1) && t.mem_other.empty());
        double other = n == 0 && static_cast<size_t>(g) < t.mem_other.size() ? t.mem_other[g] : 0;
        pack_.room[at] = shut ? -1 : full - pack_.declared[at] - other;
      }
    in_.room = pack_.room;
  }
  if (host_.on) {
    for (size_t n = 0; n < host_.used.size(); ++n)
      host_.room[n] = {in_.host_total.cpus - host_.used[n].cpus - (n == 0 ? t.host_other.cpus : 0),
                       in_.host_total.mem_gib - host_.used[n].mem_gib - (n == 0 ? t.host_other.mem_gib : 0)};
    in_.host_room = host_.room;
    in_.host_need = host_.need;
  }
  schedule_pass(plan_, ready_, in_, fx_.pass);
  if (t.explain) {
    explain_.slot.resize(plan_.jobs.size(), -1);
    for (size_t k = 0; k < fx_.pass.held.size(); ++k) mark(fx_.pass.held[k].job, static_cast<int32_t>(k));
    for (const Start& s : fx_.pass.starts) mark(s.job, policy_.paused ? -3 : -2);
  }
  if (policy_.paused) {
    fx_.pass.starts.clear();
    fx_.pass.stall_broken = false;
    return;
  }
  for (Start& s : fx_.pass.starts) {
    const Waiting& w = std::get<Waiting>(lives_[s.job]);
    long long attempts = w.attempts, oom = w.oom_retries;
    fx_.launches.push_back({s.job, s.node, attempts + 1});
    enter(s.job, Running{attempts, t.now, std::move(s.gpus), s.node, std::nullopt, std::nullopt, oom}, Cause::Start);
  }
  settle();
}

// A running attempt ends as `e` says: its dependents, reservations and GPUs follow (enter).
void Engine::end_running(size_t j, Ended e, Cause cause, bool stop) {
  if (const Running* r = std::get_if<Running>(&lives_[j])) {
    e.attempts = r->attempts;
    e.start = r->start;
    e.oom_retries = r->oom_retries;
  } else if (const Queued* q = std::get_if<Queued>(&lives_[j])) {
    e.attempts = q->attempts;
    e.oom_retries = q->oom_retries;
  }
  if (stop) fx_.stops.push_back({j, cause});
  enter(j, std::move(e), cause);
  settle();
  // on_oom: at once, resized; one gpuq stops (over memory) once its processes are gone (ev::OomRetry).
  if (!stop) oom_retry(j);
}

bool Engine::oom_retry_due(size_t j) const {
  const Ended* e = std::get_if<Ended>(&lives_[j]);
  const Job& job = plan_.jobs[j];
  return e && is_oom(e->outcome) && job.on_oom && e->oom_retries < job.on_oom->retries;
}

// An attempt that ran out of memory runs again at once, resized (size_for), no automatic retry
// spent: its end is in the log, then its retry.
void Engine::oom_retry(size_t j) {
  if (!oom_retry_due(j)) return;
  const Ended& e = std::get<Ended>(lives_[j]);
  long long attempts = e.attempts, oom = e.oom_retries + 1;
  enter(j, Waiting{attempts, std::nullopt, oom}, Cause::OomRetry);
  size_for(j, oom);
  unblock_all();
  settle();
}

void Engine::operator()(const ev::OomRetry& e) { oom_retry(e.job); }

// The host memory job j's next attempt counts: its mem_gib after `oom_retries` on_oom retries
// (host_mem.h). Only while it is not running: a running job's share stays what it took.
void Engine::size_for(size_t j, long long oom_retries) {
  if (!plan_.jobs[j].on_oom) return;
  OomValues v = oom_values(plan_.jobs[j], oom_retries);
  if (host_.on) host_.need[j].mem_gib = static_cast<float>(v.mem_gib);
  if (pack_.on && !index_->gib.empty() && plan_.jobs[j].gpus > 0 && plan_.jobs[j].gpu_mem_gib) {
    if (pack_.gib.empty()) pack_.gib = index_->gib;  // this engine's own sizes, from the first retried job on
    pack_.gib[j] = static_cast<float>(v.gpu_mem_gib);
  }
}

namespace {

bool requeueing(const Life& l) {
  const Running* r = std::get_if<Running>(&l);
  return r && r->requeue;
}

}  // namespace

void Engine::operator()(const ev::Exited& e) {
  LifeKind k = kind(e.job);
  if ((k != LifeKind::Running && k != LifeKind::Queued) || requeueing(lives_[e.job])) return;
  // After a preemption an exit 0 is done; any other end makes it wait again, no retry spent. A
  // preemptible job's own exit 85 is its checkpoint: the same, without being asked.
  bool preempted = preempting(lives_[e.job]) && e.code != 0;
  bool checkpointed = !preempted && k == LifeKind::Running && e.code == kCheckpointExit &&
                      policy_.preemptible(plan_.jobs[e.job]);
  if (preempted || checkpointed) {
    const Running& r = std::get<Running>(lives_[e.job]);
    enter(e.job, Waiting{r.attempts, e.at, r.oom_retries}, preempted ? Cause::Preempted : Cause::Checkpointed);
    settle();
    return;
  }
  Ended end = ended_by_exit(e.code, e.at, k == LifeKind::Queued ? std::optional<double>(e.at) : std::nullopt, 0);
  if (e.oom && e.code != 0) end.outcome = *e.oom;
  end_running(e.job, std::move(end), Cause::Exit, false);
}

void Engine::operator()(const ev::Vanished& e) {
  LifeKind k = kind(e.job);
  if ((k != LifeKind::Running && k != LifeKind::Queued) || requeueing(lives_[e.job])) return;
  if (preempting(lives_[e.job]) || (e.node_restarted && k == LifeKind::Running)) {
    const Running& r = std::get<Running>(lives_[e.job]);
    enter(e.job, Waiting{r.attempts, e.at, r.oom_retries}, e.node_restarted ? Cause::NodeRestarted : Cause::Preempted);
    settle();
    return;
  }
  end_running(e.job, ended_lost(e.at, std::nullopt, 0), Cause::Vanish, false);
}

void Engine::operator()(const ev::GpuFault& e) {
  const Ended* end = std::get_if<Ended>(&lives_[e.job]);
  if (!end || !(end->outcome == Outcome::Failed || end->outcome == Outcome::Lost || end->outcome == Outcome::OomGpu))
    return;
  enter(e.job, Waiting{end->attempts, end->end, end->oom_retries}, Cause::GpuFault);
  unblock_all();  // its failure blocked its dependents: it was the GPU's, not the job's
  settle();
}

void Engine::operator()(const ev::Aborted& e) {
  long long attempts = 0, oom = 0;
  if (const Running* r = std::get_if<Running>(&lives_[e.job])) attempts = r->attempts, oom = r->oom_retries;
  else if (const Queued* q = std::get_if<Queued>(&lives_[e.job])) attempts = q->attempts, oom = q->oom_retries;
  else return;
  enter(e.job, Waiting{attempts, std::nullopt, oom}, Cause::Abort);
  settle();
}

void Engine::operator()(const ev::LaunchFailed& e) {
  LifeKind k = kind(e.job);
  if (k != LifeKind::Running && k != LifeKind::Queued) return;
  Ended end;
  end.outcome = e.for_good ? Outcome::Unstartable : Outcome::Lost;
  end.exit = e.exit;
  end.end = e.at;
  end_running(e.job, std::move(end), Cause::LaunchFail, false);
  std::get<Ended>(lives_[e.job]).start.reset();  // it never ran
}

void Engine::operator()(const ev::QueueStarted& e) {
  const Queued* q = std::get_if<Queued>(&lives_[e.job]);
  if (!q) return;
  enter(e.job, Running{q->attempts, e.at, {}, 0, std::nullopt, std::nullopt, q->oom_retries}, Cause::QueueStart);
  settle();
}

void Engine::operator()(const ev::LimitReached& e) {
  if (!running(e.job)) return;
  Ended end;
  end.outcome = Outcome::Timeout;
  end.exit = timeout_exit(plan_.jobs[e.job]);
  end.end = e.at;
  end_running(e.job, std::move(end), Cause::Limit, true);
}

void Engine::operator()(const ev::Hung& e) {
  if (!running(e.job)) return;
  Ended end;
  end.outcome = e.outcome;
  end.exit = timeout_exit(plan_.jobs[e.job]);
  end.end = e.at;
  end_running(e.job, std::move(end), Cause::Hung, true);
}

void Engine::operator()(const ev::OverMemory& e) {
  if (!running(e.job)) return;
  Ended end;
  end.outcome = Outcome::OverMemory;
  end.exit = timeout_exit(plan_.jobs[e.job]);
  end.end = e.at;
  end_running(e.job, std::move(end), Cause::OverMemory, true);
}

void Engine::operator()(const ev::GroupGone& e) {
  const Running* r = std::get_if<Running>(&lives_[e.job]);
  if (!r || !r->requeue) return;
  enter(e.job, Waiting{r->attempts, std::nullopt, r->oom_retries}, Cause::Requeued);
  settle();
}

void Engine::operator()(const ev::Retry& e) {
  const Life& l = lives_[e.job];
  if (const Held* h = std::get_if<Held>(&l); h && h->in_queue) {
    enter(e.job, Queued{h->attempts}, Cause::Retry);
    settle();
    return;
  }
  if (kind_of(l) == LifeKind::Running || kind_of(l) == LifeKind::Queued) {
    fx_.refused = Refusal::Running;
    return;
  }
  retry(e.job, false);
}

void Engine::operator()(const ev::Hold& e) {
  const Life& l = lives_[e.job];
  switch (kind_of(l)) {
    case LifeKind::Held: fx_.refused = Refusal::AlreadyHeld; return;
    case LifeKind::Running: fx_.refused = Refusal::Running; return;
    case LifeKind::Ended:
      if (is_done(l)) {
        fx_.refused = Refusal::Done;
        return;
      }
      enter(e.job, Held{}, Cause::Hold);
      break;
    case LifeKind::Queued: {
      long long attempts = std::get<Queued>(l).attempts;
      enter(e.job, Held{attempts, true}, Cause::Hold);
      break;
    }
    default: enter(e.job, Held{}, Cause::Hold);
  }
  settle();
}

void Engine::operator()(const ev::Kill& e) {
  LifeKind k = kind(e.job);
  if (k != LifeKind::Running && k != LifeKind::Queued) {
    fx_.refused = Refusal::NotRunning;
    return;
  }
  Ended end;
  end.outcome = Outcome::Killed;
  end.exit = kKilledExit;
  end.end = e.at;
  end_running(e.job, std::move(end), Cause::Kill, true);
}

void Engine::operator()(const ev::Requeue& e) {
  Running* r = std::get_if<Running>(&lives_[e.job]);
  if (!r) {
    fx_.refused = Refusal::NotRunning;
    return;
  }
  if (r->requeue || r->preempt) {
    fx_.refused = Refusal::Requeueing;
    return;
  }
  Running next = *r;
  next.requeue = e.at;
  fx_.stops.push_back({e.job, Cause::Requeue});
  enter(e.job, std::move(next), Cause::Requeue);
  settle();
}

void Engine::operator()(const ev::Dequeued& e) {
  const Life& l = lives_[e.job];
  if (const Queued* q = std::get_if<Queued>(&l)) {
    enter(e.job, Waiting{q->attempts}, Cause::Abort);
  } else if (const Held* h = std::get_if<Held>(&l); h && h->in_queue) {
    enter(e.job, Held{h->attempts, false}, Cause::Hold);
  }
  settle();
}

void Engine::operator()(const ev::Files& e) {
  files_[e.job] = e.present;
  update_ready(e.job);
}

struct EngineVisit {
  Engine& e;
  template <class T>
  void operator()(const T& v) { e(v); }
};

void Engine::apply(const EngineEvent& event) {
  fx_.clear();
  std::visit(EngineVisit{*this}, event);
}

}  // namespace gpuq

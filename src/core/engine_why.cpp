// Why a job waits (engine.h): one implementation of the reasons, over the engine or a
// snapshot of its last tick.
#include "gpuq/core/engine.h"

#include <fmt/format.h>

#include <algorithm>

namespace gpuq {

// Why job j waits, from what `src` keeps of the last tick: the engine itself, or a
// WhySnapshot of it (the one implementation of the reasons).
template <class Src>
Why why_of(const Plan& plan, const PlanIndex& index, const Src& src, size_t j) {
  Why w;
  switch (src.kind(j)) {
    case LifeKind::Held: w.kind = Why::Kind::Held; return w;
    case LifeKind::Queued: w.kind = Why::Kind::Queued; return w;
    case LifeKind::Running:
      if (src.slot(j) == -2) w.kind = Why::Kind::Ready;
      return w;
    case LifeKind::Ended:
      if (src.flags(j) & kDone) return w;
      w.kind = Why::Kind::Failed;
      w.at = src.retry_at(j);
      return w;
    case LifeKind::Blocked:
      w.kind = Why::Kind::Blocked;
      for (const Dep& d : plan.jobs[j].deps)
        if (d.kind == Dep::Kind::Done && (src.flags(d.job) & kFailing)) w.jobs.push_back(d.job);
      return w;
    case LifeKind::Waiting: break;
  }
  for (const Dep& d : plan.jobs[j].deps) {
    if (d.kind == Dep::Kind::Done && !(src.flags(d.job) & kDone)) w.jobs.push_back(d.job);
    if (d.kind == Dep::Kind::After && !(src.flags(d.job) & kFinished)) w.afters.push_back(d.job);
  }
  w.files = index.file_dep[j] && !src.files(j);
  if (!w.jobs.empty() || !w.afters.empty() || w.files) {
    w.kind = Why::Kind::Deps;
    return w;
  }
  int32_t k = src.slot(j);
  if (k == -3) w.kind = Why::Kind::Paused;
  if (k < 0) return w;
  const PassedOver& h = src.held(static_cast<size_t>(k));
  w.kind = h.why == PassedOver::Why::Backfill ? Why::Kind::Backfill
           : h.why == PassedOver::Why::Host   ? Why::Kind::Host
                                              : Why::Kind::Gpus;
  w.need = h.need;
  w.host = h.host;
  w.free = h.free_for_job;
  w.closed = h.closed;
  w.room = h.room;
  w.head = h.head;
  w.head_host = h.head_host;
  if (w.kind != Why::Kind::Gpus) return w;
  const auto& mine = plan.reservations_of[j];
  for (size_t r = 0; r < plan.reservations.size(); ++r) {
    if (!src.open(r) || std::find(mine.begin(), mine.end(), r) != mine.end()) continue;
    std::vector<size_t> members;
    for (size_t m : plan.reservations[r].jobs)
      if (!(src.flags(m) & kLeft)) members.push_back(m);
    w.closing.emplace_back(r, std::move(members));
  }
  return w;
}

namespace {

// The engine as why_of reads it.
struct EngineSource {
  const Engine& e;
  const std::vector<uint8_t>& flags_;
  const std::vector<char>& files_;
  const std::vector<long>& open_;
  const std::vector<PassedOver>& held_;
  const std::vector<int32_t>& slots_;
  LifeKind kind(size_t j) const { return kind_of(e.life(j)); }
  uint8_t flags(size_t j) const { return flags_[j]; }
  bool files(size_t j) const { return files_[j]; }
  int32_t slot(size_t j) const { return j < slots_.size() ? slots_[j] : -1; }
  const PassedOver& held(size_t k) const { return held_[k]; }
  bool open(size_t r) const { return open_[r] > 0; }
  std::optional<double> retry_at(size_t j) const { return e.retry_at(j); }
};

// A snapshot as why_of reads it.
struct SnapshotSource {
  const WhySnapshot& s;
  LifeKind kind(size_t j) const { return static_cast<LifeKind>(s.kinds[j]); }
  uint8_t flags(size_t j) const { return s.flags[j]; }
  bool files(size_t j) const { return s.files[j]; }
  int32_t slot(size_t j) const { return j < s.slots.size() ? s.slots[j] : -1; }
  const PassedOver& held(size_t k) const { return s.held[k]; }
  bool open(size_t r) const { return s.open[r]; }
  std::optional<double> retry_at(size_t j) const {
    auto it = std::lower_bound(s.retries.begin(), s.retries.end(), std::pair<size_t, double>{j, -1e300});
    if (it == s.retries.end() || it->first != j) return std::nullopt;
    return it->second;
  }
};

}  // namespace

Why Engine::why(size_t j) const {
  return why_of(plan_, *index_, EngineSource{*this, flags_, files_, res_open_, fx_.pass.held, explain_.slot}, j);
}

WhySnapshot Engine::snapshot() const {
  WhySnapshot s;
  const size_t n = lives_.size();
  s.kinds.resize(n);
  for (size_t j = 0; j < n; ++j) {
    s.kinds[j] = static_cast<uint8_t>(kind(j));
    if (std::optional<double> at = retry_at(j)) s.retries.emplace_back(j, *at);
  }
  s.flags = flags_;
  s.files = files_;
  s.slots = explain_.slot;
  s.held = fx_.pass.held;
  s.open.resize(res_open_.size());
  for (size_t r = 0; r < res_open_.size(); ++r) s.open[r] = res_open_[r] > 0;
  return s;
}

Why WhySnapshot::why(const Plan& plan, const PlanIndex& index, size_t j) const {
  return why_of(plan, index, SnapshotSource{*this}, j);
}

}  // namespace gpuq

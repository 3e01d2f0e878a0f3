#include "gpuq/core/state.h"

#include <fmt/format.h>


#include <algorithm>
#include <charconv>
#include <cmath>

namespace gpuq {

namespace {
constexpr const char* kNames[] = {"pending", "running", "done", "failed", "blocked", "held"};
}

const char* status_name(Status s) { return kNames[static_cast<int>(s)]; }

std::optional<Status> parse_status(std::string_view name) {
  for (int i = 0; i < 6; ++i)
    if (name == kNames[i]) return static_cast<Status>(i);
  return std::nullopt;
}

size_t State::position(std::string_view id) const {
  return index_.find(id, [&](size_t k) -> const std::string& { return entries_[k].first; });
}

const JobState* State::find(const std::string& id) const {
  size_t p = position(id);
  return p == IdIndex::npos ? nullptr : &entries_[p].second;
}

JobState* State::find(const std::string& id) {
  size_t p = position(id);
  return p == IdIndex::npos ? nullptr : &entries_[p].second;
}

JobState& State::at(const std::string& id) {
  size_t p = position(id);
  if (p != IdIndex::npos) return entries_[p].second;
  entries_.push_back({id, JobState{}});
  index_.insert(id, entries_.size() - 1);
  bound_ = nullptr;  // the new entry may be a job's: map them again when asked
  return entries_.back().second;
}

void State::rebind(const Plan& plan) const {
  const size_t n = plan.jobs.size();
  slot_.assign(n, -1);
  if (plan.index.size() == n && entries_.size() < n) {
    // Fewer entries than jobs (a plan part done): each entry finds its job. A state written
    // by gpuq or the original lists them mostly in plan order, so the job after the last
    // one found is tried first, and the plan's index only when that guess is wrong.
    size_t guess = 0;
    for (size_t k = 0; k < entries_.size(); ++k) {
      const std::string& id = entries_[k].first;
      const Job* j = guess < n && plan.jobs[guess].id == id ? &plan.jobs[guess] : plan.find(id);
      if (!j) continue;  // a job the plan no longer has
      size_t p = static_cast<size_t>(j - plan.jobs.data());
      slot_[p] = static_cast<long>(k);
      guess = p + 1;
    }
  } else {
    // Each job finds its entry, the same way round.
    size_t guess = 0;
    for (size_t i = 0; i < n; ++i) {
      const std::string& id = plan.jobs[i].id;
      size_t p = guess < entries_.size() && entries_[guess].first == id ? guess : position(id);
      if (p != IdIndex::npos) {
        slot_[i] = static_cast<long>(p);
        guess = p + 1;
      }
    }
  }
  bound_ = &plan;
  bound_serial_ = plan.serial;
}

void State::set(const Plan& plan, size_t job, JobState s) {
  if (JobState* e = of(plan, job)) {
    *e = std::move(s);
    return;
  }
  const std::string& id = plan.jobs[job].id;
  entries_.push_back({id, std::move(s)});
  index_.insert(id, entries_.size() - 1);
  slot_[job] = static_cast<long>(entries_.size() - 1);  // the other slots stay right
}

void State::set(const std::string& id, JobState s) { at(id) = std::move(s); }

Status State::status_of(const std::string& id) const {
  const JobState* s = find(id);
  return s ? s->status : Status::Pending;
}

}  // namespace gpuq

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

std::vector<EarlierAttempt> earlier_attempts(const JobState& s) {
  std::vector<EarlierAttempt> out;
  if (!s.extra.is_object()) return out;
  auto it = s.extra.find(kEarlierAttemptsField);
  if (it == s.extra.end() || !it->is_array()) return out;
  for (const auto& a : *it) {
    if (!a.is_object() || !a.contains("start") || !a.contains("end") || !a["start"].is_number() ||
        !a["end"].is_number())
      continue;
    EarlierAttempt e;
    e.start = a["start"].get<double>();
    e.end = a["end"].get<double>();
    if (a.contains("gpus") && a["gpus"].is_array())
      for (const auto& g : a["gpus"])
        if (g.is_number_integer()) e.gpus.push_back(g.get<int>());
    if (a.contains("exit") && a["exit"].is_number_integer()) e.exit = a["exit"].get<long long>();
    e.preempted = a.contains("preempted") && a["preempted"].is_boolean() && a["preempted"].get<bool>();
    out.push_back(std::move(e));
  }
  return out;
}

void keep_attempts(const JobState& prev, JobState& next) {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  if (prev.extra.is_object())
    if (auto it = prev.extra.find(kEarlierAttemptsField); it != prev.extra.end() && it->is_array()) list = *it;
  if (prev.start && prev.end) {
    nlohmann::ordered_json run = {{"start", *prev.start}, {"end", *prev.end}};
    if (prev.gpus) run["gpus"] = *prev.gpus;
    if (prev.exit) run["exit"] = *prev.exit;
    if (prev.preempt) run["preempted"] = true;
    list.push_back(std::move(run));
  }
  if (list.empty()) return;
  if (list.size() > kKeptAttempts) list.erase(list.begin(), list.end() - static_cast<long>(kKeptAttempts));
  if (!next.extra.is_object()) next.extra = nlohmann::ordered_json::object();
  next.extra[kEarlierAttemptsField] = std::move(list);
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

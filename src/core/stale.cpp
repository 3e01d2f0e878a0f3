#include "gpuq/core/job_words.h"
#include "gpuq/core/stale.h"

#include <fmt/format.h>

#include <algorithm>
#include <string_view>

namespace gpuq {

std::vector<std::string> job_deps_of(const Job& j) {
  std::vector<std::string> out;
  for (const Dep& d : j.deps)
    if (d.kind != Dep::Kind::File && std::find(out.begin(), out.end(), d.target) == out.end()) out.push_back(d.target);
  return out;
}

std::optional<std::vector<std::string>> deps_ran(const JobState& s) {
  if (!s.extra.is_object()) return std::nullopt;
  auto it = s.extra.find(kDepsRanField);
  if (it == s.extra.end() || !it->is_array()) return std::nullopt;
  std::vector<std::string> out;
  for (const auto& v : *it)
    if (v.is_string()) out.push_back(v.get<std::string>());
  return out;
}

void set_deps_ran(JobState& s, const std::vector<std::string>& ids) {
  if (!s.extra.is_object()) s.extra = nlohmann::ordered_json::object();
  s.extra[kDepsRanField] = ids;
}

namespace {

// No dep added or removed since the job ran, and none to run again or run again since: the
// answer for most done jobs, found without copying a string (`status` asks it of every done
// job). Anything else, even in doubt, is for staleness_of's lists to say.
bool nothing_changed(const Plan& plan, const Job& me, const JobState& s, const State& state) {
  const nlohmann::ordered_json* ran = nullptr;
  if (s.extra.is_object())
    if (auto it = s.extra.find(kDepsRanField); it != s.extra.end()) {
      if (!it->is_array()) return false;
      ran = &*it;
    }
  for (const Dep& d : me.deps) {
    if (d.kind == Dep::Kind::File) continue;
    if (ran && std::none_of(ran->begin(), ran->end(), [&](const auto& v) {
          return v.is_string() && v.template get_ref<const std::string&>() == d.target;
        }))
      return false;
    const JobState* e = state.of(plan, d.job);
    if (!e || (e->status != Status::Done && e->status != Status::Failed)) return false;
    if (e->start && s.start && *e->start > *s.start) return false;
  }
  if (!ran) return true;
  // Each name it ran with is a dep now.
  for (const auto& v : *ran)
    if (!v.is_string() || std::none_of(me.deps.begin(), me.deps.end(), [&](const Dep& d) {
          return d.kind != Dep::Kind::File && d.target == v.template get_ref<const std::string&>();
        }))
      return false;
  return true;
}

}  // namespace

Staleness staleness_of(const Plan& plan, size_t job, const State& state) {
  Staleness out;
  const JobState* s = state.of(plan, job);
  if (!s || s->status != Status::Done) return out;
  const Job& me = plan.jobs[job];
  if (nothing_changed(plan, me, *s, state)) return out;  // most jobs: said without a list made
  std::optional<std::vector<std::string>> ran = deps_ran(*s);
  // The deps already named, each once (a job has a few: a list, not a hash set; `status` asks
  // this of every done job).
  std::vector<std::string_view> said;
  auto say = [&](std::string_view d) {
    if (std::find(said.begin(), said.end(), d) != said.end()) return false;
    said.push_back(d);
    return true;
  };
  std::vector<std::string> now;  // outlives `said`, which holds views of its ids
  if (ran) {
    now = job_deps_of(me);
    auto in = [](const std::vector<std::string>& v, const std::string& d) {
      return std::find(v.begin(), v.end(), d) != v.end();
    };
    for (const std::string& d : now)
      if (!in(*ran, d) && say(d)) out.added.push_back(d);
    for (const std::string& d : *ran)
      if (!in(now, d) && say(d)) out.removed.push_back(d);
  }
  for (const Dep& d : me.deps) {
    if (d.kind == Dep::Kind::File || std::find(said.begin(), said.end(), d.target) != said.end()) continue;
    const JobState* e = state.of(plan, d.job);
    Status st = e ? e->status : Status::Pending;
    if (st != Status::Done && st != Status::Failed) {
      say(d.target);
      out.redoing.push_back(d.target);
    } else if (e->start && s->start && *e->start > *s->start) {
      // Its run started after this one did: it ran again since. (Its start, not its end: under
      // Slurm a start is the queue's, in whole seconds, and may come before the end gpuq saw.)
      say(d.target);
      out.reran.push_back(d.target);
    }
  }
  return out;
}

std::string staleness_text(const Staleness& s) {
  std::vector<std::string> parts;
  auto list = [](const std::vector<std::string>& ids) { return few_of(ids, 5); };
  auto dep = [](size_t n) { return n == 1 ? "dep" : "deps"; };
  if (!s.added.empty()) parts.push_back(fmt::format("{} {} added since it ran", dep(s.added.size()), list(s.added)));
  if (!s.removed.empty())
    parts.push_back(fmt::format("{} {} removed since it ran", dep(s.removed.size()), list(s.removed)));
  if (!s.redoing.empty())
    parts.push_back(fmt::format("{} {} to run again", dep(s.redoing.size()), list(s.redoing)));
  if (!s.reran.empty())
    parts.push_back(fmt::format("{} {} ran again after it started", dep(s.reran.size()), list(s.reran)));
  std::string out;
  for (size_t k = 0; k < parts.size(); ++k) out += (k ? "; " : "") + parts[k];
  return out;
}

std::vector<size_t> stale_jobs(const Plan& plan, const State& state) {
  std::vector<size_t> out;
  for (size_t i = 0; i < plan.jobs.size(); ++i) {
    const JobState* s = state.of(plan, i);  // staleness_of's first questions, without its lists made
    if (!s || s->status != Status::Done || nothing_changed(plan, plan.jobs[i], *s, state)) continue;
    if (!staleness_of(plan, i, state).empty()) out.push_back(i);
  }
  return out;
}

std::vector<size_t> stale_reruns(const Plan& plan, const State& state) {
  std::vector<std::vector<size_t>> dependents(plan.jobs.size());
  for (size_t i = 0; i < plan.jobs.size(); ++i)
    for (const Dep& d : plan.jobs[i].deps)
      if (d.kind != Dep::Kind::File && d.job < plan.jobs.size()) dependents[d.job].push_back(i);
  std::vector<bool> in(plan.jobs.size());
  std::vector<size_t> todo = stale_jobs(plan, state);
  for (size_t i : todo) in[i] = true;
  while (!todo.empty()) {
    size_t i = todo.back();
    todo.pop_back();
    for (size_t k : dependents[i]) {
      if (in[k] || state.status_of(plan, k) != Status::Done) continue;
      in[k] = true;
      todo.push_back(k);
    }
  }
  std::vector<size_t> out;
  for (size_t i = 0; i < plan.jobs.size(); ++i)
    if (in[i]) out.push_back(i);
  return out;
}

}  // namespace gpuq

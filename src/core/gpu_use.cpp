#include "gpuq/core/job_words.h"
#include "gpuq/core/gpu_use.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include <cctype>
#include <unordered_set>

#include "gpuq/core/host_mem.h"
#include "gpuq/core/plan.h"
#include "gpuq/core/rules.h"

namespace gpuq {

namespace {

bool on_node(int g) { return g >= 0 && g <= kMaxGpuId; }

std::string process_text(const GpuProcess& p) {
  std::string s = std::to_string(p.pid);
  std::string what = !p.command.empty() ? p.command : p.name;
  if (!what.empty()) s += " `" + what + "`";
  if (p.used_mib >= 0) s += fmt::format(" ({} MiB)", p.used_mib);
  return s;
}

bool ignored(const GpuProcess& p, const GpuRules& rules) {
  return std::find(rules.ignore.begin(), rules.ignore.end(), p.name) != rules.ignore.end();
}

// The memory in use on each GPU that the memory test counts: less what processes of an
// --ignore-process name hold there, where the process list (NVML) gives it.
std::map<int, long long> counted_memory(const GpuReading& r, const GpuRules& rules) {
  std::map<int, long long> used = *r.used_mib;
  if (!r.processes || rules.ignore.empty()) return used;
  for (const auto& [g, procs] : *r.processes)
    for (const GpuProcess& p : procs)
      if (auto it = used.find(g); it != used.end() && p.used_mib > 0 && ignored(p, rules))
        it->second = std::max(0LL, it->second - p.used_mib);
  return used;
}

}  // namespace

std::map<int, std::vector<GpuProcess>> foreign_processes(const GpuReading& r, const State& state,
                                                         const GpuRules& rules) {
  std::map<int, std::vector<GpuProcess>> out;
  if (!r.processes) return out;
  std::unordered_set<long long> jobs;
  for (const auto& [id, s] : state.entries())
    if ((s.status == Status::Running || s.kill_sent) && s.pid) jobs.insert(*s.pid);
  for (const auto& [g, procs] : *r.processes)
    for (const GpuProcess& p : procs) {
      bool ours = jobs.count(p.pid) ||
                  std::any_of(p.lineage.begin(), p.lineage.end(), [&](long long q) { return jobs.count(q) > 0; });
      if (!ours && !ignored(p, rules)) out[g].push_back(p);
    }
  return out;
}

namespace {

// ReadingSeen's busy and others over the reading's foreign processes, found once.
GpuMask busy_of(const GpuReading& r, const std::map<int, std::vector<GpuProcess>>& foreign, const GpuRules& rules) {
  GpuMask busy = 0;
  if (r.used_mib) busy |= busy_by_memory(counted_memory(r, rules), rules.max_used_mib);
  for (const auto& [g, procs] : foreign)
    if (on_node(g)) busy |= GpuMask{1} << g;
  for (const auto& [g, why] : r.lost)
    if (on_node(g)) busy |= GpuMask{1} << g;
  return busy;
}

std::map<int, std::string> others_of(const GpuReading& r, const State& state,
                                     const std::map<int, std::vector<GpuProcess>>& foreign, const GpuRules& rules) {
  std::map<int, std::string> out;
  GpuMask ours = busy_in_state(state);
  auto mine = [&](int g) { return !on_node(g) || (ours >> g & 1); };
  if (r.used_mib)
    for (auto& [g, mib] : used_by_others(counted_memory(r, rules), rules.max_used_mib, state))
      out[g] = busy_by_other_text(g, mib);
  for (const auto& [g, procs] : foreign) {
    if (mine(g)) continue;
    std::string list = few_of(procs.size(), 3, [&](size_t k) { return process_text(procs[k]); });
    out[g] = fmt::format("GPU {} busy: process{} {} {} no gpuq job's", g, procs.size() == 1 ? "" : "es", list,
                         procs.size() == 1 ? "is" : "are");
  }
  for (const auto& [g, why] : r.lost)
    if (!mine(g)) out[g] = fmt::format("GPU {} busy: lost ({})", g, why);
  return out;
}

}  // namespace

double packed_gib_now(const Policy& p, const Job& j, const JobState* s) {
  double gib = p.packed_gib(j);
  if (gib > 0 && j.on_oom && s && s->oom_retries.value_or(0) > 0) gib = oom_values(j, *s->oom_retries).gpu_mem_gib;
  return gib;
}

ReadingSeen see_reading(const GpuReading& r, const State& state, const GpuRules& rules, GpuMask node,
                        const std::function<double(const std::string&)>* declared) {
  ReadingSeen seen;
  if (declared) seen.memory = memory_use(r, state, rules, *declared);
  seen.foreign = foreign_processes(r, state, rules);
  if (r.used_mib) {
    seen.busy = busy_of(r, seen.foreign, rules);
    seen.others = others_of(r, state, seen.foreign, rules);
  }
  seen.free = node & ~(busy_in_state(state) | seen.busy);
  return seen;
}

std::function<double(const std::string&)> packed_sizes(const Plan& plan, const Policy& p, const State& state) {
  return [&plan, &p, &state](const std::string& id) {
    const Job* j = plan.find(id);
    return j ? packed_gib_now(p, *j, state.find(id)) : 0.0;
  };
}

ReadingSeen read_gpus(const GpuReading& r, const State& state, const Plan& plan, Policy& p, const GpuRules& rules,
                      GpuMask node, bool memory) {
  if (!r.total_mib.empty()) p.gpu_mem_total = gpu_totals_gib(r);
  std::function<double(const std::string&)> declared = packed_sizes(plan, p, state);
  return see_reading(r, state, rules, node, memory ? &declared : nullptr);
}

std::vector<double> gpu_totals_gib(const GpuReading& r) {
  std::vector<double> out;
  for (auto [g, mib] : r.total_mib)
    if (on_node(g)) {
      out.resize(kMaxGpuId + 1, 0);
      out[static_cast<size_t>(g)] = static_cast<double>(mib) / 1024;
    }
  return out;
}

MemoryUse memory_use(const GpuReading& r, const State& state, const GpuRules& rules,
                     const std::function<double(const std::string&)>& declared) {
  MemoryUse out;
  constexpr double kGiB = 1024;  // MiB
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> packed(kMaxGpuId + 1, 0.0);  // GiB the running packed jobs declared, per GPU
  struct Entry {
    const std::string* id;
    double gib;  // it packs with this; 0: whole
    bool running;
    const std::vector<int>* gpus;
  };
  std::map<long long, Entry> by_pid;
  for (const auto& [id, s] : state.entries()) {
    bool running = s.status == Status::Running;
    if (!(running || s.kill_sent) || !s.gpus) continue;
    double gib = declared(id);
    for (int g : *s.gpus) {
      if (!on_node(g)) continue;
      if (gib <= 0)
        out.other[static_cast<size_t>(g)] = inf;  // whole: a job of no plan, or a whole job still dying
      else if (running)
        packed[static_cast<size_t>(g)] += gib;
      else
        out.other[static_cast<size_t>(g)] += gib;  // a stopped packed job: its GiB until it is gone
    }
    if (s.pid) by_pid[*s.pid] = {&id, gib, running, &*s.gpus};
  }
  for (const auto& [g, why] : r.lost)
    if (on_node(g)) out.other[static_cast<size_t>(g)] = inf;
  if (r.processes) {
    // Each process is its job's (by its lineage) or no job's.
    std::map<std::pair<const Entry*, int>, double> used;  // (job's entry, GPU) -> GiB
    for (const auto& [g, procs] : *r.processes) {
      if (!on_node(g)) continue;
      for (const GpuProcess& p : procs) {
        const Entry* owner = nullptr;
        if (auto it = by_pid.find(p.pid); it != by_pid.end()) owner = &it->second;
        for (size_t k = 0; !owner && k < p.lineage.size(); ++k)
          if (auto it = by_pid.find(p.lineage[k]); it != by_pid.end()) owner = &it->second;
        double gib = p.used_mib >= 0 ? static_cast<double>(p.used_mib) / kGiB : 0;
        if (owner) {
          used[{owner, g}] += gib;
        } else if (!ignored(p, rules)) {
          // A process of no job: its memory, or all of the GPU's when the list does not give it.
          out.other[static_cast<size_t>(g)] += p.used_mib >= 0 ? gib : inf;
        }
      }
    }
    for (const auto& [key, gib] : used) {
      const Entry& e = *key.first;
      const std::string* id = e.id;
      int g = key.second;
      if (e.running) {
        double& most = out.used_gib[*id];
        most = std::max(most, gib);
      }
      if (e.gib > 0 && e.running && gib > e.gib) {
        out.other[static_cast<size_t>(g)] += gib - e.gib;
        out.over.push_back({*id, g, gib, e.gib});
      } else if (e.gib > 0 && !e.running) {
        out.other[static_cast<size_t>(g)] += std::max(0.0, gib - e.gib);  // beyond its declared, counted above
      }
    }
  } else if (r.used_mib) {
    // No process list: the GPU's reading beyond what its packed jobs declared is another's.
    for (const auto& [g, mib] : counted_memory(r, rules))
      if (on_node(g)) {
        double beyond = static_cast<double>(mib) / kGiB - packed[static_cast<size_t>(g)] - out.other[static_cast<size_t>(g)];
        if (beyond > 0) out.other[static_cast<size_t>(g)] += beyond;
      }
  }
  return out;
}

namespace {
bool ending(const JobState& s) { return s.status != Status::Running && s.kill_sent && s.gpus; }
}  // namespace

GpuMask ending_gpus(const State& state) {
  GpuMask m = 0;
  for (const auto& [id, s] : state.entries())
    if (ending(s)) m |= mask_of(*s.gpus);
  return m;
}

void name_ending_holders(const State& state, std::map<int, std::string>& others) {
  for (const auto& [id, s] : state.entries())
    if (ending(s))
      for (int g : *s.gpus)
        others.emplace(g, fmt::format("GPU {} busy: {} was stopped and its processes are still ending (SIGTERM "
                                      "sent; SIGKILL after --kill-grace)",
                                      g, id));
}

void share_energy(const std::map<int, unsigned long long>& before, const std::map<int, unsigned long long>& after,
                  State& state, const std::function<double(const std::string&)>& declared) {
  struct Holder {
    JobState* entry;
    double gib;  // 0: it holds the GPU whole
  };
  std::map<int, std::vector<Holder>> on;
  for (auto& [id, s] : state.entries()) {
    if (s.status != Status::Running || !s.gpus || !s.start) continue;
    double gib = declared(id);
    for (int g : *s.gpus) on[g].push_back({&s, gib});
  }
  for (auto& [g, holders] : on) {
    auto b = before.find(g), a = after.find(g);
    if (b == before.end() || a == after.end() || a->second < b->second) continue;
    double joules = static_cast<double>(a->second - b->second) / 1000;
    size_t whole = 0;
    double gib = 0;
    for (const Holder& h : holders) whole += h.gib <= 0, gib += h.gib;
    for (const Holder& h : holders) {
      double share = whole ? (h.gib <= 0 ? 1.0 / static_cast<double>(whole) : 0.0)
                           : gib > 0 ? h.gib / gib : 1.0 / static_cast<double>(holders.size());
      h.entry->energy_j = h.entry->energy_j.value_or(0) + std::llround(joules * share);
    }
  }
}

std::vector<IdleHolder> note_idle_holders(const std::vector<IdleHolder>& seen,
                                          const std::map<int, std::vector<GpuProcess>>& foreign,
                                          const std::map<int, int>& util_pct, double idle_pct, double now) {
  std::vector<IdleHolder> out;
  for (const auto& [g, procs] : foreign) {
    auto u = util_pct.find(g);
    if (u == util_pct.end() || u->second > idle_pct) continue;
    for (const GpuProcess& p : procs) {
      if (p.used_mib == 0) continue;  // holds nothing there
      IdleHolder h{g, p.pid, p.user, p.name, p.command, p.used_mib, now};
      for (const IdleHolder& before : seen)
        if (before.gpu == g && before.pid == p.pid) h.since = before.since;
      out.push_back(std::move(h));
    }
  }
  return out;
}

std::vector<IdleHolder> merge_idle_holders(const std::vector<std::vector<IdleHolder>>& lists) {
  std::map<std::pair<int, long long>, IdleHolder> by;
  for (const auto& list : lists)
    for (const IdleHolder& h : list) {
      auto [it, fresh] = by.try_emplace({h.gpu, h.pid}, h);
      if (!fresh && h.since < it->second.since) it->second = h;
    }
  std::vector<IdleHolder> out;
  for (auto& [key, h] : by) out.push_back(std::move(h));
  return out;
}

std::string probe_source_text(const GpuReading& r) {
  if (r.source.empty()) return r.source_note.empty() ? "none" : r.source_note;
  if (r.source_note.empty()) return r.source;
  auto low = [](std::string t) {
    for (char& c : t) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return t;
  };
  if (low(r.source_note).rfind(low(r.source), 0) == 0) return r.source_note;
  return r.source + " (" + r.source_note + ")";
}

}  // namespace gpuq

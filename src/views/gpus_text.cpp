// `gpuq gpus`: the node as gpuq sees it (the probe's reading, the topology, the pairs), as text and JSON.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "gpuq/views/gpus_text.h"

#include <cmath>

#include "gpuq/core/local_time.h"

namespace gpuq {

std::string gpus_text(const GpusSeen& n) {
  const GpuReading& r = n.reading;
  std::string out = fmt::format("GPU probe: {}\n", probe_source_text(r));
  if (!r.used_mib) out += fmt::format("no reading: {}\n", r.problem);
  out += fmt::format("{:>3}  {:<28} {:>17}  {:>4}  {}\n", "GPU", "name", "memory used/total", "util",
                     "processes of no gpuq job");
  for (int g : n.gpus) {
    std::string mem = "?", util = "?", procs = "-";
    if (r.used_mib && r.used_mib->count(g))
      mem = r.total_mib.count(g) ? fmt::format("{} / {} MiB", r.used_mib->at(g), r.total_mib.at(g))
                                 : fmt::format("{} MiB", r.used_mib->at(g));
    if (r.util_pct.count(g)) util = fmt::format("{}%", r.util_pct.at(g));
    if (r.lost.count(g)) mem = "lost: " + r.lost.at(g);
    if (auto it = n.foreign.find(g); it != n.foreign.end()) {
      procs.clear();
      for (const GpuProcess& p : it->second)
        procs += fmt::format("{}{} `{}`{}", procs.empty() ? "" : ", ", p.pid, p.command.empty() ? p.name : p.command,
                             p.used_mib >= 0 ? fmt::format(" ({} MiB)", p.used_mib) : "");
    } else if (!r.processes) {
      procs = "(not listed by " + (r.source.empty() ? std::string("this probe") : r.source) + ")";
    }
    std::string name = r.names.count(g) ? r.names.at(g) : "";
    out += fmt::format("{:>3}  {:<28} {:>17}  {:>4}  {}\n", g, name.substr(0, 28), mem, util, procs);
  }
  for (const auto& [g, d] : n.drained)
    out += fmt::format("drained: {}; no job starts on it (gpuq undrain {})\n", drain_text(d, local_time(d.at, n.now)), g);
  if (!n.drain_note.empty()) out += n.drain_note + "\n";
  out += fmt::format("faults read: {}\n", r.faults_seen.empty() ? "none (no probe reading)" : r.faults_seen);
  const Topology& t = n.placement.topology;
  if (t.empty()) {
    out += "connections: not known\n";
  } else {
    out += "connections:\n      ";
    for (int b : t.gpus) out += fmt::format("{:>6}", fmt::format("GPU{}", b));
    out += "\n";
    for (int a : t.gpus) {
      out += fmt::format("{:<6}", fmt::format("GPU{}", a));
      for (int b : t.gpus) out += fmt::format("{:>6}", a == b ? "X" : link_name(t.between(a, b)));
      out += "\n";
    }
  }
  out += n.placement_line + "\n";
  out += idle_holders_text(n.idle, n.now, n.idle_after, n.idle_pct);
  if (!n.idle_note.empty() && !n.foreign.empty()) out += n.idle_note + "\n";  // where it could matter
  return out;
}

std::string idle_holders_text(const std::vector<IdleHolder>& idle, double now, double after, double idle_pct) {
  std::string out;
  for (const IdleHolder& h : idle) {
    if (now - h.since < after) continue;
    if (out.empty())
      out = fmt::format("GPU memory held by processes of no gpuq job on idle GPUs (reported; gpuq never stops "
                        "them):\n");
    double hours = (now - h.since) / 3600;
    out += fmt::format("  GPU {}: {}process {} `{}`{}, at or below {:g}% for {} (since {})\n", h.gpu,
                       h.user.empty() ? "" : h.user + "'s ", h.pid, h.command.empty() ? h.name : h.command,
                       h.used_mib >= 0 ? fmt::format(", {} MiB", h.used_mib) : "", idle_pct,
                       hours >= 1 ? fmt::format("{:.1f} h", hours) : fmt::format("{:.0f} min", std::floor(hours * 60)),
                       local_time(h.since, now));
  }
  return out;
}

std::string gpus_json(const GpusSeen& n) {
  using nlohmann::json;
  const GpuReading& r = n.reading;
  json out = {{"source", r.source.empty() ? json(nullptr) : json(r.source)},
              {"source_note", r.source_note},
              {"problem", r.used_mib ? json(nullptr) : json(r.problem)}};
  json gpus = json::array();
  for (int g : n.gpus) {
    json procs = json::array();
    if (r.processes && r.processes->count(g))
      for (const GpuProcess& p : r.processes->at(g)) {
        bool foreign = false;
        if (auto it = n.foreign.find(g); it != n.foreign.end())
          for (const GpuProcess& q : it->second) foreign |= q.pid == p.pid;
        procs.push_back({{"pid", p.pid}, {"name", p.name}, {"command", p.command},
                         {"used_mib", p.used_mib >= 0 ? json(p.used_mib) : json(nullptr)}, {"foreign", foreign}});
      }
    auto opt = [&](const auto& m) { return m.count(g) ? json(m.at(g)) : json(nullptr); };
    gpus.push_back({{"index", g},
                    {"name", opt(r.names)},
                    {"used_mib", r.used_mib ? opt(*r.used_mib) : json(nullptr)},
                    {"total_mib", opt(r.total_mib)},
                    {"util_pct", opt(r.util_pct)},
                    {"lost", opt(r.lost)},
                    {"ecc_uncorrected", opt(r.ecc_uncorrected)},
                    {"drained", n.drained.count(g) ? json{{"why", n.drained.at(g).why},
                                                          {"by", n.drained.at(g).by},
                                                          {"at", n.drained.at(g).at},
                                                          {"fault", n.drained.at(g).fault}}
                                                   : json(nullptr)},
                    {"processes", r.processes ? procs : json(nullptr)}});
  }
  out["gpus"] = gpus;
  json links = json::array();
  for (const auto& [ab, l] : n.placement.topology.links)
    links.push_back({{"a", ab.first}, {"b", ab.second}, {"link", link_name(l)}, {"nvlink_lanes", l.lanes}});
  out["links"] = links;
  json pairs = json::array();
  for (auto [a, b] : pairs_in_use(n.placement, mask_of(n.gpus))) pairs.push_back({a, b});
  out["pairs"] = pairs;
  json idle = json::array();
  for (const IdleHolder& h : n.idle)
    idle.push_back({{"gpu", h.gpu}, {"pid", h.pid}, {"user", h.user}, {"name", h.name}, {"command", h.command},
                    {"used_mib", h.used_mib >= 0 ? json(h.used_mib) : json(nullptr)}, {"idle_since", h.since}});
  out["idle_processes"] = idle;
  out["faults_read"] = r.faults_seen;
  out["placement"] = n.placement.kind == Placement::Kind::Auto     ? "auto"
                     : n.placement.kind == Placement::Kind::Pairs  ? "pairs"
                                                                  : "original";
  return out.dump(2) + "\n";
}

}  // namespace gpuq

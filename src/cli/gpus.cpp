// `gpuq gpus`: the node as gpuq sees it (the probe's reading, the topology, the pairs).
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "gpuq/core/gpu_use.h"
#include "gpuq/core/topology.h"
#include "gpuq/live/probe.h"
#include "gpuq/live/store.h"

#include "cli.h"

namespace gpuq::cli {

namespace {

/// The state of the plan named by --plan or $GPUQ_PLAN, to tell gpuq's jobs' processes from
/// others'; empty without one (then every process counts as another's).
State state_if_any(const Flags& f) {
  Flags g = f;
  if (g.plan.empty())
    if (const char* env = std::getenv("GPUQ_PLAN"); env && *env) g.plan = env;
  if (g.plan.empty()) return {};
  try {
    return read_state(plan_paths(g));
  } catch (const std::exception& e) {
    fmt::print(stderr, "gpuq gpus: {} (processes are judged without it)\n", e.what());
    return {};
  }
}

struct Node {
  GpuReading reading;
  Placement placement;
  std::vector<int> gpus;  // what the probe sees, else --gpus
  State state;
  std::map<int, std::vector<GpuProcess>> foreign;
};

std::string text_of(const Node& n) {
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
  out += placement_line(n.placement, mask_of(n.gpus)) + "\n";
  return out;
}

std::string json_of(const Node& n) {
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
  out["placement"] = n.placement.kind == Placement::Kind::Auto     ? "auto"
                     : n.placement.kind == Placement::Kind::Pairs  ? "pairs"
                                                                  : "original";
  return out.dump(2) + "\n";
}

}  // namespace

int cmd_gpus(Flags& f) {
  // A plan (--plan or $GPUQ_PLAN; gpus needs none) gives its settings.
  if (f.plan.empty())
    if (const char* env = std::getenv("GPUQ_PLAN"); env && *env) f.plan = env;
  if (!f.plan.empty() && !take_plan_settings_only(f, "gpus")) return kExitBadInput;
  auto node_ids = node_gpus(f);
  if (!node_ids) return kExitBadInput;
  RunOptions opt = run_options(f, *node_ids);
  std::string err;
  std::optional<Placement> placement = parse_pairs(f.pairs.empty() ? "auto" : f.pairs, &err);
  if (!placement) {
    fmt::print(stderr, "gpuq gpus: {}\n", err);
    return kExitBadInput;
  }
  std::unique_ptr<GpuProbe> probe = probe_of(opt);
  Node n;
  n.reading = probe->read();
  n.placement = std::move(*placement);
  if (n.placement.kind == Placement::Kind::Auto) n.placement.topology = probe->topology().value_or(Topology{});
  if (n.reading.used_mib) {
    GpuMask seen = 0;
    for (auto& [g, mib] : *n.reading.used_mib) seen |= GpuMask{1} << g;
    for (auto& [g, why] : n.reading.lost) seen |= GpuMask{1} << g;
    n.gpus = ids_of(seen);
  } else {
    n.gpus = *node_ids;
  }
  n.state = state_if_any(f);
  n.foreign = foreign_processes(n.reading, n.state, GpuRules{opt.max_used_mib, opt.ignore_process});
  std::string out = f.json ? json_of(n) : text_of(n);
  std::fwrite(out.data(), 1, out.size(), stdout);
  return n.reading.used_mib ? 0 : kExitFailure;
}

void add_gpus_command(CLI::App& app, Flags& f, Action& action) {
  auto* gpus = app.add_subcommand("gpus", "show the GPUs as gpuq sees them: memory, utilization, processes of no "
                                          "gpuq job, connections, the pairs it uses, and the probe");
  add_flags(gpus, f, {kGpus, kMaxUsed});
  gpus->add_flag("--json", f.json, "print one JSON object instead of text");
  setting_flag(f, gpus->add_option("--nvidia-smi", f.nvidia_smi,
                                   "the nvidia-smi command (default: $GPUQ_NVIDIA_SMI, else nvidia-smi)")
                       ->type_name(kCommandType));
  add_gpu_flags(gpus, f, "auto");
  gpus->callback([&] { action = [&] { return cmd_gpus(f); }; });
}

}  // namespace gpuq::cli

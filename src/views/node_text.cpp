// `gpuq status --node` as text.
#include "gpuq/views/node_text.h"

#include <fmt/format.h>

#include <map>
#include <optional>
#include <set>

#include "gpuq/core/local_time.h"

namespace gpuq {

namespace {

// The node-wide decision, and for each want in its fair order when it starts, in words.
struct Whens {
  NodeDecision d;
  std::vector<std::string> when;             // per d.order
  std::vector<std::optional<double>> start;  // per d.order: when predict_node starts it (none: now, or never)
};

Whens whens(const std::vector<NodeUser>& users, GpuMask node, double now, const NodeConfig& config,
            double backfill_max_hours) {
  Whens w{decide_node(users, node, node, now, config, backfill_max_hours, nullptr), {}};
  const NodeDecision& d = w.d;
  std::map<std::tuple<size_t, size_t, size_t>, std::vector<int>> next;
  for (const NodeStart& s : d.starts) next[{s.slot.user, s.slot.run, s.slot.want}] = s.gpus;
  std::set<std::tuple<size_t, size_t, size_t>> capped;
  for (const NodeSlot& s : d.capped) capped.insert({s.user, s.run, s.want});
  std::map<std::tuple<size_t, size_t, size_t>, NodePredicted> later;
  for (NodePredicted& p : predict_node(users, node, now, config, backfill_max_hours, nullptr))
    later[{p.slot.user, p.slot.run, p.slot.want}] = std::move(p);
  for (size_t k = 0; k < d.order.size(); ++k) {
    const NodeSlot& s = d.order[k];
    const NodeWant& want = users[s.user].runs[s.run].wants[s.want];
    auto it = next.find({s.user, s.run, s.want});
    int cap = config.limits_of(users[s.user].name).max_gpus.value_or(0);
    auto p = later.find({s.user, s.run, s.want});
    bool at_cap = capped.count({s.user, s.run, s.want}) > 0;
    std::string cap_text = at_cap ? fmt::format("at {}'s cap of {} GPU{} ({} held)", users[s.user].name, cap,
                                                cap == 1 ? "" : "s", held_gpus(users[s.user]))
                                  : "";
    w.start.push_back(it == next.end() && p != later.end() && !(at_cap && want.gpus > cap)
                          ? std::optional<double>(p->second.start)
                          : std::nullopt);
    w.when.push_back(
        it != next.end() ? fmt::format("starts at its run's next look, on GPUs {}", py_list(it->second))
        : at_cap && want.gpus > cap ? fmt::format("never: more GPUs than {}'s cap of {}", users[s.user].name, cap)
        : p != later.end()
            ? fmt::format("{}starts ~{}{}, {} in the node's fair order", at_cap ? cap_text + "; " : "",
                          local_time(p->second.start, now),
                          p->second.after_job.empty()
                              ? ""
                              : fmt::format(" after {}'s {}", p->second.after_user, p->second.after_job),
                          k + 1)
        : at_cap ? cap_text
                 : fmt::format("{} in the node's fair order", k + 1));
  }
  return w;
}

}  // namespace

std::map<std::string, NodeWait> node_waits(const std::vector<NodeUser>& users, GpuMask node, double now,
                                           const NodeConfig& config, double backfill_max_hours, std::string_view user,
                                           std::string_view plan) {
  std::map<std::string, NodeWait> out;
  Whens w = whens(users, node, now, config, backfill_max_hours);
  for (size_t k = 0; k < w.d.order.size(); ++k) {
    const NodeSlot& s = w.d.order[k];
    const NodeRun& r = users[s.user].runs[s.run];
    if (users[s.user].name == user && r.plan == plan) out[r.wants[s.want].id] = {w.when[k], w.start[k]};
  }
  return out;
}

std::string node_text(const std::string& dir, const std::vector<NodeUser>& users, const std::vector<std::string>& notes,
                      GpuMask node, double now, const NodeConfig& config, double backfill_max_hours) {
  std::string out;
  for (const std::string& n : notes) out += "node: " + n + "\n";
  Whens w = whens(users, node, now, config, backfill_max_hours);
  const NodeDecision& d = w.d;
  out += fmt::format("node directory {}: {} of {} GPUs held, {} job(s) waiting for GPUs\n", dir, count(d.held),
                     count(node), d.order.size());
  out += fmt::format("{:<12} {:<28} {:<14} {:<8} {}\n", "user", "job", "GPUs", "status", "when");
  for (const NodeUser& u : users)
    for (const NodeRun& r : u.runs)
      for (const NodeHold& h : r.holds)
        out += fmt::format("{:<12} {:<28} {:<14} {:<8} since {}, est. {}{}\n", u.name, h.id, py_list(h.gpus),
                           "running", local_time(h.start, now), duration_text(h.est_hours * 3600),
                           r.gone ? "; its gpuq run has ended (the job goes on, its GPUs kept until it ends)" : "");
  for (size_t k = 0; k < d.order.size(); ++k) {
    const NodeSlot& s = d.order[k];
    const NodeWant& want = users[s.user].runs[s.run].wants[s.want];
    out += fmt::format("{:<12} {:<28} {:<14} {:<8} {}\n", users[s.user].name, want.id,
                       fmt::format("{} GPU{}", want.gpus, want.gpus == 1 ? "" : "s"), "waiting", w.when[k]);
  }
  std::string shares;
  for (const NodeUser& u : users) {
    const NodeLimits& l = config.limits_of(u.name);
    std::string limits;
    if (l.share != 1) limits += fmt::format("share {:g}", l.share);
    if (l.max_gpus) limits += fmt::format("{}at most {} GPUs", limits.empty() ? "" : ", ", *l.max_gpus);
    shares += fmt::format("{}{} {:.2f}{}", shares.empty() ? "" : ", ", u.name,
                          decayed_usage(u.usage_gpu_hours, u.usage_at, now, config.half_life_days),
                          limits.empty() ? "" : " (" + limits + ")");
  }
  if (!shares.empty())
    out += fmt::format("GPU-hours used (half-life {:g} days; the least used go first): {}\n", config.half_life_days,
                       shares);
  return out;
}

}  // namespace gpuq

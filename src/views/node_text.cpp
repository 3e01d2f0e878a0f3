// `gpuq status --node` as text.
#include "gpuq/views/node_text.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <tuple>
#include <optional>
#include <set>

#include "gpuq/core/local_time.h"

namespace gpuq {

namespace {

// A packed job's GiB per GPU, after its GPUs ("" for a job that takes them whole).
std::string packed_text(double mem_gib) { return mem_gib > 0 ? fmt::format(", {:g} GiB", mem_gib) : ""; }

// "; stopping: preempted for bo's b0", "; preempted ~14:30 for bo's b0": a running job the node's
// prediction preempts (or that is stopping for a preemption now).
std::string preempted_text(const NodeWaits& w, size_t user, size_t run, const NodeHold& h, double now) {
  if (h.preempting) return "; stopping: preempted";
  for (const NodePreemptedHold& p : w.preempted)
    if (p.user == user && p.run == run && p.id == h.id)
      return fmt::format("; preempted ~{} for {}", local_time(p.at, now), p.for_want);
  return "";
}

// A plan as status --node names it: its folder's name and its file ("exp/plan.json"), enough to
// tell a user's scratch plan from their real one.
std::string plan_short(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos || slash == 0) return path;
  size_t before = path.rfind('/', slash - 1);
  return path.substr(before == std::string::npos ? 0 : before + 1);
}

}  // namespace

std::string node_why_text(const NodeWhy& y, double now) {
  std::string cap = y.at_cap ? fmt::format("at {}'s cap of {} GPU{} ({} held)", y.user, y.cap, y.cap == 1 ? "" : "s",
                                           y.held)
                             : "";
  switch (y.kind) {
    case NodeWhy::Kind::NextLook: return fmt::format("starts at its run's next look, on GPUs {}", py_list(y.gpus));
    case NodeWhy::Kind::Never:
      if (y.gib > 0) return fmt::format("never: {:g} GiB, more than a GPU takes ({:.1f})", y.gib, y.room);
      if (y.host_never)
        return y.need.cpus > y.host.cpus + 1e-9
                   ? fmt::format("never: needs {} cores, the node has {:g} for jobs", y.need.cpus, y.host.cpus)
                   : fmt::format("never: needs {:g} GiB of host memory, the node has {:.1f} for jobs", y.need.mem_gib,
                                 y.host.mem_gib);
      return fmt::format("never: more GPUs than {}'s cap of {}", y.user, y.cap);
    case NodeWhy::Kind::Later:
      if (!y.preempting.empty())  // on the GPUs of the running jobs it preempts
        return fmt::format("{}starts ~{} preempting {}, {} in the node's fair order", cap.empty() ? "" : cap + "; ",
                           local_time(y.start, now), fmt::join(y.preempting, ", "), y.place);
      return fmt::format("{}starts ~{}{}, {} in the node's fair order", cap.empty() ? "" : cap + "; ",
                         local_time(y.start, now),
                         y.after_job.empty() ? ""
                                             : fmt::format(" after {}'s {}{}", y.after_user, y.after_job,
                                                           y.after_waiting ? " (not started yet)" : ""),
                         y.place);
    case NodeWhy::Kind::AtCap: return cap;
    case NodeWhy::Kind::InLine: break;
  }
  return fmt::format("{} in the node's fair order", y.place);
}

std::string node_text(const std::string& dir, const std::vector<NodeUser>& users, const std::vector<std::string>& notes,
                      GpuMask node, double now, const NodeConfig& config, double backfill_max_hours,
                      const NodeRoom& room, const HostRoom& host) {
  std::string out;
  for (const std::string& n : notes) out += "node: " + n + "\n";
  NodeWaits w = node_whys(users, node, now, config, backfill_max_hours, room, host);
  const NodeDecision& d = w.d;
  out += fmt::format("node directory {}: {} of {} GPUs held, {} job(s) waiting for GPUs\n", dir, count(d.held),
                     count(node), d.order.size());
  // The columns as wide as their widest cell (a user, a job id, 8 GPUs' list), at least the usual.
  struct Row {
    std::string user, plan, job, gpus, status, when;
  };
  std::vector<Row> rows;
  for (size_t ui = 0; ui < users.size(); ++ui)
    for (size_t ri = 0; ri < users[ui].runs.size(); ++ri) {
      const NodeUser& u = users[ui];
      const NodeRun& r = u.runs[ri];
      for (const NodeHold& h : r.holds) {
        bool overdue = h.est_hours > 0 && now - h.start > h.est_hours * 3600;
        std::string when = preempted_text(w, ui, ri, h, now);
        // A job without GPUs is on the node for its cores and host memory (issue 45).
        std::string held = !h.gpus.empty() ? py_list(h.gpus) + packed_text(h.mem_gib)
                                           : fmt::format("no GPU, {:g} cores, {:g} GiB", h.cpus, h.host_mem_gib);
        rows.push_back({u.name, plan_short(r.plan), h.id, held, "running",
                        fmt::format("since {}, est. {}{}{}{}", local_time(h.start, now), duration_text(h.est_hours * 3600),
                                    overdue ? ", overdue" : "", when,
                                    r.gone ? h.gpus.empty() ? "; its gpuq run has ended (the job goes on)"
                                                            : "; its gpuq run has ended (the job goes on, its GPUs kept "
                                                              "until it ends)"
                                           : "")});
      }
    }
  for (size_t k = 0; k < d.order.size(); ++k) {
    const NodeSlot& s = d.order[k];
    const NodeWant& want = users[s.user].runs[s.run].wants[s.want];
    rows.push_back({users[s.user].name, plan_short(users[s.user].runs[s.run].plan), want.id,
                    fmt::format("{} GPU{}{}", want.gpus, want.gpus == 1 ? "" : "s", packed_text(want.mem_gib)),
                    "waiting", node_why_text(w.why[k], now)});
  }
  size_t wu = 12, wp = 16, wj = 28, wg = 14;
  for (const Row& r : rows) {
    wu = std::max(wu, r.user.size());
    wp = std::max(wp, r.plan.size());
    wj = std::max(wj, r.job.size());
    wg = std::max(wg, r.gpus.size());
  }
  out += fmt::format("{:<{}} {:<{}} {:<{}} {:<{}} {:<8} {}\n", "user", wu, "plan", wp, "job", wj, "GPUs", wg, "status",
                     "when");
  for (const Row& r : rows)
    out += fmt::format("{:<{}} {:<{}} {:<{}} {:<{}} {:<8} {}\n", r.user, wu, r.plan, wp, r.job, wj, r.gpus, wg, r.status,
                       r.when);
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

std::string node_json(const std::string& dir, const std::vector<NodeUser>& users, const std::vector<std::string>& notes,
                      GpuMask node, double now, const NodeConfig& config, double backfill_max_hours,
                      const NodeRoom& room, const HostRoom& host) {
  using nlohmann::ordered_json;
  NodeWaits w = node_whys(users, node, now, config, backfill_max_hours, room, host);
  // Each want's place in the node's fair order, and its reason.
  std::map<std::tuple<size_t, size_t, size_t>, size_t> at;
  for (size_t k = 0; k < w.d.order.size(); ++k) at[{w.d.order[k].user, w.d.order[k].run, w.d.order[k].want}] = k;
  ordered_json out;
  out["dir"] = dir;
  out["now"] = now;
  out["notes"] = notes;
  out["gpus_held"] = count(w.d.held);
  ordered_json drained = ordered_json::array();  // the node's drained GPUs (gpu_health.h)
  for (const auto& [g, d] : node_drained(users))
    drained.push_back({{"gpu", g}, {"why", d.why}, {"by", d.by}, {"at", d.at}, {"fault", d.fault}});
  out["drained"] = std::move(drained);
  ordered_json us = ordered_json::array();
  for (size_t u = 0; u < users.size(); ++u) {
    ordered_json runs = ordered_json::array();
    for (size_t r = 0; r < users[u].runs.size(); ++r) {
      const NodeRun& run = users[u].runs[r];
      ordered_json holds = ordered_json::array(), wants = ordered_json::array();
      for (const NodeHold& h : run.holds) {
        holds.push_back({{"id", h.id}, {"gpus", h.gpus}, {"start", h.start}, {"est_hours", h.est_hours},
                         {"mem_gib", h.mem_gib}, {"preemptible", h.preemptible}, {"preempting", h.preempting},
                         {"cpus", h.cpus}, {"host_mem_gib", h.host_mem_gib}});
        for (const NodePreemptedHold& p : w.preempted)  // the prediction preempts it
          if (p.user == u && p.run == r && p.id == h.id) {
            holds.back()["preempted_at"] = p.at;
            holds.back()["preempted_for"] = p.for_want;
          }
      }
      for (size_t i = 0; i < run.wants.size(); ++i) {
        const NodeWant& x = run.wants[i];
        ordered_json j = {{"id", x.id}, {"gpus", x.gpus}, {"priority", x.priority}, {"est_hours", x.est_hours},
                          {"mem_gib", x.mem_gib}, {"cpus", x.cpus}, {"host_mem_gib", x.host_mem_gib}};
        if (auto k = at.find({u, r, i}); k != at.end()) {
          const NodeWhy& y = w.why[k->second];
          j["place"] = y.place;
          j["why"] = node_why_text(y, now);
          j["start"] = y.kind == NodeWhy::Kind::Later ? ordered_json(y.start) : ordered_json(nullptr);
          j["preempting"] = y.preempting;
        }
        wants.push_back(std::move(j));
      }
      runs.push_back({{"plan", run.plan}, {"pid", run.pid}, {"ended", run.gone}, {"holds", holds}, {"wants", wants}});
    }
    us.push_back({{"name", users[u].name}, {"usage_gpu_hours", users[u].usage_gpu_hours}, {"runs", runs}});
  }
  out["users"] = us;
  return out.dump(1) + "\n";
}

}  // namespace gpuq

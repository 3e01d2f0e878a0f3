// A shared node's files as data (node.h): the node config, and each user's file of runs,
// holds and wants, read with every field checked and written back.
#include "gpuq/core/node.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "gpuq/core/plan.h"

namespace gpuq {

using nlohmann::json;

const NodeLimits& NodeConfig::limits_of(std::string_view user) const {
  for (const auto& [name, l] : users)
    if (name == user) return l;
  return defaults;
}

namespace {

// A finite number more than 0 (a share, a half-life), or throws naming `where`.
double positive(const json& v, const std::string& where) {
  if (!v.is_number() || !(v.get<double>() > 0) || !std::isfinite(v.get<double>()))
    throw std::runtime_error(fmt::format("{} must be a number more than 0", where));
  return v.get<double>();
}

NodeLimits read_limits(const json& j, const std::string& where) {
  if (!j.is_object()) throw std::runtime_error(fmt::format("{}: not a JSON object", where));
  NodeLimits l;
  for (const auto& [key, v] : j.items()) {
    if (key == "max_gpus") {
      if (!v.is_number_integer() || v.get<long long>() < 0 || v.get<long long>() > kMaxGpuId + 1)
        throw std::runtime_error(fmt::format("{}: \"max_gpus\" must be a whole number of GPUs, 0 or more", where));
      l.max_gpus = v.get<int>();
    } else if (key == "share") {
      l.share = positive(v, where + ": \"share\"");
    } else {
      throw std::runtime_error(fmt::format("{}: unknown key \"{}\" (known: max_gpus, share)", where, key));
    }
  }
  return l;
}

}  // namespace

std::optional<NodeConfig> read_node_config(std::string_view text_in, std::string* problem) {
  try {
    json j = json::parse(text_in);
    if (!j.is_object()) throw std::runtime_error("not a JSON object");
    NodeConfig c;
    for (const auto& [key, v] : j.items()) {
      if (key == "half_life_days") {
        c.half_life_days = positive(v, "\"half_life_days\"");
      } else if (key == "window_seconds") {
        if (!v.is_number() || !(v.get<double>() >= 0) || v.get<double>() > 600)
          throw std::runtime_error("\"window_seconds\" must be a number of seconds from 0 to 600");
        c.window_seconds = v.get<double>();
      } else if (key == "default") {
        c.defaults = read_limits(v, "\"default\"");
      } else if (key == "users") {
        if (!v.is_object()) throw std::runtime_error("\"users\": not a JSON object of user names");
        for (const auto& [name, lj] : v.items())
          c.users.emplace_back(name, read_limits(lj, fmt::format("\"users\".\"{}\"", name)));
      } else {
        throw std::runtime_error(fmt::format("unknown key \"{}\" (known: half_life_days, window_seconds, default, users)", key));
      }
    }
    return c;
  } catch (const std::exception& e) {
    if (problem) *problem = e.what();
    return std::nullopt;
  }
}

std::string write_node_user(const NodeUser& user) {
  json runs = json::array();
  for (const NodeRun& r : user.runs) {
    json holds = json::array(), wants = json::array();
    // "mem_gib" only where a job packs: a whole job's entry reads as before.
    for (const NodeHold& h : r.holds) {
      holds.push_back({{"id", h.id}, {"gpus", h.gpus}, {"pid", h.pid}, {"pid_start", h.pid_start},
                       {"start", h.start}, {"est_hours", h.est_hours}});
      if (h.mem_gib > 0) holds.back()["mem_gib"] = h.mem_gib;
      // Preemption's keys only where they say something: an older file reads as before.
      if (h.preemptible) {
        holds.back()["preemptible"] = true;
        holds.back()["preempt_after"] = h.preempt_after;
      }
      if (h.preempting) holds.back()["preempting"] = true;
      // Cores and host memory only where its plan counts them (issue 45).
      if (h.cpus > 0) holds.back()["cpus"] = h.cpus;
      if (h.host_mem_gib > 0) holds.back()["host_mem_gib"] = h.host_mem_gib;
      if (!h.cores.empty()) holds.back()["cores"] = h.cores;
    }
    for (const NodeWant& w : r.wants) {
      wants.push_back({{"id", w.id}, {"gpus", w.gpus}, {"priority", w.priority}, {"est_hours", w.est_hours}});
      if (w.mem_gib > 0) wants.back()["mem_gib"] = w.mem_gib;
      // What it needs of the rest of the box, where its plan counts it: the node's decision counts it.
      if (w.cpus > 0) wants.back()["cpus"] = w.cpus;
      if (w.host_mem_gib > 0) wants.back()["host_mem_gib"] = w.host_mem_gib;
    }
    runs.push_back({{"plan", r.plan}, {"pid", r.pid}, {"pid_start", r.pid_start}, {"updated", r.updated},
                    {"accounted", r.accounted}, {"holds", holds}, {"wants", wants}});
    if (!r.idle_holders.empty()) {  // only where it saw some: an older file reads as before
      json idle = json::array();
      for (const IdleHolder& h : r.idle_holders)
        idle.push_back({{"gpu", h.gpu}, {"pid", h.pid}, {"user", h.user}, {"name", h.name}, {"command", h.command},
                        {"used_mib", h.used_mib}, {"since", h.since}});
      runs.back()["idle_processes"] = std::move(idle);
    }
  }
  json j = {{"user", user.name}, {"usage_gpu_hours", user.usage_gpu_hours}, {"usage_at", user.usage_at},
            {"runs", runs}};
  if (!user.drains.empty()) {  // only where they drained some GPU: an older file reads as before
    json drains = json::array();
    for (const GpuDrain& d : user.drains)
      drains.push_back({{"gpu", d.gpu}, {"drained", d.drained}, {"at", d.at}, {"why", d.why}, {"fault", d.fault}});
    j["drains"] = std::move(drains);
  }
  return j.dump(1) + "\n";
}

namespace {

// The most cores and GiB of host memory a claim or a want may give (past them a file is no node's,
// and a float of the pass could not hold them).
constexpr double kMostCpus = 65535, kMostHostGib = 1e9;

// A finite number at `key`, or throws with the key's name.
double number(const json& j, const char* key) {
  const json& v = j.at(key);
  if (!v.is_number() || !std::isfinite(v.get<double>())) throw std::runtime_error(fmt::format("\"{}\" is not a number", key));
  return v.get<double>();
}

long long whole(const json& j, const char* key) {
  const json& v = j.at(key);
  if (!v.is_number_integer() && !v.is_number_unsigned()) throw std::runtime_error(fmt::format("\"{}\" is not a whole number", key));
  return v.get<long long>();
}

// The GiB a job packs with ("mem_gib": absent, or a number 0 or more; 0 is whole), or -1 when
// it is something else.
double packed_gib_of(const json& j) {
  auto it = j.find("mem_gib");
  if (it == j.end()) return 0;
  if (!it->is_number() || !std::isfinite(it->get<double>()) || it->get<double>() < 0) return -1;
  return it->get<double>();
}

std::string text(const json& j, const char* key) {
  const json& v = j.at(key);
  if (!v.is_string()) throw std::runtime_error(fmt::format("\"{}\" is not a string", key));
  return v.get<std::string>();
}

}  // namespace

namespace {

// A run's hold of GPUs (`claimed`: GPUs whole holds of the file claim; `packed`: those packed
// holds share), or nullopt with the reason it is refused in `refused`.
std::optional<NodeHold> read_hold(const json& hj, GpuMask node, GpuMask& claimed, GpuMask& packed,
                                  const std::string& name, const std::string& plan, std::vector<std::string>* refused) {
  NodeHold h;
  h.id = text(hj, "id");
  h.pid = whole(hj, "pid");
  h.pid_start = static_cast<unsigned long long>(whole(hj, "pid_start"));
  h.start = number(hj, "start");
  h.est_hours = number(hj, "est_hours");
  h.mem_gib = packed_gib_of(hj);
  auto flag = [&](const char* key) {
    auto it = hj.find(key);
    return it != hj.end() && it->is_boolean() && it->get<bool>();
  };
  h.preemptible = flag("preemptible");
  h.preempting = flag("preempting");
  if (h.preemptible && hj.contains("preempt_after")) h.preempt_after = number(hj, "preempt_after");
  if (hj.contains("cpus")) h.cpus = number(hj, "cpus");
  if (hj.contains("host_mem_gib")) h.host_mem_gib = number(hj, "host_mem_gib");
  if (hj.contains("cores")) h.cores = text(hj, "cores");
  const json& g = hj.at("gpus");
  if (!g.is_array()) throw std::runtime_error("\"gpus\" is not a list");
  std::string bad;
  if (h.mem_gib < 0) bad = fmt::format("\"mem_gib\" {}, which is no GiB", hj.at("mem_gib").dump());
  if (h.cpus < 0 || h.host_mem_gib < 0 || !std::isfinite(h.cpus) || !std::isfinite(h.host_mem_gib))
    bad = "negative cores or host memory";
  else if (h.cpus > kMostCpus || h.host_mem_gib > kMostHostGib)
    bad = "more cores or host memory than any node has";
  GpuMask m = 0;
  for (const json& x : g) {
    if (!x.is_number_integer()) throw std::runtime_error("a GPU id is not a whole number");
    long long id = x.get<long long>();
    if (id < 0 || id > kMaxGpuId || !(node >> id & 1)) {
      bad = fmt::format("GPU {}, which this node does not have", id);
      continue;
    }
    GpuMask bit = GpuMask{1} << id;
    // Packed holds may share a GPU; a whole hold shares it with none.
    if ((m | claimed | (h.mem_gib > 0 ? 0 : packed)) & bit) bad = fmt::format("GPU {} twice", id);
    m |= bit;
    h.gpus.push_back(static_cast<int>(id));
  }
  if (h.pid < 0 || h.pid == 1) bad = fmt::format("pid {}, which is no job's", h.pid);
  if (!bad.empty()) {
    if (refused) refused->push_back(fmt::format("{}'s claim for {} ({}) refused: it claims {}", name, h.id, plan, bad));
    return std::nullopt;
  }
  (h.mem_gib > 0 ? packed : claimed) |= m;
  return h;
}

// A run's want, or nullopt with the reason it is refused in `refused`.
std::optional<NodeWant> read_want(const json& wj, GpuMask node, const std::string& name, const std::string& plan,
                                  std::vector<std::string>* refused) {
  NodeWant w;
  w.id = text(wj, "id");
  long long g = whole(wj, "gpus");
  w.priority = number(wj, "priority");
  w.est_hours = number(wj, "est_hours");
  w.mem_gib = packed_gib_of(wj);
  if (wj.contains("cpus")) w.cpus = number(wj, "cpus");
  if (wj.contains("host_mem_gib")) w.host_mem_gib = number(wj, "host_mem_gib");
  if (g < 1 || g > count(node) || w.est_hours < 0 || w.mem_gib < 0 || w.cpus < 0 || w.host_mem_gib < 0 ||
      w.cpus > kMostCpus || w.host_mem_gib > kMostHostGib) {
    if (refused)
      refused->push_back(fmt::format("{}'s want {} ({}) refused: {} GPUs, est_hours {:g}{}", name, w.id, plan, g,
                                     w.est_hours, w.mem_gib < 0 ? ", mem_gib " + wj.at("mem_gib").dump() : ""));
    return std::nullopt;
  }
  w.gpus = static_cast<int>(g);
  return w;
}

// The user's drain records (a drain keeps jobs off a GPU node-wide: one that cannot be read is
// named, not guessed at).
void read_drains(const json& drains, const std::string& name, NodeUser& u, std::vector<std::string>* refused) {
  if (!drains.is_array()) throw std::runtime_error("\"drains\" is not a list");
  for (const json& dj : drains) {
    GpuDrain d;
    long long g = whole(dj, "gpu");
    d.at = number(dj, "at");
    d.why = text(dj, "why");
    d.by = name;
    auto flag = [&](const char* key, bool dflt) {
      auto it = dj.find(key);
      if (it == dj.end()) return dflt;
      if (!it->is_boolean()) throw std::runtime_error(fmt::format("drain of GPU {}: \"{}\" is not true or false", g, key));
      return it->get<bool>();
    };
    d.drained = flag("drained", true);
    d.fault = flag("fault", false);
    if (g < 0 || g > kMaxGpuId) {
      if (refused) refused->push_back(fmt::format("{}'s drain of GPU {} refused: no such GPU", name, g));
      continue;
    }
    d.gpu = static_cast<int>(g);
    set_drain_record(u.drains, std::move(d));
  }
}

// A run's entry in the user's file.
NodeRun read_run(const json& rj, GpuMask node, GpuMask& claimed, GpuMask& packed, const std::string& name,
                 std::vector<std::string>* refused) {
  if (!rj.is_object()) throw std::runtime_error("a run is not a JSON object");
  NodeRun r;
  r.plan = text(rj, "plan");
  r.pid = whole(rj, "pid");
  r.pid_start = static_cast<unsigned long long>(whole(rj, "pid_start"));
  r.updated = number(rj, "updated");
  r.accounted = number(rj, "accounted");
  if (r.pid <= 1) throw std::runtime_error(fmt::format("run of {}: pid {} is no run's", r.plan, r.pid));
  for (const json& hj : rj.at("holds"))
    if (std::optional<NodeHold> h = read_hold(hj, node, claimed, packed, name, r.plan, refused))
      r.holds.push_back(std::move(*h));
  for (const json& wj : rj.at("wants"))
    if (std::optional<NodeWant> w = read_want(wj, node, name, r.plan, refused)) r.wants.push_back(std::move(*w));
  if (auto idle = rj.find("idle_processes"); idle != rj.end() && idle->is_array())
    for (const json& ij : *idle) {  // a report: one that cannot be read is left out, nothing else
      try {
        IdleHolder h{static_cast<int>(whole(ij, "gpu")), whole(ij, "pid"), text(ij, "user"), text(ij, "name"),
                     text(ij, "command"), whole(ij, "used_mib"), number(ij, "since")};
        if (h.gpu >= 0 && h.gpu <= kMaxGpuId && (node >> h.gpu & 1)) r.idle_holders.push_back(std::move(h));
      } catch (const std::exception&) {
      }
    }
  return r;
}

}  // namespace

std::optional<NodeUser> read_node_user(std::string_view text_in, const std::string& name, GpuMask node,
                                       std::string* problem, std::vector<std::string>* refused) {
  try {
    json j = json::parse(text_in);
    if (!j.is_object()) throw std::runtime_error("not a JSON object");
    NodeUser u;
    u.name = text(j, "user");
    if (u.name != name) throw std::runtime_error(fmt::format("it says it is {}'s", u.name));
    u.usage_gpu_hours = number(j, "usage_gpu_hours");
    u.usage_at = number(j, "usage_at");
    if (u.usage_gpu_hours < 0) throw std::runtime_error("\"usage_gpu_hours\" is negative");
    const json& runs = j.at("runs");
    if (!runs.is_array()) throw std::runtime_error("\"runs\" is not a list");
    GpuMask claimed = 0, packed = 0;  // GPUs whole holds claim; GPUs packed holds share
    for (const json& rj : runs) u.runs.push_back(read_run(rj, node, claimed, packed, name, refused));
    if (auto drains = j.find("drains"); drains != j.end()) read_drains(*drains, name, u, refused);
    return u;
  } catch (const std::exception& e) {
    if (problem) *problem = e.what();
    return std::nullopt;
  }
}

}  // namespace gpuq

// A shared node: fair share and the node-wide pass (its files as data: node_files.cpp).
#include "gpuq/core/node.h"

#include "gpuq/core/events.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <tuple>
#include <set>
#include <map>
#include <nlohmann/json.hpp>

#include "gpuq/core/plan.h"
#include "gpuq/core/schedule.h"

namespace gpuq {

using nlohmann::json;

double decayed_usage(double usage, double at, double now, double half_life_days) {
  if (!(half_life_days > 0) || !(now > at)) return usage;
  return usage * std::exp2(-(now - at) / (half_life_days * 86400));
}

double usage_of_attempts(const std::vector<Attempt>& attempts, double now, double half_life_days) {
  double total = 0;
  for (const Attempt& a : attempts)
    if (a.gpus && !a.gpus->empty() && a.start && a.end && *a.end > *a.start)
      total += decayed_usage(static_cast<double>(a.gpus->size()) * (*a.end - *a.start) / 3600, *a.end, now,
                             half_life_days);
  return total;
}

void account_usage(NodeUser& user, NodeRun& run, double now, double half_life_days) {
  user.usage_gpu_hours = decayed_usage(user.usage_gpu_hours, user.usage_at, now, half_life_days);
  user.usage_at = std::max(user.usage_at, now);
  for (const NodeHold& h : run.holds) {
    double from = std::max(h.start, run.accounted);
    if (now > from) user.usage_gpu_hours += static_cast<double>(h.gpus.size()) * (now - from) / 3600;
  }
  run.accounted = now;
}

namespace {

// What a hold adds to its user's charge at `now` beyond the usage its run has accounted: the
// GPU-hours it used since `accounted` (a run accounts only when it writes its entry, and the
// runs write at different times), and what is left of its estimate (at least none).
double unaccounted_and_ahead(const NodeHold& h, double accounted, double now) {
  double used = std::max(0.0, now - std::max(h.start, accounted)) / 3600;
  double left = std::max(0.0, h.est_hours - std::max(0.0, now - h.start) / 3600);
  return static_cast<double>(h.gpus.size()) * (used + left);
}

}  // namespace

double user_charge(const NodeUser& user, double now, const NodeConfig& config) {
  double charge = decayed_usage(user.usage_gpu_hours, user.usage_at, now, config.half_life_days);
  for (const NodeRun& r : user.runs)
    for (const NodeHold& h : r.holds) charge += unaccounted_and_ahead(h, r.accounted, now);
  return charge / config.limits_of(user.name).share;
}

std::vector<NodeSlot> fair_order(const std::vector<NodeUser>& users, double now, const NodeConfig& config) {
  struct Queue {
    size_t user;
    double charge;
    std::vector<NodeSlot> wants;  // in the user's order
    size_t next = 0;
  };
  std::vector<Queue> qs;
  std::vector<double> share(users.size());
  for (size_t u = 0; u < users.size(); ++u) {
    share[u] = config.limits_of(users[u].name).share;
    Queue q{u, user_charge(users[u], now, config), {}};
    for (size_t r = 0; r < users[u].runs.size(); ++r)
      for (size_t w = 0; w < users[u].runs[r].wants.size(); ++w) q.wants.push_back({u, r, w});
    auto want = [&](const NodeSlot& s) -> const NodeWant& { return users[s.user].runs[s.run].wants[s.want]; };
    std::stable_sort(q.wants.begin(), q.wants.end(),
                     [&](const NodeSlot& a, const NodeSlot& b) { return want(a).priority < want(b).priority; });
    qs.push_back(std::move(q));
  }
  std::vector<NodeSlot> order;
  while (true) {
    Queue* best = nullptr;
    for (Queue& q : qs) {
      if (q.next >= q.wants.size()) continue;
      if (!best || q.charge < best->charge ||
          (q.charge == best->charge && users[q.user].name < users[best->user].name))
        best = &q;
    }
    if (!best) break;
    NodeSlot s = best->wants[best->next++];
    const NodeWant& w = users[s.user].runs[s.run].wants[s.want];
    // A want of no estimate still moves its user back, a little.
    best->charge += w.gpus * std::max(w.est_hours, 1e-3) / share[s.user];
    order.push_back(s);
  }
  return order;
}

namespace {

GpuMask held_mask(const NodeUser& u) {
  GpuMask m = 0;
  for (const NodeRun& r : u.runs)
    for (const NodeHold& h : r.holds) m |= mask_of(h.gpus);
  return m;
}

}  // namespace

int held_gpus(const NodeUser& u) { return count(held_mask(u)); }

HostTaken host_taken_on(const std::vector<NodeUser>& users, const std::pair<std::string_view, std::string_view>* skip) {
  HostTaken t;
  for (const NodeUser& u : users)
    for (const NodeRun& r : u.runs) {
      if (skip && u.name == skip->first && r.plan == skip->second) continue;
      for (const NodeHold& h : r.holds) {
        t.cpus += h.cpus;
        t.mem_gib += h.host_mem_gib;
        if (!h.cores.empty()) t.cores.push_back(h.cores);
      }
    }
  return t;
}

std::vector<double> packed_gib_on(const std::vector<NodeUser>& users,
                                  const std::pair<std::string_view, std::string_view>* skip) {
  std::vector<double> gib(kMaxGpuId + 1, 0.0);
  for (const NodeUser& u : users)
    for (const NodeRun& r : u.runs) {
      if (skip && u.name == skip->first && r.plan == skip->second) continue;
      for (const NodeHold& h : r.holds)
        if (h.mem_gib > 0)
          for (int g : h.gpus)
            if (g >= 0 && g <= kMaxGpuId) gib[static_cast<size_t>(g)] += h.mem_gib;
    }
  return gib;
}

namespace {

// The holds of users charged more than `slot`'s (user_charge) whose stop lets `want` start on
// `avail` and their GPUs, with the cores and memory of `host_avail` and theirs, within its
// user's cap (`within_cap`): the fewest of them, the latest started first. Their preemptions go
// into `d`, with the GPUs kept for the want; none where no set of them lets it start.
template <class WithinCap>
void choose_victims(const std::vector<NodeUser>& users, const NodeSlot& slot, const NodeWant& want, GpuMask avail,
                    const HostRoom& host_avail, GpuMask node, double now, const NodeConfig& config,
                    const Placement* placement, const WithinCap& within_cap, NodeDecision& d) {
  const double mine = user_charge(users[slot.user], now, config);
  struct Victim {
    size_t user, run, hold;
    GpuMask gpus;
    double start;
  };
  std::vector<Victim> c;
  for (size_t u = 0; u < users.size(); ++u) {
    if (u == slot.user || !(user_charge(users[u], now, config) > mine)) continue;
    for (size_t r = 0; r < users[u].runs.size(); ++r)
      for (size_t i = 0; i < users[u].runs[r].holds.size(); ++i) {
        const NodeHold& h = users[u].runs[r].holds[i];
        if (!h.preemptible || h.preempting || h.mem_gib > 0 || now < h.preempt_after || h.gpus.empty()) continue;
        c.push_back({u, r, i, mask_of(h.gpus) & node, h.start});
      }
  }
  std::sort(c.begin(), c.end(), [&](const Victim& a, const Victim& b) {
    if (a.start != b.start) return a.start > b.start;
    const NodeHold &ha = users[a.user].runs[a.run].holds[a.hold], &hb = users[b.user].runs[b.run].holds[b.hold];
    return std::tie(users[a.user].name, users[a.user].runs[a.run].plan, ha.id) <
           std::tie(users[b.user].name, users[b.user].runs[b.run].plan, hb.id);
  });
  std::optional<std::vector<int>> gpus;
  std::optional<std::vector<size_t>> pick = fewest_that_fit(c.size(), [&](const std::vector<size_t>& idx) {
    GpuMask m = avail;
    HostRoom h = host_avail;
    for (size_t i : idx) {
      m |= c[i].gpus;
      const NodeHold& v = users[c[i].user].runs[c[i].run].holds[c[i].hold];
      h.cpus += v.cpus;
      h.mem_gib += v.host_mem_gib;
    }
    gpus = pick_gpus(want.gpus, m, placement);
    return gpus && h.fits(want.host()) && within_cap(*gpus);
  });
  if (!pick) return;
  for (size_t i : *pick) d.preempts.push_back({slot, c[i].user, c[i].run, c[i].hold});
  d.kept = mask_of(*gpus);
  d.kept_for = slot;
}

// Preemption across users (NodeDecision::preempts): for the first want in fair order that the
// pass left waiting (not capped, taking its GPUs whole), the fewest preemptible holds of users
// charged more than its own, that have run their least, whose GPUs with the free ones let it
// start; the latest started first (the least work lost: other users' checkpoints are not known
// here). Holds stopping already count as free soon: when they are enough, nothing more stops.
// The want must start on what is freed: its cores and host memory (`host_free`: the node's less
// every hold's) as well as its GPUs, or nothing is preempted for it.
void preempt_across_users(const std::vector<NodeUser>& users, GpuMask free, GpuMask node, double now,
                          const NodeConfig& config, const Placement* placement, bool pack,
                          const std::vector<char>& out, const HostRoom& host_free, const std::vector<GpuMask>& held,
                          const std::vector<int>& cap, NodeDecision& d) {
  std::vector<char> started(d.order.size(), 0);
  std::vector<GpuMask> gave(d.order.size(), 0);  // per want in fair order: the GPUs the pass gave it
  for (const NodeStart& st : d.starts)
    for (size_t k = 0; k < d.order.size(); ++k)
      if (d.order[k].user == st.slot.user && d.order[k].run == st.slot.run && d.order[k].want == st.slot.want) {
        started[k] = 1;
        gave[k] = mask_of(st.gpus);
      }
  std::optional<size_t> first;
  for (size_t k = 0; k < d.order.size() && !first; ++k)
    if (!out[k] && !started[k]) first = k;
  if (!first) return;
  // The GPUs (and cores and memory) wants before it took; those the pass gave wants after it
  // (backfill) are its to keep.
  GpuMask taken = 0;
  HostRoom host_avail = host_free;
  auto take = [&](HostRoom& r, const HostNeed& n, double by) {
    r.cpus -= by * n.cpus;
    r.mem_gib -= by * n.mem_gib;
  };
  auto want_at = [&](const NodeSlot& s) -> const NodeWant& { return users[s.user].runs[s.run].wants[s.want]; };
  for (size_t k = 0; k < *first; ++k) {
    taken |= gave[k];
    if (started[k]) take(host_avail, want_at(d.order[k]).host(), 1);
  }
  const NodeSlot slot = d.order[*first];
  const NodeWant& want = want_at(slot);
  if (pack && want.mem_gib > 0) return;
  // Its user's cap, with the GPUs their wants ahead of it take: a want the cap keeps waiting is
  // preempted for by no one.
  GpuMask users_gpus = held[slot.user];
  for (size_t k = 0; k < *first; ++k)
    if (d.order[k].user == slot.user) users_gpus |= gave[k];
  auto within_cap = [&](const std::vector<int>& gpus) {
    return cap[slot.user] < 0 || count(users_gpus | mask_of(gpus)) <= cap[slot.user];
  };
  GpuMask avail = free & ~d.held & ~taken;
  bool stopping = false;
  for (const NodeUser& u : users)
    for (const NodeRun& r : u.runs)
      for (const NodeHold& h : r.holds)
        if (h.preempting && !(h.mem_gib > 0)) {
          avail |= mask_of(h.gpus) & node;
          take(host_avail, HostNeed{static_cast<float>(h.host_mem_gib), 0}, -1);
          host_avail.cpus += h.cpus;
          stopping = true;
        }
  // A want whose GPUs are there but not its cores or memory looks for holds that free those.
  std::optional<std::vector<int>> now_fits = pick_gpus(want.gpus, avail, placement);
  if (now_fits && !within_cap(*now_fits)) return;
  if (now_fits && host_avail.fits(want.host())) {
    if (stopping) {
      d.kept = mask_of(*now_fits);
      d.kept_for = slot;
    }
    return;
  }
  choose_victims(users, slot, want, avail, host_avail, node, now, config, placement, within_cap, d);
}

namespace {

/// Something running or starting on the node, and when it ends (at its estimate).
struct End {
  double at;
  GpuMask gpus;
  HostNeed host;
};

/// The waiting head's moment (its shadow): the first end after which its GPUs, cores and memory
/// are there, and what is free then (at: infinity when no end frees enough).
struct Shadow {
  double at = std::numeric_limits<double>::infinity();
  GpuMask gpus;
  HostRoom room;
};

template <class Fits>
Shadow shadow_of(std::vector<End>& ends, GpuMask avail, const HostRoom& room, const Fits& fits) {
  std::sort(ends.begin(), ends.end(), [](const End& a, const End& b) { return a.at < b.at; });
  Shadow sh{std::numeric_limits<double>::infinity(), avail, room};
  for (const End& e : ends) {
    sh.gpus |= e.gpus;
    sh.room.cpus += e.host.cpus;
    sh.room.mem_gib += e.host.mem_gib;
    if (fits(sh.gpus, sh.room)) {
      sh.at = e.at;
      break;
    }
  }
  return sh;
}

/// An earlier want of the same run as `s` has not started (a run's wants start in its order).
bool earlier_waits(const std::vector<NodeSlot>& order, const std::vector<char>& started, const NodeSlot& s) {
  for (size_t q = 0; q < order.size(); ++q)
    if (order[q].user == s.user && order[q].run == s.run && order[q].want < s.want && !started[q]) return true;
  return false;
}

}  // namespace

// Backfill across plans and users (EASY: no one ahead is delayed). The pass backfills only jobs
// of at most backfill_max_hours while a job waits, the original's rule inside a plan; across the
// node a longer want of another plan may start too, where it delays no one: the first want left
// waiting (the head) is given the earliest moment the holds' estimated ends (and the starts just
// made) free its GPUs, cores and memory; a want starts now if it fits now, within its user's cap,
// and ends by then, or leaves the head room enough at that moment. Only a want all of whose run's
// earlier wants start (its own plan's pass would hold a long job behind them) and that takes its
// GPUs whole; none while a preemption keeps GPUs, or when the head packs; none at all with
// backfill_max_hours 0 (no backfill, as asked).
void backfill_across(const std::vector<NodeUser>& users, GpuMask free, GpuMask node, double now,
                     double backfill_max_hours, const Placement* placement, bool pack, const std::vector<char>& skip,
                     const HostRoom& host_free, const std::vector<GpuMask>& held, const std::vector<int>& cap,
                     NodeDecision& d) {
  if (d.kept || !(backfill_max_hours > 0)) return;
  auto want_at = [&](const NodeSlot& s) -> const NodeWant& { return users[s.user].runs[s.run].wants[s.want]; };
  auto same = [](const NodeSlot& a, const NodeSlot& b) { return a.user == b.user && a.run == b.run && a.want == b.want; };
  std::vector<char> started(d.order.size(), 0);
  GpuMask avail = free & node & ~d.held;
  HostRoom room = host_free;
  std::vector<GpuMask> taking = held;
  std::vector<End> ends;  // what is running or starting, and when it ends
  for (const NodeUser& u : users)
    for (const NodeRun& r : u.runs)
      for (const NodeHold& h : r.holds)
        if (!(pack && h.mem_gib > 0))
          ends.push_back({std::max(now, h.start + h.est_hours * 3600), mask_of(h.gpus) & node,
                          HostNeed{static_cast<float>(h.host_mem_gib), static_cast<uint16_t>(std::min(h.cpus, 65535.0))}});
  for (const NodeStart& st : d.starts) {
    for (size_t k = 0; k < d.order.size(); ++k)
      if (same(d.order[k], st.slot)) started[k] = 1;
    const NodeWant& w = want_at(st.slot);
    avail &= ~mask_of(st.gpus);
    room.cpus -= w.cpus;
    room.mem_gib -= w.host_mem_gib;
    taking[st.slot.user] |= mask_of(st.gpus);
    ends.push_back({now + w.est_hours * 3600, pack && w.mem_gib > 0 ? GpuMask{0} : mask_of(st.gpus), w.host()});
  }
  std::optional<size_t> head;
  for (size_t k = 0; k < d.order.size() && !head; ++k)
    if (!skip[k] && !started[k]) head = k;
  if (!head) return;
  const NodeWant& hw = want_at(d.order[*head]);
  if (pack && hw.mem_gib > 0) return;
  auto fits = [&](GpuMask m, const HostRoom& r) { return pick_gpus(hw.gpus, m, placement) && r.fits(hw.host()); };
  if (fits(avail, room)) return;  // it waits for no resource (its cap): nothing to protect here
  Shadow sh = shadow_of(ends, avail, room, fits);
  double shadow = sh.at;
  GpuMask at_shadow = sh.gpus;
  HostRoom room_at_shadow = sh.room;
  for (size_t k = *head + 1; k < d.order.size(); ++k) {
    if (skip[k] || started[k]) continue;
    const NodeSlot& s = d.order[k];
    const NodeWant& w = want_at(s);
    if (pack && w.mem_gib > 0) continue;
    if (earlier_waits(d.order, started, s)) continue;  // an earlier want of its own run does not start
    std::optional<std::vector<int>> gpus = pick_gpus(w.gpus, avail, placement);
    if (!gpus || !room.fits(w.host())) continue;
    GpuMask m = mask_of(*gpus);
    if (cap[s.user] >= 0 && count(taking[s.user] | m) > cap[s.user]) continue;
    HostRoom left{room_at_shadow.cpus - w.cpus, room_at_shadow.mem_gib - w.host_mem_gib};
    bool ends_first = now + w.est_hours * 3600 <= shadow;
    bool leaves_room = std::isfinite(shadow) && fits(at_shadow & ~m, left);
    if (!ends_first && !leaves_room) continue;
    if (!ends_first) {
      at_shadow &= ~m;
      room_at_shadow = left;
    }
    avail &= ~m;
    room.cpus -= w.cpus;
    room.mem_gib -= w.host_mem_gib;
    taking[s.user] |= m;
    started[k] = 1;
    d.starts.push_back({s, std::move(*gpus)});
  }
}

// What decide_node's pass works over, the same whatever GPUs a preemption keeps closed.
struct NodePass {
  const std::vector<NodeUser>& users;
  const std::vector<char>& never_host;  // wants that need more cores or host memory than the node has
  const std::vector<char>& out0;        // wants that alone take their user past the cap
  const std::vector<GpuMask>& held;     // each user's GPUs
  const std::vector<int>& cap;          // each user's max_gpus (-1: none)
  const std::vector<double>& room_left;
  GpuMask free, node;
  const Placement* placement;
  bool pack, counts_host;
  double backfill_max_hours;
  HostRoom host_free, host;
  const NodeWant& want(const NodeSlot& s) const { return users[s.user].runs[s.run].wants[s.want]; }
};

// The pass over the wants left, in fair order, with `closed` kept from every want (the GPUs a
// preemption keeps for its want): d.starts, and in `out` the wants left out for a cap.
void node_pass(const NodePass& p, GpuMask closed, std::vector<char>& out, NodeDecision& d) {
  d.starts.clear();
  out = p.out0;
  // The pass over the wants left, in fair order (one priority: ready order is position); when
  // its starts take a user past the cap, the pass is made again with packed wants joining GPUs
  // rather than spreading over idle ones (a capped user's packed job may share their own GPU),
  // then the first start in fair order that does is left out and the pass made again (each round
  // leaves out one more want, so it ends). The first, not the last: the starts above it keep
  // within the cap, and leaving out a later one left out a want that fits once the first is out
  // (a 1-GPU job behind a 2-GPU one, cap 2: preempted for, then not started).
  bool spread = true;
  while (true) {
    Plan plan;
    std::vector<size_t> slot_of;
    std::vector<HostNeed> needs;
    for (size_t k = 0; k < d.order.size(); ++k) {
      if (out[k] || p.never_host[k]) continue;
      const NodeWant& w = p.want(d.order[k]);
      needs.push_back(w.host());
      Job j;
      j.id = std::to_string(k);
      j.gpus = w.gpus;
      j.priority = 0;
      j.est_hours = w.est_hours;
      if (p.pack && w.mem_gib > 0) j.gpu_mem_gib = w.mem_gib;
      plan.jobs.push_back(std::move(j));
      slot_of.push_back(k);
    }
    plan.reservations_of.resize(plan.jobs.size());
    rank_jobs(plan);
    std::vector<size_t> all(plan.jobs.size());
    for (size_t k = 0; k < all.size(); ++k) all[k] = k;
    ReadySet ready(plan, p.backfill_max_hours, all, p.pack);
    PassInput in;
    in.free = p.free & p.node & ~d.held & ~closed;
    in.node = p.node;
    in.placement = p.placement;
    in.spread = spread;
    if (ready.any_packed()) {
      in.room = p.room_left;
      in.room_empty = d.most_room;
    }
    const HostRoom rooms[1] = {p.host_free};
    if (p.counts_host) {
      in.host_need = needs;
      in.host_room = rooms;
      in.host_total = p.host;
      in.host_least = {std::numeric_limits<float>::max(), std::numeric_limits<uint16_t>::max()};
      for (const HostNeed& n : needs)
        in.host_least = {std::min(in.host_least.mem_gib, n.mem_gib), std::min(in.host_least.cpus, n.cpus)};
    }
    PassResult r = schedule_pass(plan, ready, in);
    std::sort(r.starts.begin(), r.starts.end(), [](const Start& a, const Start& b) { return a.job < b.job; });
    std::vector<GpuMask> taking = p.held;  // GPUs, not jobs: packed jobs on one GPU count it once
    std::optional<size_t> past;
    for (const Start& s : r.starts) {
      size_t u = d.order[slot_of[s.job]].user;
      taking[u] |= mask_of(s.gpus);
      if (!past && p.cap[u] >= 0 && count(taking[u]) > p.cap[u]) past = slot_of[s.job];
    }
    if (past && spread && ready.any_packed()) {
      spread = false;
      continue;
    }
    if (past) {
      out[*past] = 1;
      continue;
    }
    for (Start& s : r.starts) d.starts.push_back({d.order[slot_of[s.job]], std::move(s.gpus)});
    break;
  }
}

}  // namespace

std::map<int, GpuDrain> node_drained(const std::vector<NodeUser>& users, std::map<int, GpuDrain>* undrains) {
  std::vector<std::vector<GpuDrain>> records;
  for (const NodeUser& u : users) records.push_back(u.drains);
  return drained_gpus(records, undrains);
}

namespace {

// What a packed want may still declare on each GPU (PassInput::room): an empty free GPU's room,
// less what the packed holds sharing it declared; none on a whole hold's, nor on a GPU the
// deciding run sees busy with no packed hold to say why (another process's memory). Notes the
// most room of a GPU in `d`.
std::vector<double> packed_room_left(const std::vector<NodeUser>& users, GpuMask free, GpuMask node,
                                     const NodeRoom& room, NodeDecision& d) {
  std::vector<double> declared = packed_gib_on(users);
  std::vector<double> left(kMaxGpuId + 1, -1.0);
  for (GpuMask m = node; m; m &= m - 1) {
    size_t g = static_cast<size_t>(std::countr_zero(m));
    double full = g < room.size() ? room[g] : 0;
    d.most_room = std::max(d.most_room, full);
    if ((d.shared >> g & 1) || (free & ~d.held) >> g & 1) left[g] = full - declared[g];
  }
  return left;
}

// The node's cores and host memory left after every hold's.
HostRoom host_left(const std::vector<NodeUser>& users, HostRoom host) {
  for (const NodeUser& u : users)
    for (const NodeRun& r : u.runs)
      for (const NodeHold& h : r.holds) {
        host.cpus -= h.cpus;
        host.mem_gib -= h.host_mem_gib;
      }
  return host;
}

}  // namespace

NodeDecision decide_node(const std::vector<NodeUser>& users, GpuMask free, GpuMask node, double now,
                         const NodeConfig& config, double backfill_max_hours, const Placement* placement,
                         const NodeRoom& room, const HostRoom& host) {
  NodeDecision d;
  // A drained GPU is no GPU of the node to any want (its holds still hold it until they end).
  const GpuMask drained = drained_mask(node_drained(users));
  free &= ~drained;
  node &= ~drained;
  const bool pack = !room.empty();
  GpuMask whole = 0;  // GPUs a hold takes whole (without room given, every hold does)
  std::vector<GpuMask> held(users.size());
  std::vector<int> cap(users.size(), -1);
  for (size_t u = 0; u < users.size(); ++u) {
    for (const NodeRun& r : users[u].runs)
      for (const NodeHold& h : r.holds) {
        d.held |= mask_of(h.gpus);
        if (!pack || !(h.mem_gib > 0)) whole |= mask_of(h.gpus);
      }
    held[u] = held_mask(users[u]);
    if (std::optional<int> m = config.limits_of(users[u].name).max_gpus) cap[u] = *m;
  }
  d.shared = d.held & ~whole;
  std::vector<double> room_left = pack ? packed_room_left(users, free, node, room, d) : std::vector<double>{};
  d.order = fair_order(users, now, config);
  auto want_of = [&](const NodeSlot& s) -> const NodeWant& { return users[s.user].runs[s.run].wants[s.want]; };
  // A want that alone takes its user past the cap never enters the pass (one that packs may join
  // its user's GPUs: the pass's answer is checked below).
  std::vector<char> out(d.order.size(), 0);
  for (size_t k = 0; k < d.order.size(); ++k) {
    size_t u = d.order[k].user;
    const NodeWant& w = want_of(d.order[k]);
    int more = pack && w.mem_gib > 0 && w.gpus <= cap[u] ? 0 : w.gpus;
    if (cap[u] >= 0 && count(held[u]) + more > cap[u]) out[k] = 1;
  }
  // The rest of the box: the cores and host memory every hold takes, and what each want needs.
  // Counted where some want needs some (a node of plans that count neither decides on GPUs alone,
  // exactly as before); a want that needs more than the node has never enters the pass.
  HostRoom host_free = host_left(users, host);
  std::vector<char> never_host(d.order.size(), 0);
  bool counts_host = false;
  for (size_t k = 0; k < d.order.size(); ++k) {
    HostNeed n = want_of(d.order[k]).host();
    counts_host = counts_host || n.cpus > 0 || n.mem_gib > 0;
    if (!host.fits(n)) {
      never_host[k] = 1;
      d.host_never.push_back(d.order[k]);
    }
  }
  std::vector<char> out0 = out;
  const NodePass pass{users, never_host, out0, held, cap, room_left, free, node, placement, pack, counts_host,
                      backfill_max_hours, host_free, host};
  node_pass(pass, 0, out, d);
  std::vector<char> skip = out;
  for (size_t k = 0; k < skip.size(); ++k) skip[k] = skip[k] || never_host[k];
  preempt_across_users(users, free & node, node, now, config, placement, pack, skip, host_free, held, cap, d);
  if (d.kept) node_pass(pass, d.kept, out, d);
  for (size_t k = 0; k < skip.size(); ++k) skip[k] = out[k] || never_host[k];
  backfill_across(users, free, node, now, backfill_max_hours, placement, pack, skip, host_free, held, cap, d);
  for (size_t k = 0; k < d.order.size(); ++k)
    if (out[k]) {
      d.capped.push_back(d.order[k]);
      if (config.limits_of(users[d.order[k].user].name).over_cap(want_of(d.order[k]).gpus)) d.never.push_back(d.order[k]);
    }
  return d;
}

namespace {

constexpr size_t kNoWant = std::numeric_limits<size_t>::max();  // a preempted job waiting again: no want of the look
using Origins = std::vector<std::vector<std::vector<NodeSlot>>>;  // per user, run and want: its slot as given
using Victims = std::map<std::tuple<size_t, size_t, std::string>, std::vector<std::string>>;  // per want: its victims

// A hold ends at its estimate (now, if that has passed); one stopping for a preemption, now.
double hold_end(const NodeHold& h, double t) { return h.preempting ? t : std::max(h.start + h.est_hours * 3600, t); }

// The decision's preemptions at `t`: each victim waits again with what is left of its estimate.
void stop_victims(std::vector<NodeUser>& users, const NodeDecision& d, double t, const NodeConfig& config,
                  Origins& origin, Victims& preempting_of, std::vector<NodePreemptedHold>* preempted) {
  // Its victims end now and wait again with what is left of their estimates (last in their
  // runs' ready order); the want they give way to starts on their GPUs at the next decision,
  // at this same instant. Each round stops running jobs that are fewer each time: it ends.
  std::vector<std::tuple<size_t, size_t, std::string>> gone;
  for (const NodePreempt& p : d.preempts) {
    NodeRun& r = users[p.user].runs[p.run];
    const NodeHold& h = r.holds[p.hold];
    const NodeWant& w = users[p.want.user].runs[p.want.run].wants[p.want.want];
    std::string victim = fmt::format("{}'s {}", users[p.user].name, h.id);
    std::string for_want = fmt::format("{}'s {}", users[p.want.user].name, w.id);
    preempting_of[{p.want.user, p.want.run, w.id}].push_back(victim);
    if (preempted) preempted->push_back({p.user, p.run, h.id, t, for_want});
    double left = std::max(0.0, h.est_hours - (t - h.start) / 3600);
    r.wants.push_back(NodeWant{h.id, static_cast<int>(h.gpus.size()), 50, left, h.mem_gib, h.cpus, h.host_mem_gib});
    origin[p.user][p.run].push_back({p.user, p.run, kNoWant});
    gone.push_back({p.user, p.run, h.id});
  }
  // What they ran is charged to their users first, as their runs do when they publish.
  for (const auto& [u, r, id] : gone) {
    account_usage(users[u], users[u].runs[r], t, config.half_life_days);
    std::erase_if(users[u].runs[r].holds, [&](const NodeHold& h) { return h.id == id; });
  }
}

// When the prediction looks next after `t`: the first hold's end, or a preemptible job's least
// run; infinity where no want is left or nothing would change.
double next_instant(const std::vector<NodeUser>& users, double t) {
  bool wanting = false;
  double next = std::numeric_limits<double>::infinity();
  for (const NodeUser& u : users)
    for (const NodeRun& r : u.runs) {
      wanting = wanting || !r.wants.empty();
      for (const NodeHold& h : r.holds) {
        next = std::min(next, hold_end(h, t));
        // A running preemptible job may give way once it has run its least: decide again then.
        if (h.preemptible && !h.preempting && h.preempt_after > t) next = std::min(next, h.preempt_after);
      }
    }
  return wanting ? next : std::numeric_limits<double>::infinity();
}

}  // namespace

std::vector<NodePredicted> predict_node(std::vector<NodeUser> users, GpuMask node, double now,
                                        const NodeConfig& config, double backfill_max_hours,
                                        const Placement* placement, const NodeRoom& room,
                                        std::vector<NodePreemptedHold>* preempted, const HostRoom& host) {
  // The slot each want had in `users` as given, kept through the removals below (a preempted
  // job waiting again has none: kNoWant).
  Origins origin(users.size());
  for (size_t u = 0; u < users.size(); ++u) {
    origin[u].resize(users[u].runs.size());
    for (size_t r = 0; r < users[u].runs.size(); ++r)
      for (size_t w = 0; w < users[u].runs[r].wants.size(); ++w) origin[u][r].push_back({u, r, w});
  }
  std::vector<NodePredicted> out;
  double t = now;
  std::string after_user, after_job;
  bool after_waiting = false;
  std::set<std::tuple<size_t, size_t, std::string>> placed_ids;  // holds the prediction made (jobs not running yet)
  Victims preempting_of;  // a want's victims
  // Each round places at least one want or ends at least one hold, so it ends; the cap guards
  // against what cannot happen.
  for (size_t round = 0; round < 100000; ++round) {
    NodeDecision d = decide_node(users, node, node, t, config, backfill_max_hours, placement, room, host);
    if (!d.preempts.empty()) {
      stop_victims(users, d, t, config, origin, preempting_of, preempted);
      continue;
    }
    // The starts, as holds of their runs; their wants leave (the highest index first per run).
    std::vector<std::pair<NodeSlot, NodeHold>> placed;
    for (NodeStart& s : d.starts) {
      const NodeWant& w = users[s.slot.user].runs[s.slot.run].wants[s.slot.want];
      NodePredicted p{origin[s.slot.user][s.slot.run][s.slot.want], t, t + w.est_hours * 3600, s.gpus, after_user,
                      after_job, after_waiting};
      if (auto it = preempting_of.find({s.slot.user, s.slot.run, w.id}); it != preempting_of.end()) {
        p.preempting = std::move(it->second);
        preempting_of.erase(it);
      }
      placed_ids.insert({s.slot.user, s.slot.run, w.id});
      if (p.slot.want != kNoWant) out.push_back(std::move(p));  // a preempted job's resume: no want of the look
      NodeHold hold{w.id, std::move(s.gpus), 0, 0, t, w.est_hours, w.mem_gib};
      hold.cpus = w.cpus;
      hold.host_mem_gib = w.host_mem_gib;
      placed.push_back({s.slot, std::move(hold)});
    }
    std::sort(placed.begin(), placed.end(), [](const auto& a, const auto& b) { return a.first.want > b.first.want; });
    for (auto& [slot, hold] : placed) {
      NodeRun& r = users[slot.user].runs[slot.run];
      r.wants.erase(r.wants.begin() + static_cast<std::ptrdiff_t>(slot.want));
      auto& o = origin[slot.user][slot.run];
      o.erase(o.begin() + static_cast<std::ptrdiff_t>(slot.want));
      r.holds.push_back(std::move(hold));
    }
    double next = next_instant(users, t);
    if (!std::isfinite(next)) break;
    // Every run's usage to `next`; then the holds that end there leave, the first named.
    after_user.clear();
    after_job.clear();
    for (size_t ui = 0; ui < users.size(); ++ui)
      for (size_t ri = 0; ri < users[ui].runs.size(); ++ri) {
        NodeUser& u = users[ui];
        NodeRun& r = u.runs[ri];
        account_usage(u, r, next, config.half_life_days);
        std::erase_if(r.holds, [&](const NodeHold& h) {
          if (hold_end(h, t) > next) return false;
          if (after_job.empty()) {
            after_user = u.name;
            after_job = h.id;
            after_waiting = placed_ids.count({ui, ri, h.id}) > 0;
          }
          return true;
        });
      }
    t = next;
  }
  return out;
}

GpuMask gpus_for(const NodeDecision& d, const std::vector<NodeUser>& users, std::string_view user,
                 std::string_view plan) {
  GpuMask m = 0;
  for (const NodeStart& s : d.starts)
    if (users[s.slot.user].name == user && users[s.slot.user].runs[s.slot.run].plan == plan) m |= mask_of(s.gpus);
  return m;
}

NodeWaits node_whys(const std::vector<NodeUser>& users, GpuMask node, double now, const NodeConfig& config,
                    double backfill_max_hours, const NodeRoom& room, const HostRoom& host) {
  NodeWaits w{decide_node(users, node, node, now, config, backfill_max_hours, nullptr, room, host), {}, {}};
  const NodeDecision& d = w.d;
  using Key = std::tuple<size_t, size_t, size_t>;
  std::map<Key, std::vector<int>> next;
  for (const NodeStart& s : d.starts) next[{s.slot.user, s.slot.run, s.slot.want}] = s.gpus;
  std::set<Key> capped, never, host_never;
  for (const NodeSlot& s : d.capped) capped.insert({s.user, s.run, s.want});
  for (const NodeSlot& s : d.never) never.insert({s.user, s.run, s.want});
  for (const NodeSlot& s : d.host_never) host_never.insert({s.user, s.run, s.want});
  w.predicted = predict_node(users, node, now, config, backfill_max_hours, nullptr, room, &w.preempted, host);
  std::map<Key, const NodePredicted*> later;
  for (const NodePredicted& p : w.predicted) later[{p.slot.user, p.slot.run, p.slot.want}] = &p;
  for (size_t k = 0; k < d.order.size(); ++k) {
    const NodeSlot& s = d.order[k];
    const Key key{s.user, s.run, s.want};
    const NodeWant& want = users[s.user].runs[s.run].wants[s.want];
    NodeWhy& y = w.why.emplace_back();
    y.place = k + 1;
    y.user = users[s.user].name;
    y.cap = config.limits_of(y.user).max_gpus.value_or(0);
    y.held = held_gpus(users[s.user]);
    y.at_cap = capped.count(key) > 0;
    auto it = next.find(key);
    auto p = later.find(key);
    if (it != next.end()) {
      y.kind = NodeWhy::Kind::NextLook;
      y.gpus = it->second;
    } else if (never.count(key)) {
      y.kind = NodeWhy::Kind::Never;
    } else if (host_never.count(key)) {
      y.kind = NodeWhy::Kind::Never;
      y.host_never = true;
      y.need = want.host();
      y.host = host;
    } else if (!room.empty() && want.mem_gib > d.most_room) {
      y.kind = NodeWhy::Kind::Never;
      y.gib = want.mem_gib;
      y.room = d.most_room;
    } else if (p != later.end()) {
      y.kind = NodeWhy::Kind::Later;
      y.start = p->second->start;
      y.after_user = p->second->after_user;
      y.after_job = p->second->after_job;
      y.after_waiting = p->second->after_waiting;
      y.preempting = p->second->preempting;
    } else {
      y.kind = y.at_cap ? NodeWhy::Kind::AtCap : NodeWhy::Kind::InLine;
    }
  }
  return w;
}

std::map<std::string, NodeWhy> waits_of(const NodeWaits& w, const std::vector<NodeUser>& users, std::string_view user,
                                        std::string_view plan) {
  std::map<std::string, NodeWhy> out;
  for (size_t k = 0; k < w.d.order.size(); ++k) {
    const NodeSlot& s = w.d.order[k];
    const NodeRun& r = users[s.user].runs[s.run];
    if (users[s.user].name == user && r.plan == plan) out[r.wants[s.want].id] = w.why[k];
  }
  return out;
}

}  // namespace gpuq

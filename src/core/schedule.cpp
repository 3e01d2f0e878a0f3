#include "gpuq/core/schedule.h"

#include <algorithm>
#include <array>
#include <bit>
#include <limits>
#include <map>

namespace gpuq {

GpuMask reserved_gpus(const Plan& plan, size_t job, const std::vector<bool>& open) {
  GpuMask closed = 0;
  const auto& mine = plan.reservations_of[job];
  for (size_t r = 0; r < plan.reservations.size(); ++r) {
    if (!open[r]) continue;
    if (std::find(mine.begin(), mine.end(), r) != mine.end()) continue;
    closed |= plan.reservations[r].gpus;
  }
  return closed;
}

bool RankSet::insert(size_t r) {
  if (lv_.empty()) {
    size_t m = n_;
    do {
      m = (m + 63) / 64;
      lv_.emplace_back(std::max<size_t>(m, 1), 0);
    } while (m > 1);
  }
  if (contains(r)) return false;
  for (size_t k = 0; k < lv_.size(); ++k, r >>= 6) {
    std::uint64_t& w = lv_[k][r >> 6];
    bool was_empty = w == 0;
    w |= std::uint64_t{1} << (r & 63);
    if (!was_empty) break;
  }
  ++size_;
  return true;
}

bool RankSet::erase(size_t r) {
  if (!contains(r)) return false;
  for (size_t k = 0; k < lv_.size(); ++k, r >>= 6) {
    std::uint64_t& w = lv_[k][r >> 6];
    w &= ~(std::uint64_t{1} << (r & 63));
    if (w != 0) break;
  }
  --size_;
  return true;
}

size_t RankSet::next(size_t r) const {
  if (size_ == 0) return npos;
  size_t k = 0;
  // Up: the first level with a member at or after r (r becomes a word index one level up).
  while (true) {
    if (k == lv_.size()) return npos;
    size_t i = r >> 6;
    if (i >= lv_[k].size()) return npos;
    std::uint64_t w = lv_[k][i] & (~std::uint64_t{0} << (r & 63));
    if (w) {
      r = (i << 6) | static_cast<size_t>(std::countr_zero(w));
      break;
    }
    r = i + 1;
    ++k;
  }
  // Down: the first member under that bit.
  while (k > 0) {
    --k;
    r = (r << 6) | static_cast<size_t>(std::countr_zero(lv_[k][r]));
  }
  return r;
}

ReadySet::ReadySet(const Plan& plan, double backfill_max_hours, bool pack)
    : all_(plan.jobs.size()) {
  const size_t n = plan.jobs.size();
  if (plan.rank_of.size() == n) {
    rank_of_ = plan.rank_of;
  } else {  // a plan made by hand, not by parse_plan
    Plan ranked;
    ranked.jobs = plan.jobs;
    rank_jobs(ranked);
    rank_of_ = std::move(ranked.rank_of);
  }
  std::map<std::vector<size_t>, int> sigs;
  at_rank_.resize(n);
  for (size_t j = 0; j < n; ++j) {  // the jobs in plan order, each written to its rank
    const Job& job = plan.jobs[j];
    AtRank& a = at_rank_[rank_of_[j]];
    a.job = static_cast<std::uint32_t>(j);
    a.gpus = static_cast<std::uint8_t>(job.gpus);
    a.is_long = job.est_hours > backfill_max_hours;
    a.packed = pack && job.gpu_mem_gib && job.gpus > 0;
    any_packed_ |= a.packed;
    if (sig0_ >= 0 && plan.reservations_of[j].empty()) {  // most jobs: no map lookup, no copy
      a.sig = static_cast<std::uint32_t>(sig0_);
      continue;
    }
    std::vector<size_t> mine = plan.reservations_of[j];
    std::sort(mine.begin(), mine.end());
    mine.erase(std::unique(mine.begin(), mine.end()), mine.end());
    auto [it, fresh] = sigs.emplace(mine, static_cast<int>(sig_members_.size()));
    if (fresh) {
      sig_members_.push_back(mine);
      Class c;
      for (auto& v : c.by_gpus) v.assign(kMaxGpuId + 2, RankSet(n));
      c.count.resize(kMaxGpuId + 2);
      for (auto& v : c.packed) v = RankSet(n);
      classes_.push_back(std::move(c));
      if (mine.empty()) sig0_ = it->second;
    }
    a.sig = static_cast<std::uint32_t>(it->second);
  }
}

ReadySet::ReadySet(const Plan& plan, double backfill_max_hours, std::span<const size_t> jobs, bool pack)
    : ReadySet(plan, backfill_max_hours, pack) {
  for (size_t j : jobs) insert(j);
}


RankSet& ReadySet::slot(Key k) {
  const AtRank& a = at_rank_[k];
  Class& c = classes_[a.sig];
  return a.packed ? c.packed[a.is_long] : c.by_gpus[a.is_long][a.gpus];
}

void ReadySet::insert(size_t job) {
  Key k = key(job);
  if (!all_.insert(k)) return;
  slot(k).insert(k);
  const AtRank& a = at_rank_[k];
  if (a.packed) return;
  Class& c = classes_[a.sig];
  if (c.count[a.gpus]++ == 0 && a.gpus > 0) c.present |= std::uint64_t{1} << (a.gpus - 1);
}

void ReadySet::erase(size_t job) {
  Key k = key(job);
  if (!all_.erase(k)) return;
  slot(k).erase(k);
  const AtRank& a = at_rank_[k];
  if (a.packed) return;
  Class& c = classes_[a.sig];
  if (--c.count[a.gpus] == 0 && a.gpus > 0) c.present &= ~(std::uint64_t{1} << (a.gpus - 1));
}

bool ReadySet::contains(size_t job) const { return all_.contains(key(job)); }

void ReadySet::clear() {
  for (size_t k = all_.next(0); k != RankSet::npos; k = all_.next(k + 1)) {
    slot(k).erase(k);
    const AtRank& a = at_rank_[k];
    if (a.packed) continue;
    Class& c = classes_[a.sig];
    if (--c.count[a.gpus] == 0 && a.gpus > 0) c.present &= ~(std::uint64_t{1} << (a.gpus - 1));
  }
  all_ = RankSet(at_rank_.size());
}

std::vector<size_t> ReadySet::in_order(size_t limit) const {
  std::vector<size_t> out;
  for (size_t k = all_.next(0); k != RankSet::npos && out.size() < limit; k = all_.next(k + 1))
    out.push_back(job_at(k));
  return out;
}

/// One walk of the policy over a ReadySet. Rather than trying each ready job in
/// turn, it asks the index for the first job after the last one considered that
/// can start (enough GPUs open to its class; within the limit once a job waits),
/// and for the first job in no reservation that cannot: whichever comes first
/// is what the original's walk would meet next.
struct PassRunner {
  const Plan& plan;
  const ReadySet& rs;
  const PassInput& in;
  // Per signature: the GPUs closed to its jobs. In place for the usual few signatures (a
  // pass per event of a simulation made one allocation each).
  std::array<GpuMask, 8> closed_here{};
  std::vector<GpuMask> closed_more;
  GpuMask* closed;

  PassRunner(const PassRunner&) = delete;  // `closed` may point into this object
  PassRunner& operator=(const PassRunner&) = delete;
  PassRunner(const Plan& p, const ReadySet& r, const PassInput& i) : plan(p), rs(r), in(i) {
    if (rs.sig_members_.size() <= closed_here.size()) {
      closed = closed_here.data();
    } else {
      closed_more.assign(rs.sig_members_.size(), 0);
      closed = closed_more.data();
    }
    for (size_t s = 0; s < rs.sig_members_.size(); ++s) {
      const auto& mine = rs.sig_members_[s];
      for (size_t r = 0; r < plan.reservations.size(); ++r)
        if (in.open[r] && !std::binary_search(mine.begin(), mine.end(), r)) closed[s] |= plan.reservations[r].gpus;
    }
  }

  using Key = ReadySet::Key;

  GpuMask closed_to(size_t job) const { return closed[rs.at_rank_[rs.key(job)].sig]; }

  static void first_after(const RankSet& s, const std::optional<Key>& p, std::optional<Key>& best) {
    size_t k = s.next(p ? *p + 1 : 0);
    if (k != RankSet::npos && (!best || k < *best)) best = k;
  }

  // The free GPUs per node: in.free, or a copy of in.nodes.
  struct Free {
    GpuMask one;
    std::vector<GpuMask> many;  // empty for one node: no allocation
    std::vector<double> room;   // PassInput::room (empty when no job packs)
    std::vector<HostRoom> host;  // PassInput::host_room (empty when the plan counts no cores nor memory)
    explicit Free(const PassInput& in)
        : one(in.free),
          many(in.nodes.begin(), in.nodes.end()),
          room(in.room.begin(), in.room.end()),
          host(in.host_room.begin(), in.host_room.end()) {}
    size_t nodes() const { return many.empty() ? 1 : many.size(); }
    const double* room_of(size_t n) const { return room.data() + n * (kMaxGpuId + 1); }
    double* room_of(size_t n) { return room.data() + n * (kMaxGpuId + 1); }
    GpuMask* begin() { return many.empty() ? &one : many.data(); }
    GpuMask* end() { return many.empty() ? &one + 1 : many.data() + many.size(); }
    /// The most GPUs outside `closed` that one node has free.
    int most(GpuMask closed) {
      int m = 0;
      for (GpuMask f : *this) m = std::max(m, count(f & ~closed));
      return m;
    }
    /// The first node with `n` GPUs free outside `closed` (there is one: most(closed) >= n).
    GpuMask& node_for(int n, GpuMask closed) {
      GpuMask* f = begin();
      while (count(*f & ~closed) < n) ++f;
      return *f;
    }
    /// Cores and memory: node n has room for `need` (always, where the plan counts neither).
    bool host_fits(size_t n, const HostNeed& need) const { return host.empty() || host[n].fits(need); }
    /// Some node has room for `least`.
    bool host_any(const HostNeed& least) const {
      for (const HostRoom& h : host)
        if (h.fits(least)) return true;
      return false;
    }
    void take_host(size_t n, const HostNeed& need) {
      if (host.empty()) return;
      host[n].cpus -= need.cpus;
      host[n].mem_gib -= need.mem_gib;
    }
  };

  // ---- Cores and host memory (PassInput::host_need).

  bool counts_host() const { return !in.host_need.empty(); }
  const HostNeed& host_need(size_t job) const { return in.host_need[job]; }

  // The first node with `gpus` GPUs free outside `closed` and room for the job's cores and memory,
  // or -1.
  int whole_node(Free& free, size_t job, int gpus, GpuMask closed) const {
    const GpuMask* f = free.begin();
    for (size_t n = 0; n < free.nodes(); ++n)
      if (count(f[n] & ~closed) >= gpus && free.host_fits(n, host_need(job))) return static_cast<int>(n);
    return -1;
  }

  // ---- Jobs that pack (PassInput::room).

  double need(size_t job) const { return in.gib.empty() ? *plan.jobs[job].gpu_mem_gib : in.gib[job]; }

  // The GPUs of node n outside `closed` with room for `gib`.
  int fitting(const Free& free, size_t n, double gib, GpuMask closed) const {
    if (free.room.empty()) return 0;
    const double* room = free.room_of(n);
    int c = 0;
    for (GpuMask m = in.node & ~closed; m; m &= m - 1) c += room[std::countr_zero(m)] >= gib;
    return c;
  }

  // The first node where the packed job of rank k fits (`host`: its cores and memory too), or -1.
  int packed_node(const Free& free, Key k, bool host = true) const {
    const ReadySet::AtRank& a = rs.at_rank_[k];
    double gib = need(a.job);
    for (size_t n = 0; n < free.nodes(); ++n)
      if (fitting(free, n, gib, closed[a.sig]) >= a.gpus && (!host || free.host_fits(n, host_need_or_none(a.job))))
        return static_cast<int>(n);
    return -1;
  }
  HostNeed host_need_or_none(size_t job) const { return counts_host() ? host_need(job) : HostNeed{}; }

  // GPUs the ready whole jobs ask for (those no wider than the node), before the pass starts any:
  // while more GPUs than that are idle, packed jobs spread over them rather than share one.
  int whole_wanted() const {
    int wanted = 0, widest = count(in.node);
    for (const auto& c : rs.classes_)
      for (int g = 1; g < static_cast<int>(c.count.size()) && g <= widest; ++g)
        wanted += static_cast<int>(c.count[static_cast<size_t>(g)]) * g;
    return wanted;
  }

  // Places the packed job of rank k on node n: its GPUs are those with room for it. While the node
  // has more idle GPUs (no job holds them) than the whole jobs waiting ask for (`wanted`), one per
  // idle GPU first: co-located jobs slow each other. Else the fullest first (best fit: a GPU no job
  // holds last, then the fewest GiB left), so that idle GPUs stay whole for wide jobs. Then the
  // lowest id.
  Start place_packed(Free& free, Key k, int n, int wanted) const {
    const ReadySet::AtRank& a = rs.at_rank_[k];
    double gib = need(a.job);
    double* room = free.room_of(static_cast<size_t>(n));
    GpuMask& empty = free.begin()[n];
    bool spread = in.spread && count(empty & in.node & ~closed[a.sig]) - std::max(wanted, 0) >= a.gpus;
    std::array<std::pair<std::pair<int, double>, int>, kMaxGpuId + 1> pick;
    size_t m = 0;
    for (GpuMask b = in.node & ~closed[a.sig]; b; b &= b - 1) {
      int g = std::countr_zero(b);
      int idle = static_cast<int>(empty >> g & 1);
      if (room[g] >= gib) pick[m++] = {{spread ? 1 - idle : idle, room[g]}, g};
    }
    std::partial_sort(pick.begin(), pick.begin() + a.gpus, pick.begin() + m);
    Start s{a.job, {}, n};
    for (int i = 0; i < a.gpus; ++i) {
      int g = pick[static_cast<size_t>(i)].second;
      s.gpus.push_back(g);
      room[g] -= gib;
      empty &= ~(GpuMask{1} << g);
    }
    std::sort(s.gpus.begin(), s.gpus.end());
    return s;
  }

  // The packed jobs of `set` after p, in order, up to `best` and `fail`: the first that fits is
  // a candidate for `best`; the first that does not, in no reservation before any job waits, for
  // `fail`. A walk, not an index: whether one fits depends on its GiB.
  void packed_after(const Free& free, const RankSet& set, const std::optional<Key>& p, bool may_fail,
                    std::optional<Key>& best, std::optional<Key>& fail) const {
    for (size_t k = set.next(p ? *p + 1 : 0); k != RankSet::npos; k = set.next(k + 1)) {
      if ((best && k >= *best) || (fail && k >= *fail)) return;
      if (packed_node(free, k, false) >= 0) {  // its GPUs; the caller looks at its cores and memory
        best = k;
        return;
      }
      // One of more GiB than an empty GPU takes never starts: it holds no job back.
      if (may_fail && need(rs.job_at(k)) <= in.room_empty) {
        fail = k;
        return;
      }
    }
  }

  // Widths up to n GPUs, as bits (bit g: g + 1 GPUs).
  static std::uint64_t up_to(int n) { return n >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << std::max(n, 0)) - 1; }

  // The first ready job after p in rank order whose GPUs are free (best), and, while no job
  // waits, the first before it that cannot get GPUs and is in no reservation (fail). Once a job
  // waits (head), only short jobs, unless `lift_limit`.
  void next_after(Free& free, const std::optional<Key>& p, const std::optional<Key>& head, bool lift_limit,
                  int budget, std::optional<Key>& best, std::optional<Key>& fail) const {
    std::uint64_t within = up_to(budget);  // widths the cap leaves in the pass
    for (size_t s = 0; s < rs.classes_.size(); ++s) {
      const auto& c = rs.classes_[s];
      int avail = free.most(closed[s]);
      std::uint64_t fits = c.present & up_to(avail) & within;
      for (int len = 0; len < 2; ++len) {
        if (len == 1 && head && !lift_limit) continue;  // only short jobs once a job waits
        first_after(c.by_gpus[len][0], p, best);
        for (std::uint64_t m = fits; m; m &= m - 1) first_after(c.by_gpus[len][std::countr_zero(m) + 1], p, best);
        if (!head && static_cast<int>(s) == rs.sig0_)
          for (std::uint64_t m = c.present & ~fits & within; m; m &= m - 1)
            first_after(c.by_gpus[len][std::countr_zero(m) + 1], p, fail);
      }
    }
    if (rs.any_packed_)
      for (size_t s = 0; s < rs.classes_.size(); ++s)
        for (int len = 0; len < 2; ++len) {
          if (len == 1 && head && !lift_limit) continue;
          packed_after(free, rs.classes_[s].packed[len], p, !head && static_cast<int>(s) == rs.sig0_, best, fail);
        }
  }

  // Starts the whole job `a` on `node` (one of free's): its GPUs picked and taken from the node,
  // the cap's budget and the whole jobs' wanted GPUs.
  void start_whole(Free& free, const ReadySet::AtRank& a, GpuMask& node, int& budget, int& wanted,
                   PassResult& out) const {
    auto gpus = pick_gpus(a.gpus, node & ~closed[a.sig], in.placement);
    budget -= a.gpus;
    if (a.gpus <= count(in.node)) wanted -= a.gpus;
    node &= ~mask_of(*gpus);
    int n = static_cast<int>(&node - free.begin());
    if (!free.room.empty())  // a whole job's GPUs are shared with no packed job
      for (int g : *gpus) free.room_of(static_cast<size_t>(n))[g] = -1;
    out.starts.push_back({a.job, std::move(*gpus), n});
  }

  void run(bool lift_limit, PassResult& out) const {
    out.starts.clear();
    out.held.clear();
    out.waiting_head.reset();
    out.stall_broken = false;
    Free free(in);
    std::optional<Key> p, head;
    int budget = in.gpu_budget < 0 ? 64 : in.gpu_budget;
    int wanted = rs.any_packed_ ? whole_wanted() : 0;  // by the whole jobs not started yet
    const bool host = counts_host();
    while (true) {
      // Once a job waits, no node with less room than any job needs starts one more.
      if (host && head && !free.host_any(in.host_least)) break;
      std::optional<Key> best, fail;
      next_after(free, p, head, lift_limit, budget, best, fail);
      if (fail && (!best || *fail < *best)) {
        head = fail;  // a job in no reservation cannot get GPUs: from here on, only short jobs
        out.waiting_head = rs.job_at(*fail);
        p = fail;
        continue;
      }
      if (!best) break;
      const ReadySet::AtRank& a = rs.at_rank_[*best];
      size_t j = a.job;
      p = best;
      if (host) {
        // Its GPUs are free; its cores and memory must be too, on the same node. A job that waits
        // for them sets the limit as a job waiting for GPUs does (one that needs more than an
        // empty node has never starts, and holds no job back).
        int n = a.packed ? packed_node(free, *best) : whole_node(free, j, a.gpus, closed[a.sig]);
        if (n < 0) {
          if (!head && static_cast<int>(a.sig) == rs.sig0_ && in.host_total.fits(host_need(j))) {
            head = best;
            out.waiting_head = j;
          }
          continue;
        }
        free.take_host(static_cast<size_t>(n), host_need(j));
        if (a.packed)
          out.starts.push_back(place_packed(free, *best, n, wanted));
        else
          start_whole(free, a, free.begin()[n], budget, wanted, out);
      } else if (a.packed) {
        out.starts.push_back(place_packed(free, *best, packed_node(free, *best), wanted));
      } else {
        start_whole(free, a, free.node_for(a.gpus, closed[a.sig]), budget, wanted, out);
      }
    }
  }

  // The job of rank k has its GPUs free on some node (whatever its cores and memory).
  bool gpus_fit(Free& free, Key k) const {
    const ReadySet::AtRank& a = rs.at_rank_[k];
    if (a.packed) return packed_node(free, k, false) >= 0;
    return free.most(closed[a.sig]) >= a.gpus;
  }

  // ... and its cores and memory on one of the nodes where its GPUs are.
  bool host_fits_where_gpus(Free& free, Key k) const {
    const ReadySet::AtRank& a = rs.at_rank_[k];
    if (a.packed) return packed_node(free, k) >= 0;
    return whole_node(free, a.job, a.gpus, closed[a.sig]) >= 0;
  }

  // Why each ready job that did not start waits, replaying the walk in order.
  void explain(PassResult& out, bool lift_limit) const {
    Free free(in);
    size_t next = 0;
    std::optional<Key> head;
    if (out.waiting_head) head = rs.key(*out.waiting_head);
    for (Key k = rs.all_.next(0); k != RankSet::npos; k = rs.all_.next(k + 1)) {
      const ReadySet::AtRank& a = rs.at_rank_[k];
      size_t j = a.job;
      if (next < out.starts.size() && out.starts[next].job == j) {
        const Start& s = out.starts[next++];
        free.begin()[s.node] &= ~mask_of(s.gpus);
        if (counts_host()) free.take_host(static_cast<size_t>(s.node), host_need(j));
        if (!free.room.empty())
          for (int g : s.gpus) free.room_of(static_cast<size_t>(s.node))[g] -= a.packed ? need(j) : 1e300;
        continue;
      }
      if (head && k > *head && a.is_long && !lift_limit) {
        PassedOver b{j, PassedOver::Why::Backfill, 0, 0, *out.waiting_head};
        // What the head waits for: its own entry is before this one (it ranks first).
        b.head_host = std::any_of(out.held.begin(), out.held.end(), [&](const PassedOver& h) {
          return h.job == *out.waiting_head && h.why == PassedOver::Why::Host;
        });
        out.held.push_back(b);
      } else if (counts_host() && gpus_fit(free, k) && !host_fits_where_gpus(free, k)) {
        PassedOver h{j, PassedOver::Why::Host, 0, 0, 0};
        h.need = host_need(j);
        h.host = {0, 0};
        for (const HostRoom& r : free.host) h.host = {std::max(h.host.cpus, r.cpus), std::max(h.host.mem_gib, r.mem_gib)};
        out.held.push_back(h);
      } else if (a.packed) {
        GpuMask c = closed[a.sig];
        int most = 0;
        double room = 0;
        for (size_t n = 0; n < free.nodes(); ++n) {
          most = std::max(most, fitting(free, n, need(j), c));
          for (GpuMask m = in.node & ~c; m; m &= m - 1) room = std::max(room, free.room_of(n)[std::countr_zero(m)]);
        }
        out.held.push_back({j, PassedOver::Why::Gpus, most, *free.begin() & c, 0, room});
      } else {
        GpuMask c = closed[a.sig];
        out.held.push_back({j, PassedOver::Why::Gpus, free.most(c), *free.begin() & c, 0});
      }
    }
  }
};

PassResult schedule_pass(const Plan& plan, const ReadySet& ready, const PassInput& in) {
  PassResult out;
  schedule_pass(plan, ready, in, out);
  return out;
}

void schedule_pass(const Plan& plan, const ReadySet& ready, const PassInput& in, PassResult& out) {
  PassRunner runner(plan, ready, in);
  runner.run(false, out);
  bool stalled = out.starts.empty() && in.nothing_running && out.waiting_head;
  if (stalled) {
    size_t head = *out.waiting_head;
    GpuMask usable = in.node & ~runner.closed_to(head);
    const Job& job = plan.jobs[head];
    if (!in.room.empty() && ready.packs(head))
      stalled = !(count(usable) >= job.gpus && (in.gib.empty() ? *job.gpu_mem_gib : in.gib[head]) <= in.room_empty);
    else
      stalled = !pick_gpus(job.gpus, usable, in.placement);  // else it will fit once GPUs free up
  }
  if (!stalled) {
    if (in.explain) runner.explain(out, false);
    return;
  }
  // The limit can only be waited out by GPUs that will never free up: lift it. If even that
  // starts nothing, its reasons (GPUs, not the limit) are the true ones.
  std::optional<size_t> head = out.waiting_head;
  runner.run(true, out);
  out.stall_broken = !out.starts.empty();
  out.waiting_head = head;
  if (in.explain) runner.explain(out, true);
}

std::optional<std::vector<size_t>> fewest_that_fit(size_t n, const std::function<bool(const std::vector<size_t>&)>& fits) {
  n = std::min(n, kPreemptCandidates);
  for (size_t k = 1; k <= n; ++k) {
    std::vector<size_t> idx(k);
    for (size_t i = 0; i < k; ++i) idx[i] = i;
    while (true) {
      if (fits(idx)) return idx;
      size_t i = k;  // the next combination, in lexicographic order
      while (i > 0 && idx[i - 1] == n - k + i - 1) --i;
      if (i == 0) break;
      ++idx[i - 1];
      for (size_t q = i; q < k; ++q) idx[q] = idx[q - 1] + 1;
    }
  }
  return std::nullopt;
}

}  // namespace gpuq

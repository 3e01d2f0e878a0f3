// The scheduling pass: one pure function shared by `run` and `simulate`.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "gpuq/core/gpus.h"
#include "gpuq/core/plan.h"
#include "gpuq/core/topology.h"

namespace gpuq {

/// GPUs closed to `job`: those of every open reservation that does not list it.
/// `open[r]` says whether some job reservation r lists is unfinished.
GpuMask reserved_gpus(const Plan& plan, size_t job, const std::vector<bool>& open);

/// A set of ranks 0..n-1 as a tree of 64-bit words: bit r of level 0 is rank r,
/// bit i of level k+1 says word i of level k is not zero. Insert, erase and
/// "first member from r" cost a few word operations, with no allocation once
/// made; it takes n/8 bytes, allocated at the first insert.
class RankSet {
 public:
  static constexpr size_t npos = static_cast<size_t>(-1);
  explicit RankSet(size_t n = 0) : n_(n) {}
  bool insert(size_t r);
  bool erase(size_t r);
  bool contains(size_t r) const { return !lv_.empty() && (lv_[0][r >> 6] >> (r & 63) & 1); }
  /// The smallest member >= r, or npos.
  size_t next(size_t r) const;
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

 private:
  size_t n_;
  size_t size_ = 0;
  std::vector<std::vector<std::uint64_t>> lv_;
};

/// The ready jobs, indexed so that a pass finds the next job that can start
/// in O(log n) instead of walking every ready job: by reservation membership,
/// GPU count, and whether est_hours is within the backfill limit. Jobs that
/// pack (a gpu_mem_gib, with `pack`) are kept apart: whether one fits depends on
/// its GiB, so the pass walks them in order.
class ReadySet {
 public:
  ReadySet(const Plan& plan, double backfill_max_hours, bool pack = true);
  /// A set holding `jobs`.
  ReadySet(const Plan& plan, double backfill_max_hours, std::span<const size_t> jobs, bool pack = true);
  void insert(size_t job);
  void erase(size_t job);
  bool contains(size_t job) const;
  /// Empties the set.
  void clear();
  /// The first `limit` members in ready order.
  std::vector<size_t> in_order(size_t limit) const;
  size_t size() const { return all_.size(); }
  bool empty() const { return all_.empty(); }
  /// The job packs (a gpu_mem_gib, and the set was made to pack).
  bool packs(size_t job) const { return at_rank_[rank_of_[job]].packed; }
  /// Some job of the plan packs.
  bool any_packed() const { return any_packed_; }

 private:
  friend struct PassRunner;
  // A job's place in ready order (priority, then plan position): Plan::rank_of.
  using Key = size_t;
  struct Class {
    std::vector<RankSet> by_gpus[2];  // [long?][gpus] -> jobs
    std::vector<size_t> count;        // [gpus] -> jobs of either length
    std::uint64_t present = 0;        // bit g-1 set when some job needs g >= 1 GPUs
    RankSet packed[2];                // [long?] -> jobs that pack (any GPU count)
  };
  // What a pass asks of the job of each rank, in rank order: a pass meets jobs in that
  // order, so these share cache lines where the plan's jobs (and a vector per job) would
  // cost a cache miss each in a large plan.
  struct AtRank {
    std::uint32_t job;
    std::uint32_t sig;    // index of its reservation signature
    std::uint8_t gpus;
    std::uint8_t is_long;  // est_hours over the backfill limit
    std::uint8_t packed;   // it packs: Class::packed holds it
  };
  Key key(size_t job) const { return rank_of_[job]; }
  size_t job_at(Key k) const { return at_rank_[k].job; }
  RankSet& slot(Key k);

  std::vector<std::uint32_t> rank_of_;             // a copy of the plan's (a copy of the set stays whole)
  int sig0_ = -1;                                  // the signature of jobs in no reservation
  std::vector<AtRank> at_rank_;
  std::vector<std::vector<size_t>> sig_members_;   // per signature: the reservations it is in
  std::vector<Class> classes_;                     // per signature
  RankSet all_;
  bool any_packed_ = false;                        // some job of the plan packs
};

/// What a job needs of the rest of the box (issue 45): cores and GiB of host memory.
struct HostNeed {
  float mem_gib = 0;
  uint16_t cpus = 0;
};

/// Cores and GiB of host memory free for jobs (on one node); +inf where the node does not count one.
struct HostRoom {
  double cpus = 0;
  double mem_gib = 0;
  bool fits(const HostNeed& n) const { return n.cpus <= cpus + 1e-9 && n.mem_gib <= mem_gib + 1e-9; }
};

/// What the pass sees.
struct PassInput {
  GpuMask free = 0;                ///< GPUs free now
  GpuMask node = 0;                ///< every GPU of --gpus
  std::vector<bool> open;          ///< per reservation: some job it lists is unfinished
  bool nothing_running = false;    ///< no job of the plan is running
  bool explain = false;            ///< fill PassResult::held (costs a walk over every ready job)
  const Placement* placement = nullptr;  ///< how multi-GPU jobs are placed (null: the original's pairs)
  /// `simulate --nodes`: the free GPUs of each node of a cluster, every node's GPUs being
  /// `node`; `free` is then not read. A job runs on one node: the first (lowest) node
  /// where it fits. Empty: one node, `free`.
  std::span<const GpuMask> nodes;
  /// Several jobs on one GPU: per node (one, or each of `nodes`), for each GPU id 0..kMaxGpuId, the
  /// GiB a packed job may still declare there (negative: none; a whole job holds it, or it is no GPU
  /// of the node). Empty when no job packs. A packed job takes GPUs with room for its GiB: one per
  /// idle GPU while more GPUs are idle than the ready whole jobs ask for (co-located jobs slow each
  /// other), else the fullest first (best fit), so that idle GPUs stay whole for wide jobs; it never
  /// shares a whole job's.
  std::span<const double> room;
  double room_empty = 0;  ///< what an empty GPU takes (fix 12: could the waiting job ever fit?)
  /// Per job: the GiB it packs with where that is not its gpu_mem_gib (an on_oom retry's, host_mem.h);
  /// empty: each job's gpu_mem_gib.
  std::span<const float> gib;
  /// Packed jobs spread over idle GPUs while the ready whole jobs leave some (see `room`); false:
  /// the fullest first always (a shared node's decision, where spreading took a user past their cap).
  bool spread = true;
  /// The most GPUs the pass may give whole jobs in all (Policy::max_gpus less what the plan's
  /// running jobs hold); a job wider than what is left is left out. Negative: no cap.
  int gpu_budget = -1;
  /// Cores and host memory (Policy::counts_host): per job, what it needs. Empty when the plan
  /// counts neither: the pass is then exactly the GPUs' (and as fast).
  std::span<const HostNeed> host_need;
  /// Per node (one, or each of `nodes`): the cores and GiB free for jobs now. A job starts only on
  /// a node where its need fits beside the running jobs'.
  std::span<const HostRoom> host_room;
  HostRoom host_total;  ///< what an empty node has for jobs: a job that needs more never starts, holds none back
  HostNeed host_least;  ///< the least any job needs of each: a node with less room starts nothing more
};

/// A job the pass starts, and its GPUs.
struct Start {
  size_t job;
  std::vector<int> gpus;
  int node = 0;  ///< with PassInput::nodes: which node the GPUs are on
};

/// Why a ready job was not started.
struct PassedOver {
  enum class Why {
    Gpus,      ///< not enough GPUs (free ones, less those reservations close to it)
    Backfill,  ///< longer than --backfill-max-hours while `head` waits for GPUs
    Host,      ///< its GPUs are there, but not its cores or host memory (`host`)
  };
  size_t job;
  Why why;
  int free_for_job = 0;    ///< GPUs it could use now (Gpus; with PassInput::nodes, on the node with most)
  GpuMask closed = 0;      ///< free GPUs a reservation closes to it (Gpus)
  size_t head = 0;         ///< the waiting job that set the backfill limit (Backfill)
  double room = 0;         ///< a job that packs: the most GiB a GPU open to it has room for (Gpus)
  HostRoom host{};         ///< the most cores and host GiB free on a node (Host)
  HostNeed need{};         ///< what it needs of them (Host)
  bool head_host = false;  ///< Backfill: `head` waits for cores or host memory, not GPUs
};

/// What the pass decided.
struct PassResult {
  std::vector<Start> starts;           ///< in ready order
  std::vector<PassedOver> held;              ///< with PassInput::explain
  std::optional<size_t> waiting_head;  ///< the job that set the backfill limit
  bool stall_broken = false;           ///< the limit was lifted to break a reservation deadlock
};

/// One scheduling pass, the original's rules exactly: ready jobs in order; a
/// job starts if pick_gpus finds GPUs among the free ones less its reserved
/// ones; once a job that needs GPUs and is in no reservation cannot get them,
/// later jobs start only if est_hours <= the backfill limit. Fix 12: when this
/// starts nothing, nothing is running, and the job that set the limit could not
/// fit even on every GPU of the node that no reservation closes to it, the pass
/// runs again without the limit and says so in `stall_broken`; if that starts
/// nothing either, its reasons (GPUs) are returned.
PassResult schedule_pass(const Plan& plan, const ReadySet& ready, const PassInput& in);
/// The same into `out`, whose lists keep their room (the simulator runs a pass per event).
void schedule_pass(const Plan& plan, const ReadySet& ready, const PassInput& in, PassResult& out);

/// Preemption's search, the engine's within a plan and the node's across plans: of the first
/// kPreemptCandidates of `n` candidates (in the caller's order of preference), the fewest for
/// which `fits` holds, and among as many the first set in that order (as indices, ascending).
/// None: no set of them fits.
inline constexpr size_t kPreemptCandidates = 12;  // 2^12 sets at most
std::optional<std::vector<size_t>> fewest_that_fit(size_t n, const std::function<bool(const std::vector<size_t>&)>& fits);

}  // namespace gpuq

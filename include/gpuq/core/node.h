// A node shared by several users' runs: what each run publishes in the node directory (its
// holds and its wants), the fair-share order between users, and the one node-wide decision
// every run computes from the same data. Pure: no file, no clock, no process.
#pragma once

#include <algorithm>
#include <map>
#include <optional>
#include <utility>
#include <string>
#include <string_view>
#include <vector>

#include "gpuq/core/gpu_health.h"
#include "gpuq/core/gpu_use.h"
#include "gpuq/core/gpus.h"
#include "gpuq/core/schedule.h"
#include "gpuq/core/topology.h"

namespace gpuq {

struct Attempt;  // events.h: an attempt as the event log records it

/// A running job a run holds GPUs for.
struct NodeHold {
  std::string id;
  std::vector<int> gpus;
  long long pid = 0;                  ///< its process (group leader); 0: not known yet
  unsigned long long pid_start = 0;   ///< /proc/PID/stat's start time of `pid` (0: not known)
  double start = 0;                   ///< seconds since the epoch
  double est_hours = 0;
  double mem_gib = 0;                 ///< it packs: the GiB it declared on each of its GPUs (its
                                      ///< gpu_mem_gib), which other packed jobs may share; 0: whole
  bool preemptible = false;           ///< another user's waiting job may preempt it (preempt.h)
  double preempt_after = 0;           ///< ... once this time has passed (its start + its run's preempt_min_minutes)
  bool preempting = false;            ///< its run is stopping it for a preemption: its GPUs come free soon
  double cpus = 0;                    ///< the cores it counts (its cpus, where its plan counts them); 0: none
  double host_mem_gib = 0;            ///< the host memory it counts (its attempt's mem_gib); 0: none
  std::string cores;                  ///< the cores it is pinned to ("0-3,8"); "": none
};

/// What other runs' jobs on the node hold of the rest of the box (NodeHold::cpus, ...).
struct HostTaken {
  double cpus = 0;
  double mem_gib = 0;
  std::vector<std::string> cores;  ///< each job's pinned cores, as its hold gives them
};


/// A ready job of a run that waits for GPUs, in its run's ready order.
struct NodeWant {
  std::string id;
  int gpus = 1;
  double priority = 50;
  double est_hours = 1;
  double mem_gib = 0;                 ///< it packs: the GiB it declares per GPU; 0: it takes its GPUs whole
  double cpus = 0;                    ///< the cores it needs, where its plan counts them (0: none)
  double host_mem_gib = 0;            ///< the host memory it needs, where its plan counts it (0: none)
  /// What it needs of the rest of the box, as the pass counts it.
  HostNeed host() const { return {static_cast<float>(host_mem_gib), static_cast<uint16_t>(std::min(cpus, 65535.0))}; }
};

/// A ready job as the node sees it: its GPUs, priority and estimate, the GiB it packs with
/// (0: whole), and what it needs of the rest of the box (none where its plan counts neither).
inline NodeWant node_want(const Job& j, double packed_gib, HostNeed host) {
  return {j.id, j.gpus, j.priority, j.est_hours, packed_gib, static_cast<double>(host.cpus), host.mem_gib};
}

/// The node's cores and host memory for jobs, as the deciding run counts them (its node_cpus and
/// node_mem_gib): +inf where none is counted.
inline constexpr HostRoom kHostUncounted{1e300, 1e300};
/// The node's HostRoom from node_cpus and node_mem_gib (0: not counted).
inline HostRoom node_host_room(double cpus, double mem_gib) {
  return {cpus > 0 ? cpus : kHostUncounted.cpus, mem_gib > 0 ? mem_gib : kHostUncounted.mem_gib};
}

/// The most wants a run publishes (its first ready jobs, in ready order).
inline constexpr size_t kNodeMaxWants = 256;

/// One `gpuq run` on the node: its plan, its process, what it holds and wants.
struct NodeRun {
  std::string plan;                   ///< the plan's absolute path (a run of the same plan replaces it)
  long long pid = 0;
  unsigned long long pid_start = 0;
  double updated = 0;                 ///< when it last wrote its entry
  double accounted = 0;               ///< when its holds were last added to its user's usage
  std::vector<NodeHold> holds;
  std::vector<NodeWant> wants;
  std::vector<IdleHolder> idle_holders;  ///< processes of no gpuq job it saw idle on GPUs (reported only)
  bool gone = false;                  ///< what a reader found, not written: its process has ended
};

/// One user's file: their runs and their decayed GPU-hours.
struct NodeUser {
  std::string name;
  double usage_gpu_hours = 0;         ///< decayed GPU-hours as of `usage_at`
  double usage_at = 0;
  std::vector<NodeRun> runs;
  /// Their newest drain record per GPU (gpu_health.h): the node's drained GPUs are every user's
  /// newest records (node_drained); no run's pass or prediction gives a drained GPU a job.
  std::vector<GpuDrain> drains;
};

/// The GPUs drained on the node now: each GPU's newest record among every user's (gpu_health.h).
/// `undrains`, when given: the GPUs whose newest record is an undrain, with it.
std::map<int, GpuDrain> node_drained(const std::vector<NodeUser>& users, std::map<int, GpuDrain>* undrains = nullptr);

/// What the node config allows one user: a cap on the GPUs their jobs hold at once, and
/// their share (a user of share 2 is charged half as much for the same GPU-hours, so gets twice
/// the GPU time of a user of share 1 when both want more than there is).
struct NodeLimits {
  std::optional<int> max_gpus;        ///< none: as many as the node has
  double share = 1;
  /// A job of `gpus` GPUs is wider than the cap: it never starts on this node.
  bool over_cap(int gpus) const { return max_gpus && gpus > *max_gpus; }
};

/// The node's fair-share figures: the node config, `node.json` in the node directory or
/// /etc/gpuq/node.json, a file root owns.
struct NodeConfig {
  double half_life_days = 7;          ///< usage halves in this long
  /// "window_seconds": a run's first decision waits this long after its start, so that runs
  /// started within it are decided together (fairly) rather than the first taking every GPU.
  double window_seconds = 5;
  NodeLimits defaults;                ///< "default": for every user not named in `users`
  std::vector<std::pair<std::string, NodeLimits>> users;  ///< "users": by name
  const NodeLimits& limits_of(std::string_view user) const;
};

/// The node config's text (JSON), read; a file that is not one gives nullopt and names the
/// problem (its place and what is wrong): unknown keys are refused, so that a typo in "share"
/// is not silently a share of 1.
std::optional<NodeConfig> read_node_config(std::string_view text, std::string* problem);

/// `usage` GPU-hours at `at`, decayed to `now` with the half-life.
double decayed_usage(double usage, double at, double now, double half_life_days);

/// The GPU-hours a plan's attempts (its event log's, events.h) charge its user at `now`: each
/// ended attempt's GPUs times its hours, decayed from its end. Attempts not ended are left out
/// (the holds of a run charge them).
double usage_of_attempts(const std::vector<Attempt>& attempts, double now, double half_life_days);

/// Adds what `run`'s holds used since it last accounted (GPU-hours, up to `now`) to `user`'s
/// usage, decayed to `now` first; `run.accounted` becomes `now`.
void account_usage(NodeUser& user, NodeRun& run, double now, double half_life_days);

/// The text of a user's file (JSON), and back. read_node_user never throws: a file that is not
/// a user file gives nullopt and `problem`; a hold it cannot accept (a GPU outside `node`, a GPU
/// claimed twice, a pid <= 1) is left out and named in `refused`, the rest kept.
std::string write_node_user(const NodeUser& user);
std::optional<NodeUser> read_node_user(std::string_view text, const std::string& name, GpuMask node,
                                       std::string* problem, std::vector<std::string>* refused);

/// A want placed in the fair-share order, with whose it is.
struct NodeSlot {
  size_t user = 0, run = 0, want = 0;  ///< indices into the users given, their runs, its wants
};

/// The order in which the node's ready jobs are considered: between users, the one with the
/// least charge first, where a user's charge is, divided by their share, their decayed usage,
/// plus what their holds used since their run last accounted (so a run that wrote its entry
/// long ago is not undercharged), plus the GPU-hours still ahead of their holds (GPUs x what
/// is left of est_hours); each want placed adds its
/// GPUs x est_hours over their share (so that equal users alternate); ties by user name. Within a user: their
/// wants by priority (lower first), then run (as given), then the run's own order.
std::vector<NodeSlot> fair_order(const std::vector<NodeUser>& users, double now, const NodeConfig& config);

/// A want the node-wide pass gives GPUs.
/// A user's charge in the fair order (see fair_order): their decayed usage, what their holds used
/// since their runs last accounted and the GPU-hours still ahead of them, over their share.
double user_charge(const NodeUser& user, double now, const NodeConfig& config);

struct NodeStart {
  NodeSlot slot;
  std::vector<int> gpus;
};

/// The node-wide decision: the GPUs every run's holds take, and the wants the scheduling pass
/// (schedule.h: the same rules as a plan's, backfill included) starts, in fair order, on the
/// GPUs of `free` no hold takes, no user past their cap: a want that would take its user past
/// it is left out of the pass (so it neither starts nor holds GPUs back for itself). Several
/// jobs on one GPU: a want that packs (mem_gib) may also start on a GPU only packed holds
/// take, whoever's, where their declared GiB leave room for its own; never on a whole hold's.
/// A hold the node-wide decision preempts: the hold (user, run, index into its holds), for a want.
struct NodePreempt {
  NodeSlot want;
  size_t user = 0, run = 0, hold = 0;
};

struct NodeDecision {
  GpuMask held = 0;                   ///< the GPUs some hold takes
  GpuMask shared = 0;                 ///< of `held`, those only packed holds take
  double most_room = 0;               ///< the most GiB a packed want may declare on an empty GPU (room given)
  std::vector<NodeStart> starts;
  std::vector<NodeSlot> order;
  std::vector<NodeSlot> capped;       ///< wants left out: their user's cap (max_gpus) is reached
  std::vector<NodeSlot> never;        ///< of `capped`, those wider than the cap: they never start
  /// Wants that need more cores or host memory than the node has for jobs (`host`): left out of
  /// the pass (they hold no GPU back, and no job is preempted for them); they never start.
  std::vector<NodeSlot> host_never;
  /// Preemption across users: the first want in fair order left waiting, whose user is charged
  /// less than another user holding preemptible jobs that have run their least, gets the fewest
  /// of those holds that let it start (the latest started first): each is preempted by its own
  /// run. The GPUs it will start on (`kept`) are kept from every other want meanwhile; a later
  /// decision that finds those holds stopping (`preempting`) keeps them again and stops no more.
  std::vector<NodePreempt> preempts;
  GpuMask kept = 0;
  std::optional<NodeSlot> kept_for;
};

/// The GPUs the holds of user `u` take.
int held_gpus(const NodeUser& u);

/// The GiB each GPU offers packed jobs when empty, by GPU id (Policy::gpu_room: its memory less
/// the headroom). Empty: wants that pack take their GPUs whole, and so do holds that pack.
using NodeRoom = std::vector<double>;

/// The GiB the packed holds declare on each GPU, by GPU id (kMaxGpuId + 1 of them); with `skip`
/// (a user's name and plan), that run's holds are left out.
std::vector<double> packed_gib_on(const std::vector<NodeUser>& users,
                                  const std::pair<std::string_view, std::string_view>* skip = nullptr);

/// The cores and host memory the holds of every run but `skip` (user, plan) take.
HostTaken host_taken_on(const std::vector<NodeUser>& users, const std::pair<std::string_view, std::string_view>* skip);

/// One decision for the whole node. `free`: the GPUs free as the deciding run sees them
/// (its node's, less its probe's busy ones; a GPU packed holds share may be busy by its memory
/// and still take a packed want); `node`: every GPU of the node.
/// `host`: the node's cores and host memory for jobs; a want starts only where its own fit beside
/// every hold's (NodeHold::cpus, host_mem_gib), and a hold is preempted only when the want then
/// starts on what the preemption frees: its GPUs, cores and memory.
NodeDecision decide_node(const std::vector<NodeUser>& users, GpuMask free, GpuMask node, double now,
                         const NodeConfig& config, double backfill_max_hours, const Placement* placement,
                         const NodeRoom& room = {}, const HostRoom& host = kHostUncounted);

/// When a want is predicted to start: its slot (into the users given), start and end (seconds
/// since the epoch), GPUs, and the hold whose end lets it start ("" when it starts now).
struct NodePredicted {
  NodeSlot slot;
  double start = 0, end = 0;
  std::vector<int> gpus;
  std::string after_user, after_job;
  bool after_waiting = false;  ///< that job is not running yet: it is predicted to start before this one
  std::vector<std::string> preempting;  ///< it starts on the GPUs of these running jobs, preempted for it ("ana's a7")
};

/// A running job the prediction preempts (decide_node's preempts, played forward): its user, run
/// and id, when, and for whom ("bo's b0"). It waits again with what is left of its estimate.
struct NodePreemptedHold {
  size_t user = 0, run = 0;
  std::string id;
  double at = 0;
  std::string for_want;
};

/// The node's wants played forward on a virtual clock: each hold ends at its start plus its
/// estimate (now, if that has passed), each want placed runs its estimate, and at each end
/// the node-wide decision (decide_node: fair order, caps, the pass) is made again, every run's
/// usage accounted to that instant. Wants never placed (above a cap, wider than the node) are
/// left out. Only the wants published (the runs' ready jobs) are known: jobs that become ready
/// later, in any plan, are not in it.
/// Preemption across users is played too: the running jobs a decision preempts end then (in
/// `preempted`, when given) and wait again with what is left of their estimates, and the want
/// they give way to starts on their GPUs (NodePredicted::preempting).
std::vector<NodePredicted> predict_node(std::vector<NodeUser> users, GpuMask node, double now,
                                        const NodeConfig& config, double backfill_max_hours,
                                        const Placement* placement, const NodeRoom& room = {},
                                        std::vector<NodePreemptedHold>* preempted = nullptr,
                                        const HostRoom& host = kHostUncounted);

/// Why a want waits on the node, as data (views/node_text.cpp says it in words).
struct NodeWhy {
  enum class Kind {
    NextLook,  ///< the decision gives it `gpus`: its run's next look starts it
    Never,     ///< it takes more GPUs than its user's cap (`cap`), or packs with more GiB (`gib`)
               ///< than any GPU takes (`room`), or needs more cores or host memory (`need`) than
               ///< the node has for jobs (`host`)
    Later,     ///< the node's wants played forward (predict_node) start it at `start`
    AtCap,     ///< its user holds their cap, and no start is known
    InLine,    ///< it waits its turn, and no start is known
  };
  Kind kind = Kind::InLine;
  size_t place = 0;                   ///< its place in the node's fair order, from 1
  std::vector<int> gpus;              ///< NextLook: the GPUs it is given
  bool at_cap = false;                ///< its user is at their cap (a Later one says so too)
  std::string user;                   ///< its user, whose cap it is
  int cap = 0, held = 0;              ///< that user's cap and the GPUs their jobs hold
  double start = 0;                   ///< Later: when it starts (seconds since the epoch)
  std::string after_user, after_job;  ///< Later: the job whose end lets it start ("": none)
  bool after_waiting = false;         ///< Later: that job waits too (it is predicted to start first)
  double gib = 0, room = 0;           ///< Never for its memory: its GiB, the most a GPU takes
  HostNeed need{};                    ///< Never for the rest of the box: what it needs ...
  HostRoom host{};                    ///< ... and what the node has for jobs (+inf: not counted)
  bool host_never = false;            ///< Never: for its cores or host memory
  std::vector<std::string> preempting;  ///< Later: the running jobs preempted for it ("ana's a7")
};

/// The node-wide decision and, per want of its fair order (d.order), why it waits; and the
/// node's wants played forward (predict_node).
struct NodeWaits {
  NodeDecision d;
  std::vector<NodeWhy> why;
  std::vector<NodePredicted> predicted;
  std::vector<NodePreemptedHold> preempted;  ///< running jobs the prediction preempts
};
NodeWaits node_whys(const std::vector<NodeUser>& users, GpuMask node, double now, const NodeConfig& config,
                    double backfill_max_hours, const NodeRoom& room = {}, const HostRoom& host = kHostUncounted);

/// Why each waiting job of `user`'s run of `plan` (its absolute path) waits on the node, by job
/// id, from node_whys' answer `w` over `users`: plain `status` gives it as the job's reason, and a
/// Later one's start delays the plan's own prediction of it.
std::map<std::string, NodeWhy> waits_of(const NodeWaits& w, const std::vector<NodeUser>& users, std::string_view user,
                                        std::string_view plan);

/// The GPUs the decision gives the wants of (user, plan), in that run's order of its wants.
GpuMask gpus_for(const NodeDecision& d, const std::vector<NodeUser>& users, std::string_view user,
                 std::string_view plan);

}  // namespace gpuq

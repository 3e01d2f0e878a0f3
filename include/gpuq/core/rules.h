// The rule book: what the original's rules say about each job of a live queue,
// from its state entry and the time. `run`'s tick, `status`'s reasons and the
// prediction from the live state all ask here, so they cannot disagree.
// Pure: no clock, no file, no process (file: deps are asked through a callback).
#pragma once

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gpuq/core/life.h"
#include "gpuq/core/plan.h"
#include "gpuq/core/schedule.h"
#include "gpuq/core/settings.h"
#include "gpuq/core/state.h"

namespace gpuq {

/// gpuq's field "outcome" of a job that could not be started for a cause no retry fixes
/// (its log cannot be opened, its script is missing): it is finished and never retried
/// automatically; its field "reason" says why, its exit is 127 (a missing script, as
/// bash gives) or kLostExit.
inline constexpr const char* kUnstartableOutcome = "unstartable";

/// The outcome of a done or failed entry; nullopt for any other status (life.h's rules on it).
std::optional<Outcome> outcome_of(const JobState& s);

/// The automatic retries job `j` gets when the run's setting (--max-retries) is `max_retries`:
/// its own `max_retries` field when it has one. The one place that says it (the engine, the
/// prediction, status's words and logs -f ask here).
inline long long retries_of(const Job& j, long long max_retries) { return j.max_retries.value_or(max_retries); }

/// The settings the rules read: the flags of `run`, `status` and `simulate`.
struct Policy {
  /// Every setting as its sources gave it (settings.h; the table's defaults where none did): a new
  /// setting is read from here, by the rule that uses it, with no member of its own below.
  Settings settings;
  std::vector<int> node_gpus{0, 1, 2, 3, 4, 5, 6, 7};
  double backfill_max_hours = 0.5;
  long long max_retries = 2;
  double retry_after = 300;
  double time_limit_factor = 0;  ///< --time-limit-factor: a job without a limit gets this x est_hours (0: off)
  double poll = 20;              ///< --poll: the longest wait of `run` between two looks (and GPU readings)
  double quiet_minutes = 0;      ///< --quiet-minutes: a job without quiet_minutes gets this watchdog (0: off)
  Placement placement;           ///< --pairs: how multi-GPU jobs are placed (the original's pairs by default)
  bool paused = false;           ///< `gpuq pause` holds the plan: a tick starts nothing new (running jobs go on)
  int nodes = 1;                 ///< simulate --nodes: that many nodes of node_gpus each; a job runs on one node
  /// A shared node's cap (its config's max_gpus for the user): the most GPUs the plan's running
  /// jobs and the user's other runs' jobs (Tick::held_elsewhere) hold at once. A job that would pass it is left out of
  /// the pass (it neither starts nor holds GPUs back), as the node-wide decision leaves it out.
  /// None: no cap (alone on the node; `run` itself, which the node-wide decision caps).
  std::optional<int> max_gpus;
  /// The job needs more GPUs than the cap: it never starts on this node.
  bool over_cap(const Job& j) const { return max_gpus && j.gpus > *max_gpus; }
  // Several jobs on one GPU (a job's gpu_mem_gib): packed jobs share a GPU while their declared
  // GiB, with what else uses its memory, fit in its memory less the headroom.
  double gpu_mem_gib = 80;            ///< --gpu-mem-gib: each GPU's memory where gpu_mem_total gives none
  double gpu_mem_headroom = 5;        ///< --gpu-mem-headroom: percent of a GPU's memory left free
  std::vector<double> gpu_mem_total;  ///< GiB per GPU id, as the probe read it (0 or absent: gpu_mem_gib)
  bool pack = true;                   ///< false: every job takes its GPUs whole (simulate's "whole GPUs")
  /// The GiB job j's pass may place on each of its GPUs' memory, or 0: it takes them whole.
  double packed_gib(const Job& j) const { return pack && !batch && j.gpu_mem_gib ? *j.gpu_mem_gib : 0; }
  /// The GiB packed jobs may declare on GPU g.
  double gpu_room(int g) const {
    double total = g >= 0 && static_cast<size_t>(g) < gpu_mem_total.size() && gpu_mem_total[g] > 0
                       ? gpu_mem_total[g] : gpu_mem_gib;
    return total * (1 - gpu_mem_headroom / 100);
  }
  /// gpu_room of each GPU of node_gpus, by GPU id (kMaxGpuId + 1 of them; 0 for the others).
  std::vector<double> gpu_rooms() const {
    std::vector<double> room(kMaxGpuId + 1, 0.0);
    for (int g : node_gpus)
      if (g >= 0 && g <= kMaxGpuId) room[static_cast<size_t>(g)] = gpu_room(g);
    return room;
  }
  /// The most GiB a packed job may declare on one GPU of node_gpus (0 when there is none).
  double most_room() const {
    double most = 0;
    for (int g : node_gpus) most = std::max(most, gpu_room(g));
    return most;
  }
  /// The job packs with more GiB than any GPU of the node takes: it never starts here.
  bool too_big(const Job& j) const { return packed_gib(j) > most_room(); }
  // Preemption (engine.h): a ready job that would start first, waiting for GPUs, may stop running
  // preemptible jobs of a larger priority value that have run preempt_min_minutes since their start.
  bool preemptible_default = false;  ///< the `preemptible` setting: a job without its own field
  double preempt_min_minutes = 30;   ///< the least a job runs after its (re)start before it may be preempted
  /// Job j may be preempted: its own "preemptible", else the setting.
  bool preemptible(const Job& j) const { return j.preemptible.value_or(preemptible_default); }
  // The rest of the box (issue 45): a job starts where its cores and host memory fit beside the
  // running jobs'. Counted only where some job of the plan gives "cpus" or "mem_gib" (counts_host):
  // a plan that gives neither is scheduled exactly as before.
  double node_cpus = 0;     ///< cores jobs may use at once (the live layer reads the machine's; 0: not counted)
  double node_mem_gib = 0;  ///< GiB of host memory jobs may use at once (0: not counted)
  /// The plan counts cores and host memory: some job gives cpus or mem_gib, and jobs run here.
  bool counts_host(const Plan& plan) const;
  /// The cores job j needs: its "cpus", else a share of node_cpus for each GPU it takes (at least 1),
  /// 1 for a job without GPUs.
  int cpus_of(const Job& j) const {
    if (j.cpus) return j.cpus;
    int gpus = static_cast<int>(node_gpus.size());
    if (j.gpus <= 0 || gpus <= 0 || node_cpus <= 0) return 1;
    return std::max(1, static_cast<int>(node_cpus * j.gpus / gpus));
  }
  /// The job needs more cores or host memory than the node has for jobs: it never starts here.
  bool host_too_big(const Job& j) const {
    return (node_cpus > 0 && j.cpus > node_cpus) || (node_mem_gib > 0 && j.mem_gib > node_mem_gib);
  }
  bool batch = false;            ///< jobs go to a batch queue that places them (a batch backend): every ready job is
                                 ///< handed to it in ready order, as many as it takes; node_gpus are not used

  long long retries_of(const Job& j) const { return gpuq::retries_of(j, max_retries); }
};

/// GPUs the state says are in use: those of running entries (jobs of the plan or
/// not) and of killed jobs still in their grace time (`kill_sent`).
GpuMask busy_in_state(const State& state);

/// GPUs with more memory in use than `max_used_mib` (MiB per GPU id): another
/// user's processes, or a finished job's still exiting.
GpuMask busy_by_memory(const std::map<int, long long>& used_mib, long long max_used_mib);

/// GPUs over `max_used_mib` in a reading that no running entry of the state holds
/// (nor a killed one in its grace time): another user's memory, with its MiB.
std::map<int, long long> used_by_others(const std::map<int, long long>& used_mib, long long max_used_mib,
                                        const State& state);

/// "GPU 1 busy: 20000 MiB in use by another process".
std::string busy_by_other_text(int gpu, long long mib);

/// Why a job Policy::too_big never starts: "needs 90 GiB on a GPU, more than any takes (80 GiB
/// less --gpu-mem-headroom 5%: 76.0)".
std::string too_big_text(const Policy& p, const Job& j);

/// Why a job Policy::host_too_big never starts: "needs 300 GiB of host memory, the node has 240 for jobs
/// (node_mem_gib)".
std::string host_too_big_text(const Policy& p, const Job& j);

/// The file checks of `file:` deps: a port. `run` and `status` look at the file
/// system; tests and `simulate` pass a table.
class FileChecks {
 public:
  virtual ~FileChecks() = default;
  /// The path as the job sees it: `~` and `$VARS` expanded.
  virtual std::string expand(const std::string& written) const = 0;
  /// Whether the expanded path exists now.
  virtual bool exists(const std::string& path) const = 0;
  /// Nothing exists under a folder that does not (true of a file system, where a path is
  /// looked up through its folders; not of a table of paths): a look at many paths may then
  /// answer for all those under a missing folder at once.
  virtual bool nested() const { return false; }
  /// The names of the entries of a folder (expanded; "." for the current one), in any order:
  /// where a "did you mean" looks for a name near a missing one. None by default (a table of paths).
  virtual std::vector<std::string> names_in(const std::string& folder) const {
    (void)folder;
    return {};
  }
};

/// FileChecks over a function of the path, taken as written (no expansion).
class FileTable : public FileChecks {
 public:
  explicit FileTable(std::function<bool(const std::string&)> exists) : exists_(std::move(exists)) {}
  std::string expand(const std::string& written) const override { return written; }
  bool exists(const std::string& path) const override { return exists_(path); }

 private:
  std::function<bool(const std::string&)> exists_;
};

/// Every file: dep of the job exists now.
bool files_present(const Job& job, const FileChecks& files);

/// A path that exists near a missing one, for a "did you mean": the deepest folder of `expanded`
/// that exists, then in each folder below it the entry nearest in name (nearest_name), as the
/// plan wrote it (`written`, whose expansion is `expanded`: "ckpt/trian/final.pt" ->
/// "ckpt/train/final.pt"). "" when `expanded` exists or nothing is near. The one rule for scripts
/// (validate, run) and file: deps (a producer that ended without making one).
std::string nearest_existing_path(const std::string& written, const std::string& expanded, const FileChecks& files);

}  // namespace gpuq

// `run --slurm`: the Launcher, GpuProbe and Waker ports over a Slurm cluster. gpuq keeps
// the plan (deps, file deps, priorities, retries, time limits); Slurm places each job.
// A ready job is submitted held (`sbatch --hold`), its Slurm id saved in the state
// (JobState::queue_id, and `pid` as the handle the run loop signals), then released:
// the local start line's protocol, with the queue's hold as the line.
#pragma once

#if defined(GPUQ_CORE) || defined(GPUQ_VIEWS)
#error "a live header (the OS behind ports) in the core or the views: pass data in instead"
#endif

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpuq/core/plan.h"
#include "gpuq/live/ports.h"
#include "gpuq/live/proc.h"
#include "gpuq/live/store.h"

namespace gpuq {

/// What `run --slurm` hands sbatch besides each job's own values.
/// Slurm's GPU shards (gres "shard", which lets jobs share a GPU): a packed job (gpu_mem_gib) asks
/// for the shards of its GiB, on one GPU. `per_gpu` 0: the cluster has none.
struct SlurmShards {
  long long per_gpu = 0;
  double gpu_gib = 80;   ///< a GPU's memory (--gpu-mem-gib: Slurm does not say)
  double headroom = 5;   ///< --gpu-mem-headroom, percent: one shard is the GPU's room / per_gpu
};
/// Shards per GPU from `scontrol show node -o` ("Gres=gpu:8,shard:64" or with types,
/// "gpu:a100:8(S:0-1),shard:a100:64"): the fewest of the nodes that have both; 0 when none has.
long long parse_shards_per_gpu(std::string_view scontrol_nodes);
/// The same, asked of the cluster (scontrol); 0 when it cannot tell.
long long slurm_shards_per_gpu();
/// The shards a packed job of `gib` asks for: its GiB in shards, rounded up.
long long shards_for(double gib, const SlurmShards& s);

struct SlurmOptions {
  std::string partition, account, qos;  ///< "" = Slurm's default
  std::vector<std::string> sbatch_args; ///< --sbatch-arg, passed as written
  double time_margin = 1.5;             ///< --time from est_hours x this (without time_limit_hours)
  long long max_queued = 200;           ///< at most this many of the plan's jobs in Slurm's queue
  std::string gpuq_binary;              ///< the job wrapper (this program), absolute
  std::string chdir;                    ///< the folder jobs run in (absolute)
  std::map<std::string, std::string> reservations;  ///< job id -> the Slurm reservation it goes to
  SlurmShards shards;                   ///< the cluster's GPU shards (asked once, at the start)
};

/// Why `run --slurm` cannot take this plan ("" when it can): jobs that share GPUs by
/// gpu_mem_gib where the cluster has no GPU shards, or that need more than one GPU's shards or
/// several GPUs (Slurm gives a job its shards on one GPU); a reservation without
/// "slurm_reservation" closes GPU ids of one node, which mean nothing across a cluster.
/// `shards` nullopt: the cluster was not asked (packed jobs pass).
std::string slurm_plan_problem(const Plan& plan, const std::optional<SlurmShards>& shards);
/// The plan as run --slurm schedules it: its reservations are Slurm's (none close GPUs here).
Plan slurm_copy(const Plan& plan);
/// Each job of a reservation with "slurm_reservation" -> that name.
std::map<std::string, std::string> slurm_reservations(const Plan& plan);

/// Parses `squeue --json` (22.05's openapi v0.0.38 and later: "jobs" with job_id, name,
/// job_state, state_reason). Throws std::runtime_error saying what is wrong.
std::vector<QueueJob> parse_squeue_json(const std::string& text);
/// Parses `squeue -h -o '%i|%j|%T|%r'` lines (for a squeue without --json).
std::vector<QueueJob> parse_squeue_lines(const std::string& text);
/// Parses `sacct --json -X`: job_id, name, state.current, exit_code.return_code.
std::vector<QueueJob> parse_sacct_json(const std::string& text);

/// A job's Slurm name: gpuq-TAG-ID-ATTEMPT (TAG: the plan file's name without .json).
std::string slurm_job_name(const std::string& tag, const std::string& id, long long attempt);
/// The tag of a plan path: "runs/plan.json" -> "plan".
std::string plan_tag(const std::string& plan_path);
/// Minutes for --time: time_limit_hours when the job has one, else est_hours x margin, rounded up (at least 1).
long long slurm_minutes(const Job& job, double margin);
/// --nice for each job: the rank of its priority among the plan's distinct priorities
/// (the lowest value 0, the next 1, ...): never negative.
std::vector<long long> slurm_nice(const Plan& plan);
/// sbatch's arguments for one job (without the program name); `gpus` is its GPU count, `shards`
/// (a packed job's) its GPU shards instead.
std::vector<std::string> sbatch_args(const SlurmOptions& o, const std::string& name, long long gpus, long long minutes,
                                     long long nice, const std::string& log, const std::string& reservation,
                                     const std::string& wrap, long long shards = 0);

/// sbatch's arguments for a job's cores and host memory, where it gives them: `--cpus-per-task`
/// and `--mem` (in MiB, rounded up: `mem_gib`, its attempt's after on_oom retries, else the job's).
/// Slurm's own defaults for a job that gives neither.
std::vector<std::string> slurm_host_args(const Job& job, double mem_gib = 0);

// run_command (proc.h) runs sbatch, squeue and sacct.

/// The Launcher over Slurm. One squeue per survey() (each tick's refresh), one
/// batched sacct for the recorded jobs no longer in the queue that left no exit
/// file (none when accounting is off: then a job without logs/ID.exit is lost).
class SlurmLauncher : public Launcher, public BatchQueue {
 public:
  SlurmLauncher(const Plan& plan, PlanPaths paths, SlurmOptions opt);
  ~SlurmLauncher() override;

  BatchQueue* queue() override { return this; }
  /// One squeue (and sacct for the recorded jobs that left the queue without an exit file):
  /// the jobs Slurm started (or that are over) since, with Slurm's start where squeue gives it.
  std::vector<std::pair<std::string, double>> survey(const State& state, double now) override;
  void mend() override;
  /// Submits the job held (`sbatch --hold`), unless squeue shows one of its name and
  /// attempt already (an earlier run died before saving it): that one is adopted.
  Launched launch(const LaunchSpec& spec) override;
  void release(const std::vector<Launched>& jobs) override;
  void abandon(const Launched& job) override;
  Observed observe(const std::string& id, const JobState& s) override;
  /// OUT_OF_MEMORY in squeue or sacct: OverMemory (its --mem, its mem_gib, reached).
  std::optional<Outcome> out_of_memory(const std::string& id, const JobState& s, long long exit,
                                       std::string* why) override;
  Identity identify(const JobState& s) override;
  /// scancel (Term: SIGTERM to the job's steps, then Slurm's KillWait; Kill: -s KILL).
  bool signal_group(long long slurm_id, Signal sig) override;
  bool warn_group(long long slurm_id, const WarnSpec& sig) override;
  void note_in_log(const std::string& id, const std::string& line) override;
  std::optional<long long> log_size(const std::string& id) override;
  bool group_alive(long long slurm_id) override;
  void reap() override {}
  /// Nothing: a batch job's wrapper syncs its code (and the folder) before the rename run sees.
  std::vector<std::string> sync_ends(const std::vector<std::string>&) override { return {}; }
  /// scontrol hold / release.
  bool hold(const JobState& s) override;
  bool release(const JobState& s) override;
  std::optional<QueueJob> view(const JobState& s) override;
  long long room(const State& state) override;

  /// The plan jobs are submitted from from now on (the loop's, after a reload; a slurm_copy,
  /// so its reservations come apart, from slurm_reservations of the plan as loaded):
  /// priorities ranked again. `plan` must outlive its use here.
  void use_plan(const Plan& plan, std::map<std::string, std::string> reservations);

 private:
  void take_squeue();
  const QueueJob* queued(long long slurm_id) const;
  std::string reservation_of(const std::string& id) const;

  const Plan* plan_;
  PlanPaths paths_;
  SlurmOptions opt_;
  std::string tag_;
  std::vector<long long> nice_;
  std::map<long long, QueueJob> queue_;           // the last squeue: the plan's jobs in the queue
  std::map<std::string, long long> by_name_;      // their names -> ids
  std::map<long long, QueueJob> accounted_;       // sacct's view of the recorded jobs that left the queue
  std::vector<long long> held_;                   // submitted held, not yet released or abandoned
  std::vector<long long> stray_holds_;            // the last survey's: recorded running, held (mend)
  bool squeue_ok_ = false;
  std::string squeue_problem_ = "not looked at yet";
  bool accounting_off_ = false;
  bool json_ = true;
  bool full_ = false;
  long long full_at_ = -1;  // the jobs in the queue when Slurm refused one
};

/// The probe in Slurm mode: the cluster's GPUs are Slurm's business; an empty reading.
class SlurmProbe : public GpuProbe {
 public:
  GpuReading read() override {
    GpuReading r;
    r.used_mib.emplace();
    return r;
  }
};

/// The waker in Slurm mode: a job's end is its logs/ID.exit appearing (the wrapper
/// writes it on the shared file system), watched as files through `inner`.
class SlurmWaker : public Waker {
 public:
  explicit SlurmWaker(Waker& inner) : inner_(inner) {}
  /// A Slurm id is no pid here: each job is watched by its exit file alone.
  void watch_jobs(const std::vector<WatchedJob>& jobs) override;
  std::vector<std::string> watch_files(const std::vector<std::string>& paths) override { return inner_.watch_files(paths); }
  void drain() override { inner_.drain(); }
  Wake wait(double timeout_s) override { return inner_.wait(timeout_s); }

 private:
  Waker& inner_;
};

/// Whether this state has jobs in Slurm (an entry with a slurm_id, running or held there).
bool state_in_slurm(const State& state);

}  // namespace gpuq

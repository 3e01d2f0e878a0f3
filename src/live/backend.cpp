// The backends (backend.h): this machine, and Slurm, the batch queue gpuq drives (slurm.h).
#include "gpuq/live/backend.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "gpuq/live/control.h"
#include "gpuq/live/launcher.h"
#include "gpuq/live/run_info.h"
#include "gpuq/live/run_loop.h"
#include "gpuq/live/slurm.h"

namespace gpuq {

namespace {

class LocalBackend : public Backend {
 public:
  bool batch() const override { return false; }
  std::string plan_problem(const Plan&, bool) const override { return ""; }
  std::unique_ptr<Launcher> launcher(const Plan&, const PlanPaths& paths) const override {
    return std::make_unique<PosixLauncher>(paths);
  }
  int run(Plan plan, const PlanPaths& paths, RunOptions opt, bool, std::FILE* out, RunInfo* info,
          const std::string* plan_text) const override {
    return run_queue(std::move(plan), paths, opt, out, info, plan_text, nullptr);
  }
};

// Slurm's ports for run_queue: sbatch and squeue, no GPU reading, the ends as files.
class SlurmPorts : public BatchPorts {
 public:
  SlurmPorts(const Plan& plan, const PlanPaths& paths, SlurmOptions opt, Waker& local)
      : shards_(opt.shards),
        reservations_(opt.reservations),
        launcher_(plan, paths, std::move(opt)),
        waker_(local) {}
  Launcher& launcher() override { return launcher_; }
  GpuProbe& probe() override { return probe_; }
  Waker& waker() override { return waker_; }
  std::string adapt(Plan& p) override {
    if (std::string why = slurm_plan_problem(p, shards_); !why.empty()) return "run --slurm: " + why;
    reservations_ = slurm_reservations(p);
    p = slurm_copy(p);
    return "";
  }
  void use_plan(const Plan& plan) override { launcher_.use_plan(plan, reservations_); }

 private:
  std::optional<SlurmShards> shards_;
  std::map<std::string, std::string> reservations_;
  SlurmLauncher launcher_;
  SlurmWaker waker_;
  SlurmProbe probe_;
};

// Slurm: jobs are submitted with sbatch (held until the state records them), watched with
// squeue and sacct, stopped with scancel.
class SlurmBackend : public Backend {
 public:
  explicit SlurmBackend(BatchAsk ask) : ask_(std::move(ask)) {}
  bool batch() const override { return true; }
  std::string run_flag() const override { return "--slurm"; }

  std::string plan_problem(const Plan& plan, bool ask_cluster) const override {
    bool packs = std::any_of(plan.jobs.begin(), plan.jobs.end(), [](const Job& j) { return j.gpu_mem_gib && j.gpus > 0; });
    // scontrol only when it matters: a packed job needs the cluster's GPU shards.
    std::optional<SlurmShards> shards;
    if (ask_cluster && packs) shards = this->shards();
    return slurm_plan_problem(plan, shards);
  }

  Plan plan_for(const Plan& plan) const override { return slurm_copy(plan); }

  std::vector<std::string> prediction_notes(const Plan& plan) const override {
    std::vector<std::string> out;
    for (const Reservation& r : plan.reservations)
      out.push_back(fmt::format("the jobs of Slurm's reservation {} are predicted on any node, as if it held every "
                                "node (gpuq does not know which nodes it holds)",
                                r.queue_reservation));
    return out;
  }

  QueueView queue_view(Launcher& seen_by, const State& state) const override {
    BatchQueue* slurm = seen_by.queue();
    if (!slurm) return {};
    QueueView v;
    v.text = "\nIn Slurm (run --slurm):\n";
    for (const auto& [id, s] : state.entries()) {
      if (!s.queue_id || (s.status != Status::Running && s.status != Status::Held)) continue;
      std::optional<QueueJob> q = slurm->view(s);
      if (q && q->state == "PENDING" && !q->reason.empty() && q->reason != "None") v.reasons[id] = q->reason;
      v.text += fmt::format("  {:<24} Slurm job {:<8} {:<10} {}\n", id, *s.queue_id, q ? q->state : "?",
                            q && !q->reason.empty() && q->reason != "None" ? "reason: " + q->reason : "");
    }
    return v;
  }

  std::unique_ptr<Launcher> launcher(const Plan& plan, const PlanPaths& paths) const override {
    return std::make_unique<SlurmLauncher>(plan, paths, SlurmOptions{});
  }

  int run(Plan plan, const PlanPaths& paths, RunOptions opt, bool poll_given, std::FILE* out, RunInfo* info,
          const std::string* plan_text) const override {
    SlurmOptions o;
    o.shards = shards();
    o.partition = ask_.partition;
    o.account = ask_.account;
    o.qos = ask_.qos;
    o.sbatch_args = ask_.extra_args;
    o.time_margin = ask_.time_margin;
    o.max_queued = ask_.max_queued;
    o.reservations = slurm_reservations(plan);
    char self[4096];
    ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
    o.gpuq_binary = n > 0 ? std::string(self, static_cast<size_t>(n)) : "gpuq";
    o.chdir = std::filesystem::absolute(opt.workdir.empty() ? "." : opt.workdir).lexically_normal().string();
    // Slurm places the jobs (the engine hands it every ready job, as many as --max-queued lets
    // through), and a reservation is Slurm's (--reservation), not a closed GPU of this node.
    opt.batch = true;
    if (!poll_given) opt.poll = 30;
    BatchPortsMaker ports = [&](Waker& local) { return std::make_unique<SlurmPorts>(plan, paths, o, local); };
    return run_queue(slurm_copy(plan), paths, opt, out, info, plan_text, &ports);
  }

 private:
  SlurmShards shards() const { return {slurm_shards_per_gpu(), ask_.gpu_mem_gib, ask_.gpu_mem_headroom}; }
  BatchAsk ask_;
};

}  // namespace

std::unique_ptr<Backend> local_backend() { return std::make_unique<LocalBackend>(); }

std::unique_ptr<Backend> batch_backend(const BatchAsk& ask) { return std::make_unique<SlurmBackend>(ask); }

std::unique_ptr<Backend> backend_in_use(const State* state, const RunInfo* info, const BatchAsk& ask) {
  if ((state && state_in_slurm(*state)) || (info && info->slurm)) return batch_backend(ask);
  return local_backend();
}

std::string mode_mix_problem(const State& state, bool batch) {
  for (const auto& [id, s] : state.entries()) {
    if (s.status != Status::Running) continue;
    if (!batch && s.queue_id)
      return fmt::format("job {} is running in Slurm (Slurm job {}): this plan is run with --slurm until its Slurm "
                         "jobs have ended",
                         id, *s.queue_id);
    if (batch && !s.queue_id)
      return fmt::format("job {} is running on this machine (pid {}): run --slurm once no job runs here", id,
                         s.pid.value_or(0));
  }
  return "";
}

}  // namespace gpuq

// The one file of the CLI that knows which batch queues there are: `run --slurm` and its
// options, `validate --slurm`, and the cluster `simulate --nodes` predicts. Everything else
// reaches a backend through its port (live/backend.h).
#include <CLI/CLI.hpp>

#include "gpuq/live/backend.h"

#include "cli.h"

namespace gpuq::cli {

namespace {

BatchAsk batch_ask(const Flags& f) {
  BatchAsk a;
  a.partition = f.partition;
  a.account = f.account;
  a.qos = f.qos;
  a.extra_args = f.batch_args;
  a.time_margin = f.time_margin;
  a.max_queued = f.max_queued;
  a.gpu_mem_gib = f.gpu_mem_gib;
  a.gpu_mem_headroom = f.gpu_mem_headroom;
  return a;
}

}  // namespace

const char* const kNodesHelp =
    "predict for a cluster of N nodes like this one (a job runs on one node), as `run --slurm` would run the plan";

std::unique_ptr<Backend> chosen_backend(const Flags& f) { return f.batch ? batch_backend(batch_ask(f)) : local_backend(); }

std::unique_ptr<Backend> cluster_backend(const Flags& f) { return batch_backend(batch_ask(f)); }

void add_batch_run_flags(CLI::App* run, Flags& f) {
  run->add_flag("--slurm", f.batch,
                "submit each ready job to Slurm (sbatch) instead of starting it here; gpuq keeps the plan's deps, "
                "priorities and retries, Slurm places the jobs (doc/slurm.md)");
  run->add_option("--partition", f.partition, "--slurm: the partition to submit to (sbatch --partition)");
  run->add_option("--account", f.account, "--slurm: the account to charge (sbatch --account)");
  run->add_option("--qos", f.qos, "--slurm: the quality of service (sbatch --qos)");
  run->add_option("--max-queued", f.max_queued, "--slurm: at most this many of the plan's jobs in Slurm's queue")
      ->capture_default_str()
      ->type_name("N")
      ->check(CLI::PositiveNumber);
  run->add_option("--time-margin", f.time_margin,
                  "--slurm: a job without time_limit_hours gets sbatch --time of est_hours x this")
      ->capture_default_str()
      ->check(CLI::PositiveNumber.description(""))
      ->type_name("X");
  run->add_option("--sbatch-arg", f.batch_args, "--slurm: one more argument for every sbatch (repeatable)")
      ->allow_extra_args(false);
}

void add_batch_check_flag(CLI::App* validate, Flags& f) {
  validate->add_flag("--slurm", f.batch, "check also what `run --slurm` needs (reservations naming a Slurm reservation)");
}

}  // namespace gpuq::cli

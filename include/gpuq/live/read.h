// The one read of the world (issue 49): what `run`'s tick reads at its start, and what every
// look (status, status --watch, simulate --from-state, add --dry-run, gpus, top) reads, with
// one function over the same ports. The tick then decides and acts on it; a look predicts from
// it and changes nothing. Every look reads the node directory here too (read_node, without the
// node lock); run's tick reads the same files at its node decision (node_enter), under the node
// lock it holds from there to its publication, not through its slower steps before.
#pragma once

#if defined(GPUQ_CORE) || defined(GPUQ_VIEWS)
#error "a live header (the OS behind ports) in the core or the views: pass data in instead"
#endif

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gpuq/core/plan.h"
#include "gpuq/core/state.h"
#include "gpuq/live/node_dir.h"
#include "gpuq/live/ports.h"

namespace gpuq {

/// A running entry whose attempt the launcher no longer sees running: read, not yet settled.
struct JobSeen {
  std::string id;
  Observed seen;
  /// Its process group still has a process (asked only for a requeue or a preemption, whose
  /// job gives its GPUs up once nothing of it is left).
  bool group_alive = false;
  std::optional<Outcome> oom;  ///< a failure the launcher found out of memory (see_jobs's `oom`)
  std::string oom_why;
};

/// What the launcher sees of a state's running jobs: the batch queue's survey (the queued
/// jobs it started since, and when), then each running entry that is not running any more.
struct JobsSeen {
  std::vector<std::pair<std::string, double>> started;
  std::vector<JobSeen> ended;
};

/// The running entries of `state` as `launcher` sees them at `now`. With `oom`, each failure of
/// one of its jobs is looked at for an out-of-memory.
JobsSeen see_jobs(Launcher& launcher, const State& state, double now, const Plan* oom);

/// The node directory (node_dir.h) as read: every run's holds and wants, or why it was not read.
struct NodeRead {
  std::string dir;               ///< the node directory
  std::optional<NodeView> view;  ///< its files as read; none: `problem` says why
  std::string problem;           ///< "no such folder", "not a folder", or the read's error
  bool folder = false;           ///< the problem is the folder's: it is missing or not a folder
  /// The problem as a command says it: "the node directory DIR: no such folder", or the read's.
  std::string what() const { return folder ? "the node directory " + dir + ": " + problem : problem; }
};

/// A look's read of the node directory `dir` against the GPUs `node`: without the node lock, so
/// nothing of it waits for a run's tick. An empty `dir`: none (nullopt).
std::optional<NodeRead> read_node(const std::string& dir, GpuMask node);

/// Where the read reads: run's ports, or a look's files. An empty function is not read.
struct ReadFrom {
  /// The state; none where the reader keeps its own, unchanged since it saved it (run).
  std::function<std::optional<State>()> state;
  /// When the state was read: the read's `now`.
  std::function<double()> clock;
  /// The launcher that sees the state's jobs (a look's depends on the state: Slurm's for jobs
  /// in its queue); null: the jobs are not looked at.
  std::function<Launcher*(const State&)> launcher;
  /// The plan whose failures are looked at for an out-of-memory (see_jobs's `oom`): run's, whose
  /// engine retries them with on_oom; null for a look, which leaves it.
  const Plan* oom_of = nullptr;
  /// The GPU reading, taken before the state: run saves a job's record before it lets the job go,
  /// so every job of gpuq's in the reading is in the state read after it (none is taken for
  /// someone else's). A look starts its probe before its state's read, each on a core of its own.
  std::function<GpuReading()> gpus;
  /// `gpuq pause`: since when, or none.
  std::function<std::optional<double>()> paused;
  /// The node directory, a look's (read_node: without the node lock). Read after the GPUs and
  /// before the state. (run's tick reads it at node_enter, under the lock.)
  std::function<std::optional<NodeRead>()> node;
};

/// The world at one moment, as read.
struct WorldRead {
  std::optional<State> state;  ///< read (none: the reader's own, kept)
  double now = 0;
  JobsSeen jobs;
  std::optional<GpuReading> gpus;
  std::optional<double> paused;
  std::optional<NodeRead> node;  ///< none: no node directory (or none asked)
};

/// The one read: the GPUs, the node directory, the state (or `kept`, the reader's own, when `from.state` gives none),
/// when, what the launcher sees of its running jobs, the pause.
WorldRead read_world(const ReadFrom& from, const State* kept);

}  // namespace gpuq

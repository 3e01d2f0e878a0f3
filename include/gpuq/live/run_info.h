// Who runs a plan: PLAN.run.json, written by `gpuq run` at its start and after each
// tick (gpuq's own file; the original neither writes nor reads it), so that `status`
// can say whether a run is working, since when, and on which version of the plan.
#pragma once

#if defined(GPUQ_CORE) || defined(GPUQ_VIEWS)
#error "a live header (the OS behind ports) in the core or the views: pass data in instead"
#endif

#include <optional>
#include <string>

#include "gpuq/core/settings.h"
#include "gpuq/live/store.h"

namespace gpuq {

/// A plan file's version: its size, modification time and a hash of its bytes.
struct PlanStamp {
  long long size = 0;
  double mtime = 0;   ///< unix seconds
  std::string hash;   ///< FNV-1a 64 of the content, 16 hex digits
  bool operator==(const PlanStamp&) const = default;
};

/// The stamp of the file at `path` (symbolic links followed), or nullopt when it cannot be read.
std::optional<PlanStamp> stamp_plan(const std::string& path);

/// The content of PLAN.run.json.
struct RunInfo {
  long long pid = 0;
  std::string host;
  std::string plan;             ///< the --plan the run was given
  double started = 0;           ///< unix seconds
  double tick = 0;              ///< the end of its last tick (unix seconds)
  std::optional<double> ended;  ///< when it exited (all finished, or stopped)
  PlanStamp loaded;             ///< the plan as it loaded it (at the start or its last reload)
  std::optional<double> loaded_at;  ///< when it loaded that version (unix seconds; older runs: none)
  bool slurm = false;           ///< run --slurm: it refuses an edit Slurm cannot take (slurm_plan_problem)
  std::string node_dir;         ///< the node directory it shares the node through ("": alone; status reads it)
  std::vector<int> gpus;        ///< its --gpus (`gpuq add` checks a job's width against them; older runs: none)
  std::optional<long long> max_retries;  ///< its --max-retries (`logs -f` follows a job into its retry)
  /// Every setting it runs with ("settings"; `gpus` and `max_retries` above are kept for older
  /// readers). An older run's file gives only its gpus and max_retries here.
  GivenSettings settings;
};

/// Writes PLAN.run.json (a temporary file renamed over it; not fsynced: it is news, not
/// state). False when it cannot be written (the run goes on; status then knows less).
/// With `problem`, what failed is put there ("" when it was written).
bool write_run_info(const PlanPaths& paths, const RunInfo& info, std::string* problem = nullptr);

/// PLAN.run.json, or nullopt when it is missing or not readable as one.
std::optional<RunInfo> read_run_info(const PlanPaths& paths);

/// Keeps a copy of the plan's text as `run` loaded it (PLAN.run.plan.json), so that
/// `status` can tell which jobs of an edited plan the run knows. False when it cannot.
bool keep_loaded_plan(const PlanPaths& paths, const std::string& plan_file);

/// Whether a `gpuq run` holds the plan's run lock now, and what its PLAN.run.json says.
/// Looks without taking anything: a shared flock tried and let go at once.
struct RunPresence {
  bool running = false;
  std::optional<RunInfo> info;  ///< the last run's (this one's when running)
  std::string lock_pid;         ///< the pid in PLAN.run.lock ("" when none)
};
RunPresence run_presence(const PlanPaths& paths);

}  // namespace gpuq

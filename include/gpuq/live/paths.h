// Where a plan's files live: its state, lock, logs and gpuq's own files beside it.
#pragma once

#if defined(GPUQ_CORE) || defined(GPUQ_VIEWS)
#error "a live header (the OS behind ports) in the core or the views: pass data in instead"
#endif

#include <string>

namespace gpuq {

/// The files beside a plan, named as the original names them:
/// plan.json -> plan.state.json, plan.lock, logs/ in the plan's folder. When the
/// plan is a symbolic link, they are beside the file it points to (one plan file,
/// one queue, whichever link it is run through).
struct PlanPaths {
  std::string plan;       ///< as given
  std::string state;
  std::string lock;
  std::string run_lock;   ///< held by a `gpuq run` for its whole life (gpuq's own; the original has none)
  std::string run_info;   ///< PLAN.run.json: who runs the plan, its last tick, the plan it loaded (gpuq's own)
  std::string run_plan;   ///< PLAN.run.plan.json: a copy of the plan as `run` loaded it (gpuq's own)
  std::string paused;     ///< PLAN.paused: there while `gpuq pause` holds the plan (gpuq's own)
  std::string logs;
  /// When `plan` is a symbolic link: the state file beside the link (which the original,
  /// or a gpuq before this one, used), else "".
  std::string state_beside_link;
  std::string log(const std::string& id) const { return logs + "/" + id + ".log"; }
  std::string exit(const std::string& id) const { return logs + "/" + id + ".exit"; }
  std::string aborted(const std::string& id) const { return logs + "/" + id + ".aborted"; }
  /// The CPU time its attempt's processes used (the wrapper's getrusage of what it waited for),
  /// written before its exit file; the wrapper names it after its exit file (cpu_file_of).
  std::string cpu(const std::string& id) const { return logs + "/" + id + ".cpu"; }
  /// The exit code's room, made before the job may start (launcher.h): its wrapper writes the
  /// code into it in place and renames it to exit(id), so that a full disk cannot lose an end.
  std::string exit_room(const std::string& id) const { return exit(id) + ".new"; }
  /// GPUQ_PROGRESS: where the job may write how far it is ("0.42", "420/1000").
  std::string progress(const std::string& id) const { return logs + "/" + id + ".progress"; }
  /// GPUQ_CHECKPOINT_DIR of a preemptible job: PLAN.checkpoints/ID beside the state, kept across
  /// its attempts (preemptions, retries); the job may keep its checkpoints there.
  std::string checkpoints(const std::string& id) const { return checkpoints_root + "/" + id; }
  std::string checkpoints_root;  ///< PLAN.checkpoints
};

/// The paths for a plan file (Python's Path.with_suffix rules): beside the file a
/// symbolic link points to, or with the same names in `state_dir` when it is given
/// (gpuq's --state-dir).
PlanPaths paths_for(const std::string& plan, const std::string& state_dir = "");

/// When the plan was given through a symbolic link and a state file exists beside the
/// link that is not the plan's own: what to tell the user (that state is not used), else "".
std::string state_beside_link_problem(const PlanPaths& paths);

}  // namespace gpuq

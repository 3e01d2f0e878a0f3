// One look at the node: everything a prediction of a plan needs, gathered once, the way `run`'s
// tick gathers it. The plan (or, when the file does not load, the version a running `gpuq run`
// goes on with, and why), the state with the jobs that ended since, the run and its settings,
// the GPU reading and topology, the node's other users, the backend's view of its queue, the
// snapshots' freshness. `status` (once and --watch), `simulate --from-state` and `--node`,
// `add --dry-run`, `status --node` and `gpus` take one; what differs between them is a LookAsk,
// not a copy. Then the engine predicts over it (outlook_of) and the views render the result.
//
// One of the library's entry points for the CLI (setup.h, commands.h and backend.h are the others).
#pragma once

#if defined(GPUQ_CORE) || defined(GPUQ_VIEWS)
#error "a live header (the OS behind ports) in the core or the views: pass data in instead"
#endif

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <unordered_set>
#include <vector>

#include "gpuq/core/gpu_use.h"
#include "gpuq/core/node.h"
#include "gpuq/core/outlook.h"
#include "gpuq/core/plan.h"
#include "gpuq/core/simulate.h"
#include "gpuq/core/state.h"
#include "gpuq/live/phase.h"  // phase(): the commands that look time their steps with it
#include "gpuq/live/setup.h"

namespace gpuq {

/// What a node shared with other users' runs means to this plan (node_dir.h): their jobs' GPUs
/// are busy until each is predicted to end, and this plan's ready jobs wait as the node-wide
/// decision says (its fair order, the caps). Empty when the plan's run is alone.
struct NodeLook {
  std::vector<HeldGpus> held;          ///< the other runs' jobs: their GPUs, (from and) until (unix seconds)
  std::map<std::string, NodeWhy> waits;  ///< this plan's waiting jobs: why the node keeps each waiting
  std::string line;                    ///< for the text, above the outlook
  std::optional<int> cap;              ///< the user's cap (Policy::max_gpus)
  std::string dir;                     ///< the node directory read ("": none)
  std::string problem;                 ///< why it could not be read ("": it was)
  std::vector<std::string> notes;      ///< files refused, claims reaped (read_node_dir)
  std::map<int, GpuDrain> drained;     ///< the node's drained GPUs (gpu_health.h): held for ever in the prediction
};

/// A look the user's input makes impossible (a --pairs that is no placement): exit 2.
struct BadLook : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// `gpuq top`'s plan from one look to the next: the plan as loaded (its report, with the
/// settings taken into the setup) is taken again, not read and checked again, while the plan
/// file, the run's file (PLAN.run.json) and the run's presence are as they were. A refresh of a
/// 10,000-job plan spent most of its time reading the plan again (bench/run.sh top).
struct PlanCache {
  std::string key;  ///< the files' identities and the run's presence when it was loaded ("": none)
  PlanSetup setup;  ///< the setup as loading left it
  PlanReport report;
};

/// What differs between the commands that look.
struct LookAsk {
  /// The plan on disk has problems: take the version a running `gpuq run` goes on with
  /// (status, the control commands); else the look has no plan (Look::plan empty).
  bool run_plan_when_broken = true;
  /// The plan on disk has problems: take this version (status --watch: the last good one).
  const Plan* plan_when_broken = nullptr;
  bool state = true;    ///< read the state (simulate without --from-state: none)
  bool refresh = true;  ///< the jobs that ended since the state was saved, in memory (never written)
  /// Read the GPUs (status, gpus): the free GPUs are those no job and no reading holds. Without,
  /// only the state's running jobs hold GPUs (simulate --from-state, add --dry-run).
  bool probe = true;
  const char* pairs_default = "auto";  ///< an unset --pairs (simulate: original); auto reads the topology
  bool node = true;                    ///< the shared node's other runs (node_dir.h)
  /// The plan from its beginning on the node (simulate --node): its run going on is left out and
  /// its first ready jobs stand in the node's fair order for it, as its run would publish them.
  bool whole = false;
  bool run = true;                     ///< the plan's `gpuq run`: whether it runs, on which version
  bool snapshots = true;               ///< waiting jobs whose snapshot is older than the tree on disk
  bool rows = false;                   ///< the outlook explains only its first rows (status's text without --all)
  /// Kept between looks of one setup (top): the plan taken from it while its files are unchanged.
  PlanCache* plan_cache = nullptr;
};

/// What one look found.
struct Look {
  PlanReport report;       ///< the plan file as loaded (its errors, warnings, unknown fields: the CLI says them)
  std::string kept_note;   ///< the plan is the version the running `gpuq run` goes on with: why ("": the file's)
  std::optional<Plan> plan;
  std::vector<int> gpus;   ///< the node's GPUs
  PlanPaths paths;
  State state;
  double now = 0;
  RunOptions opt;          ///< the settings as options: the placement (with the topology), paused, the cap
  std::optional<GpuReading> reading;
  GpuMask free = 0;                    ///< the GPUs free now, as `run`'s next tick would see them
  std::map<int, std::string> others;   ///< why each GPU someone else holds is busy
  std::vector<double> mem_other;       ///< jobs that pack: GiB per GPU beyond their declared
  std::vector<MemoryUse::Over> over;   ///< packed jobs using more than they declared
  NodeLook node;
  OnNode on_node;                      ///< what the node means to the prediction
  RunSeen run;                         ///< the plan's `gpuq run`
  std::optional<std::unordered_set<std::string>> run_ids;  ///< the ids of the plan the run loaded, when it is another
  QueueView queue;                     ///< the backend's view of the jobs in its queue
  std::set<std::string> stale_commits;  ///< snapshots older than the tree, of waiting jobs
  std::string stale_text;               ///< a line per such snapshot, naming its jobs
  std::vector<std::string> warnings;    ///< for stderr: state entries of jobs no longer in the plan, a split state
  std::vector<std::string> settings_notes;  ///< where the settings differ from the run's
};

/// Looks at the plan of `s` and its world (the settings taken into `s`).
Look look_at(PlanSetup& s, const LookAsk& ask);

/// State entries of jobs the plan no longer has (renamed or removed jobs), for stderr: a
/// "note: " line for each one still running (it holds GPUs, and only `kill` reaches it), one
/// "warning: " line for the rest. Entries a running `run` marked "removed" are expected.
std::vector<std::string> unknown_entry_lines(const Plan& plan, const PlanPaths& paths, const State& state);

/// The engine's prediction over a look: each job's status, reason and predicted start, as
/// `status` shows them. `learned`: the plan with learned estimates, in place of the look's.
Outlook outlook_of(const Look& l, const LookAsk& ask, const Plan* learned = nullptr);

/// Where a prediction of `plan` (the look's, or a copy of it: learned estimates) from the live
/// state starts (simulate --from-state, --node): the state's lives, the free GPUs, the other
/// runs' jobs holding theirs.
LiveStart live_start_of(const Look& l, const Plan& plan);

/// `status --node`: the node directory's users, their running and waiting jobs (for the views:
/// views/node_text.h), or a problem. `bad_input`: the problem is the user's (no directory named).
struct NodeStatus {
  std::string problem;
  bool bad_input = false;
  std::string dir;
  GpuMask node = 0;
  std::vector<NodeUser> users;
  std::vector<std::string> notes;  ///< files refused, claims reaped
  NodeConfig config;
  double now = 0, backfill_max_hours = 0;
  NodeRoom room;
  HostRoom host;
  std::string unusable;  ///< why this user's runs cannot share the node ("": they can)
};
NodeStatus node_status(const PlanSetup& s);

/// When a job of `plan` runs from a snapshot and the workdir is in no git repository: one line
/// naming the plan file, the job (or the setting) and the problem. Else "".
std::string snapshot_problem(const PlanSetup& s, const Plan& plan, const Workdir& wd);

/// `gpus`: the probe's reading of the node, its topology and pairs, and the processes of no gpuq
/// job (the plan's state tells gpuq's from others', when there is a plan).
struct GpusLook {
  GpusSeen seen;              ///< for the views (views/gpus_text.h)
  std::string state_problem;  ///< the plan's state could not be read ("": it was, or there is none)
};
/// Nullopt with `problem` for a bad --pairs.
std::optional<GpusLook> look_at_gpus(const PlanSetup& s, std::string* problem);

}  // namespace gpuq

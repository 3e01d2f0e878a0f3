// The plan a command acts on and its settings, each with where it came from (a flag, $GPUQ_*, a
// running `gpuq run`, the plan's "settings", the default), and what follows from them: the
// plan's files, the workdir, the run options, the plan loaded and checked. One of the library's
// entry points for the CLI (look.h is the other for the commands that only read): the CLI fills
// the flags in, this takes the rest from the world, the same way for every command.
#pragma once

#if defined(GPUQ_CORE) || defined(GPUQ_VIEWS)
#error "a live header (the OS behind ports) in the core or the views: pass data in instead"
#endif

#include <nlohmann/json.hpp>

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpuq/core/plan.h"
#include "gpuq/core/settings.h"
#include "gpuq/live/cgroup.h"
#include "gpuq/live/queue.h"
#include "gpuq/live/paths.h"

namespace gpuq {

/// The plan and its settings (the base's members), filled in order of precedence: a flag, an
/// environment variable, a running `gpuq run`'s (for the commands that read them), the plan's
/// "settings", the default; `from` says which gave each.
struct PlanSetup : Settings {
  std::string plan;                    ///< the plan file (the CLI resolves --plan, $GPUQ_PLAN, ./plan.json)
  std::string gpus_source = "--gpus";  ///< what gave `gpus`, as errors about a job's width name it
  std::string node_dir;  ///< --node-dir: "" for $GPUQ_NODE_DIR, else /var/lib/gpuq when usable; "off": alone
  std::array<SettingSource, kSettingCount> from{};  ///< each setting's source, in the table's order
  bool reads_run_settings = false;  ///< status, simulate --from-state, settings, add: a running run's come before the plan's
  bool settings_taken = false;      ///< take_settings has run
  GivenSettings plan_settings;      ///< the plan's own "settings", as read
  GivenSettings run_settings;       ///< a running `gpuq run`'s (PLAN.run.json), when the command reads them
  std::string run_info_file;        ///< that PLAN.run.json ("" when no run's settings were read)

  /// Where the setting `name` came from.
  SettingSource source_of(std::string_view name) const { return from[setting_index(*find_setting(name))]; }
};

/// Takes the settings an environment variable gives ($GPUQ_STATE_DIR, $GPUQ_NVIDIA_SMI) where
/// no flag did (the CLI marks the flags given first).
void take_env(PlanSetup& s);

/// Takes the plan's "settings" where no flag or variable gave one and, for a command that
/// reads them (reads_run_settings), a running `gpuq run`'s before them (PLAN.run.json). A
/// plan's relative state_dir is taken from the plan's folder. Once: a second call changes nothing.
void take_settings(PlanSetup& s, const GivenSettings& plan);

/// The loader's GPU choice for `s`: take_settings, then the GPU ids they give.
ChooseGpus choose_gpus(PlanSetup& s);

/// The GPU ids `gpus` gives, or nullopt with the problem in `err`.
std::optional<std::vector<int>> gpu_ids(const PlanSetup& s, std::string* err);

/// A loader error about a job wider than the node, naming `source` (--node-gpus,
/// --gpus-per-node, a running run's --gpus) where the loader says --gpus.
std::string with_gpus_source(std::string error, const std::string& source);

/// The plan loaded and checked against the node's GPUs as its settings give them.
struct PlanReport {
  std::optional<Plan> plan;                 ///< nullopt: not valid (errors, or not_a_plan)
  std::vector<int> gpus;                    ///< the node's GPUs
  std::string not_a_plan;                   ///< a path that is no plan file at all ("": it is one)
  std::string bad_gpus;                     ///< the GPU list the settings give is not one ("": it is)
  std::vector<std::string> errors;          ///< each "FILE: where: problem", the GPUs' source named
  std::vector<std::string> warnings;        ///< the loader's
  std::vector<std::string> unknown_fields;  ///< fields gpuq does not read
};

/// Loads and checks the plan with its settings taken into `s` (take_settings).
PlanReport load_plan_report(PlanSetup& s);

/// What a loaded plan's settings hold that the loader cannot check (its on_event hooks), as
/// loader errors ("FILE: \"settings\": ..."); empty when they are good.
std::vector<std::string> settings_problems(const PlanSetup& s);

/// For a command that needs the plan's settings but not its jobs (add, pause, resume, gpus,
/// settings): reads and takes them. The problems (empty when good); a plan that is not JSON
/// gives none, and `note` says why its settings were not read.
std::vector<std::string> take_plan_settings_only(PlanSetup& s, std::string* note);

/// For status and simulate --from-state: a line for each way the settings they predict with
/// differ from a running run's ("--gpus 0-7 given here; the run uses 0-3"), and which of the
/// run's they took. Empty when nothing differs. `pairs_default`: what an unset pairs means to the
/// command (status: auto, simulate: original).
std::vector<std::string> settings_notes(const PlanSetup& s, const char* pairs_default);

/// Every setting's value and where it came from, for `status --json` and `settings --json`:
/// {"NAME": {"value", "from", "flag"[, "run"][, "plan"]}}.
nlohmann::ordered_json settings_sources_json(const PlanSetup& s);

/// The plan's files: beside the plan, or in the state_dir (made when missing).
PlanPaths plan_paths(const PlanSetup& s);

/// Where jobs run and relative script and file: paths are taken from.
struct Workdir {
  std::string path;   ///< "": the current folder (the original's way); else an absolute folder
  std::string shown;  ///< for messages: the absolute folder and where it came from
};

/// The workdir setting as its source gives it: --workdir (or a running run's) as an absolute
/// folder, the plan's "workdir" relative to the plan file's folder, else the current folder.
Workdir workdir_of(const PlanSetup& s, const std::optional<std::string>& plan_workdir);

/// The workdir as an absolute folder (the current one when the setting gives none).
std::string absolute_workdir(const Workdir& wd);

/// The run options the settings give for the node's GPUs `gpus`.
RunOptions run_options(const PlanSetup& s, const std::vector<int>& gpus);

/// The rest of the box as `run` would take it with these settings (`gpuq settings` shows it): the
/// machine's cores and memory, what jobs may use of them, and what holds a job's memory.
struct NodeHost {
  std::vector<int> usable;   ///< the cores this process may run on
  std::vector<int> cores;    ///< those jobs are pinned to
  double cpus = 0;           ///< node_cpus as run takes it
  double machine_gib = 0;    ///< the machine's memory (0: unread)
  double mem_gib = 0;        ///< node_mem_gib as run takes it
  Cgroups cgroups;           ///< what --mem-cgroup auto would use here (looked at, nothing made)
  std::string note;          ///< RunOptions::host_note: node_cpus lowered to the cores jobs may be pinned to
};
NodeHost node_host(const PlanSetup& s);

/// The --pairs setting (or `dflt` when unset) as a Placement for the node's `gpus` (the topology
/// of "auto" is the caller's to read); nullopt with the problem: not a placement, or pairs that
/// name GPUs the node does not have (such a pair would never be used).
std::optional<Placement> placement_of(const PlanSetup& s, const char* dflt, const std::vector<int>& gpus,
                                      std::string* problem);

/// The plan file a command takes when none is named: $GPUQ_PLAN, else ./plan.json when it is a
/// file; "" when there is none.
std::string plan_in_reach(const std::string& given);

/// What a command hint needs to act on the plan (hint.h): "--plan PATH" unless it is the file
/// gpuq takes without --plan, and "--state-dir DIR" when a flag gave one.
std::string hint_flags_for(const PlanSetup& s);

/// Where the plan's state belongs to another user (and this one is not root): their jobs are
/// theirs to stop, hold, retry or add to (`action`). The words, or "" when it is this user's.
std::string others_plan_problem(const std::string& plan, const std::string& action);

/// True when `path` is a regular file this process can read (a script `run` can start).
bool readable_file(const std::string& path);

}  // namespace gpuq

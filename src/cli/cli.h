// The CLI layer's shared parts: the flags, loading the plan, and one function per subcommand.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <array>
#include <functional>
#include <memory>
#include <future>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "gpuq/core/plan.h"
#include "gpuq/core/settings.h"
#include "gpuq/core/simulate.h"
#include "gpuq/core/state.h"
#include "gpuq/live/probe.h"
#include "gpuq/live/run_info.h"
#include "gpuq/live/queue.h"
#include "gpuq/live/slurm.h"
#include "gpuq/live/snapshots.h"
#include "gpuq/live/store.h"
#include "gpuq/views/node_text.h"

namespace gpuq::cli {

/// Exit statuses: 0 success, 1 the command could not do all its work, 2 bad input; `run` gives 3
/// when every job finished but not all are done (kExitJobsNotDone, run_loop.h).
constexpr int kExitFailure = 1;
constexpr int kExitBadInput = 2;

/// Every flag of the original; each subcommand shows the ones it uses. The settings
/// (settings.h: --gpus, --poll, --max-retries, ...) are the base's members, filled in order of
/// precedence: a flag, an environment variable, a running `gpuq run`'s (for the commands that
/// read them), the plan's "settings", the default; `from` says which gave each.
struct Flags : Settings {
  std::string plan;       ///< --plan, else $GPUQ_PLAN, else ./plan.json (resolve_plan)
  std::string gpus_source = "--gpus";  ///< what gave `gpus`, as errors about a job's width name it
  bool all = false;
  std::vector<std::string> jobs;
  bool json = false;
  std::string svg;
  bool from_state = false;
  double watch = 0;
  bool strict = false;
  long lines = 20;
  bool follow = false;
  std::string since;                  ///< history --since
  bool estimates = false;             ///< history --estimates
  bool accuracy = false;              ///< history --accuracy
  bool learned_estimates = false;     ///< status/simulate --learned-estimates
  bool stale = false;                 ///< retry --stale: the stale done jobs (stale.h) and the done ones after them
  std::optional<long long> nodes;          ///< simulate --nodes: a cluster of that many nodes
  std::optional<long long> gpus_per_node;  ///< simulate --gpus-per-node: each node's GPUs are 0..G-1
  // gpuq add:
  std::string add_id;
  std::optional<long long> add_gpus;
  std::optional<double> add_priority, add_est_hours;
  bool add_dry_run = false;  ///< add --dry-run: what it would move, nothing written
  std::vector<std::string> add_deps;
  std::vector<std::string> add_script;  ///< the script, then its arguments
  // run on a shared node (node_dir.h):
  bool status_node = false;  ///< status --node: every user's jobs on the shared node
  bool simulate_node = false;  ///< simulate --node: the plan on the shared node as it is now
  std::string node_dir;  ///< --node-dir: "" for $GPUQ_NODE_DIR, else /var/lib/gpuq when usable; "off": alone
  // run --slurm (slurm.h):
  bool slurm = false;
  std::string partition, account, qos;
  long long max_queued = 200;
  double time_margin = 1.5;
  std::vector<std::string> sbatch_arg;
  // Where the settings came from (settings.cpp):
  std::array<SettingSource, kSettingCount> from{};                ///< each setting's source, in the table's order
  std::vector<std::pair<size_t, CLI::Option*>> setting_options;  ///< the options that give a setting (setting_flag)
  bool reads_run_settings = false;  ///< status, simulate --from-state, settings, add: a running run's come before the plan's
  bool settings_taken = false;      ///< take_settings has run
  GivenSettings plan_settings;      ///< the plan's own "settings", as read
  GivenSettings run_settings;       ///< a running `gpuq run`'s (PLAN.run.json), when the command reads them
  std::string run_info_file;        ///< that PLAN.run.json ("" when no run's settings were read)

  /// Where the setting `name` came from.
  SettingSource source_of(std::string_view name) const { return from[setting_index(*find_setting(name))]; }
};

/// CLI11 type names that also tell completion what a flag's value is: a plan (*.json), any
/// file, a command. Other values get no suggestion.
inline constexpr const char* kPlanType = "PLAN";
inline constexpr const char* kFileType = "FILE";
inline constexpr const char* kCommandType = "COMMAND";

enum Flag { kGpus, kPoll, kAll, kBackfill, kRetries, kRetryAfter, kMaxUsed };

/// Adds --plan and the original's flags: those in `used` are documented, the
/// rest accepted and ignored (the original took every flag with every command).
void add_flags(CLI::App* sub, Flags& f, std::initializer_list<Flag> used);

/// Fills f.plan when --plan was not given: $GPUQ_PLAN, else plan.json in the current
/// folder (saying on stderr which file was taken). False, with the problem printed, when there is no plan to take.
bool resolve_plan(Flags& f);
/// The plan resolve_plan would take, quietly: --plan, else $GPUQ_PLAN, else ./plan.json when it
/// is a file; "" when there is none.
std::string plan_in_reach(const Flags& f);

/// What a command hint needs to act on f's plan (hint.h): "--plan PATH" (the path as given)
/// unless it is the file gpuq takes without --plan ($GPUQ_PLAN, else ./plan.json), and
/// "--state-dir DIR" when the flag gave one.
std::string hint_flags_for(const Flags& f);

/// The plan's files: beside the plan, or in --state-dir.
PlanPaths plan_paths(const Flags& f);

/// Where jobs run and relative script and file: paths are taken from.
struct Workdir {
  std::string path;   ///< "": the current folder (the original's way); else an absolute folder
  std::string shown;  ///< for messages: the absolute folder and where it came from
};

/// The workdir setting as its source gives it: --workdir (or a running run's) as an absolute
/// folder, the plan's "workdir" relative to the plan file's folder, else the current folder.
Workdir workdir_of(const Flags& f, const std::optional<std::string>& plan_workdir);

/// The workdir as an absolute folder (the current one when the setting gives none).
std::string absolute_workdir(const Workdir& wd);

/// When a job of `plan` runs from a snapshot (its "snapshot", else the setting, is "git") and
/// the workdir is in no git repository: one line naming the plan file, the job (or the setting)
/// and the problem. Else "".
std::string snapshot_problem(const Flags& f, const Plan& plan, const Workdir& wd, Snapshots& snapshots);

/// Adds gpuq's --time-limit-factor (run, status and simulate, so that predictions match).
void add_time_limit_factor(CLI::App* sub, Flags& f);

/// Adds gpuq's --quiet-minutes (run, and status, which marks hung jobs as run sees them).
void add_quiet_minutes(CLI::App* sub, Flags& f);

/// Adds --gpu-mem-gib and --gpu-mem-headroom (several jobs on one GPU).
void add_gpu_memory(CLI::App* sub, Flags& f);
/// The cluster's GPU shards (scontrol), with the GPU memory of `f` (--gpu-mem-gib, headroom).
SlurmShards cluster_shards(const Flags& f);

/// Adds gpuq's --gpu-probe, --pairs (its help naming `pairs_default`) and --ignore-process.
void add_gpu_flags(CLI::App* sub, Flags& f, const char* pairs_default);

/// --pairs (or `dflt` when not given) as a Placement; with "auto" the topology is read from the
/// probe --gpu-probe names. Nullopt, with the problem printed, for a bad value.
std::optional<Placement> placement_of(const Flags& f, const char* dflt, const RunOptions& opt);

/// The probe --gpu-probe names, for a command that reads once (not in the background).
std::unique_ptr<GpuProbe> probe_of(const RunOptions& opt);

/// The run options the flags give for the node's GPUs `gpus`.
RunOptions run_options(const Flags& f, const std::vector<int>& gpus);

/// A loader error about a job wider than the node, naming `source` (--node-gpus,
/// --gpus-per-node, a running run's --gpus) where the loader says --gpus.
std::string with_gpus_source(std::string error, const std::string& source);

/// Loads and checks the plan (the node's GPUs as the settings give them: take_settings), or
/// prints every problem. The loader's warnings go to stderr,
/// or to `warnings` when given (validate reports them as its own findings); the fields
/// gpuq does not read to `unknown_fields` when given (else they are warnings on stderr too).
std::optional<Plan> load_or_report(Flags& f, std::vector<std::string>* warnings = nullptr,
                                   std::vector<std::string>* unknown_fields = nullptr);

/// --gpus as ids, or nullopt with the problem printed.
std::optional<std::vector<int>> node_gpus(const Flags& f);

/// True when `path` is a regular file this process can read (a script `run` can start).
bool readable_file(const std::string& path);

/// Writes `text` to `path`, or says why it could not.
bool write_output(const std::string& path, const std::string& text);

/// What every command starts from: the node's GPUs and the checked plan.
struct Loaded {
  std::vector<int> gpus;
  Plan plan;
};

/// Loads the plan with its settings taken into `f` (take_settings) and parses the GPUs they
/// give, or prints every problem (then the exit status is 2).
std::optional<Loaded> load_command(Flags& f);

/// The plan on disk has problems (load_command printed them): the version a running `gpuq run`
/// goes on with (PLAN.run.plan.json), or nullopt when no run goes on.
std::optional<Loaded> plan_run_goes_on_with(const Flags& f);

/// Marks `o` as a flag that gives a setting (settings.h): the one whose flag it is, or `name`
/// (add's --node-gpus gives "gpus"). Given on the command line, it beats the plan's
/// "settings" and a run's. Returns `o`.
CLI::Option* setting_flag(Flags& f, CLI::Option* o, std::string_view name = {});

/// After parsing: marks the settings whose flags the command line gave, and takes those that
/// an environment variable gives ($GPUQ_STATE_DIR, $GPUQ_NVIDIA_SMI) where no flag did.
void take_flags_and_env(Flags& f);

/// Takes the plan's "settings" where no flag or variable gave one and, for a command that
/// reads them (f.reads_run_settings), a running `gpuq run`'s before them (PLAN.run.json).
/// A plan's relative state_dir is taken from the plan's folder. Once per command: a second
/// call changes nothing.
void take_settings(Flags& f, const GivenSettings& plan);

/// The loader's GPU choice for `f`: take_settings, then the GPU ids they give.
ChooseGpus choose_gpus(Flags& f);

/// What a loaded plan's settings hold that only the CLI can check (its on_event hooks), as
/// loader errors ("FILE: \"settings\": ..."); empty when they are good.
std::vector<std::string> settings_problems(const Flags& f);

/// For a command that needs the plan's settings but not its jobs (add, pause, resume, gpus):
/// reads them and takes them (take_settings). False, with the problems printed, when they are
/// bad; a plan that is not JSON gives none (said on stderr as `gpuq COMMAND`'s note, unless
/// `command` is null).
bool take_plan_settings_only(Flags& f, const char* command);

/// For status and simulate --from-state: a line for each way the settings they predict with
/// differ from a running run's ("--gpus 0-7 given here; the run uses 0-3"), and which of the
/// run's they took. Empty when nothing differs. `pairs_default`: what an unset pairs means to the
/// command (status: auto, simulate: original).
std::vector<std::string> settings_notes(const Flags& f, const char* pairs_default);

/// Every setting's value and where it came from, for `status --json` and `settings --json`:
/// {"NAME": {"value", "from", "flag"[, "run"][, "plan"]}}.
nlohmann::ordered_json settings_sources_json(const Flags& f);

/// Warns when the plan is a symbolic link and a state file beside the link is not the one used.
void warn_state_beside_link(const std::string& plan);

/// Names, in `others` (GPU -> why it is busy), the GPUs that running jobs no longer in the plan hold.
void name_removed_holders(const Plan& plan, const State& state, std::map<int, std::string>& others);

/// Warns about state entries of jobs the plan no longer has (renamed or removed jobs).
void warn_unknown_entries(const Plan& plan, const PlanPaths& paths, const State& state);

/// What a node shared with other users' runs means to this plan (node_dir.h): their jobs' GPUs
/// are busy until each is predicted to end, and this plan's ready jobs wait as the node-wide
/// decision says (its fair order, the caps). Empty when the plan's run is alone.
struct NodeLook {
  std::vector<HeldGpus> held;  // the other runs' jobs: their GPUs, (from and) until (unix seconds)
  std::map<std::string, NodeWhy> waits;          // this plan's waiting jobs: why the node keeps each waiting
  std::string line;                              // for the text, above the outlook
  std::optional<int> cap;                        // the user's cap (Policy::max_gpus)
  std::string dir;                               // the node directory read ("": none)
  std::string problem;                           // why it could not be read ("": it was)
  std::vector<std::string> notes;                // files refused, claims reaped (read_node_dir)
};

/// The GiB each GPU of `gpus` offers packed jobs on the node (core/node.h NodeRoom), from
/// --gpu-mem-gib and --gpu-mem-headroom, as the runs' policies give it where no probe says more.
NodeRoom node_room(const Flags& f, const std::vector<int>& gpus);

/// Where the plan's state beside it belongs to another user (and this one is not root): their
/// jobs are theirs to stop, hold, retry or add to (`action`). The words, or "" when it is this
/// user's plan (or has no state yet).
std::string others_plan_problem(const std::string& plan, const std::string& action);

/// The node directory of the plan's run (`info`: its PLAN.run.json), unless --node-dir or
/// $GPUQ_NODE_DIR names one; else choose_node_dir's ("" when the run is alone).
std::string node_dir_for(const Flags& f, const std::optional<RunInfo>& info);

/// The node look of the plan of `paths` on `gpus`: the node directory of its run (PLAN.run.json),
/// unless --node-dir or $GPUQ_NODE_DIR names one; none in Slurm mode. With `others`, each GPU
/// another run's job holds is named there ("ana's train (gpuq, ends ~14:30)").
/// `whole`: the plan is predicted from its beginning (simulate --node): a run of it that is going
/// on is left out, and the line says so; `plan_wants` (its jobs ready at its beginning) stand in
/// the node's fair order for it. The other runs' waiting jobs hold the GPUs the node's prediction
/// gives them (NodeLook::held, from their predicted starts).
NodeLook node_look(const Flags& f, const PlanPaths& paths, const std::vector<int>& gpus, double now,
                   std::map<int, std::string>* others, bool whole = false,
                   const std::vector<NodeWant>* plan_wants = nullptr);

/// One heap of transparent huge pages for the short commands that read a big plan.
void huge_page_heap();

/// Keeps `x` (moved) until the process exits, never freeing it: the short commands leave their
/// plan, state and prediction to the exit. Freeing them took 8 ms of a 160 ms `status` of 100k
/// jobs (GPUQ_PHASES=1, phase "free"). Reachable from a static, so no leak checker reports it.
void keep_until_exit(std::shared_ptr<void> x);
template <class T>
void keep_until_exit(T&& x) {
  keep_until_exit(std::shared_ptr<void>(std::make_shared<std::decay_t<T>>(std::forward<T>(x))));
}

/// The free GPUs as `run` would see them now: not used by a running job, not busy by the
/// reading (busy_by_reading: `probed`, else the probe is asked now). With `others`, also why
/// each GPU another user holds is busy (held_by_others).
GpuMask free_now(const State& state, const RunOptions& opt, std::optional<GpuReading> probed = std::nullopt,
                 std::map<int, std::string>* others = nullptr);

/// What the parsed command line asks to run: a subcommand's function, bound to the flags.
using Action = std::function<int()>;

/// Each adds its subcommand (flags and help) to `app`; parsing it sets `action`.
void add_run_command(CLI::App& app, Flags& f, Action& action);
void add_status_command(CLI::App& app, Flags& f, Action& action);
void add_simulate_command(CLI::App& app, Flags& f, Action& action);
void add_validate_command(CLI::App& app, Flags& f, Action& action);
void add_logs_command(CLI::App& app, Flags& f, Action& action);
void add_control_commands(CLI::App& app, Flags& f, Action& action);  ///< retry, kill, hold
void add_history_command(CLI::App& app, Flags& f, Action& action);
void add_plan_edit_commands(CLI::App& app, Flags& f, Action& action);  ///< add, pause, resume
void add_gpus_command(CLI::App& app, Flags& f, Action& action);
void add_settings_command(CLI::App& app, Flags& f, Action& action);

/// Adds run's settings beyond the original's flags: --kill-grace, --time-limit-factor,
/// --quiet-minutes, --nvidia-smi, --gpu-probe, --pairs, --ignore-process, --on-event,
/// --hook-timeout, --events-max-mb (run, and settings, which takes every setting's flag).
void add_run_settings(CLI::App* sub, Flags& f);

/// Adds --learned-estimates (status, simulate).
void add_learned_estimates(CLI::App* sub, Flags& f);

/// With --learned-estimates: the pending jobs' est_hours scaled by what their id prefix
/// took before (the event log), and a line on stderr saying which prefixes were used.
void learn_into(const Flags& f, Plan& plan, const State& state);
/// `--version` and `gpuq version`.
void add_version_command(CLI::App& app, Action& action);
/// `gpuq completion SHELL` and the hidden `gpuq __complete COMMAND PLAN [PREFIX]` (job ids
/// for the scripts, actionable ones first). Add them last: the scripts list what `app` has.
void add_completion_commands(CLI::App& app, Action& action);

/// The hidden `--help-man`: every command's help, laid out for help2man (the man page).
/// Add it last, after every subcommand.
void add_man_help_flag(CLI::App& app);

/// "gpuq 0.1.0 (commit abc123def456)": the project version, and the git commit when built
/// from a checkout (generated at build time by cmake/version.cmake).
const char* version_line();

/// The completion script for `shell` (bash, zsh or fish), made from the subcommands and
/// flags `app` defines.
std::string completion_script(CLI::App& app, const std::string& shell);

/// The subcommands: each returns the exit status.
int cmd_run(Flags& f);
int cmd_status(Flags& f);
int cmd_simulate(const Flags& f);
int cmd_validate(Flags& f);
int cmd_logs(Flags& f);
int cmd_control(Flags& f, const std::string& action);
int cmd_history(Flags& f);
int cmd_add(Flags& f);
int cmd_gpus(Flags& f);
int cmd_settings(Flags& f);

}  // namespace gpuq::cli

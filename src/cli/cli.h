// The CLI layer's shared parts: the flags, loading the plan, and one function per subcommand.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <memory>
#include <future>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "gpuq/core/plan.h"
#include "gpuq/core/state.h"
#include "gpuq/live/probe.h"
#include "gpuq/live/queue.h"
#include "gpuq/live/store.h"

namespace gpuq::cli {

/// Exit statuses: 0 success, 1 the command could not do all its work, 2 bad input.
constexpr int kExitFailure = 1;
constexpr int kExitBadInput = 2;

/// Every flag of the original; each subcommand shows the ones it uses.
struct Flags {
  std::string plan;       ///< --plan, else $GPUQ_PLAN, else ./plan.json (resolve_plan)
  std::string state_dir;  ///< gpuq's own: --state-dir, else $GPUQ_STATE_DIR: state, locks and logs/ there
  std::string workdir;    ///< gpuq's own: --workdir: scripts and file: deps are taken from there
  std::string gpus = "0,1,2,3,4,5,6,7";
  std::string gpus_source = "--gpus";  ///< what gave `gpus`, as errors about a job's width name it
  double poll = 20;
  bool all = false;
  double backfill_max_hours = 0.5;
  long long max_retries = 2;
  double retry_after = 300;
  long long max_used_mib = 1024;
  double kill_grace = 30;
  double time_limit_factor = 0;  ///< gpuq's own: a job without time_limit_hours gets this x est_hours (0: none)
  double quiet_minutes = 0;      ///< gpuq's own: the hang watchdog for every job without quiet_minutes (0: none)
  std::string nvidia_smi;
  std::string gpu_probe = "auto";              ///< gpuq's own: --gpu-probe auto|nvml|nvidia-smi|none
  std::string pairs;                           ///< gpuq's own: --pairs auto|original|0-1,2-3 ("": the command's default)
  std::vector<std::string> ignore_process;     ///< gpuq's own: --ignore-process NAME (repeatable)
  std::vector<std::string> jobs;
  bool json = false;
  std::string svg;
  bool from_state = false;
  double watch = 0;
  bool strict = false;
  long lines = 20;
  bool follow = false;
  std::vector<std::string> on_event;  ///< run --on-event
  double hook_timeout = 60;
  double events_max_mb = 64;
  std::string since;                  ///< history --since
  bool estimates = false;             ///< history --estimates
  bool learned_estimates = false;     ///< status/simulate --learned-estimates
  std::optional<long long> nodes;          ///< simulate --nodes: a cluster of that many nodes
  std::optional<long long> gpus_per_node;  ///< simulate --gpus-per-node: each node's GPUs are 0..G-1
  // gpuq add:
  std::string add_id;
  std::optional<long long> add_gpus;
  std::optional<double> add_priority, add_est_hours;
  std::vector<std::string> add_deps;
  std::vector<std::string> add_script;  ///< the script, then its arguments
  // run --slurm (slurm.h):
  bool slurm = false;
  std::string partition, account, qos;
  long long max_queued = 200;
  double time_margin = 1.5;
  std::vector<std::string> sbatch_arg;
  bool poll_given = false;  ///< --poll was on the command line (Slurm mode's default is 30 s)
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
/// folder (saying on stderr which file was taken); and f.state_dir from $GPUQ_STATE_DIR.
/// False, with the problem printed, when there is no plan to take.
bool resolve_plan(Flags& f);

/// The plan's files: beside the plan, or in --state-dir.
PlanPaths plan_paths(const Flags& f);

/// Where jobs run and relative script and file: paths are taken from.
struct Workdir {
  std::string path;   ///< "": the current folder (the original's way); else an absolute folder
  std::string shown;  ///< for messages: the absolute folder and where it came from
};

/// --workdir, else the plan's "workdir" (relative to the plan file's folder), else the current folder.
Workdir workdir_of(const Flags& f, const std::optional<std::string>& plan_workdir);

/// Adds gpuq's --time-limit-factor (run, status and simulate, so that predictions match).
void add_time_limit_factor(CLI::App* sub, Flags& f);

/// Adds gpuq's --quiet-minutes (run, and status, which marks hung jobs as run sees them).
void add_quiet_minutes(CLI::App* sub, Flags& f);

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

/// Loads and checks the plan, or prints every problem. The loader's warnings go to stderr,
/// or to `warnings` when given (validate reports them as its own findings); the fields
/// gpuq does not read to `unknown_fields` when given (else they are not mentioned).
std::optional<Plan> load_or_report(const Flags& f, const std::vector<int>& gpus,
                                   std::vector<std::string>* warnings = nullptr,
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

/// Parses --gpus and loads the plan, or prints every problem (then the exit status is 2).
std::optional<Loaded> load_command(const Flags& f);

/// Warns when the plan is a symbolic link and a state file beside the link is not the one used.
void warn_state_beside_link(const std::string& plan);

/// Names, in `others` (GPU -> why it is busy), the GPUs that running jobs no longer in the plan hold.
void name_removed_holders(const Plan& plan, const State& state, std::map<int, std::string>& others);

/// Warns about state entries of jobs the plan no longer has (renamed or removed jobs).
void warn_unknown_entries(const Plan& plan, const PlanPaths& paths, const State& state);

/// One heap of transparent huge pages for the short commands that read a big plan.
void huge_page_heap();

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
int cmd_run(const Flags& f);
int cmd_status(const Flags& f);
int cmd_simulate(const Flags& f);
int cmd_validate(const Flags& f);
int cmd_logs(const Flags& f);
int cmd_control(const Flags& f, const std::string& action);
int cmd_history(const Flags& f);
int cmd_add(const Flags& f);
int cmd_gpus(const Flags& f);

}  // namespace gpuq::cli

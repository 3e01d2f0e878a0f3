// The CLI layer's shared parts: the flags, loading the plan, and one function per subcommand.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <array>
#include <functional>
#include <memory>
#include <future>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gpuq/core/plan.h"
#include "gpuq/core/settings.h"
#include "gpuq/core/simulate.h"
#include "gpuq/core/state.h"
#include "gpuq/live/setup.h"

namespace gpuq {
class Backend;  // live/backend.h: the commands that choose one include it
}  // namespace gpuq

namespace gpuq::cli {

/// Exit statuses: 0 success, 1 the command could not do all its work, 2 bad input; `run` gives 3
/// when every job finished but not all are done, `simulate` when some never start on this node
/// (kExitJobsNotDone, core/simulate.h).
constexpr int kExitFailure = 1;
constexpr int kExitBadInput = 2;

/// Every flag of the original; each subcommand shows the ones it uses. The plan and the settings
/// (setup.h: --gpus, --poll, --max-retries, ...) are the base's members, filled in order of
/// precedence: a flag, an environment variable, a running `gpuq run`'s (for the commands that
/// read them), the plan's "settings", the default; `from` says which gave each.
struct Flags : PlanSetup {
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
  bool add_dry_run = false;  ///< add --dry-run: what it would move, nothing written
  std::map<std::string, std::vector<std::string>> add_fields;  ///< a job field's flag -> its words (job_fields.h)
  std::vector<std::string> add_script;  ///< the script, then its arguments
  // run on a shared node (node_dir.h):
  bool status_node = false;  ///< status --node: every user's jobs on the shared node
  bool simulate_node = false;  ///< simulate --node: the plan on the shared node as it is now
  int drain_gpu = -1;          ///< drain, undrain: the GPU
  std::string drain_why;       ///< drain --why
  // run through a batch queue (backend_flags.cpp):
  bool batch = false;
  std::string partition, account, qos;
  long long max_queued = 200;
  double time_margin = 1.5;
  std::vector<std::string> batch_args;
  std::vector<std::pair<size_t, CLI::Option*>> setting_options;  ///< the options that give a setting (setting_flag)
};

/// CLI11 type names that also tell completion what a flag's value is: a plan (*.json), any
/// file, a command. Other values get no suggestion.
inline constexpr const char* kPlanType = "PLAN";
inline constexpr const char* kFileType = "FILE";
inline constexpr const char* kCommandType = "COMMAND";

/// Adds --plan, --all and the flag of each setting for `command` (SettingCommand's bits:
/// listed in its --help), and, unlisted, the original's flags (the original took every flag
/// with every command). settings.h's table says which.
void add_flags(CLI::App* sub, Flags& f, uint8_t command);

/// Adds the flag of `spec` (settings.h), its help, value and check from the table; `listed`:
/// in --help. Given on the command line, it beats the plan's "settings" and a run's.
CLI::Option* add_setting_flag(CLI::App* sub, Flags& f, const SettingSpec& spec, bool listed);
/// ... the setting named `name`, listed.
CLI::Option* add_setting_flag(CLI::App* sub, Flags& f, std::string_view name);

/// Fills f.plan when --plan was not given: $GPUQ_PLAN, else plan.json in the current
/// folder (saying on stderr which file was taken). False, with the problem printed, when there is no plan to take.
bool resolve_plan(Flags& f);

/// Says what loading the plan found, as every command says it: a path that is no plan, a bad
/// GPU list, every problem (with the fields gpuq does not read); on success the loader's
/// warnings and those fields, to stderr, unless `warnings` or `unknown_fields` take them
/// (validate reports them as its own findings). True when the plan is valid.
bool say_load(const Flags& f, const PlanReport& r, std::vector<std::string>* warnings = nullptr,
              std::vector<std::string>* unknown_fields = nullptr);

/// What every command starts from: the node's GPUs and the checked plan.
struct Loaded {
  std::vector<int> gpus;
  Plan plan;
};

/// Loads the plan with its settings taken into `f` and parses the GPUs they give, or prints
/// every problem (then the exit status is 2).
std::optional<Loaded> load_command(Flags& f, std::vector<std::string>* warnings = nullptr,
                                   std::vector<std::string>* unknown_fields = nullptr);

/// --gpus as ids, or nullopt with the problem printed.
std::optional<std::vector<int>> node_gpus(const Flags& f);

/// For a command that needs the plan's settings but not its jobs: takes them, or prints their
/// problems (false). A plan that is not JSON gives none (said on stderr as `gpuq COMMAND`'s
/// note, unless `command` is null).
bool take_plan_settings_only(Flags& f, const char* command);

/// Writes `text` to `path`, or says why it could not.
bool write_output(const std::string& path, const std::string& text);

/// Marks `o` as a flag that gives a setting (settings.h): the one whose flag it is, or `name`
/// (add's --node-gpus gives "gpus"). Given on the command line, it beats the plan's
/// "settings" and a run's. Returns `o`.
CLI::Option* setting_flag(Flags& f, CLI::Option* o, std::string_view name = {});

/// After parsing: marks the settings whose flags the command line gave, and takes those that
/// an environment variable gives where no flag did.
void take_flags_and_env(Flags& f);

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

/// The backend the flags choose for `run` and `validate`: this machine, or a batch queue
/// (backend_flags.cpp, the one file of the CLI that knows which queues there are).
std::unique_ptr<Backend> chosen_backend(const Flags& f);
/// The backend `simulate --nodes` predicts a cluster of.
std::unique_ptr<Backend> cluster_backend(const Flags& f);
/// Adds the flags of a run through a batch queue (run), and validate's check for one.
void add_batch_run_flags(CLI::App* sub, Flags& f);
void add_batch_check_flag(CLI::App* sub, Flags& f);
/// simulate --nodes's help: what it predicts.
extern const char* const kNodesHelp;

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
void add_top_command(CLI::App& app, Flags& f, Action& action);  ///< the live view (top.cpp)


/// Adds --learned-estimates (status, simulate).
void add_learned_estimates(CLI::App* sub, Flags& f);

/// With --learned-estimates: a copy of `plan` with the pending jobs' est_hours scaled by what
/// their id prefix took before (the event log), and a line on stderr saying which prefixes were used.
Plan learn_into(const Flags& f, const Plan& plan, const State& state);
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

// The settings: what a user may keep in the plan's top-level "settings" object instead of
// repeating flags on every command line. One table (settings_table) names each setting, its
// flag, kind, default, doc and member; it drives the plan's "settings" reader, the record a
// `gpuq run` leaves in PLAN.run.json, where each value came from, `gpuq settings` and the
// doc/settings.md's list (a test holds it to the table).
#pragma once

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace gpuq {

/// Every setting's value. A default-made one holds the table's defaults.
struct Settings {
  std::string gpus;
  double poll;
  double gpu_mem_gib;       ///< each GPU's memory (GiB) where the probe gives none
  double gpu_mem_headroom;  ///< percent of a GPU's memory that packed jobs leave free
  double backfill_max_hours;
  long long max_retries;
  double retry_after;
  long long max_used_mib;
  std::vector<std::string> ignore_process;
  std::string gpu_probe;
  std::string nvidia_smi;  ///< "": $GPUQ_NVIDIA_SMI, else nvidia-smi
  std::string pairs;       ///< "": the command's default (auto; simulate: original)
  double time_limit_factor;
  double quiet_minutes;
  double kill_grace;
  std::string workdir;    ///< "": the current folder; from a plan: relative to the plan's folder
  std::string state_dir;  ///< "": beside the plan; from a plan: relative to the plan's folder
  std::vector<std::string> on_event;
  double hook_timeout;
  double events_max_mb;
  std::string progress_from_log;  ///< "true" or "false": run reads progress bars in jobs' logs
  double eta_slip_percent;        ///< an eta event when the predicted finish moves this much of the time left
  double eta_slip_minutes;        ///< ... and at least this many minutes
  std::string snapshot;  ///< "off" or "git": jobs run from a git snapshot of the workdir (snapshot.h)
  std::string preemptible;    ///< "true" or "false": every job without its own "preemptible" may be preempted
  double preempt_grace;       ///< seconds from a preemption's signal to SIGKILL of the job's group
  double preempt_min_minutes; ///< a job runs at least this long (since its last start) before it may be preempted
  double node_cpus;           ///< cores jobs may use at once (0: the machine's less reserve_cpus)
  double node_mem_gib;        ///< GiB of host memory jobs may use at once (0: the machine's less reserve_mem_gib)
  long long reserve_cpus;     ///< cores kept for the system where node_cpus is the machine's
  double reserve_mem_gib;     ///< GiB kept for the system where node_mem_gib is the machine's
  double mem_margin_percent;  ///< run stops a job over its mem_gib by more than this percent (host_mem.h)
  std::string mem_cgroup;     ///< "auto" or "off": a job with mem_gib gets a cgroup where the node allows (cgroup.h)

  Settings();
  /// Every number 0, every text and list empty: a start for reading the table's defaults.
  explicit Settings(std::monostate);
};

/// What a setting's value is, and so how it is read and checked.
enum class SettingKind {
  Gpus,      ///< GPU ids: "0-3", "0,1,2,3" or [0, 1, 2, 3]
  Number,    ///< a number >= 0
  Positive,  ///< a number > 0
  Count,     ///< a whole number >= 0
  Whole,     ///< a whole number
  Choice,    ///< one of `choices`
  Pairs,     ///< auto, original, or pairs such as "0-2,1-3"
  Text,      ///< a non-empty string (a command)
  Folder,    ///< a folder's path; in a plan, relative to the plan's folder
  Names,     ///< a list of non-empty strings (or one string)
};

/// Where a setting's member is in Settings.
using SettingMember = std::variant<std::string Settings::*, double Settings::*, long long Settings::*,
                                   std::vector<std::string> Settings::*>;

/// One row of the table.
struct SettingSpec {
  std::string_view name;          ///< as the plan's "settings" and PLAN.run.json spell it
  std::string_view flag;          ///< the command-line flag that gives it
  SettingKind kind;
  std::string_view default_json;  ///< the default, as JSON
  std::string_view doc;           ///< one line
  SettingMember member;
  bool predicts = true;           ///< status and simulate --from-state predict with it (say when it is the run's)
  bool from_run = true;           ///< taken from a running `gpuq run` (not state_dir: PLAN.run.json is found through it)
  std::string_view env = {};      ///< an environment variable that gives it (between the flag and the rest)
  std::string_view choices = {};  ///< Choice: the values, "|" between
  std::string_view unset = {};    ///< what an empty value means, for people
};

/// The number of settings.
inline constexpr size_t kSettingCount = 33;

/// The table, in the order `gpuq settings` and doc/settings.md list it.
std::span<const SettingSpec, kSettingCount> settings_table();

/// The row of the setting named `name`, or nullptr.
const SettingSpec* find_setting(std::string_view name);

/// The row's position in settings_table().
size_t setting_index(const SettingSpec& spec);

/// Where a setting's value came from, weakest first: the precedence is flag > env > run > plan > default.
enum class SettingSource : uint8_t { Default, Plan, Run, Env, Flag };

/// "default", "plan", "run", "env", "flag".
const char* source_name(SettingSource s);

/// Some settings, as one source (the plan's "settings", PLAN.run.json) gives them.
struct GivenSettings {
  Settings values;
  std::array<bool, kSettingCount> given{};
  bool any() const;
};

/// Reads one setting's JSON value into `into`; the problem ("must be ...") or "".
std::string read_setting(const SettingSpec& spec, const nlohmann::json& value, Settings& into);

/// Reads the member `name` of a "settings" object into `into` (marked given). The problem,
/// "\"NAME\": problem" (a name that is no setting with "did you mean" when one is near), or "".
std::string read_named_setting(std::string_view name, const nlohmann::json& value, GivenSettings& into);

/// Reads a "settings" object: each member as read_named_setting. The problems.
std::vector<std::string> read_settings(const nlohmann::json& object, GivenSettings& into);

/// A setting's value as JSON, as read_setting reads it back.
nlohmann::json setting_json(const SettingSpec& spec, const Settings& s);

/// Every setting's value, in the table's order (PLAN.run.json's "settings").
nlohmann::ordered_json settings_json(const Settings& s);

/// A setting's value for people: "0-3", "20", "a, b", and `unset` (or "none") for an empty one.
std::string setting_text(const SettingSpec& spec, const Settings& s);

/// Whether two settings hold the same value of the row's setting.
bool same_setting(const SettingSpec& spec, const Settings& a, const Settings& b);

/// Copies the row's setting from `from` to `to`.
void copy_setting(const SettingSpec& spec, const Settings& from, Settings& to);

/// Sets the row's setting from text (a flag's or an environment variable's value; for Names, one
/// name). The problem, or "".
std::string set_setting_text(const SettingSpec& spec, std::string_view text, Settings& into);

}  // namespace gpuq

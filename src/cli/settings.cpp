// Where each setting comes from (flag > env > run > plan > default), and `gpuq settings`.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "gpuq/core/settings.h"
#include "gpuq/live/hooks.h"
#include "gpuq/live/proc.h"
#include "gpuq/live/run_info.h"
#include "gpuq/live/store.h"

#include "cli.h"

namespace gpuq::cli {

namespace {

// The values the command would take without the run (the plan's, else the default), as they
// take effect, to be compared with the run's: an unset pairs is the command's default, the
// workdir an absolute folder (the run records its own so).
Settings without_run(const Flags& f, const char* pairs_default) {
  Settings s;
  const size_t wd = setting_index(*find_setting("workdir"));
  for (const SettingSpec& spec : settings_table())
    if (f.plan_settings.given[setting_index(spec)]) copy_setting(spec, f.plan_settings.values, s);
  if (s.pairs.empty()) s.pairs = pairs_default;
  Flags at = f;
  at.workdir = s.workdir;
  at.from[wd] = f.plan_settings.given[wd] ? SettingSource::Plan : SettingSource::Default;
  Workdir w = workdir_of(at, std::nullopt);
  std::error_code ec;
  s.workdir = w.path.empty() ? std::filesystem::current_path(ec).string() : w.path;
  return s;
}

}  // namespace

CLI::Option* setting_flag(Flags& f, CLI::Option* o, std::string_view name) {
  std::string flag = "--" + o->get_lnames().front();
  for (const SettingSpec& spec : settings_table())
    if (name.empty() ? spec.flag == flag : spec.name == name) f.setting_options.push_back({setting_index(spec), o});
  return o;
}

void take_flags_and_env(Flags& f) {
  for (auto [i, o] : f.setting_options)
    if (o->count() > 0) f.from[i] = SettingSource::Flag;
  for (const SettingSpec& spec : settings_table()) {
    size_t i = setting_index(spec);
    if (spec.env.empty() || f.from[i] != SettingSource::Default) continue;
    const char* env = std::getenv(std::string(spec.env).c_str());
    if (env && *env && set_setting_text(spec, env, f).empty()) f.from[i] = SettingSource::Env;
  }
}

void take_settings(Flags& f, const GivenSettings& plan) {
  if (f.settings_taken) return;
  f.settings_taken = true;
  f.plan_settings = plan;
  for (const SettingSpec& spec : settings_table()) {
    size_t i = setting_index(spec);
    if (plan.given[i] && f.from[i] < SettingSource::Plan) {
      copy_setting(spec, plan.values, f);
      f.from[i] = SettingSource::Plan;
    }
  }
  if (f.source_of("state_dir") == SettingSource::Plan) {
    std::filesystem::path dir = expand_path(f.state_dir);
    if (dir.is_relative()) f.state_dir = (std::filesystem::path(f.plan).parent_path() / dir).string();
  }
  if (f.reads_run_settings) {
    PlanPaths paths = paths_for(f.plan, f.state_dir);
    RunPresence run = run_presence(paths);
    if (run.running && run.info) {
      f.run_settings = run.info->settings;
      f.run_info_file = paths.run_info;
      for (const SettingSpec& spec : settings_table()) {
        size_t i = setting_index(spec);
        if (spec.from_run && f.run_settings.given[i] && f.from[i] < SettingSource::Run) {
          copy_setting(spec, f.run_settings.values, f);
          f.from[i] = SettingSource::Run;
        }
      }
      if (f.source_of("gpus") == SettingSource::Run)
        f.gpus_source = fmt::format("the running `gpuq run` (pid {}) --gpus", run.info->pid);
    }
  }
  if (f.source_of("gpus") == SettingSource::Plan) f.gpus_source = "the plan's \"settings\" \"gpus\"";
}

ChooseGpus choose_gpus(Flags& f) {
  return [&f](const GivenSettings& plan) {
    take_settings(f, plan);
    std::string err;
    // Every source was checked as it was read; a bad --gpus was said before the load.
    return parse_gpu_list(f.gpus, &err).value_or(std::vector<int>{});
  };
}

std::vector<std::string> settings_problems(const Flags& f) {
  std::vector<std::string> out;
  if (f.source_of("on_event") != SettingSource::Plan) return out;
  for (const std::string& hook : f.on_event) {
    std::string problem;
    if (!parse_hook(hook, &problem)) {
      if (problem.rfind("--on-event ", 0) == 0) problem.erase(0, 11);  // the setting is named already
      out.push_back(fmt::format("{}: \"settings\": \"on_event\": {}", f.plan, problem));
    }
  }
  return out;
}

bool take_plan_settings_only(Flags& f, const char* command) {
  std::vector<std::string> errors;
  std::optional<GivenSettings> given = load_plan_settings(f.plan, errors);
  if (!given) {
    std::error_code ec;
    if (command && std::filesystem::exists(f.plan, ec))
      fmt::print(stderr, "gpuq {}: note: the plan's \"settings\" are not read: {}\n", command,
                 errors.empty() ? "?" : errors.front());
    take_settings(f, {});
    return true;
  }
  take_settings(f, *given);
  for (std::string& e : settings_problems(f)) errors.push_back(std::move(e));
  if (errors.empty()) return true;
  fmt::print(stderr, "gpuq: the plan {} is not valid ({} problem{}):\n", f.plan, errors.size(),
             errors.size() == 1 ? "" : "s");
  for (const std::string& e : errors) fmt::print(stderr, "  {}\n", e);
  return false;
}

std::vector<std::string> settings_notes(const Flags& f, const char* pairs_default) {
  std::vector<std::string> lines;
  if (f.run_info_file.empty()) return lines;
  std::string file = std::filesystem::path(f.run_info_file).filename().string();
  Settings base = without_run(f, pairs_default);
  std::string taken, plan_says;
  for (const SettingSpec& spec : settings_table()) {
    size_t i = setting_index(spec);
    if (!spec.predicts) continue;
    SettingSource from = f.from[i];
    std::string value = setting_text(spec, f);
    bool run_differs = f.run_settings.given[i] && !same_setting(spec, f, f.run_settings.values);
    if (from == SettingSource::Flag && run_differs)
      lines.push_back(fmt::format("{} {} given here; the run uses {}", spec.flag, value,
                                  setting_text(spec, f.run_settings.values)));
    else if (from == SettingSource::Env && run_differs)
      lines.push_back(fmt::format("${}={} here; the run uses {}", spec.env, value,
                                  setting_text(spec, f.run_settings.values)));
    else if (from == SettingSource::Run && !same_setting(spec, f, base)) {
      taken += fmt::format("{}{} {}", taken.empty() ? "" : ", ", spec.flag, value);
      if (f.plan_settings.given[i])
        plan_says += fmt::format("{}{} {}", plan_says.empty() ? "" : ", ", spec.name, setting_text(spec, base));
    }
  }
  if (!taken.empty()) lines.insert(lines.begin(), fmt::format("predicting with the run's {} ({})", taken, file));
  if (!plan_says.empty())
    lines.push_back(fmt::format("the plan's \"settings\" say {}: the run keeps the settings it started with until "
                                "it is restarted",
                                plan_says));
  return lines;
}

nlohmann::ordered_json settings_sources_json(const Flags& f) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  for (const SettingSpec& spec : settings_table()) {
    size_t i = setting_index(spec);
    nlohmann::ordered_json s = nlohmann::ordered_json::object();
    s["value"] = nlohmann::ordered_json(setting_json(spec, f));
    s["from"] = source_name(f.from[i]);
    s["flag"] = spec.flag;
    if (!f.run_info_file.empty() && f.run_settings.given[i] && !same_setting(spec, f, f.run_settings.values))
      s["run"] = nlohmann::ordered_json(setting_json(spec, f.run_settings.values));
    if (f.plan_settings.given[i] && !same_setting(spec, f, f.plan_settings.values))
      s["plan"] = nlohmann::ordered_json(setting_json(spec, f.plan_settings.values));
    out[std::string(spec.name)] = std::move(s);
  }
  return out;
}

int cmd_settings(Flags& f) {
  if (!take_plan_settings_only(f, "settings")) return kExitBadInput;
  if (std::string err; f.source_of("gpus") == SettingSource::Flag && !parse_gpu_list(f.gpus, &err)) {
    fmt::print(stderr, "gpuq: {}\n", err);
    return kExitBadInput;
  }
  if (f.json) {
    nlohmann::ordered_json out = nlohmann::ordered_json::object();
    out["plan"] = f.plan;
    out["run_info"] = f.run_info_file.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(f.run_info_file);
    out["settings"] = settings_sources_json(f);
    fmt::print("{}\n", out.dump(1));
    return 0;
  }
  fmt::print("settings of {}{}\n", f.plan,
             f.run_info_file.empty() ? ""
                                     : fmt::format(" (a `gpuq run` is running it: its settings, in {}, come before "
                                                   "the plan's)",
                                                   f.run_info_file));
  fmt::print("{:<20} {:<26} {:<8} {:<21} {}\n", "setting", "value", "from", "flag", "note");
  for (const SettingSpec& spec : settings_table()) {
    size_t i = setting_index(spec);
    std::string note;
    if (f.from[i] == SettingSource::Env) note = fmt::format("${}", spec.env);
    if (!f.run_info_file.empty() && f.run_settings.given[i] && !same_setting(spec, f, f.run_settings.values))
      note += fmt::format("{}the run uses {}", note.empty() ? "" : "; ", setting_text(spec, f.run_settings.values));
    if (f.plan_settings.given[i] && !same_setting(spec, f, f.plan_settings.values))
      note += fmt::format("{}the plan says {}", note.empty() ? "" : "; ", setting_text(spec, f.plan_settings.values));
    std::string value = setting_text(spec, f);
    fmt::print("{:<20} {:<26} {:<8} {:<21} {}\n", spec.name, value, source_name(f.from[i]), spec.flag, note);
  }
  std::fflush(stdout);
  return 0;
}

void add_settings_command(CLI::App& app, Flags& f, Action& action) {
  auto* sub = app.add_subcommand(
      "settings", "print each setting's value and where it came from: a flag, $GPUQ_*, the running `gpuq run`, the "
                  "plan's \"settings\", or the default");
  add_flags(sub, f, {kGpus, kPoll, kBackfill, kRetries, kRetryAfter, kMaxUsed});
  add_run_settings(sub, f);
  sub->add_flag("--json", f.json, "print one JSON object: each setting's value, source and flag");
  sub->callback([&] {
    f.reads_run_settings = true;
    action = [&] { return cmd_settings(f); };
  });
}

}  // namespace gpuq::cli

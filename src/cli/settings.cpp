// Where each setting comes from (flag > env > run > plan > default), and `gpuq settings`.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "gpuq/core/settings.h"

#include "cli.h"

namespace gpuq::cli {

CLI::Option* setting_flag(Flags& f, CLI::Option* o, std::string_view name) {
  std::string flag = "--" + o->get_lnames().front();
  for (const SettingSpec& spec : settings_table())
    if (name.empty() ? spec.flag == flag : spec.name == name) f.setting_options.push_back({setting_index(spec), o});
  return o;
}

void take_flags_and_env(Flags& f) {
  for (auto [i, o] : f.setting_options)
    if (o->count() > 0) f.from[i] = SettingSource::Flag;
  take_env(f);
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

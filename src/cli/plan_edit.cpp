// `gpuq add`, `gpuq pause` and `gpuq resume`: changes to a plan that a running `gpuq run`
// takes without a restart (it reloads the plan file on edit, and looks at PLAN.paused).
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <cmath>
#include <filesystem>
#include <map>

#include "gpuq/core/job_fields.h"
#include "gpuq/live/commands.h"

#include "cli.h"

namespace gpuq::cli {

namespace {

// The job `gpuq add` appends, as one line of JSON laid out as people write plans ("key":
// value, ", " between): the fields given, in the table's order (job_fields.h). Nullopt, said,
// for a flag's word its field cannot take.
std::optional<std::string> job_text(const Flags& f) {
  auto str = [](const std::string& s) { return nlohmann::json(s).dump(); };
  std::string out = fmt::format("{{\"id\": {}, \"script\": {}", str(f.add_id), str(f.add_script.front()));
  for (const JobField& field : job_fields()) {
    if (field.name == "args" && f.add_script.size() > 1) {
      std::vector<std::string> args(f.add_script.begin() + 1, f.add_script.end());
      out += ", \"args\": " + *job_field_json(field, args, nullptr);
      continue;
    }
    auto given = f.add_fields.find(std::string(field.name));
    if (given == f.add_fields.end() || given->second.empty()) continue;
    std::string problem;
    std::optional<std::string> value = job_field_json(field, given->second, &problem);
    if (!value) {
      fmt::print(stderr, "gpuq add: {} (nothing was added)\n", problem);
      return std::nullopt;
    }
    out += fmt::format(", \"{}\": {}", field.name, *value);
  }
  return out + "}";
}

// A flag for each field of a job but its id, script and args (--id, and the words after --):
// the field table's words for its help.
void add_job_field_flags(CLI::App* add, Flags& f) {
  for (const JobField& field : job_fields()) {
    if (field.name == "id" || field.name == "script" || field.name == "args") continue;
    std::string doc(field.doc), dflt(field.default_value);
    if (doc.starts_with("gpuq's own: ")) doc.erase(0, 12);
    std::erase(doc, '`');
    std::erase(dflt, '`');
    std::string_view type = field.type;
    bool list = type.starts_with("list"), object = type.starts_with("object");
    const char* form = list ? "comma-separated; " : !object ? "" : type == "object of lists" ? "repeatable; " : "repeatable; ";
    auto* o = add->add_option("--" + dashed_name(field.name), f.add_fields[std::string(field.name)],
                              fmt::format("{}{} (plan default: {})", form, doc, dflt))
                  ->allow_extra_args(false);  // one value a flag: a `--` after it starts the script
    if (list) o->delimiter(',')->type_name("A,B,...");
    else if (object) o->type_name(type == "object of lists" ? "KEY=V1,V2,..." : "KEY=VALUE");
    else
      o->type_name(type.starts_with("whole") ? "N" : type.starts_with("number") ? "X" : type == "true or false" ? "BOOL" : "TEXT")
          ->expected(1)
          ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  }
}

}  // namespace

/// The job must fit --node-gpus, else a running `gpuq run`'s --gpus (the run would refuse the
/// plan otherwise), else the plan's "settings" "gpus", else the default.
int cmd_add(Flags& f) {
  if (!node_gpus(f)) return kExitBadInput;  // a bad --node-gpus, before anything else
  if (std::string why = plan_file_problem(f.plan); !why.empty()) {
    fmt::print(stderr, "gpuq add: {}\n", why);
    return kExitBadInput;
  }
  if (std::string why = others_plan_problem(f.plan, "add"); !why.empty()) {
    fmt::print(stderr, "gpuq add: {}\n", why);
    return kExitFailure;
  }
  if (!take_plan_settings_only(f, nullptr) || !node_gpus(f)) return kExitBadInput;  // a plan that is not JSON: said below
  std::optional<std::string> text = job_text(f);
  if (!text) return kExitBadInput;
  return add_job(f, NewJob{f.add_id, f.add_script, *text}, f.add_dry_run,
                 [](const std::string& l) { fmt::print("{}\n", l); },
                 [](const std::string& l) { fmt::print(stderr, "{}\n", l); });
}

void add_plan_edit_commands(CLI::App& app, Flags& f, Action& action) {
  auto* add = app.add_subcommand("add", "append one job to the plan file (checked first; the rest of the file kept "
                                        "as it is); a running `gpuq run` picks it up");
  add->add_option("--plan", f.plan, "the plan file (JSON) (default: $GPUQ_PLAN, else plan.json in the current folder)")
      ->type_name(kPlanType);
  add_setting_flag(add, f, "state_dir");
  add->add_option("--id", f.add_id, "the new job's id")->required();
  add_job_field_flags(add, f);
  setting_flag(f,
               add->add_option("--node-gpus", f.gpus,
                               "GPU ids of this node, to check the job's width against (default: a running `gpuq "
                               "run`'s --gpus, else the plan's \"settings\", else 0-7)"),
               "gpus");
  add->add_flag("--dry-run", f.add_dry_run,
                "write nothing: say how the job would move each other job's predicted start, and the plan's finish");
  add->add_option("script", f.add_script, "-- SCRIPT [ARGS...]: the job's bash script and its arguments")->required();
  add->callback([&] {
    f.reads_run_settings = true;
    action = [&] { return cmd_add(f); };
  });
  for (bool on : {true, false}) {
    auto* sub = app.add_subcommand(on ? "pause" : "resume",
                                   on ? "start no new job until `gpuq resume` (running jobs go on; kept across "
                                        "restarts of `gpuq run`)"
                                      : "let jobs start again after `gpuq pause`");
    add_flags(sub, f, 0);
    sub->callback([&, on] {
      action = [&, on] {
        if (auto why = plan_file_problem(f.plan); !why.empty()) {
          fmt::print(stderr, "gpuq {}: {}\n", on ? "pause" : "resume", why);
          return kExitBadInput;
        }
        if (auto why = others_plan_problem(f.plan, on ? "pause" : "resume"); !why.empty()) {
          fmt::print(stderr, "gpuq {}: {}\n", on ? "pause" : "resume", why);
          return kExitFailure;
        }
        if (!take_plan_settings_only(f, on ? "pause" : "resume")) return kExitBadInput;  // its state_dir
        fmt::print("{}\n", pause_plan(f, on));
        return 0;
      };
    });
  }
}

}  // namespace gpuq::cli

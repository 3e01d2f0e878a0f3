#include "plan_settings.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

#include "gpuq/core/json_read.h"
#include "gpuq/core/settings.h"

namespace gpuq {

namespace plan_read {

void read_plan_settings(const std::string& file, std::optional<simdjson::dom::element> settings, Plan& plan,
                        std::vector<std::string>& errors) {
  auto add = [&](const char* where, const std::string& what) { errors.push_back(fmt::format("{}: {}: {}", file, where, what)); };
  // Member by member, in the file's order (a repeated name keeps its last value).
  if (settings && !settings->is_object())
    for (const std::string& problem : read_settings(to_nlohmann(*settings), plan.settings)) add("\"settings\"", problem);
  else if (settings)
    for (auto [key, value] : simdjson::dom::object(*settings))
      if (std::string problem = read_named_setting(key, to_nlohmann(value), plan.settings); !problem.empty())
        add("\"settings\"", problem);
  const SettingSpec& wd = *find_setting("workdir");
  const size_t at = setting_index(wd);
  bool in_settings = plan.settings.given[at];
  if (in_settings && plan.workdir && *plan.workdir != plan.settings.values.workdir)
    add("\"workdir\"", fmt::format("is given twice, at the top level ({}) and in \"settings\" ({}): keep one",
                                    *plan.workdir, plan.settings.values.workdir));
  else if (in_settings)
    plan.workdir = plan.settings.values.workdir;
  else if (plan.workdir && read_setting(wd, *plan.workdir, plan.settings.values).empty())
    plan.settings.given[at] = true;
}

}  // namespace plan_read

std::optional<GivenSettings> load_plan_settings(const std::string& path, std::vector<std::string>& errors) {
  if (std::string problem = plan_file_problem(path); !problem.empty()) {
    errors.push_back(fmt::format("{}: {}", path, problem));
    return std::nullopt;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    errors.push_back(fmt::format("{}: cannot read the plan: {}", path, std::strerror(errno)));
    return std::nullopt;
  }
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  simdjson::dom::parser parser;
  JsonText json = parse_json(parser, content);
  if (!json.ok()) {
    errors.push_back(fmt::format("{}: {}: {}", path, json.where,
                                 json.why == "the file is empty" ? json.why : "invalid JSON: " + json.why));
    return std::nullopt;
  }
  if (!json.root.is_object()) return GivenSettings{};  // a list of jobs: no settings
  Plan plan;
  std::optional<simdjson::dom::element> settings;
  for (auto [key, value] : simdjson::dom::object(json.root)) {
    if (key == "settings") settings = value;
    if (key == "workdir" && value.is_string() && !std::string_view(value).empty())
      plan.workdir = std::string(std::string_view(value));
  }
  plan_read::read_plan_settings(path, settings, plan, errors);
  return plan.settings;
}

}  // namespace gpuq

// The settings table (settings.h): its defaults, the plan's "settings" reader, PLAN.run.json's
// record of them, and doc/settings.md's list of them.
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "gpuq/core/plan.h"
#include "gpuq/core/settings.h"
#include "gpuq/live/run_info.h"
#include "test_util.h"

using namespace gpuq;
using namespace gpuq::test;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using nlohmann::json;

namespace {

const SettingSpec& spec(std::string_view name) {
  const SettingSpec* s = find_setting(name);
  EXPECT_NE(s, nullptr) << name;
  return *s;
}

bool given(const GivenSettings& s, std::string_view name) { return s.given[setting_index(spec(name))]; }

// A value of each kind that is not its default.
json other_value(const SettingSpec& s) {
  switch (s.kind) {
    case SettingKind::Gpus: return "0-3";
    case SettingKind::Number: return 7.5;
    case SettingKind::Positive: return 3.25;
    case SettingKind::Percent: return 12.5;
    case SettingKind::Count: return 5;
    case SettingKind::Whole: return -1;
    case SettingKind::Choice: {  // the last choice: none of the defaults
      std::string_view c = s.choices;
      return std::string(c.substr(c.rfind('|') + 1));
    }
    case SettingKind::Pairs: return "0-2,1-3";
    case SettingKind::Text: return "/opt/bin/nvidia-smi";
    case SettingKind::Folder: return "some/folder";
    case SettingKind::Names: return json::array({"a", "b c"});
    case SettingKind::Codes: return json::array({119, 120});
  }
  return nullptr;
}

}  // namespace

// The flags kept the original's defaults (../shared/reference/README.md, "Defaults") now
// that the table holds them.
TEST(SettingsTable, DefaultsAreTheOriginalsFlagDefaults) {
  Settings s;
  EXPECT_EQ(s.gpus, "0,1,2,3,4,5,6,7");
  EXPECT_EQ(s.poll, 20);
  EXPECT_EQ(s.backfill_max_hours, 0.5);
  EXPECT_EQ(s.max_retries, 2);
  EXPECT_EQ(s.retry_after, 300);
  EXPECT_EQ(s.max_used_mib, 1024);
  // gpuq's own, as their flags had them.
  EXPECT_EQ(s.kill_grace, 30);
  EXPECT_EQ(s.time_limit_factor, 0);
  EXPECT_EQ(s.quiet_minutes, 0);
  EXPECT_EQ(s.gpu_probe, "auto");
  EXPECT_EQ(s.hook_timeout, 60);
  EXPECT_EQ(s.events_max_mb, 64);
  EXPECT_TRUE(s.pairs.empty() && s.workdir.empty() && s.state_dir.empty() && s.nvidia_smi.empty());
  EXPECT_TRUE(s.on_event.empty() && s.ignore_process.empty());
}

TEST(SettingsTable, EachRowReadsItsDefaultAndHasUniqueNamesAndFlags) {
  std::set<std::string_view> names, flags;
  Settings defaults;
  for (const SettingSpec& s : settings_table()) {
    EXPECT_TRUE(names.insert(s.name).second) << s.name;
    EXPECT_TRUE(flags.insert(s.flag).second) << s.flag;
    EXPECT_EQ(s.flag.substr(0, 2), "--");
    EXPECT_FALSE(s.doc.empty()) << s.name;
    Settings read(std::monostate{});
    if (json::parse(s.default_json) != "") {  // "": unset, which a plan cannot give
      EXPECT_EQ(read_setting(s, json::parse(s.default_json), read), "") << s.name;
    }
    EXPECT_TRUE(same_setting(s, read, defaults)) << s.name;
    EXPECT_EQ(setting_json(s, defaults), json::parse(s.default_json)) << s.name;
  }
  EXPECT_EQ(names.size(), kSettingCount);
}

// PLAN.run.json's "settings" and the plan's are read by one reader: what is written reads back.
TEST(SettingsTable, EverySettingRoundTripsThroughJson) {
  GivenSettings written;
  for (const SettingSpec& s : settings_table())
    ASSERT_EQ(read_setting(s, other_value(s), written.values), "") << s.name;
  GivenSettings back;
  std::vector<std::string> problems = read_settings(json::parse(settings_json(written.values).dump()), back);
  EXPECT_TRUE(problems.empty()) << problems.front();
  Settings defaults;
  for (const SettingSpec& s : settings_table()) {
    EXPECT_TRUE(back.given[setting_index(s)]) << s.name;
    EXPECT_TRUE(same_setting(s, back.values, written.values)) << s.name;
    EXPECT_FALSE(same_setting(s, back.values, defaults)) << s.name << ": the test's value is the default";
  }
}

TEST(SettingsTable, GpusAreTheSameWhateverTheirSpelling) {
  Settings a, b;
  a.gpus = "0-3";
  b.gpus = "0,1,2,3";
  EXPECT_TRUE(same_setting(spec("gpus"), a, b));
  GivenSettings listed;
  EXPECT_TRUE(read_settings(json::parse(R"({"gpus": [0, 1, 2, 3]})"), listed).empty());
  EXPECT_TRUE(same_setting(spec("gpus"), listed.values, a));
  b.gpus = "0-2";
  EXPECT_FALSE(same_setting(spec("gpus"), a, b));
}

// A share kept back of each GPU's memory is below 100 % in the plan as on the command line (the
// flag alone refused 150 before the flags were made from the table; the plan took it).
TEST(SettingsTable, TheGpuMemoryHeadroomIsBelowAHundredPercent) {
  GivenSettings g;
  EXPECT_THAT(read_settings(json::parse(R"({"gpu_mem_headroom": 150})"), g),
              ::testing::ElementsAre(R"("gpu_mem_headroom": must be below 100 (got 150))"));
  EXPECT_TRUE(read_settings(json::parse(R"({"gpu_mem_headroom": 99.5})"), g).empty());
  EXPECT_DOUBLE_EQ(g.values.gpu_mem_headroom, 99.5);
}

TEST(PlanSettings, APlanWithoutThemGivesNone) {
  EXPECT_FALSE(plan_of(R"([{"id": "a", "script": "a.sh"}])").settings.any());
  EXPECT_FALSE(plan_of(R"({"jobs": [{"id": "a", "script": "a.sh"}]})").settings.any());
}

TEST(PlanSettings, AreReadWhereverTheyStandInThePlan) {
  Plan p = plan_of(R"({"jobs": [{"id": "a", "script": "a.sh"}],
                       "settings": {"gpus": "0-3", "max_retries": 0, "poll": 2.5, "ignore_process": "Xorg",
                                    "on_event": ["failed:notify.sh"], "pairs": "original"}})");
  for (const char* name : {"gpus", "max_retries", "poll", "ignore_process", "on_event", "pairs"})
    EXPECT_TRUE(given(p.settings, name)) << name;
  EXPECT_FALSE(given(p.settings, "retry_after"));
  EXPECT_EQ(p.settings.values.gpus, "0-3");
  EXPECT_EQ(p.settings.values.max_retries, 0);
  EXPECT_EQ(p.settings.values.poll, 2.5);
  EXPECT_THAT(p.settings.values.ignore_process, ElementsAre("Xorg"));
  EXPECT_THAT(p.settings.values.on_event, ElementsAre("failed:notify.sh"));
}

// The node's GPUs are chosen from the settings before a job's width is checked, even when
// "settings" comes after "jobs" in the file.
TEST(PlanSettings, TheirGpusAreChosenBeforeTheJobsAreChecked) {
  std::optional<std::string> seen;
  ChooseGpus choose = [&](const GivenSettings& s) {
    seen = s.values.gpus;
    std::string err;
    return given(s, "gpus") ? *parse_gpu_list(s.values.gpus, &err) : std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7};
  };
  PlanLoad wide = parse_plan_choosing_gpus(R"({"jobs": [{"id": "a", "script": "a.sh", "gpus": 3}], "settings": {"gpus": "0,1"}})",
                             "p.json", choose);
  EXPECT_EQ(seen, "0,1");
  ASSERT_EQ(wide.errors.size(), 1u);
  EXPECT_THAT(wide.errors[0], HasSubstr("needs 3 GPUs but --gpus gives 2 ([0, 1])"));
  PlanLoad fits = parse_plan_choosing_gpus(R"({"jobs": [{"id": "a", "script": "a.sh", "gpus": 3}], "settings": {"gpus": "0-3"}})",
                             "p.json", choose);
  EXPECT_TRUE(fits.plan.has_value());
  // The GPUs given by the caller win over the plan's: the settings are then only read.
  PlanLoad given_gpus = parse_plan(R"({"jobs": [{"id": "a", "script": "a.sh", "gpus": 3}], "settings": {"gpus": "0,1"}})",
                                   "p.json", std::vector<int>{0, 1, 2, 3});
  ASSERT_TRUE(given_gpus.plan.has_value());
  EXPECT_TRUE(given(given_gpus.plan->settings, "gpus"));
}

TEST(PlanSettings, BadValuesAreLoadErrorsNamingTheFileAndTheSetting) {
  auto errors = [](const std::string& settings) {
    return errors_of(R"({"jobs": [{"id": "a", "script": "a.sh"}], "settings": )" + settings + "}");
  };
  EXPECT_THAT(errors(R"({"max_retires": 1})"),
              ElementsAre(R"(inline.json: "settings": "max_retires" is not a setting; did you mean "max_retries"?)"));
  EXPECT_THAT(errors(R"({"colour": 1})"),
              ElementsAre(R"(inline.json: "settings": "colour" is not a setting (`gpuq settings` lists them))"));
  EXPECT_THAT(errors(R"({"max_retries": "2"})"),
              ElementsAre(R"(inline.json: "settings": "max_retries": must be a whole number, not a string ("2"))"));
  EXPECT_THAT(errors(R"({"max_retries": -1})"),
              ElementsAre(R"(inline.json: "settings": "max_retries": must not be negative (got -1))"));
  EXPECT_THAT(errors(R"({"poll": 0})"), ElementsAre(R"(inline.json: "settings": "poll": must be more than 0 (got 0))"));
  EXPECT_THAT(errors(R"({"gpu_probe": "nvm"})"),
              ElementsAre(R"(inline.json: "settings": "gpu_probe": must be one of auto, nvml, nvidia-smi, none, not "nvm"; did you mean "nvml"?)"));
  EXPECT_THAT(errors(R"({"gpus": "0-x"})"), ElementsAre(HasSubstr(R"(inline.json: "settings": "gpus": 'x' in '0-x' is not a GPU id)")));
  EXPECT_THAT(errors(R"({"gpus": [0, 0]})"), ElementsAre(HasSubstr(R"("gpus": GPU id 0 appears twice)")));
  EXPECT_THAT(errors(R"({"pairs": "0-1-2"})"), ElementsAre(HasSubstr(R"(inline.json: "settings": "pairs": )")));
  EXPECT_THAT(errors(R"({"ignore_process": [""]})"),
              ElementsAre(HasSubstr(R"("ignore_process": must be a list of non-empty strings)")));
  EXPECT_THAT(errors(R"({"workdir": 3})"),
              ElementsAre(R"(inline.json: "settings": "workdir": must be a folder's path (a string), not a number (3))"));
  EXPECT_THAT(errors("[1]"), ElementsAre(HasSubstr(R"(inline.json: "settings": must be an object of settings)")));
  // Every problem at once, in the file's order.
  EXPECT_THAT(errors(R"({"retry_after": -1, "max_retries": 1.5})"),
              ElementsAre(HasSubstr(R"("retry_after": must not be negative)"), HasSubstr(R"("max_retries": must be a whole number)")));
  // A mistyped "settings" is not silently ignored.
  EXPECT_THAT(errors_of(R"({"jobs": [{"id": "a", "script": "a.sh"}], "setings": {"gpus": "0-3"}})"),
              ElementsAre(R"(inline.json: top level: "setings" is not a field of a plan; did you mean "settings"?)"));
}

// The plan's top-level "workdir" (older than "settings") is the same setting.
TEST(PlanSettings, TheTopLevelWorkdirIsTheWorkdirSetting) {
  Plan top = plan_of(R"({"workdir": "w", "jobs": [{"id": "a", "script": "a.sh"}]})");
  EXPECT_TRUE(given(top.settings, "workdir"));
  EXPECT_EQ(top.settings.values.workdir, "w");
  Plan inside = plan_of(R"({"settings": {"workdir": "w"}, "jobs": [{"id": "a", "script": "a.sh"}]})");
  EXPECT_EQ(inside.workdir, "w");
  plan_of(R"({"workdir": "w", "settings": {"workdir": "w"}, "jobs": [{"id": "a", "script": "a.sh"}]})");
  EXPECT_THAT(errors_of(R"({"workdir": "w", "settings": {"workdir": "v"}, "jobs": [{"id": "a", "script": "a.sh"}]})"),
              ElementsAre(R"(inline.json: "workdir": is given twice, at the top level (w) and in "settings" (v): keep one)"));
}

TEST(PlanSettings, ASettingsOnlyReadSkipsTheJobs) {
  TempDir d;
  std::string path = d.write("p.json", R"({"jobs": [{"id": "a", "script": "a.sh", "gpus": 99}],
                                           "settings": {"state_dir": "st", "max_retries": 1}})");
  std::vector<std::string> errors;
  std::optional<GivenSettings> s = load_plan_settings(path, errors);
  ASSERT_TRUE(s.has_value());
  EXPECT_TRUE(errors.empty());
  EXPECT_EQ(s->values.state_dir, "st");
  d.write("bad.json", R"({"jobs": [], "settings": {"state_dir": 1}})");
  s = load_plan_settings(d.path() + "/bad.json", errors);
  ASSERT_TRUE(s.has_value());
  EXPECT_THAT(errors, ElementsAre(HasSubstr(R"(bad.json: "settings": "state_dir": must be a folder's path)")));
  errors.clear();
  d.write("broken.json", "{");
  EXPECT_FALSE(load_plan_settings(d.path() + "/broken.json", errors).has_value());
  EXPECT_THAT(errors, ElementsAre(HasSubstr("invalid JSON")));
}

TEST(RunInfoSettings, WhatARunRecordsReadsBack) {
  TempDir d;
  PlanPaths paths = paths_for(d.path() + "/plan.json");
  RunInfo info;
  info.pid = 42;
  info.host = "h";
  info.plan = paths.plan;
  info.gpus = {0, 1, 2, 3};
  info.max_retries = 0;
  for (const SettingSpec& s : settings_table()) {
    ASSERT_EQ(read_setting(s, other_value(s), info.settings.values), "");
    info.settings.given[setting_index(s)] = s.name != "state_dir";
  }
  ASSERT_TRUE(write_run_info(paths, info));
  std::optional<RunInfo> back = read_run_info(paths);
  ASSERT_TRUE(back.has_value());
  for (const SettingSpec& s : settings_table()) {
    EXPECT_EQ(back->settings.given[setting_index(s)], s.name != "state_dir") << s.name;
    if (s.name != "state_dir") {
      EXPECT_TRUE(same_setting(s, back->settings.values, info.settings.values)) << s.name;
    }
  }
  // What older readers take (`add`, `logs -f`) is still there.
  json raw = json::parse(d.read("plan.run.json"));
  EXPECT_EQ(raw["gpus"], json({0, 1, 2, 3}));
  EXPECT_EQ(raw["max_retries"], 0);
}

// A run.json of a gpuq from before the settings: its gpus and max_retries are the run's settings.
TEST(RunInfoSettings, AnOlderRunsFileGivesItsGpusAndRetries) {
  TempDir d;
  d.write("plan.run.json", R"({"pid": 7, "host": "h", "plan": "plan.json", "started": 1, "tick": 2, "ended": null,
                              "plan_loaded": {"size": 1, "mtime": 1, "hash": "0"}, "gpus": [0, 1], "max_retries": 1})");
  std::optional<RunInfo> info = read_run_info(paths_for(d.path() + "/plan.json"));
  ASSERT_TRUE(info.has_value());
  EXPECT_TRUE(given(info->settings, "gpus"));
  EXPECT_TRUE(given(info->settings, "max_retries"));
  EXPECT_FALSE(given(info->settings, "poll"));
  EXPECT_EQ(info->settings.values.gpus, "0,1");
  EXPECT_EQ(info->settings.values.max_retries, 1);
}

// doc/settings.md's settings table lists exactly the table's settings, in its order: name,
// flag, default (as `gpuq settings` shows it) and doc.
TEST(SettingsDocs, TheReadmeListsExactlyTheTablesSettings) {
  std::ifstream in(std::string(EXAMPLES) + "/../doc/settings.md");
  ASSERT_TRUE(in) << "doc/settings.md";
  std::string line;
  bool in_section = false;
  std::vector<std::string> rows;
  while (std::getline(in, line)) {
    if (line.rfind("## ", 0) == 0) in_section = line == "## Every setting, its flag and its default";
    if (in_section && line.rfind("| `", 0) == 0) rows.push_back(line);
  }
  std::vector<std::string> table;
  Settings defaults;
  for (const SettingSpec& s : settings_table())
    table.push_back(fmt::format("| `{}` | `{}` | {} | {} |", s.name, s.flag, setting_text(s, defaults), s.doc));
  EXPECT_EQ(rows, table);
}

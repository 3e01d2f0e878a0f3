// The table of a job's fields (job_fields.h): doc/plan-file.md's field table lists exactly its
// rows, and the loader's required fields and suggestions follow it.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>
#include <span>

#include "gpuq/core/job_fields.h"
#include "readme_table.h"
#include "test_util.h"

using namespace gpuq;
using gpuq::test::errors_of;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

namespace {

using Rows = std::vector<std::vector<std::string>>;

// doc/plan-file.md's rows of the job field table (under "A job's fields").
Rows readme_job_rows() {
  return test::readme_rows(DOC_DIR "/plan-file.md", "## A job's fields", {"field", "type", "default", "meaning"});
}

// How the README should write the row.
std::string readme_line(const JobField& f) {
  return fmt::format("| `{}` | {} | {} | {} |", f.name, f.type, f.default_value, f.doc);
}

// Where the README's rows and the table differ, one line each: a field missing from the
// README, or written otherwise (with the line it should have), or one no row has.
std::vector<std::string> differences(const Rows& readme, std::span<const JobField> table) {
  std::vector<std::string> out;
  std::map<std::string, std::vector<std::string>> by_name;
  for (const auto& row : readme)
    if (!by_name.emplace(test::unquoted(row.at(0)), row).second) out.push_back("listed twice: " + row.at(0));
  for (const JobField& f : table) {
    auto row = by_name.find(std::string(f.name));
    std::vector<std::string> want{fmt::format("`{}`", f.name), std::string(f.type), std::string(f.default_value),
                                  std::string(f.doc)};
    if (row == by_name.end())
      out.push_back(fmt::format("missing \"{}\"; add: {}", f.name, readme_line(f)));
    else if (row->second != want)
      out.push_back(fmt::format("\"{}\" differs; the table's: {}", f.name, readme_line(f)));
    if (row != by_name.end()) by_name.erase(row);
  }
  for (const auto& [name, row] : by_name) out.push_back(fmt::format("\"{}\" is no field of job_fields()", name));
  return out;
}

}  // namespace

TEST(JobFields, TheReadmeListsExactlyTheTablesRowsWithTheirTypesDefaultsAndDocs) {
  Rows readme = readme_job_rows();
  EXPECT_EQ(readme.size(), job_fields().size());
  EXPECT_THAT(differences(readme, job_fields()), IsEmpty());
}

TEST(JobFields, TheReadmeCheckSeesAChangedDocADroppedRowAndAnUnknownOne) {
  const Rows original = readme_job_rows();
  Rows readme;
  auto row = [&](std::string_view name) -> std::vector<std::string>& {
    for (auto& r : readme)
      if (test::unquoted(r.at(0)) == name) return r;
    throw std::runtime_error("no README row " + std::string(name));
  };
  readme = original;
  row("gpus").at(3) += " (edited)";
  EXPECT_THAT(differences(readme, job_fields()), ElementsAre(HasSubstr("\"gpus\" differs")));
  readme = original;
  row("priority").at(2) = "40";
  EXPECT_THAT(differences(readme, job_fields()), ElementsAre(HasSubstr("\"priority\" differs")));
  readme = original;
  std::erase_if(readme, [](const auto& r) { return r.at(0) == "`env`"; });
  EXPECT_THAT(differences(readme, job_fields()), ElementsAre(HasSubstr("missing \"env\"")));
  readme = original;
  readme.push_back({"`nice`", "number", "0", "a field the loader does not read"});
  EXPECT_THAT(differences(readme, job_fields()), ElementsAre(HasSubstr("\"nice\" is no field")));
}

TEST(JobFields, TheSuggestionsAreTheTablesNamesInItsOrder) {
  std::vector<std::string_view> names;
  for (const JobField& f : job_fields()) names.push_back(f.name);
  EXPECT_EQ(kJobFieldNames, names);
  // Each field but the required ones (every good job gives those) is suggested for a near miss.
  for (const JobField& f : job_fields()) {
    if (f.presence == Presence::Required) continue;
    std::string typo = std::string(f.name) + "x";
    std::string job = fmt::format(R"([{{"id": "a", "script": "a.sh", "{}": 1}}])", typo);
    EXPECT_THAT(errors_of(job), Contains(fmt::format("inline.json: job 'a': \"{}\" is not a field of a job; did you "
                                                     "mean \"{}\"?",
                                                     typo, f.name)))
        << f.name;
  }
}

// Each name another scheduler uses for a field is an error naming gpuq's field, whatever the
// job gives besides: ignored, "depends_on" would start the job beside its dep.
TEST(JobFields, EveryAliasNamesAFieldOfTheTableAndIsAnErrorThatSuggestsIt) {
  ASSERT_GE(job_field_aliases().size(), 14u);
  for (const JobFieldAlias& a : job_field_aliases()) {
    EXPECT_NE(find_job_field(a.field), nullptr) << a.name << " -> " << a.field;
    EXPECT_EQ(find_job_field(a.name), nullptr) << a.name << " is a field's own name";
    EXPECT_EQ(find_job_field_alias(a.name), &a) << a.name;  // each name once
    std::string job = fmt::format(R"([{{"id": "a", "script": "a.sh", "{}": 1}}])", a.name);
    EXPECT_THAT(errors_of(job), Contains(fmt::format("inline.json: job 'a': \"{}\" is not a field of a job; did you "
                                                     "mean \"{}\"?",
                                                     a.name, a.field)))
        << a.name;
  }
  for (std::string_view name : {"depends_on", "dependencies", "needs", "num_gpus", "n_gpus", "gpu", "time_limit",
                                "walltime", "timeout", "max_time", "command", "cmd", "env_vars", "environment"})
    EXPECT_NE(find_job_field_alias(name), nullptr) << name;
  EXPECT_EQ(find_job_field_alias("Depends-On")->field, "deps");
  EXPECT_EQ(find_job_field_alias("TIME LIMIT")->field, "time_limit_hours");
  for (std::string_view note : {"notes", "name", "owner", "description", "comment", "deps", "gpus", "script"})
    EXPECT_EQ(find_job_field_alias(note), nullptr) << note;
}

TEST(JobFields, AJobWithoutARequiredFieldIsRefusedNamingIt) {
  int required = 0;
  for (const JobField& f : job_fields()) {
    if (f.presence != Presence::Required) continue;
    ++required;
    EXPECT_EQ(f.default_value, "(required)") << f.name;
    std::string job = f.name == "id" ? R"([{"script": "a.sh"}])" : R"([{"id": "a"}])";
    EXPECT_THAT(errors_of(job), Contains(HasSubstr(fmt::format("has no \"{}\"", f.name)))) << f.name;
  }
  EXPECT_EQ(required, 2);  // id and script
}

TEST(JobFields, NullIsAbsentOnlyInTheNullableFields) {
  for (const JobField& f : job_fields()) {
    std::string job = f.name == "id"       ? R"([{"id": null, "script": "a.sh"}])"
                      : f.name == "script" ? R"([{"id": "a", "script": null}])"
                                           : fmt::format(R"([{{"id": "a", "script": "a.sh", "{}": null}}])", f.name);
    if (f.presence == Presence::Nullable)
      EXPECT_THAT(errors_of(job), IsEmpty()) << f.name;
    else
      EXPECT_THAT(errors_of(job), ElementsAre(HasSubstr(fmt::format("\"{}\" must be", f.name)))) << f.name;
  }
}

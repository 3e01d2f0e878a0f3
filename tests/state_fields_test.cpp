// The table of a state entry's fields (state_fields.h): doc/files.md's table lists exactly
// its rows, and the codec reads and writes each row as its kind says.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>

#include "gpuq/core/state_fields.h"
#include "gpuq/live/state_codec.h"
#include "readme_table.h"
#include "test_util.h"

using namespace gpuq;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

namespace {

using Rows = std::vector<std::vector<std::string>>;

// doc/files.md's rows of the state's fields (under "A state entry's fields").
Rows readme_state_rows() {
  return test::readme_rows(DOC_DIR "/files.md", "## A state entry's fields", {"field", "type", "meaning"});
}

// How the README should write the row.
std::string readme_line(const StateField& f) {
  return fmt::format("| `{}` | {} | {} |", f.name, state_kind_text(f.kind), f.doc);
}

// Where the README's rows and the table differ, one line each (as for the job's fields).
std::vector<std::string> differences(const Rows& readme) {
  std::vector<std::string> out;
  std::map<std::string, std::vector<std::string>> by_name;
  for (const auto& row : readme)
    if (!by_name.emplace(test::unquoted(row.at(0)), row).second) out.push_back("listed twice: " + row.at(0));
  for (const StateField& f : kStateFields) {
    auto row = by_name.find(std::string(f.name));
    std::vector<std::string> want{fmt::format("`{}`", f.name), std::string(state_kind_text(f.kind)),
                                  std::string(f.doc)};
    if (row == by_name.end())
      out.push_back(fmt::format("missing \"{}\"; add: {}", f.name, readme_line(f)));
    else if (row->second != want)
      out.push_back(fmt::format("\"{}\" differs; the table's: {}", f.name, readme_line(f)));
    if (row != by_name.end()) by_name.erase(row);
  }
  for (const auto& [name, row] : by_name) out.push_back(fmt::format("\"{}\" is no field of kStateFields", name));
  return out;
}

// An entry with only the field of `f` set (and the status, which every entry has), to a
// value of its kind, and that value as the file writes it.
std::pair<JobState, std::string> entry_with(const StateField& f) {
  JobState s;
  s.status = Status::Done;
  std::string text;
  switch (f.kind) {
    case StateKind::Status:
      s.*state_member<Status>(f) = Status::Held, text = "\"held\"";
      break;
    case StateKind::GpuList:
      s.*state_member<std::optional<std::vector<int>>>(f) = std::vector<int>{3, 63}, text = "[\n   3,\n   63\n  ]";
      break;
    case StateKind::Integer:
      s.*state_member<std::optional<long long>>(f) = -15, text = "-15";
      break;
    case StateKind::Bytes:
      s.*state_member<std::optional<long long>>(f) = 1 << 20, text = "1048576";
      break;
    case StateKind::Unsigned:
      s.*state_member<std::optional<unsigned long long>>(f) = 18446744073709551615ull, text = "18446744073709551615";
      break;
    case StateKind::UnixSeconds:
      s.*state_member<std::optional<double>>(f) = 1764000000.5, text = "1764000000.5";
      break;
    case StateKind::Text:
      s.*state_member<std::optional<std::string>>(f) = "timeout \"x\"", text = "\"timeout \\\"x\\\"\"";
      break;
    case StateKind::Fraction:
      s.*state_member<std::optional<double>>(f) = 0.42, text = "0.42";
      break;
    case StateKind::Flag:
      s.*state_member<std::optional<bool>>(f) = true, text = "true";
      break;
  }
  return {s, text};
}

}  // namespace

TEST(StateFields, TheReadmeListsExactlyTheTablesRowsWithTheirTypesAndDocs) {
  Rows readme = readme_state_rows();
  EXPECT_EQ(readme.size(), std::size(kStateFields));
  EXPECT_THAT(differences(readme), IsEmpty());
}

TEST(StateFields, TheReadmeCheckSeesAChangedDocADroppedRowAndAnUnknownOne) {
  const Rows original = readme_state_rows();
  ASSERT_FALSE(original.empty());
  Rows readme = original;
  readme[3].at(2) += " (edited)";
  EXPECT_THAT(differences(readme), ElementsAre(HasSubstr(fmt::format("\"{}\" differs", kStateFields[3].name))));
  readme = original;
  readme.erase(readme.begin() + 1);
  EXPECT_THAT(differences(readme), ElementsAre(HasSubstr(fmt::format("missing \"{}\"", kStateFields[1].name))));
  readme = original;
  readme.push_back({"`nice`", "whole number", "a field gpuq does not know"});
  EXPECT_THAT(differences(readme), ElementsAre(HasSubstr("\"nice\" is no field")));
}

// Each row alone: written under its name after the status, read back the same.
TEST(StateFields, EachFieldIsWrittenUnderItsNameAndReadBack) {
  for (const StateField& f : kStateFields) {
    auto [entry, text] = entry_with(f);
    State st;
    st.set("a", entry);
    std::string dumped = dump_state(st);
    std::string want = f.kind == StateKind::Status
                           ? fmt::format("{{\n \"a\": {{\n  \"status\": {}\n }}\n}}\n", text)
                           : fmt::format("{{\n \"a\": {{\n  \"status\": \"done\",\n  \"{}\": {}\n }}\n}}\n", f.name, text);
    EXPECT_EQ(dumped, want) << f.name;
    StateLoad back = parse_state(dumped, "s.json");
    ASSERT_TRUE(back.state) << f.name << ": " << back.error;
    EXPECT_EQ(dump_state(*back.state), dumped) << f.name;
    EXPECT_TRUE(back.state->find("a")->extra.is_null()) << f.name << " was not read as a known field";
  }
}

// Each row refuses a value of the wrong type, naming itself; null is absent in every row
// but the status.
TEST(StateFields, EachFieldRefusesAWrongValueByNameAndTakesNullAsAbsent) {
  for (const StateField& f : kStateFields) {
    std::string wrong = fmt::format(R"({{"a": {{"status": "done", "{}": {{}}}}}})", f.name);
    if (f.kind == StateKind::Status) wrong = R"({"a": {"status": {}}})";
    StateLoad l = parse_state(wrong, "s.json");
    EXPECT_FALSE(l.state) << f.name;
    EXPECT_EQ(l.error, fmt::format("s.json: job 'a': \"{}\" must be {}, not an object", f.name,
                                   f.kind == StateKind::GpuList       ? "a list of GPU ids"
                                   : f.kind == StateKind::Bytes       ? "a whole number of bytes"
                                   : f.kind == StateKind::UnixSeconds ? "a number (unix seconds)"
                                   : f.kind == StateKind::Fraction    ? "a number from 0 to 1"
                                   : f.kind == StateKind::Flag        ? "true or false"
                                   : f.kind == StateKind::Text || f.kind == StateKind::Status ? "a string"
                                                                                               : "a whole number"));
    std::string null = fmt::format(R"({{"a": {{"status": "done", "{}": null}}}})", f.name);
    StateLoad n = parse_state(null, "s.json");
    if (f.kind == StateKind::Status) {
      EXPECT_FALSE(n.state);
      continue;
    }
    ASSERT_TRUE(n.state) << f.name << ": " << n.error;
    EXPECT_EQ(dump_state(*n.state), "{\n \"a\": {\n  \"status\": \"done\"\n }\n}\n") << f.name;
  }
}

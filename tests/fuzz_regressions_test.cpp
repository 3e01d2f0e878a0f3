// Every input the fuzzers ever found a problem with, replayed (tests/fuzz/regressions/).
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "gpuq/core/plan.h"
#include "gpuq/core/simulate.h"
#include "gpuq/core/state.h"
#include "test_util.h"
#include "gpuq/live/state_codec.h"

namespace fs = std::filesystem;

namespace {
/// The inputs in `dir`, each with its file name. A missing or empty folder fails the
/// test: it would otherwise pass replaying nothing.
std::vector<std::pair<std::string, std::string>> inputs_in(const fs::path& dir) {
  std::vector<std::pair<std::string, std::string>> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (!it->is_regular_file()) continue;
    std::ifstream f(it->path(), std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    EXPECT_TRUE(f) << it->path() << ": cannot be read";
    out.push_back({it->path().filename().string(), ss.str()});
  }
  if (ec)
    ADD_FAILURE() << dir << ": cannot be listed: " << ec.message();
  else if (out.empty())
    ADD_FAILURE() << dir << " holds no inputs: the test would replay nothing";
  return out;
}

/// The inputs of tests/fuzz/regressions/KIND.
std::vector<std::pair<std::string, std::string>> inputs(const std::string& kind) {
  return inputs_in(fs::path(FIXTURES).parent_path() / "fuzz" / "regressions" / kind);
}
}  // namespace

TEST(FuzzRegressions, AnEmptyOrMissingFolderFailsTheReplay) {
  static const gpuq::test::TempDir d;  // static: EXPECT_NONFATAL_FAILURE sees no locals
  fs::create_directories(d.path() + "/empty");
  EXPECT_NONFATAL_FAILURE(inputs_in(d.path() + "/empty"), "holds no inputs");
  EXPECT_NONFATAL_FAILURE(inputs_in(d.path() + "/missing"), "cannot be listed: No such file or directory");
  d.write("one/input", "[]");
  auto one = inputs_in(d.path() + "/one");
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0], (std::pair<std::string, std::string>{"input", "[]"}));
}

// What each input must give (not merely "no crash"), by the rules as doc/history.md states them:
// a corrupt plan or state is reported with the file and the place (10); a cycle is rejected at
// load, naming it (11; the original waits for ever); a state read is written back as the
// original writes it (json.dumps(json.loads(text), indent=1), here computed by Python), and a
// final newline, gpuq's own (the original's json.load reads the file alike). An
// input without an entry here fails the test: a new regression states what it must give.
namespace {
struct FuzzResult {
  bool accepted;
  std::string first_error;  ///< rejected: the start of its first error
  std::string dumped;       ///< an accepted state: its text written back
};

const std::map<std::string, FuzzResult>& fuzz_plan_results() {
  static const std::map<std::string, FuzzResult> m{
      // Not JSON (a number past a double's range): the file, the place (top level) and why.
      {"number-overflow-top-level", {false, "fuzz.json: top level: invalid JSON: number overflow parsing '5555", ""}},
      // A job that waits on itself: the cycle, named.
      {"seed-self-cycle.json", {false, "fuzz.json: job 'a': dependency cycle: a -> a", ""}},
  };
  return m;
}

const std::map<std::string, FuzzResult>& fuzz_state_results() {
  static const std::map<std::string, FuzzResult> m{
      // Not JSON: the file, and the number it cannot read (a number overflow has no line in the parser's error).
      {"number-overflow-start",
       {false, "fuzz.state.json: top level: not valid JSON (number overflow parsing '179601e355')", ""}},
      // A running entry without GPUs: taken, and written back as it was.
      {"seed-running.json", {true, "", "{\n \"a\": {\n  \"status\": \"running\",\n  \"pid\": 5\n }\n}\n"}},
  };
  return m;
}
}  // namespace

TEST(FuzzRegressions, PlanInputsLoadOrAreRejectedWithReasons) {
  for (const auto& [name, text] : inputs("plan")) {
    SCOPED_TRACE(name);
    gpuq::PlanLoad load = gpuq::parse_plan(text, "fuzz.json", {0, 1, 2, 3, 4, 5, 6, 7});
    EXPECT_NE(load.plan.has_value(), !load.errors.empty());
    if (load.plan) (void)gpuq::simulate(*load.plan, {});
    auto it = fuzz_plan_results().find(name);
    if (it == fuzz_plan_results().end()) {
      ADD_FAILURE() << "no expected result for tests/fuzz/regressions/plan/" << name << ": add one to fuzz_plan_results()";
      continue;
    }
    const FuzzResult& want = it->second;
    EXPECT_EQ(load.plan.has_value(), want.accepted);
    if (!want.accepted && !load.errors.empty()) {
      EXPECT_EQ(load.errors[0].rfind(want.first_error, 0), 0u) << load.errors[0];
      for (const std::string& e : load.errors) EXPECT_EQ(e.find('\n'), std::string::npos) << "one line each: " << e;
    }
  }
}

TEST(FuzzRegressions, StateInputsRoundTrip) {
  for (const auto& [name, text] : inputs("state")) {
    SCOPED_TRACE(name);
    gpuq::StateLoad load = gpuq::parse_state(text, "fuzz.state.json");
    auto it = fuzz_state_results().find(name);
    if (it == fuzz_state_results().end())
      ADD_FAILURE() << "no expected result for tests/fuzz/regressions/state/" << name << ": add one to fuzz_state_results()";
    if (!load.state) {
      EXPECT_FALSE(load.error.empty());
      if (it != fuzz_state_results().end()) {
        EXPECT_FALSE(it->second.accepted) << load.error;
        EXPECT_EQ(load.error.rfind(it->second.first_error, 0), 0u) << load.error;
      }
      continue;
    }
    std::string once = gpuq::dump_state(*load.state);
    auto again = gpuq::parse_state(once, "again");
    ASSERT_TRUE(again.state.has_value()) << again.error;
    EXPECT_EQ(gpuq::dump_state(*again.state), once);
    if (it != fuzz_state_results().end()) {
      EXPECT_TRUE(it->second.accepted);
      EXPECT_EQ(once, it->second.dumped);
    }
  }
}

// Each expected result names an input that is there: a renamed input is not silently unchecked.
TEST(FuzzRegressions, EveryExpectedResultHasItsInput) {
  for (const auto& [kind, table] : {std::pair{"plan", &fuzz_plan_results()}, std::pair{"state", &fuzz_state_results()}}) {
    std::set<std::string> names;
    for (const auto& [name, text] : inputs(kind)) names.insert(name);
    for (const auto& [name, want] : *table) EXPECT_TRUE(names.count(name)) << kind << "/" << name << " is gone";
  }
}

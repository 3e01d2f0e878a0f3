// Every input the fuzzers ever found a problem with, replayed (tests/fuzz/regressions/).
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
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

TEST(FuzzRegressions, PlanInputsLoadOrAreRejectedWithReasons) {
  for (const auto& [name, text] : inputs("plan")) {
    SCOPED_TRACE(name);
    gpuq::PlanLoad load = gpuq::parse_plan(text, "fuzz.json", {0, 1, 2, 3, 4, 5, 6, 7});
    EXPECT_NE(load.plan.has_value(), !load.errors.empty());
    if (load.plan) (void)gpuq::simulate(*load.plan, {});
  }
}

TEST(FuzzRegressions, StateInputsRoundTrip) {
  for (const auto& [name, text] : inputs("state")) {
    SCOPED_TRACE(name);
    gpuq::StateLoad load = gpuq::parse_state(text, "fuzz.state.json");
    if (!load.state) {
      EXPECT_FALSE(load.error.empty());
      continue;
    }
    std::string once = gpuq::dump_state(*load.state);
    auto again = gpuq::parse_state(once, "again");
    ASSERT_TRUE(again.state.has_value()) << again.error;
    EXPECT_EQ(gpuq::dump_state(*again.state), once);
  }
}

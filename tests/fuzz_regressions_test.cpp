// Every input the fuzzers ever found a problem with, replayed (tests/fuzz/regressions/).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "gpuq/plan.h"
#include "gpuq/simulate.h"
#include "gpuq/state.h"

namespace fs = std::filesystem;

namespace {
std::vector<std::string> inputs(const std::string& kind) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(fs::path(FIXTURES).parent_path() / "fuzz" / "regressions" / kind)) {
    std::ifstream f(e.path(), std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    out.push_back(ss.str());
  }
  return out;
}
}  // namespace

TEST(FuzzRegressions, PlanInputsLoadOrAreRejectedWithReasons) {
  for (const std::string& text : inputs("plan")) {
    gpuq::PlanLoad load = gpuq::parse_plan(text, "fuzz.json", {0, 1, 2, 3, 4, 5, 6, 7});
    EXPECT_NE(load.plan.has_value(), !load.errors.empty());
    if (load.plan) (void)gpuq::simulate(*load.plan, {});
  }
}

TEST(FuzzRegressions, StateInputsRoundTrip) {
  for (const std::string& text : inputs("state")) {
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

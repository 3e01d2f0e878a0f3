// Absurd values and far-off times, and simulate's note on the rows it hides.
#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <regex>

#include "gpuq/core/local_time.h"
#include "gpuq/core/outlook.h"
#include "gpuq/core/validate.h"
#include "gpuq/views/text.h"
#include "test_util.h"

using namespace gpuq;
using namespace gpuq::test;
using ::testing::HasSubstr;
using ::testing::Not;

namespace {

// A run of 20 digits: what a 300-digit number prints, and no sane figure does.
bool has_long_number(const std::string& text) { return std::regex_search(text, std::regex("[0-9]{20}")); }

constexpr double kMarch1 = 1772323200;  // 2026-03-01 00:00 UTC: a week either side stays in 2026 in any zone

}  // namespace

TEST(Absurd, TimesMoreThanSixDaysAwayCarryTheDate) {
  double now = kMarch1 + 12 * 3600;
  EXPECT_TRUE(std::regex_match(local_time(now + 3 * 86400, now), std::regex("[A-Z][a-z]{2} [0-9]{2}:[0-9]{2}")))
      << local_time(now + 3 * 86400, now);
  std::string far = local_time(now + 20 * 86400, now);
  EXPECT_TRUE(std::regex_match(far, std::regex("[A-Z][a-z]{2} [0-9]{2} Mar [0-9]{2}:[0-9]{2}"))) << far;
  std::string next_year = local_time(now + 400 * 86400, now);
  EXPECT_TRUE(std::regex_match(next_year, std::regex("[A-Z][a-z]{2} [0-9]{2} [A-Z][a-z]{2} 2027 [0-9]{2}:[0-9]{2}")))
      << next_year;
  EXPECT_EQ(local_time(now + 1e300, now), "after the year 9999");
  EXPECT_EQ(local_time(std::numeric_limits<double>::infinity(), now), "after the year 9999");
}

TEST(Absurd, HugeHoursPrintInExponentFormOnly) {
  EXPECT_EQ(fixed(3.5, 6, 2), "  3.50");
  EXPECT_EQ(fixed(123456.789, 0, 1), "123456.8");
  EXPECT_EQ(fixed(1e300, 6, 2), "1.00e+300");
  EXPECT_EQ(fixed(1e300, 0, 1), "1.0e+300");
}

// fixed() prints with std::to_chars (the timeline's hot path); fmt's "{:W.Pf}", which the
// timeline printed before, is the oracle, on seeded random values of every magnitude simulate
// prints (halfway cases included: x.xx5 and exact binary halves).
TEST(Absurd, FixedPrintsWhatFmtPrintsForEveryMagnitude) {
  unsigned seed = 20261202;
  if (const char* s = std::getenv("GPUQ_TEST_SEED")) seed = static_cast<unsigned>(std::stoul(s));
  std::printf("seed %u (GPUQ_TEST_SEED replays)\n", seed);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> exp10(-6, 12.5), unit(0, 1);
  for (int i = 0; i < 200000; ++i) {
    double v = std::pow(10.0, exp10(rng)) * (i % 7 == 0 ? -1 : 1);
    if (i % 5 == 0) v = std::round(v * 1000) / 1000 + 0.005;  // near a rounding tie
    if (i % 11 == 0) v = std::ldexp(std::floor(unit(rng) * 4096), -3);  // exact binary halves
    for (auto [w, p] : {std::pair{6, 2}, std::pair{0, 1}, std::pair{0, 0}, std::pair{9, 3}}) {
      std::string want = std::fabs(v) >= 1e12 ? fmt::format("{:{}.{}e}", v, w, p) : fmt::format("{:{}.{}f}", v, w, p);
      ASSERT_EQ(fixed(v, w, p), want) << "value " << fmt::format("{:.17g}", v) << " width " << w << " precision " << p;
    }
  }
  EXPECT_EQ(fixed(0.125, 0, 2), fmt::format("{:.2f}", 0.125));
  EXPECT_EQ(fixed(-0.0, 6, 2), fmt::format("{:6.2f}", -0.0));
  EXPECT_EQ(fixed(std::nan(""), 6, 2), fmt::format("{:6.2f}", std::nan("")));
}

TEST(Absurd, ValidateWarnsOfAnEstimatePastAWeek) {
  Plan p = plan_of(R"([{"id": "a", "script": "a.sh", "est_hours": 1e9}, {"id": "b", "script": "b.sh",
                       "est_hours": 168}])");
  auto yes = [](const std::string&) { return true; };
  std::vector<Finding> f = validate_plan(p, {0}, 0.5, FileTable(yes), yes);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_FALSE(f[0].error);
  EXPECT_EQ(f[0].job, "a");
  EXPECT_THAT(f[0].text, HasSubstr("est_hours 1000000000 is more than a week (168 h)"));
}

TEST(Absurd, SimulateAndStatusNeverPrintAHundredDigits) {
  TempDir d;
  d.write("plan.json", R"([{"id": "a", "script": "a.sh", "est_hours": 1e300, "first_look_frac": 0.5},
                          {"id": "b", "script": "b.sh", "est_hours": 1, "deps": ["a"]}])");
  Output sim = run_gpuq({"simulate", "--plan", "plan.json", "--gpus", "0"}, d.path());
  ASSERT_EQ(sim.status, 0) << sim.err;
  EXPECT_FALSE(has_long_number(sim.out)) << sim.out;
  EXPECT_THAT(sim.out, HasSubstr("  0.00h -> 1.00e+300h gpus=[0]      a\n"));
  EXPECT_THAT(sim.out, HasSubstr("makespan 1.0e+300h"));
  // status over a live state where a runs.
  Plan p = plan_of(d.read("plan.json"), {0});
  State st;
  JobState a;
  a.status = Status::Running;
  a.pid = 5;
  a.start = kMarch1;
  a.gpus = std::vector<int>{0};
  st.set("a", a);
  Policy pol;
  pol.node_gpus = {0};
  double now = kMarch1 + 3600;
  Outlook o = make_outlook(p, st, pol, now, 0, FileTable([](const std::string&) { return true; }));
  std::string text = format_status(p, st, now, true) + format_outlook(p, st, o, true);
  EXPECT_FALSE(has_long_number(text)) << text;
  EXPECT_THAT(text, HasSubstr("after the year 9999"));
}

TEST(SimulateNote, OneStderrLineSaysWhatAllWouldAddAndWhatTheRound100LineIs) {
  TempDir d;
  d.write("plan.json", R"([{"id": "train", "script": "t.sh", "est_hours": 2, "first_look_frac": 0.5},
                          {"id": "eval_a", "script": "e.sh", "est_hours": 1, "deps": ["train"]},
                          {"id": "eval_b", "script": "e.sh", "est_hours": 1, "deps": ["train"]}])");
  Output r = run_gpuq({"simulate", "--plan", "plan.json"}, d.path());
  ASSERT_EQ(r.status, 0) << r.err;
  // stdout is the original's, untouched.
  EXPECT_EQ(r.out,
            "  0.00h ->   2.00h gpus=[0]      train\n"
            "makespan 3.0h, GPU utilization 16.7%\n"
            "round-100 in-loop eval of the first-wave arms: earliest ~1.0h, all ~1.0h\n");
  EXPECT_EQ(r.err,
            "gpuq: 2 eval_ jobs not listed (--all adds 2 rows); the round-100 line gives when the first and the last "
            "job with first_look_frac reach that fraction of their est_hours\n");
  Output all = run_gpuq({"simulate", "--plan", "plan.json", "--all"}, d.path());
  ASSERT_EQ(all.status, 0) << all.err;
  EXPECT_THAT(all.out, HasSubstr("eval_a"));
  EXPECT_THAT(all.err, Not(HasSubstr("eval_")));
  d.write("plan.json", R"([{"id": "train", "script": "t.sh", "est_hours": 2}])");
  EXPECT_EQ(run_gpuq({"simulate", "--plan", "plan.json"}, d.path()).err, "");  // nothing to explain
}
